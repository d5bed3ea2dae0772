// File: verl/ckpt/merger/checkpoint_merger.cc
#include "verl/ckpt/merger/checkpoint_merger.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
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
#include "verl/ckpt/dist_ckpt.h"
#include "verl/ckpt/pt_archive.h"
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
  if (!fs::exists(path, ec) &&
      fs::is_directory(Join(options.local_dir, kDistCkptSubdir), ec)) {
    return absl::InvalidArgumentError(absl::StrCat(
        options.local_dir, " holds a Megatron checkpoint (", kDistCkptSubdir,
        "/), not an FSDP one: use --backend megatron"));
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

// Runs fn(0..n-1) on up to `threads` threads; the first error (lowest
// index) wins.
absl::Status ParallelFor(int n, int threads,
                         const std::function<absl::Status(int)>& fn) {
  std::vector<absl::Status> status(n);
  std::atomic<int> next{0};
  auto work = [&] {
    for (int i = next++; i < n; i = next++) status[i] = fn(i);
  };
  const int k = std::max(1, std::min({threads, n, 32}));
  if (k == 1) {
    work();
  } else {
    std::vector<std::thread> pool;
    for (int i = 0; i < k; ++i) pool.emplace_back(work);
    for (auto& t : pool) t.join();
  }
  for (const absl::Status& s : status) VERL_RETURN_IF_ERROR(s);
  return absl::OkStatus();
}

// Opens every shard file (zip directory + pickle only) on a thread pool.
absl::StatusOr<std::vector<PtArchive>> OpenShards(const std::string& dir,
                                                  int world, int shards,
                                                  int threads) {
  std::vector<std::optional<PtArchive>> opened(shards);
  VERL_RETURN_IF_ERROR(ParallelFor(shards, threads, [&](int r) {
    auto a = PtArchive::Open(Join(dir, RankFileName("model", r, world)));
    if (!a.ok()) return a.status();
    opened[r] = std::move(*a);
    return absl::OkStatus();
  }));
  std::vector<PtArchive> out;
  for (auto& a : opened) out.push_back(std::move(*a));
  return out;
}

// The layout to merge with: the stored one (checked against every shard's
// keys, chunk shapes and dtypes) or, for files without layout, dim-0
// concatenation of what is there. Everything is checked from the files'
// metadata before any tensor data is read.
absl::StatusOr<FsdpLayout> ResolveLayout(const FsdpLayout& stored,
                                         const std::vector<PtArchive>& shards) {
  FsdpLayout layout = stored;
  const bool have_layout = !stored.params.empty();
  for (const PtArchive& a : shards) {
    for (const PtTensorInfo& t : a.tensors()) {
      if (have_layout && !stored.params.count(t.name)) {
        return absl::InvalidArgumentError(absl::StrCat(a.path(), ": tensor '",
                                                       t.name, "' is not in ",
                                                       kFsdpConfigFileName));
      }
      if (shards[0].Find(t.name) == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat(a.path(), ": tensor '", t.name,
                         "' is missing from rank 0's shard"));
      }
    }
  }
  if (!have_layout) {
    for (const PtTensorInfo& t0 : shards[0].tensors()) {
      ParamLayout p;
      p.dtype = DtypeName(t0.dtype);
      p.shape = t0.shape;
      p.shard_dim = t0.shape.empty() ? -1 : 0;
      if (p.shard_dim == 0) p.shape[0] = 0;
      for (const PtArchive& a : shards) {
        const PtTensorInfo* t = a.Find(t0.name);
        if (t == nullptr) {
          return absl::InvalidArgumentError(
              absl::StrCat(a.path(), ": tensor '", t0.name, "' is missing"));
        }
        const bool same_rest =
            t->shape.size() == t0.shape.size() &&
            std::equal(t->shape.begin() + (p.shard_dim == 0), t->shape.end(),
                       t0.shape.begin() + (p.shard_dim == 0));
        if (t->dtype != t0.dtype || !same_rest) {
          return absl::InvalidArgumentError(absl::StrCat(
              a.path(), ": tensor '", t0.name, "' has dtype/shape ",
              DtypeName(t->dtype), " [", absl::StrJoin(t->shape, ", "),
              "], not concatenable with rank 0's ", DtypeName(t0.dtype), " [",
              absl::StrJoin(t0.shape, ", "), "]"));
        }
        if (p.shard_dim == 0) p.shape[0] += t->shape[0];
      }
      layout.params[t0.name] = p;
    }
    return layout;
  }
  for (const auto& [name, p] : layout.params) {
    std::vector<std::vector<int64_t>> shapes;
    std::vector<at::ScalarType> dtypes;
    for (const PtArchive& a : shards) {
      const PtTensorInfo* t = a.Find(name);
      if (t == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat(a.path(), ": tensor '", name, "' is missing"));
      }
      shapes.push_back(t->shape);
      dtypes.push_back(t->dtype);
    }
    absl::Status s = CheckChunks(name, p, shapes, dtypes);
    if (!s.ok()) {
      return Annotate(s, absl::StrCat(shards[0].path(), " .. (", shards.size(),
                                      " shard files)"));
    }
  }
  return layout;
}

