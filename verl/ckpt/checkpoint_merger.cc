// File: verl/ckpt/checkpoint_merger.cc
#include "verl/ckpt/checkpoint_merger.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "verl/ckpt/checkpoint_layout.h"
#include "verl/ckpt/checkpoint_manager.h"
#include "verl/ckpt/checkpoint_pt.h"
#include "verl/core/file_util.h"
#include "verl/core/status.h"

namespace verl::ckpt {
namespace fs = std::filesystem;
namespace {

std::string Join(const std::string& a, const std::string& b) {
  return (fs::path(a) / b).string();
}

// The model_world_size_*_rank_*.pt files of `dir`, sorted.
std::vector<std::string> ModelShardFiles(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (absl::StartsWith(name, "model_world_size_") &&
        absl::EndsWith(name, ".pt")) {
      out.push_back(name);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<FsdpLayout> ReadLayout(const MergeOptions& options) {
  const std::string path = Join(options.local_dir, kFsdpConfigFileName);
  std::error_code ec;
  if (!fs::is_directory(options.local_dir, ec)) {
    return absl::NotFoundError(
        absl::StrCat("--local_dir ", options.local_dir, " is not a folder"));
  }
  if (!fs::exists(path, ec)) {
    const std::vector<std::string> found = ModelShardFiles(options.local_dir);
    return absl::NotFoundError(absl::StrCat(
        path,
        " not found: expected fsdp_config.json ({\"FSDP_version\": 2, "
        "\"world_size\": W}) next to model_world_size_{W}_rank_{R}.pt; "
        "found ",
        found.empty() ? "no model shard files"
                      : absl::StrCat(found.size(), " model shard files (",
                                     absl::StrJoin(found, ", "), ")")));
  }
  VERL_ASSIGN_OR_RETURN(nlohmann::json json, core::ReadJsonFile(path));
  VERL_ASSIGN_OR_RETURN(FsdpLayout layout, FsdpLayoutFromJson(json, path));
  if (!options.mesh_dim_names.empty()) {
    layout.mesh_dim_names = options.mesh_dim_names;
  }
  return layout;
}

// How many shard files hold the model: the last mesh dim (HSDP replicas of
// the "ddp" dim are not read).
absl::StatusOr<int> NumShardFiles(const FsdpLayout& layout,
                                  const std::string& source) {
  const auto& names = layout.mesh_dim_names;
  if (names == std::vector<std::string>{"fsdp"}) return layout.world_size;
  if (names == std::vector<std::string>{"ddp", "fsdp"}) {
    if (layout.mesh_shape.size() != 2 ||
        layout.mesh_shape[0] * layout.mesh_shape[1] != layout.world_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          source,
          ": mesh (ddp, fsdp) needs a 2-D \"mesh_shape\" whose product "
          "is world_size ",
          layout.world_size));
    }
    return static_cast<int>(layout.mesh_shape[1]);
  }
  return absl::UnimplementedError(absl::StrCat(
      source, ": unsupported mesh_dim_names (", absl::StrJoin(names, ", "),
      "); supported: (fsdp) and (ddp, fsdp)"));
}

absl::Status CheckShardFiles(const std::string& dir, int world, int shards) {
  std::set<std::string> expected;
  for (int r = 0; r < world; ++r)
    expected.insert(RankFileName("model", r, world));
  for (const std::string& name : ModelShardFiles(dir)) {
    if (!expected.count(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected shard file ", Join(dir, name), ": ",
                       kFsdpConfigFileName, " says world size ", world));
    }
  }
  for (int r = 0; r < shards; ++r) {
    const std::string path = Join(dir, RankFileName("model", r, world));
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      return absl::NotFoundError(absl::StrCat("missing shard file ", path, " (",
                                              kFsdpConfigFileName,
                                              " says world size ", world, ")"));
    }
  }
  return absl::OkStatus();
}

// Loads every shard file with a pool of threads; the first error wins.
absl::StatusOr<std::vector<PtTensorDict>> LoadShards(const std::string& dir,
                                                     int world, int shards,
                                                     int threads) {
  std::vector<PtTensorDict> out(shards);
  std::vector<absl::Status> status(shards);
  std::atomic<int> next{0};
  auto work = [&] {
    for (int r = next++; r < shards; r = next++) {
      auto loaded =
          LoadPtTensorDict(Join(dir, RankFileName("model", r, world)));
      if (loaded.ok()) {
        out[r] = std::move(*loaded);
      } else {
        status[r] = loaded.status();
      }
    }
  };
  std::vector<std::thread> pool;
  const int n = std::max(1, std::min({threads, shards, 32}));
  for (int i = 0; i < n; ++i) pool.emplace_back(work);
  for (auto& t : pool) t.join();
  for (const absl::Status& s : status) VERL_RETURN_IF_ERROR(s);
  return out;
}