// The full tensor `name` in its stored dtype, read from every shard straight
// into its rows (shards in parallel). Memory: the full tensor only.
absl::StatusOr<at::Tensor> Assemble(const std::string& name,
                                    const ParamLayout& p, bool exact,
                                    const std::vector<PtArchive>& shards,
                                    int threads) {
  const PtTensorInfo& t0 = *shards[0].Find(name);
  if (p.shard_dim < 0 || shards.size() == 1) {
    at::Tensor full = LargeBufferTensor(t0.shape, t0.dtype);
    VERL_RETURN_IF_ERROR(shards[0].ReadInto(t0, full));
    return full;
  }
  const int d = p.shard_dim;
  at::Tensor full = LargeBufferTensor(p.shape, t0.dtype);
  std::vector<int64_t> begin(shards.size(), 0);
  for (size_t r = 1; r < shards.size(); ++r) {
    begin[r] = exact ? p.RowRange(r, shards.size()).first
                     : begin[r - 1] + shards[r - 1].Find(name)->shape[d];
  }
  VERL_RETURN_IF_ERROR(
      ParallelFor(shards.size(), threads, [&](int r) -> absl::Status {
        const PtTensorInfo& t = *shards[r].Find(name);
        if (t.shape[d] == 0) return absl::OkStatus();
        at::Tensor rows = full.narrow(d, begin[r], t.shape[d]);
        if (rows.is_contiguous()) return shards[r].ReadInto(t, rows);
        VERL_ASSIGN_OR_RETURN(at::Tensor chunk, shards[r].Read(t));
        rows.copy_(chunk);
        return absl::OkStatus();
      }));
  return full;
}

// `full` in `dtype`, converted in row blocks on up to `threads` threads.
at::Tensor Convert(const at::Tensor& full, at::ScalarType dtype, int threads) {
  if (full.scalar_type() == dtype) return full;
  at::Tensor out = LargeBufferTensor(full.sizes(), dtype);
  if (full.dim() == 0 || full.numel() < (1 << 20) || threads <= 1) {
    out.copy_(full);
    return out;
  }
  const int64_t rows = full.size(0);
  const int n = static_cast<int>(std::min<int64_t>(threads, rows));
  const int64_t per = (rows + n - 1) / n;
  VERL_CHECK_OK(ParallelFor(n, n, [&](int i) {
    const int64_t b = std::min(rows, i * per), e = std::min(rows, b + per);
    if (e > b) out.narrow(0, b, e - b).copy_(full.narrow(0, b, e - b));
    return absl::OkStatus();
  }));
  return out;
}

// verl's LoRA handling: base names lose the PEFT prefix and ".base_layer".
std::string BaseName(const std::string& name) {
  std::string out = name;
  if (absl::StartsWith(out, "base_model.model.")) {
    out = out.substr(std::string("base_model.model.").size());
  }
  return absl::StrReplaceAll(out, {{".base_layer.", "."}});
}

// `ids` without repeats; a list that collapses to one id becomes that id
// (as transformers writes a single eos_token_id).
nlohmann::json UniqueIds(const nlohmann::json& ids) {
  if (!ids.is_array()) return ids;
  nlohmann::json out = nlohmann::json::array();
  for (const nlohmann::json& id : ids) {
    if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
  }
  if (out.size() == 1 && ids.size() > 1) return out[0];
  return out;
}

// config.json / generation_config.json of the merged folder: the dtype keys
// say the merge's dtype (transformers' save_pretrained writes the model's:
// "torch_dtype", or "dtype" in files of transformers v5, also in nested
// text/vision configs), and eos_token_id loses repeated ids.
void PatchHfJson(nlohmann::json* json, at::ScalarType dtype, bool is_config) {
  if (json->contains("eos_token_id")) {
    (*json)["eos_token_id"] = UniqueIds((*json)["eos_token_id"]);
  }
  if (!is_config) return;
  const std::string name = DtypeName(dtype);
  auto set_dtype = [&](nlohmann::json& j, bool add) {
    const bool v5 = j.contains("dtype") && !j.contains("torch_dtype");
    if (v5) {
      j["dtype"] = name;
    } else if (add || j.contains("torch_dtype")) {
      j["torch_dtype"] = name;
    }
  };
  set_dtype(*json, /*add=*/true);
  for (auto& [key, value] : json->items()) {
    if (value.is_object()) set_dtype(value, /*add=*/false);
  }
}

absl::Status CopyHfFilesImpl(const MergeOptions& options,
                             const std::string& tmp) {
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
    const bool is_config = name == "config.json";
    if (is_config || name == "generation_config.json") {
      VERL_ASSIGN_OR_RETURN(nlohmann::json json, core::ReadJsonFile(src));
      PatchHfJson(&json, options.dtype, is_config);
      bytes = json.dump(2) + "\n";
    }
    VERL_RETURN_IF_ERROR(core::WriteFileAtomic(Join(tmp, name), bytes));
  }
  return absl::OkStatus();
}

// For a base weight "<module>.base_layer.weight" with "<module>.lora_A*" and
// "<module>.lora_B*" in the layout: W + (alpha / r) * B @ A (fp32), in W's
// dtype. Other tensors are returned unchanged.
template <typename AssembleFn>
absl::StatusOr<at::Tensor> MergeLoraInto(const std::string& src,
                                         const at::Tensor& full,
                                         const FsdpLayout& layout,
                                         const MergeOptions& options,
                                         AssembleFn& assemble) {
  const std::string suffix = ".base_layer.weight";
  if (!absl::EndsWith(src, suffix)) return full;
  const std::string module = src.substr(0, src.size() - suffix.size());
  std::string a_name, b_name;
  for (const auto& [name, p] : layout.params) {
    if (absl::StartsWith(name, module + ".lora_A")) a_name = name;
    if (absl::StartsWith(name, module + ".lora_B")) b_name = name;
  }
  if (a_name.empty() || b_name.empty()) return full;
  VERL_ASSIGN_OR_RETURN(at::Tensor a, assemble(a_name));
  VERL_ASSIGN_OR_RETURN(at::Tensor b, assemble(b_name));
  if (a.dim() != 2 || b.dim() != 2 || b.size(1) != a.size(0) ||
      b.size(0) != full.size(0) || a.size(1) != full.size(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("LoRA shapes of ", module, " do not fit its weight ",
                     full.size(0), "x", full.size(1), ": A ", a.size(0), "x",
                     a.size(1), ", B ", b.size(0), "x", b.size(1)));
  }
  const double scale = options.lora_alpha / static_cast<double>(a.size(0));
  at::Tensor merged =
      full.to(at::kFloat) + b.to(at::kFloat).matmul(a.to(at::kFloat)) * scale;
  return merged.to(full.scalar_type());
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
  const int threads = options.num_threads;
  VERL_ASSIGN_OR_RETURN(std::vector<PtArchive> shards,
                        OpenShards(dir, stored.world_size, num_files, threads));
  VERL_ASSIGN_OR_RETURN(FsdpLayout layout, ResolveLayout(stored, shards));
  VERL_RETURN_IF_ERROR(CopyHfFilesImpl(options, tmp));
  const bool exact = !stored.params.empty();
  auto assemble = [&](const std::string& src) {
    return Assemble(src, layout.params.at(src), exact, shards, threads);
  };
  auto full_in_dtype =
      [&](const std::string& src) -> absl::StatusOr<at::Tensor> {
    VERL_ASSIGN_OR_RETURN(at::Tensor full, assemble(src));
    if (options.merge_lora) {
      VERL_ASSIGN_OR_RETURN(
          full, MergeLoraInto(src, full, layout, options, assemble));
    }
    return Convert(full, options.dtype, threads);
  };
  if (options.merge_lora && !(options.lora_alpha > 0)) {
    return absl::InvalidArgumentError(
        "--merge_lora needs --lora_alpha > 0 (checkpoints do not store it)");
  }

  std::map<std::string, std::vector<int64_t>> shapes;
  std::map<std::string, std::string> out_to_src;
  for (const auto& [name, p] : layout.params) {
    if (absl::StrContains(name, "lora_")) continue;
    const std::string out = BaseName(name);
    if (options.tie_word_embedding && out == "lm_head.weight") continue;
    out_to_src[out] = name;
    shapes[out] = p.shape;
  }
  VERL_RETURN_IF_ERROR(WriteMergedWeights(
      options, tmp, shapes,
      [&](const std::string& out) -> absl::StatusOr<at::Tensor> {
        VERL_ASSIGN_OR_RETURN(at::Tensor full, assemble(out_to_src.at(out)));
        if (options.merge_lora) {
          VERL_ASSIGN_OR_RETURN(full, MergeLoraInto(out_to_src.at(out), full,
                                                    layout, options, assemble));
        }
        return full;
      },
      &stats));
  TensorMap lora;
  for (const auto& [name, p] : layout.params) {
    if (!absl::StrContains(name, "lora_")) continue;
    VERL_ASSIGN_OR_RETURN(lora[name], full_in_dtype(name));
  }
  if (!lora.empty()) {
    stats.num_lora_tensors = lora.size();
    VERL_RETURN_IF_ERROR(WriteLoraAdapter(Join(tmp, kLoraAdapterSubdir), lora,
                                          options.lora_alpha));
  }
  return stats;
}

}  // namespace