// The layout to merge with: the stored one (checked against every shard's
// keys) or, for files without layout, dim-0 concatenation of what is there.
absl::StatusOr<FsdpLayout> ResolveLayout(
    const FsdpLayout& stored, const std::vector<PtTensorDict>& shards,
    const std::string& dir, int world) {
  FsdpLayout layout = stored;
  const bool have_layout = !stored.params.empty();
  for (size_t r = 0; r < shards.size(); ++r) {
    const std::string file = Join(dir, RankFileName("model", r, world));
    for (const auto& [name, t] : shards[r]) {
      if (have_layout && !stored.params.count(name)) {
        return absl::InvalidArgumentError(absl::StrCat(
            file, ": tensor '", name, "' is not in ", kFsdpConfigFileName));
      }
      if (!shards[0].count(name)) {
        return absl::InvalidArgumentError(absl::StrCat(
            file, ": tensor '", name, "' is missing from rank 0's shard"));
      }
    }
    for (const auto& [name, p] : layout.params) {
      if (have_layout && !shards[r].count(name)) {
        return absl::InvalidArgumentError(
            absl::StrCat(file, ": tensor '", name, "' is missing"));
      }
    }
  }
  if (!have_layout) {
    for (const auto& [name, t0] : shards[0]) {
      ParamLayout p;
      p.dtype = DtypeName(t0.scalar_type());
      p.shape = t0.sizes().vec();
      if (t0.dim() == 0) {
        p.shard_dim = -1;
      } else {
        p.shape[0] = 0;
        for (const auto& s : shards) {
          if (!s.count(name)) {
            return absl::InvalidArgumentError(
                absl::StrCat("tensor '", name, "' is missing from a shard"));
          }
          p.shape[0] += s.at(name).size(0);
        }
      }
      layout.params[name] = p;
    }
  }
  return layout;
}

// Full tensor `name` in `dtype`, freeing its chunks from `shards`.
absl::StatusOr<at::Tensor> TakeFull(const std::string& name,
                                    const ParamLayout& p, bool exact_chunks,
                                    std::vector<PtTensorDict>& shards,
                                    const std::string& dir, int world,
                                    at::ScalarType dtype) {
  std::vector<at::Tensor> chunks;
  for (auto& s : shards) {
    chunks.push_back(s.at(name));
    s.erase(name);
  }
  at::Tensor full;
  if (exact_chunks) {
    auto merged = UnshardTensor(name, p, chunks);
    if (!merged.ok()) {
      return Annotate(merged.status(),
                      absl::StrCat(dir, " (world size ", world, ")"));
    }
    full = *merged;
  } else {
    full =
        p.shard_dim < 0 || chunks.size() == 1 ? chunks[0] : at::cat(chunks, 0);
  }
  return full.to(dtype).contiguous();
}

// verl's LoRA handling: base names lose the PEFT prefix and ".base_layer".
std::string BaseName(const std::string& name) {
  std::string out = name;
  if (absl::StartsWith(out, "base_model.model.")) {
    out = out.substr(std::string("base_model.model.").size());
  }
  return absl::StrReplaceAll(out, {{".base_layer.", "."}});
}

absl::Status CopyHfFiles(const MergeOptions& options, const std::string& tmp) {
  std::string source = Join(options.local_dir, kHfSubdir);
  std::error_code ec;
  if (!fs::exists(Join(source, "config.json"), ec)) {
    if (options.hf_model_path.empty()) {
      return absl::NotFoundError(absl::StrCat("no config.json in ", source,
                                              " and no --hf_model_path given"));
    }
    source = options.hf_model_path;
    if (!fs::exists(Join(source, "config.json"), ec)) {
      return absl::NotFoundError(
          absl::StrCat("--hf_model_path ", source, " has no config.json"));
    }
  }
  std::vector<std::string> files = {"config.json", "generation_config.json"};
  files.insert(files.end(), options.extra_hf_files.begin(),
               options.extra_hf_files.end());
  for (const std::string& name : files) {
    const std::string src = Join(source, name);
    if (!fs::exists(src, ec)) continue;
    VERL_ASSIGN_OR_RETURN(std::string bytes, core::ReadFile(src));
    VERL_RETURN_IF_ERROR(core::WriteFileAtomic(Join(tmp, name), bytes));
  }
  return absl::OkStatus();
}

absl::Status WriteLoraAdapter(const std::string& dir, const TensorMap& lora) {
  VERL_RETURN_IF_ERROR(core::MakeDirs(dir));
  VERL_RETURN_IF_ERROR(
      SaveSafetensors(Join(dir, "adapter_model.safetensors"), lora));
  std::set<std::string> targets;
  int64_t rank = 0;
  for (const auto& [name, t] : lora) {
    // "...self_attn.q_proj.lora_A.weight" -> "q_proj".
    const size_t pos = name.find(".lora_");
    const std::string module = name.substr(0, pos);
    targets.insert(module.substr(module.rfind('.') + 1));
    if (t.dim() == 2) rank = std::min(t.size(0), t.size(1));
  }
  nlohmann::json config = {{"peft_type", "LORA"},
                           {"task_type", "CAUSAL_LM"},
                           {"r", rank},
                           {"lora_alpha", 0},  // unknown here, as in verl
                           {"target_modules", targets},
                           {"bias", "none"}};
  return core::WriteFileAtomic(Join(dir, "adapter_config.json"),
                               config.dump(2) + "\n");
}

// Moves the finished `tmp` to `target` (replacing an existing folder).
absl::Status Publish(const std::string& tmp, const std::string& target) {
  std::error_code ec;
  const std::string old = target + ".tmp-old-" + std::to_string(::getpid());
  const bool existed = fs::exists(target, ec);
  if (existed) fs::rename(target, old, ec);
  if (!ec) fs::rename(tmp, target, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot move ", tmp, " to ", target, ": ", ec.message()));
  }
  if (existed) fs::remove_all(old, ec);
  const std::string parent = fs::path(target).parent_path().string();
  return core::FsyncPath(parent.empty() ? "." : parent);
}

absl::StatusOr<MergeStats> MergeInto(const MergeOptions& options,
                                     const std::string& tmp) {
  VERL_ASSIGN_OR_RETURN(FsdpLayout stored, ReadLayout(options));
  const std::string dir = options.local_dir;
  VERL_ASSIGN_OR_RETURN(int num_files,
                        NumShardFiles(stored, Join(dir, kFsdpConfigFileName)));
  VERL_RETURN_IF_ERROR(CheckShardFiles(dir, stored.world_size, num_files));
  MergeStats stats;
  stats.world_size = stored.world_size;
  stats.num_shard_files = num_files;
  for (int r = 0; r < num_files; ++r) {
    std::error_code ec;
    stats.bytes_read += fs::file_size(
        Join(dir, RankFileName("model", r, stored.world_size)), ec);
  }
  VERL_ASSIGN_OR_RETURN(
      std::vector<PtTensorDict> shards,
      LoadShards(dir, stored.world_size, num_files, options.num_threads));
  VERL_ASSIGN_OR_RETURN(FsdpLayout layout,
                        ResolveLayout(stored, shards, dir, stored.world_size));
  VERL_RETURN_IF_ERROR(CopyHfFiles(options, tmp));

  // Plan output shards over meta tensors of the output names/shapes/dtype.
  TensorMap plan_input;
  TensorMap lora;
  std::map<std::string, std::string> out_to_src;
  for (const auto& [name, p] : layout.params) {
    if (absl::StrContains(name, "lora_")) continue;
    const std::string out = BaseName(name);
    if (options.tie_word_embedding && out == "lm_head.weight") continue;
    out_to_src[out] = name;
    plan_input[out] = at::empty(
        p.shape, at::TensorOptions().dtype(options.dtype).device(at::kMeta));
  }
  const bool exact = !stored.params.empty();
  const auto plan = PlanShards(plan_input, options.max_shard_size);
  ShardIndex index;
  for (size_t i = 0; i < plan.size(); ++i) {
    const std::string file = plan.size() == 1 ? kSafetensorsSingleFile
                                              : ShardFileName(i, plan.size());
    TensorMap part;
    for (const std::string& out : plan[i]) {
      const std::string& src = out_to_src.at(out);
      VERL_ASSIGN_OR_RETURN(
          part[out], TakeFull(src, layout.params.at(src), exact, shards, dir,
                              stored.world_size, options.dtype));
      stats.bytes_written += part[out].nbytes();
      index.weight_map[out] = file;
      ++stats.num_tensors;
    }
    VERL_RETURN_IF_ERROR(
        SaveSafetensors(Join(tmp, file), part, {{"format", "pt"}}));
  }
  index.total_size = stats.bytes_written;
  if (plan.size() > 1) {
    VERL_RETURN_IF_ERROR(core::WriteFileAtomic(Join(tmp, kSafetensorsIndexFile),
                                               ShardIndexToJson(index)));
  }
  for (const auto& [name, p] : layout.params) {
    if (!absl::StrContains(name, "lora_")) continue;
    VERL_ASSIGN_OR_RETURN(
        lora[name], TakeFull(name, p, exact, shards, dir, stored.world_size,
                             options.dtype));
  }
  if (!lora.empty()) {
    stats.num_lora_tensors = lora.size();
    VERL_RETURN_IF_ERROR(WriteLoraAdapter(Join(tmp, "lora_adapter"), lora));
  }
  return stats;
}

}  // namespace