absl::StatusOr<MergeStats> MergeIntoTarget(
    const MergeOptions& options,
    const std::function<absl::StatusOr<MergeStats>(const std::string& tmp)>&
        merge) {
  if (options.target_dir.empty()) {
    return absl::InvalidArgumentError("--target_dir is empty");
  }
  std::error_code probe;
  if (!options.overwrite && fs::exists(options.target_dir, probe) &&
      !(fs::is_directory(options.target_dir, probe) &&
        fs::is_empty(options.target_dir, probe))) {
    return absl::FailedPreconditionError(absl::StrCat(
        "target_dir '", options.target_dir,
        "' exists and is not empty; pass --overwrite to replace it (its "
        "files are deleted) or choose another folder"));
  }
  // Scratch folders of killed merges into the same target go first.
  std::string target_dir = options.target_dir;
  while (target_dir.size() > 1 && target_dir.back() == '/')
    target_dir.pop_back();
  const fs::path target(target_dir);
  const std::string tmp_prefix = target.filename().string() + ".tmp-merge-";
  std::error_code ec;
  core::RemoveDeadTempDirs(
      target.has_parent_path() ? target.parent_path().string() : ".",
      tmp_prefix);
  const std::string tmp =
      (target.parent_path() / core::ProcessTempName(tmp_prefix)).string();
  fs::remove_all(tmp, ec);
  VERL_RETURN_IF_ERROR(core::MakeDirs(tmp));
  absl::StatusOr<MergeStats> stats = merge(tmp);
  if (stats.ok()) {
    absl::Status s = core::FsyncPath(tmp);
    if (s.ok()) s = Publish(tmp, options.target_dir);
    if (!s.ok()) stats = s;
  }
  if (!stats.ok()) fs::remove_all(tmp, ec);
  return stats;
}

absl::StatusOr<MergeStats> MergeFsdpCheckpoint(const MergeOptions& options) {
  return MergeIntoTarget(
      options, [&](const std::string& tmp) { return MergeInto(options, tmp); });
}

absl::Status CopyHfFiles(const MergeOptions& options, const std::string& tmp) {
  return CopyHfFilesImpl(options, tmp);
}

absl::Status WriteMergedWeights(
    const MergeOptions& options, const std::string& tmp,
    const std::map<std::string, std::vector<int64_t>>& shapes,
    const std::function<absl::StatusOr<at::Tensor>(const std::string& name)>&
        produce,
    MergeStats* stats) {
  // Plan output shards from metadata (meta tensors), then stream: every
  // output file's header is written first, then one tensor at a time.
  TensorMap plan_input;
  for (const auto& [name, shape] : shapes) {
    plan_input[name] = at::empty(
        shape, at::TensorOptions().dtype(options.dtype).device(at::kMeta));
  }
  const auto plan = PlanShards(plan_input, options.max_shard_size);
  ShardIndex index;
  for (size_t i = 0; i < plan.size(); ++i) {
    const std::string file = plan.size() == 1 ? kSafetensorsSingleFile
                                              : ShardFileName(i, plan.size());
    std::vector<SafetensorsStreamWriter::Entry> entries;
    for (const std::string& out : plan[i]) {
      entries.push_back({out, options.dtype, shapes.at(out)});
    }
    VERL_ASSIGN_OR_RETURN(
        auto writer, SafetensorsStreamWriter::Create(Join(tmp, file), entries,
                                                     {{"format", "pt"}}));
    for (const std::string& out : writer->DataOrder()) {
      VERL_ASSIGN_OR_RETURN(at::Tensor full, produce(out));
      if (full.sizes() != at::IntArrayRef(shapes.at(out))) {
        return absl::DataLossError(absl::StrCat(
            "tensor '", out, "' is [", absl::StrJoin(full.sizes(), ", "),
            "], planned [", absl::StrJoin(shapes.at(out), ", "), "]"));
      }
      at::Tensor t = Convert(full, options.dtype, options.num_threads);
      VERL_RETURN_IF_ERROR(writer->Write(out, t));
      stats->bytes_written += t.nbytes();
      index.weight_map[out] = file;
      ++stats->num_tensors;
    }
    VERL_RETURN_IF_ERROR(writer->Finish());
  }
  index.total_size = stats->bytes_written;
  if (plan.size() > 1) {
    VERL_RETURN_IF_ERROR(core::WriteFileAtomic(Join(tmp, kSafetensorsIndexFile),
                                               ShardIndexToJson(index)));
  }
  return absl::OkStatus();
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