absl::StatusOr<MergeStats> MergeFsdpCheckpoint(const MergeOptions& options) {
  if (options.target_dir.empty()) {
    return absl::InvalidArgumentError("--target_dir is empty");
  }
  const std::string tmp =
      absl::StrCat(options.target_dir, ".tmp-merge-", ::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  VERL_RETURN_IF_ERROR(core::MakeDirs(tmp));
  absl::StatusOr<MergeStats> stats = MergeInto(options, tmp);
  if (stats.ok()) {
    absl::Status s = core::FsyncPath(tmp);
    if (s.ok()) s = Publish(tmp, options.target_dir);
    if (!s.ok()) stats = s;
  }
  if (!stats.ok()) fs::remove_all(tmp, ec);
  return stats;
}

absl::StatusOr<CompareReport> CompareHfFolders(const std::string& merged,
                                               const std::string& reference,
                                               double atol, double rtol) {
  VERL_ASSIGN_OR_RETURN(TensorMap a, LoadSafetensorsFolder(merged));
  VERL_ASSIGN_OR_RETURN(TensorMap b, LoadSafetensorsFolder(reference));
  CompareReport report;
  for (const auto& [name, t] : b) {
    if (!a.count(name)) report.mismatches.push_back("missing tensor " + name);
  }
  for (const auto& [name, t] : a) {
    auto it = b.find(name);
    if (it == b.end()) {
      report.mismatches.push_back("unexpected tensor " + name);
      continue;
    }
    ++report.num_tensors;
    const at::Tensor& ref = it->second;
    if (t.sizes() != ref.sizes()) {
      report.mismatches.push_back(
          absl::StrCat(name, ": shape [", absl::StrJoin(t.sizes(), ","),
                       "] vs [", absl::StrJoin(ref.sizes(), ","), "]"));
      continue;
    }
    if (t.scalar_type() != ref.scalar_type()) {
      report.mismatches.push_back(
          absl::StrCat(name, ": dtype ", DtypeName(t.scalar_type()), " vs ",
                       DtypeName(ref.scalar_type())));
      continue;
    }
    if (t.numel() == 0) continue;
    const at::Tensor x = t.to(at::kDouble), y = ref.to(at::kDouble);
    const double diff = (x - y).abs().max().item<double>();
    report.max_abs_diff = std::max(report.max_abs_diff, diff);
    if (!at::allclose(x, y, rtol, atol)) {
      report.mismatches.push_back(
          absl::StrCat(name, ": values differ (max abs diff ", diff, ")"));
    }
  }
  return report;
}

absl::StatusOr<uint64_t> ParseByteSize(const std::string& text) {
  static const std::vector<std::pair<std::string, uint64_t>> units = {
      {"KIB", 1ull << 10},
      {"MIB", 1ull << 20},
      {"GIB", 1ull << 30},
      {"KB", 1000},
      {"MB", 1000000},
      {"GB", 1000000000},
      {"B", 1}};
  const std::string upper = absl::AsciiStrToUpper(text);
  for (const auto& [unit, scale] : units) {
    if (absl::EndsWith(upper, unit)) {
      double v = 0;
      if (absl::SimpleAtod(upper.substr(0, upper.size() - unit.size()), &v) &&
          v > 0) {
        return static_cast<uint64_t>(v * scale);
      }
      break;
    }
  }
  uint64_t v = 0;
  if (absl::SimpleAtoi(text, &v) && v > 0) return v;
  return absl::InvalidArgumentError(absl::StrCat(
      "--max_shard_size: cannot parse '", text, "' (e.g. 5GB, 500MB, 2GiB)"));
}

absl::StatusOr<at::ScalarType> ParseMergeDtype(const std::string& text) {
  if (text == "bf16" || text == "bfloat16") return at::kBFloat16;
  if (text == "fp16" || text == "float16") return at::kHalf;
  if (text == "fp32" || text == "float32") return at::kFloat;
  return absl::InvalidArgumentError(
      absl::StrCat("--dtype: unknown '", text, "' (bf16, fp16 or fp32)"));
}

}  // namespace verl::ckpt
