// File: verl/models/megatron/megatron_gpt_worker.cc
//
// Test worker for megatron_gpt_test, started as N ranks (tp = N / (cp*pp),
// cp = --cp: context parallel, each sequence split over cp ranks; pp =
// --pp pipeline stages) by the launcher. --microbatches packed batches go
// through the 1F1B schedule (a plain loop at pp = 1) with their losses
// summed; with pp > 1 also through the forward-only schedule, the last
// stage's log-probs / values broadcast to every stage and compared there. For
// each case of --cases (names below) every rank builds the single-process
// CausalLM from one seed (norm weights and biases perturbed so that none is
// trivial), loads its tensor-parallel shards of it into a MegatronGPTModel,
// runs forward + vocab-parallel log-probs and entropy + backward on a packed
// batch of 3 sequences, and compares the gathered logits, log-probs, entropy
// and every parameter gradient (against the reference gradient's shard) with
// the reference (<= 1e-5 relative); value cases (the critic) compare the values
// and the gradients of sum(a*values). The first case also loads the model from
// an HF folder the reference was saved to and checks every parameter equals the
// state-dict load. Every case also gathers the shards back into HF tensors
// layer by layer and checks they equal the reference's exactly. Prints "rank R:
// CASE OK (max rel err E at NAME)" per case or "rank R FAILED: ..." and exits
// non-zero on failure.
//
// Case "hf_mmap" (HF folder in): rank 0 saves a mid-sized Llama (hidden
// 256, vocab 4096: 16 MiB of tensors from 256 KiB to 4 MiB) as an HF
// folder; the ranks in turn map it (LoadHfCheckpoint) and copy their shards
// out of the mapping (LoadMegatronFromHf: what LoadMegatronFromHfFolder
// does). Asserted per rank: the file pages its load touched (readahead off
// on the mapping, the file dropped from the page cache before its turn,
// then the mapping's resident pages: smaps Rss) equal what its slices need
// within a page at each end of a slice — 1/tp of the row-split tensors,
// the column-split linear_proj / linear_fc2 whole (their 1 KiB rows are
// shorter than a page), the norms whole (skipped where the page cache
// cannot be dropped, e.g. tmpfs); the load's peak resident growth (VmHWM)
// stays below the file + 4 MiB (no full copy of the model); afterwards
// nothing of the file stays mapped and the rank holds exactly its shards.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <fcntl.h>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "verl/core/status.h"
#include "verl/models/decoder.h"
#include "verl/models/hf_checkpoint.h"
#include "verl/models/logprob.h"
#include "verl/models/megatron/megatron_gpt.h"
#include "verl/models/megatron/megatron_weights.h"
#include "verl/models/megatron/moe_layer.h"
#include "verl/models/moe/router.h"
#include "verl/parallel/distributed.h"
#include "verl/parallel/megatron/parallel_state.h"
#include "verl/parallel/megatron/pipeline_schedule.h"
#include "verl/parallel/megatron/test_compare.h"
#include "verl/parallel/megatron/vocab_parallel.h"
#include "verl/parallel/test_worker.h"
#include "verl/profiler/timeline.h"

ABSL_FLAG(std::string, cases, "", "comma-separated case names");
ABSL_FLAG(int, cp, 1, "context_parallel_size (tp = world / (cp * pp))");
ABSL_FLAG(int, pp, 1, "pipeline_model_parallel_size");
ABSL_FLAG(int, vpp, 0,
          "virtual_pipeline_model_parallel_size (the interleaved schedule)");
ABSL_FLAG(int, steps, 0,
          "SGD steps after the first forward-backward: each is followed by "
          "the parameters' check and another forward-backward check");
ABSL_FLAG(int, microbatches, 1,
          "micro-batches (packed batches of 3, 2, 1 sequences in turn) "
          "through the 1F1B and forward-only schedules");
ABSL_FLAG(int, layers, 3, "num_hidden_layers");
ABSL_FLAG(int, first_stage_layers, -1, "num_layers_in_first_pipeline_stage");
ABSL_FLAG(int, ep, 1,
          "expert_model_parallel_size (MoE cases; tp = world / cp / --tp_div)");
ABSL_FLAG(int, etp, 1, "expert_tensor_parallel_size (MoE cases)");
ABSL_FLAG(int, tp_div, 1, "tp = world / cp / tp_div (the rest is dp)");

namespace verl::models {
namespace {

namespace mg = parallel::megatron;

constexpr double kTol = 1e-5;
constexpr double kTemperature = 0.8;

struct Case {
  const char* name;
  int64_t kv_heads;
  bool bias, qk_norm, tie, sp;
  const char* granularity;  // "", "full", "selective"
  const char* method;
  int64_t num_layers;
  std::vector<std::string> modules;
  bool value = false;  // critic: value head, loss on the values
  // DeepSeek-V3 multi-head latent attention (YaRN rope) with this
  // q_lora_rank (0: q_proj without compression); -1: the case's family.
  int64_t mla_q_lora_rank = -1;
  // An MoE model: the config of this MoE case (MoeConfig; every rank runs
  // the same batch, so dp = 1), with the recompute and sp above.
  const char* moe = nullptr;
  // MoE: Megatron's load-balancing loss type ("aux_loss" / "seq_aux_loss")
  // with the z-loss, attached at kAuxScale; null: none.
  const char* balance = nullptr;
};

// Qwen2 (bias), Qwen3 (qk norm), Llama (neither); kv_heads 1 and 2 with
// tp 2 and 4 cover both query-group layouts (ng >= tp and ng < tp).
const std::vector<Case>& Cases() {
  static const auto* cases = new std::vector<Case>{
      {"qwen2", 2, true, false, false, false, "", "uniform", 1, {}},
      {"qwen3_sp_full_uniform_tied",
       2,
       false,
       true,
       true,
       true,
       "full",
       "uniform",
       2,
       {}},
      {"llama_kv1_sp_selective",
       1,
       false,
       false,
       false,
       true,
       "selective",
       "uniform",
       1,
       {"core_attn", "mlp"}},
      {"qwen2_kv2_sp_core_attn",
       2,
       true,
       false,
       false,
       true,
       "selective",
       "uniform",
       1,
       {"core_attn"}},
      {"qwen3_kv4_full_block_tied",
       4,
       false,
       true,
       true,
       false,
       "full",
       "block",
       2,
       {}},
      {"qwen3_kv1_sp_full",
       1,
       true,
       true,
       false,
       true,
       "full",
       "uniform",
       1,
       {}},
      {"qwen2_value_sp_selective",
       2,
       true,
       false,
       false,
       true,
       "selective",
       "uniform",
       1,
       {"core_attn"},
       true},
      {"llama_kv2_value_full",
       2,
       false,
       false,
       false,
       false,
       "full",
       "uniform",
       1,
       {},
       true},
      // MLA: replicated down projections, heads split over tp (4 heads: tp
      // 2 and 4), the rope key gathered / copied into the tp region.
      {"dsv3_mla",
       4,
       false,
       false,
       false,
       false,
       "",
       "uniform",
       1,
       {},
       false,
       12},
      {"dsv3_mla_noq_sp_core_attn",
       4,
       false,
       false,
       true,
       true,
       "selective",
       "uniform",
       1,
       {"core_attn"},
       false,
       0},
      // MoE layers through the pipeline schedules and recompute, with
      // Megatron's load-balancing and z losses (HF's aux loss is not
      // computed there: HasMoeAuxLoss).
      {"qwen3_moe_pp",
       2,
       false,
       false,
       false,
       false,
       "",
       "uniform",
       1,
       {},
       false,
       -1,
       "qwen3_moe",
       "aux_loss"},
      {"dsv3_moe_sp_full",
       2,
       false,
       false,
       false,
       true,
       "full",
       "uniform",
       1,
       {},
       false,
       -1,
       "dsv3_router",
       "seq_aux_loss"},
      {"qwen2_moe_sp_selective_mlp",
       2,
       false,
       false,
       false,
       true,
       "selective",
       "uniform",
       1,
       {"core_attn", "mlp"},
       false,
       -1,
       "qwen2_moe_shared_sp",
       "aux_loss"},
  };
  return *cases;
}

// The config of MoE case `name` (below).
ModelConfig MoeCaseConfig(const std::string& name);

// DeepSeek-V3's attention on `config`: multi-head latent attention with
// q_lora_rank `q_lora_rank`, v narrower than q/k, interleaved rope under
// YaRN with both mscales (so cos/sin and the softmax scale are scaled).
void MakeMla(int64_t q_lora_rank, ModelConfig& config) {
  config.architecture = "DeepseekV3ForCausalLM";
  config.model_type = "deepseek_v3";
  config.attention_bias = false;
  config.qk_norm = false;
  config.q_lora_rank = q_lora_rank;
  config.kv_lora_rank = 12;
  config.qk_nope_head_dim = 6;
  config.qk_rope_head_dim = 4;
  config.v_head_dim = 5;
  config.head_dim = 4;  // = qk_rope_head_dim, as HF sets it
  config.rope_interleave = true;
  config.rope_scaling.rope_type = "yarn";
  config.rope_scaling.factor = 4.0;
  config.rope_scaling.original_max_position_embeddings = 8;
  config.max_position_embeddings = 32;  // factor x original, as HF checks
  config.rope_scaling.mscale = 0.9;
  config.rope_scaling.mscale_all_dim = 0.7;
}

ModelConfig TinyConfig(const Case& c) {
  ModelConfig config;
  config.architecture = c.qk_norm ? "Qwen3ForCausalLM" : "Qwen2ForCausalLM";
  config.model_type = c.qk_norm ? "qwen3" : "qwen2";
  config.vocab_size = 37;  // padded to 40 (tp 2) / 48 (tp 4)
  config.hidden_size = 32;
  config.intermediate_size = 48;
  config.num_hidden_layers = absl::GetFlag(FLAGS_layers);
  config.num_attention_heads = 4;
  config.num_key_value_heads = c.kv_heads;
  config.head_dim = 8;
  config.attention_bias = c.bias;
  config.qk_norm = c.qk_norm;
  config.tie_word_embeddings = c.tie;
  config.rope_theta = 10000.0;
  config.is_value_model = c.value;
  if (c.mla_q_lora_rank >= 0) MakeMla(c.mla_q_lora_rank, config);
  return config;
}

// Detached parameters by name (an HF source for LoadMegatronFromHf).
std::map<std::string, at::Tensor> NamedParams(const torch::nn::Module& m) {
  std::map<std::string, at::Tensor> params;
  for (const auto& item : m.named_parameters()) {
    params[item.key()] = item.value().detach();
  }
  return params;
}

std::map<std::string, at::Tensor> NamedGrads(const torch::nn::Module& m) {
  std::map<std::string, at::Tensor> grads;
  for (const auto& item : m.named_parameters()) {
    grads[item.key()] = item.value().grad();
  }
  return grads;
}

absl::Status CheckFolderLoad(const CausalLM& ref, const MegatronGPTModel& got,
                             const std::shared_ptr<mg::ParallelState>& mpu) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir =
      absl::StrCat(tmp ? tmp : "/tmp", "/megatron_gpt_hf_", getppid());
  if (mpu->world()->rank() == 0) {
    HfCheckpoint ckpt;
    ckpt.config = ref.config();
    for (const auto& item : ref.named_parameters()) {
      ckpt.tensors[item.key()] = item.value().detach();
    }
    VERL_RETURN_IF_ERROR(SaveHfCheckpoint(dir, ckpt));
  }
  VERL_RETURN_IF_ERROR(mpu->world()->Barrier());
  MegatronGPTModel loaded(ref.config(), got.options(), mpu);
  VERL_RETURN_IF_ERROR(LoadMegatronFromHfFolder(dir, &loaded));
  auto want = got.named_parameters();
  for (const auto& item : loaded.named_parameters()) {
    if (!at::equal(item.value(), want[item.key()])) {
      return absl::InternalError(
          absl::StrCat("HF folder load differs at ", item.key()));
    }
  }
  return mpu->world()->Barrier();
}

// A "VmRSS" / "VmHWM" line of /proc/self/status, in bytes (-1: absent).
int64_t StatusBytes(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (!absl::StartsWith(line, key + ":")) continue;
    std::vector<std::string> f =
        absl::StrSplit(line, ' ', absl::SkipWhitespace());
    int64_t kb = 0;
    if (f.size() >= 2 && absl::SimpleAtoi(f[1], &kb)) return kb * 1024;
  }
  return -1;
}

// Resident bytes (smaps Rss) of this process's mappings of files under
// `dir`.
int64_t MappedRssBytes(const std::string& dir) {
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool ours = false;
  int64_t kb = 0;
  while (std::getline(in, line)) {
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
        line.find('-') != std::string::npos &&
        line.find(':') > line.find(' ')) {  // a mapping's header line
      ours = absl::StrContains(line, dir + "/");
      continue;
    }
    if (ours && absl::StartsWith(line, "Rss:")) {
      int64_t v = 0;
      std::vector<std::string> f =
          absl::StrSplit(line, ' ', absl::SkipWhitespace());
      if (f.size() >= 2 && absl::SimpleAtoi(f[1], &v)) kb += v;
    }
  }
  return kb * 1024;
}

// This process's mappings of files under `dir` (from /proc/self/maps).
struct FileMapping {
  uintptr_t start = 0, end = 0;
  std::string path;
};
std::vector<FileMapping> MappingsUnder(const std::string& dir) {
  std::vector<FileMapping> out;
  std::ifstream in("/proc/self/maps");
  std::string line;
  while (std::getline(in, line)) {
    const size_t at = line.find(dir + "/");
    if (at == std::string::npos) continue;
    FileMapping m;
    m.start = std::stoull(line.substr(0, line.find('-')), nullptr, 16);
    m.end = std::stoull(line.substr(line.find('-') + 1), nullptr, 16);
    m.path = line.substr(at);
    out.push_back(m);
  }
  return out;
}

// Bytes of `maps` whose file pages are in the page cache (mincore).
int64_t CachedBytes(const std::vector<FileMapping>& maps) {
  const int64_t page = sysconf(_SC_PAGESIZE);
  int64_t n = 0;
  for (const FileMapping& m : maps) {
    std::vector<unsigned char> vec((m.end - m.start + page - 1) / page);
    if (mincore(reinterpret_cast<void*>(m.start), m.end - m.start,
                vec.data()) != 0) {
      return -1;
    }
    for (unsigned char v : vec) n += (v & 1) ? page : 0;
  }
  return n;
}

absl::Status RunHfMmapCase(const std::shared_ptr<mg::ParallelState>& mpu) {
  ModelConfig c;
  c.architecture = "LlamaForCausalLM";
  c.model_type = "llama";
  c.vocab_size = 4096;
  c.hidden_size = 256;
  c.intermediate_size = 1024;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 8;
  c.head_dim = 32;
  c.rope_theta = 10000.0;
  const int tp = mpu->tp_size();
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir =
      absl::StrCat(tmp ? tmp : "/tmp", "/megatron_hf_mmap_", getppid());
  if (mpu->world()->rank() == 0) {
    std::shared_ptr<CausalLM> ref = CreateModel(c, /*seed=*/5, 0.02);
    HfCheckpoint ckpt;
    ckpt.config = c;
    ckpt.tensors = NamedParams(*ref);
    VERL_RETURN_IF_ERROR(SaveHfCheckpoint(dir, ckpt));
  }
  VERL_RETURN_IF_ERROR(mpu->world()->Barrier());
  MegatronModelOptions options;
  options.sequence_parallel = true;
  MegatronGPTModel model(c, options, mpu);
  int64_t file = 0, held_want = 0, need = 0, slack = 0, before = 0, touched = 0,
          cached = 0;
  mallopt(M_MMAP_THRESHOLD, 1 << 20);  // freed temporaries leave the RSS
  std::ofstream clear_refs("/proc/self/clear_refs");
  clear_refs << "5" << std::flush;  // VmHWM := VmRSS
  const bool peak_reset = clear_refs.good();
  const int64_t rss0 = StatusBytes("VmRSS");
  // Exact page count: each rank in turn maps the folder, turns readahead
  // off on the mapping and drops the file's clean pages from the page cache
  // (no other rank has them mapped then), so the pages its page tables map
  // after the load are the pages its copies touched (fault-around maps only
  // pages already cached), then releases the mapping.
  for (int turn = 0; turn < mpu->world()->size(); ++turn) {
    VERL_RETURN_IF_ERROR(mpu->world()->Barrier());
    if (turn != mpu->world()->rank()) continue;
    VERL_ASSIGN_OR_RETURN(HfCheckpoint ckpt, LoadHfCheckpoint(dir));
    const std::vector<FileMapping> maps = MappingsUnder(dir);
    for (const FileMapping& m : maps) {
      madvise(reinterpret_cast<void*>(m.start), m.end - m.start, MADV_RANDOM);
      const int fd = open(m.path.c_str(), O_RDONLY);
      if (fd >= 0) {
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
      }
    }
    before = MappedRssBytes(dir);
    cached = CachedBytes(maps);
    VERL_RETURN_IF_ERROR(
        LoadMegatronFromHf(HfSourceFromMap(ckpt.tensors), &model));
    touched = MappedRssBytes(dir) - before;
    for (const auto& [name, t] : ckpt.tensors) {
      const int64_t bytes = t.numel() * t.element_size();
      file += bytes;
      held_want += t.dim() == 1 ? bytes : bytes / tp;  // norms replicated
      // Rows split over tp: 1/tp of the tensor. Columns split (o_proj,
      // down_proj): 1 KiB rows, shorter than a page: every page. Norms:
      // whole. Up to a page more at each end of a slice.
      const bool whole = t.dim() == 1 ||
                         absl::EndsWith(name, "o_proj.weight") ||
                         absl::EndsWith(name, "down_proj.weight");
      need += whole ? bytes : bytes / tp;
      slack += 2 * sysconf(_SC_PAGESIZE);
    }
  }
  VERL_RETURN_IF_ERROR(mpu->world()->Barrier());
  const int64_t peak_rise = StatusBytes("VmHWM") - rss0;
  const int64_t after_release = MappedRssBytes(dir);
  int64_t held = 0;
  for (const at::Tensor& p : model.parameters()) {
    held += p.numel() * p.element_size();
  }
  std::cout << "rank " << mpu->world()->rank() << ": hf_mmap tp " << tp
            << ": file tensors " << file << " B, mapped before the load "
            << before << " B, mapped by the load " << touched << " B ("
            << absl::StrFormat("%.3f", static_cast<double>(touched) / file)
            << " of the file), peak resident rise " << peak_rise
            << " B, held after " << held << " B (file / tp " << file / tp << ")"
            << "; its slices need " << need << " B; cached before its turn "
            << cached << " B" << std::endl;
  // The page cache dropped (not on tmpfs): the exact count.
  if (cached >= 0 && cached <= before + (64 << 10) &&
      std::abs(touched - need) > slack) {
    return absl::InternalError(
        absl::StrCat("the load touched ", touched,
                     " bytes of the mapped file; its slices "
                     "need ",
                     need, " (+-", slack, "), the file has ", file));
  }
  constexpr int64_t kTemporaries = 4 << 20;
  if (peak_reset && peak_rise > file + kTemporaries) {
    return absl::InternalError(
        absl::StrCat("loading the shards raised the peak resident set by ",
                     peak_rise, " bytes: more than the ", file, "-byte file + ",
                     kTemporaries, " (a full copy of the model?)"));
  }
  if (after_release != 0 || held != held_want) {
    return absl::InternalError(absl::StrCat(
        "after the load: ", after_release, " bytes still mapped, ", held,
        " bytes of parameters held (its shards: ", held_want, ")"));
  }
  return mpu->world()->Barrier();
}

// Gathering the shards back, layer by layer, gives the HF tensors exactly
// (with pipeline stages: the layers and root tensors of this stage).
absl::Status CheckGatherToHf(const MegatronGPTModel& model,
                             const std::map<std::string, at::Tensor>& hf) {
  size_t seen = 0;
  for (int64_t l = kMegatronRootStage; l < model.config().num_hidden_layers;
       ++l) {
    if (l != kMegatronRootStage && !model.LocalLayer(l)) continue;
    for (const auto& [name, tensor] : GatherHfTensors(model, l)) {
      auto it = hf.find(name);
      if (it == hf.end() || !at::equal(it->second, tensor)) {
        return absl::InternalError(
            absl::StrCat("gathered HF tensor ", name, " differs"));
      }
      ++seen;
    }
  }
  const bool whole = model.is_first_stage() && model.is_last_stage();
  if (whole ? seen != hf.size() : seen == 0) {
    return absl::InternalError(
        absl::StrCat("gathered ", seen, " of ", hf.size(), " HF tensors"));
  }
  return absl::OkStatus();
}

// The schedule's spans on the process timeline: one pipeline_forward and
// one pipeline_backward per (micro-batch, chunk), nested as a viewer
// stacks them.
absl::Status CheckScheduleTrace(const profiler::Timeline& timeline, int64_t n,
                                int64_t chunks) {
  VERL_RETURN_IF_ERROR(profiler::ValidateTrace(timeline.ToJson()));
  std::map<std::string, std::set<std::pair<int64_t, int64_t>>> seen;
  for (const profiler::TraceEvent& e : timeline.Events()) {
    if (e.category != "pipeline") continue;
    seen[e.name].insert(
        {e.args["mb"].get<int64_t>(), e.args["chunk"].get<int64_t>()});
  }
  for (const char* name : {"pipeline_forward", "pipeline_backward"}) {
    if (static_cast<int64_t>(seen[name].size()) != n * chunks) {
      return absl::InternalError(absl::StrCat("trace: ", seen[name].size(), " ",
                                              name, " spans, expected ",
                                              n * chunks));
    }
  }
  return absl::OkStatus();
}

// One packed micro-batch and its loss weights.
struct MicroBatch {
  std::vector<int64_t> cu;
  at::Tensor ids, labels, pos, a, b;
};

std::vector<MicroBatch> MakeMicroBatches(const ModelConfig& config, int n,
                                         at::Generator& gen) {
  const std::vector<std::vector<int64_t>> shapes = {
      {0, 5, 12, 17}, {0, 4, 11}, {0, 9}};
  std::vector<MicroBatch> out;
  for (int m = 0; m < n; ++m) {
    MicroBatch mb;
    mb.cu = shapes[m % shapes.size()];
    const int64_t t = mb.cu.back();
    mb.ids = at::randint(config.vocab_size, {t}, gen, at::kLong);
    mb.labels = at::randint(config.vocab_size, {t}, gen, at::kLong);
    std::vector<at::Tensor> pos_parts;
    for (size_t s = 0; s + 1 < mb.cu.size(); ++s) {
      pos_parts.push_back(at::arange(mb.cu[s + 1] - mb.cu[s], at::kLong));
    }
    mb.pos = at::cat(pos_parts);
    mb.a = at::randn({t}, gen);
    mb.b = at::randn({t}, gen);
    out.push_back(std::move(mb));
  }
  return out;
}

// The single-process reference: seeded weights (std 0.1) with the 1-D
// parameters (norms, biases) moved off their init by `gen`, so a wrong
// sharding of them shows.
std::shared_ptr<CausalLM> ReferenceModel(const ModelConfig& config,
                                         at::Generator& gen) {
  std::shared_ptr<CausalLM> ref = CreateModel(config, /*seed=*/1, 0.1);
  at::NoGradGuard no_grad;
  for (const auto& item : ref->named_parameters()) {
    if (item.value().dim() == 1) {
      item.value().add_(at::randn(item.value().sizes(), gen) * 0.1);
    }
  }
  return ref;
}

// Megatron's MoE losses of the Case.balance cases: coefficients and the
// gradient scale (MegatronGPTModel::SetMoeAuxLossScale).
constexpr double kAuxCoeff = 0.3, kZCoeff = 0.05, kAuxScale = 0.5;

struct RefMoeLosses {
  at::Tensor total;  // sum over layers of kAuxCoeff * balance + kZCoeff * z
  double balance = 0, z = 0;  // means over the MoE layers
};

// The load-balancing and z losses of one packed micro-batch (sequences at
// `cu`) from the reference's router logits [T, E] per MoE layer, written
// out sequence by sequence (moe_layer.h's formulas).
RefMoeLosses ReferenceMoeLosses(const std::vector<at::Tensor>& router_logits,
                                const std::vector<int64_t>& cu,
                                const ModelConfig& config, bool per_sequence) {
  const int64_t e = config.num_experts, k = config.num_experts_per_tok;
  std::vector<std::pair<int64_t, int64_t>> spans;  // [begin, end)
  if (per_sequence) {
    for (size_t s = 0; s + 1 < cu.size(); ++s)
      spans.push_back({cu[s], cu[s + 1]});
  } else {
    spans.push_back({0, cu.back()});
  }
  RefMoeLosses out;
  out.total = at::zeros({});
  for (const at::Tensor& logits : router_logits) {
    at::Tensor p = at::softmax(logits, -1);
    if (config.scoring_func == "sigmoid") {
      p = at::sigmoid(logits);
      p = p / p.sum(-1, /*keepdim=*/true);
    }
    at::Tensor balance = at::zeros({});
    for (const auto& [begin, end] : spans) {
      const at::Tensor seq = p.narrow(0, begin, end - begin);
      const at::Tensor chosen =
          at::bincount(std::get<1>(at::topk(seq.detach(), k, 1)).reshape({-1}),
                       {}, e)
              .to(p.scalar_type());
      const double len = static_cast<double>(end - begin);
      balance = balance + (chosen * seq.sum(0)).sum() *
                              (static_cast<double>(e) / (len * len * k));
    }
    balance = balance / static_cast<double>(spans.size());
    const at::Tensor z = at::logsumexp(logits, -1).pow(2).mean();
    out.total = out.total + kAuxCoeff * balance + kZCoeff * z;
    out.balance += balance.item<double>() / router_logits.size();
    out.z += z.item<double>() / router_logits.size();
  }
  return out;
}

// The last stage's outputs of one micro-batch (logits shard or values),
// and what the loss derives from them.
struct StageResult {
  at::Tensor out, log_probs, entropy;
};

absl::Status RunCase(const Case& c, bool check_folder,
                     const std::shared_ptr<mg::ParallelState>& mpu,
                     mg::Comparer& cmp) {
  const ModelConfig config = c.moe ? MoeCaseConfig(c.moe) : TinyConfig(c);
  MegatronModelOptions options;
  options.sequence_parallel = c.sp;
  options.make_vocab_size_divisible_by = 4;
  options.recompute_granularity = c.granularity;
  options.recompute_method = c.method;
  options.recompute_num_layers = c.num_layers;
  options.recompute_modules = c.modules;
  options.num_layers_in_first_pipeline_stage =
      absl::GetFlag(FLAGS_first_stage_layers);
  if (c.balance) {
    options.moe_router_load_balancing_type = c.balance;
    options.moe_aux_loss_coeff = kAuxCoeff;
    options.moe_z_loss_coeff = kZCoeff;
  }
  VERL_RETURN_IF_ERROR(
      ValidateMegatronModel(config, options, mpu->layout().sizes()));

  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(2);
  std::shared_ptr<CausalLM> ref = ReferenceModel(config, gen);
  const std::vector<MicroBatch> mbs =
      MakeMicroBatches(config, absl::GetFlag(FLAGS_microbatches), gen);
  const int64_t n = static_cast<int64_t>(mbs.size());
  auto ref_params = [&] { return NamedParams(*ref); };

  MegatronGPTModel model(config, options, mpu);
  model.SetMoeAuxLossScale(kAuxScale);
  VERL_RETURN_IF_ERROR(
      LoadMegatronFromHf(HfSourceFromMap(ref_params()), &model));
  if (check_folder) VERL_RETURN_IF_ERROR(CheckFolderLoad(*ref, model, mpu));
  VERL_RETURN_IF_ERROR(CheckGatherToHf(model, ref_params()));

  parallel::Communicator& pp = *mpu->group(mg::MpuGroup::kPp);
  // 1F1B (interleaved with virtual stages) over the micro-batches (a plain
  // loop at pp = 1); the loss and the outputs on the last stage.
  std::vector<StageResult> got(n);
  mg::PipelineStageFns fns = StageFns(model, [&mbs](int64_t m) {
    return StageMicroBatch{mbs[m].ids, mbs[m].pos, &mbs[m].cu};
  });
  fns.loss = [&](int64_t m, const at::Tensor& out) {
    const MicroBatch& mb = mbs[m];
    got[m].out = out.detach();
    if (c.value) return (out * mb.a).sum();
    mg::VocabParallelOutput lp = mg::VocabParallelLogProbsAndEntropy(
        out, mb.labels, config.vocab_size, mpu->tp(), kTemperature);
    got[m].log_probs = lp.log_probs.detach();
    got[m].entropy = lp.entropy.detach();
    return (lp.log_probs * mb.a + lp.entropy * mb.b).sum();
  };
  // Forward-backward checks before and after each SGD step (same lr on
  // both models: the sharded gradients equal the reference's, so must the
  // updated shards, the tied head's copy included).
  const int steps = absl::GetFlag(FLAGS_steps);
  constexpr double kLr = 0.01;
  std::vector<ForwardOutput> ref_fwd;
  std::vector<LogProbEntropy> ref_out(n);
  // After an update the two models' weights differ by fp32 rounding,
  // which the gradients of near-cancelling parameters (q/k norms, the tied
  // embedding) amplify to ~3e-5 relative even at pp = 1 (measured), and the
  // outputs after 3 steps to ~1.1e-5 (llama_kv2_value_full at pp 2 x vpp 2
  // on BLIS's skx kernels): after an update outputs and gradients are held
  // to 1e-4 (a wrong update moves them by >= 1e-2), the weights to 1e-5;
  // before any update everything to 1e-5.
  mg::Comparer after_update(10 * kTol);
  for (int step = 0; step <= steps; ++step) {
    const std::string tag =
        step == 0 ? absl::StrCat(c.name, ": ")
                  : absl::StrCat(c.name, " after step ", step, ": ");
    // The reference: every micro-batch's loss, gradients accumulated.
    ref->zero_grad();
    ref_fwd.clear();
    double ref_balance = 0, ref_z = 0;  // means over the micro-batches
    for (int64_t m = 0; m < n; ++m) {
      const MicroBatch& mb = mbs[m];
      std::vector<at::Tensor> router_logits;
      ref_fwd.push_back(ref->ForwardPacked(
          mb.ids, mb.pos, mb.cu, c.balance ? &router_logits : nullptr));
      at::Tensor loss;
      if (c.value) {
        loss = (ref_fwd[m].values * mb.a).sum();
      } else {
        ref_out[m] =
            LogProbsAndEntropy(ref_fwd[m].logits, mb.labels, kTemperature);
        loss = (ref_out[m].log_probs * mb.a + ref_out[m].entropy * mb.b).sum();
      }
      if (c.balance) {
        const RefMoeLosses aux =
            ReferenceMoeLosses(router_logits, mb.cu, config,
                               std::string(c.balance) == "seq_aux_loss");
        loss = loss + kAuxScale * aux.total;
        ref_balance += aux.balance / n;
        ref_z += aux.z / n;
      }
      loss.backward();
    }
    std::map<std::string, at::Tensor> ref_grads = NamedGrads(*ref);
    for (auto& [name, g] : ref_grads) {  // an expert no token reached
      if (!g.defined()) g = at::zeros_like(ref_params().at(name));
    }
    model.zero_grad();
    profiler::Timeline& timeline = profiler::Timeline::Global();
    const bool trace = step == 0 && mpu->pp_size() > 1;
    if (trace) {
      timeline.Clear();
      timeline.Enable(mpu->world()->rank());
    }
    mg::PipelineForwardBackward(fns, n, pp);
    if (trace) {
      timeline.Disable();
      VERL_RETURN_IF_ERROR(CheckScheduleTrace(timeline, n, model.num_chunks()));
    }
    model.FinalizeGrads();
    if (c.balance) {  // the step's losses as the model reports them
      const std::map<std::string, double> aux = model.TakeMoeAuxLosses();
      const std::string key = std::string(c.balance) == "seq_aux_loss"
                                  ? "moe/seq_load_balancing_loss"
                                  : "moe/load_balancing_loss";
      if (!aux.count(key) || !aux.count("moe/z_loss")) {
        return absl::InternalError(tag + "no " + key + " / moe/z_loss");
      }
      VERL_RETURN_IF_ERROR(cmp.Expect(tag + key,
                                      at::tensor(aux.at(key), at::kDouble),
                                      at::tensor(ref_balance, at::kDouble)));
      VERL_RETURN_IF_ERROR(cmp.Expect(
          tag + "moe/z_loss", at::tensor(aux.at("moe/z_loss"), at::kDouble),
          at::tensor(ref_z, at::kDouble)));
    }
    mg::Comparer& step_cmp = step == 0 ? cmp : after_update;
    for (int64_t m = 0; m < n && model.is_last_stage(); ++m) {
      const std::string mt = absl::StrCat(tag, "mb ", m, " ");
      if (c.value) {
        VERL_RETURN_IF_ERROR(
            step_cmp.Expect(mt + "values", got[m].out, ref_fwd[m].values));
        continue;
      }
      VERL_RETURN_IF_ERROR(
          step_cmp.Expect(mt + "logits",
                          mg::GatherVocabParallelLogits(
                              got[m].out, config.vocab_size, mpu->tp()),
                          ref_fwd[m].logits));
      VERL_RETURN_IF_ERROR(step_cmp.Expect(mt + "log_probs", got[m].log_probs,
                                           ref_out[m].log_probs));
      VERL_RETURN_IF_ERROR(
          step_cmp.Expect(mt + "entropy", got[m].entropy, ref_out[m].entropy));
    }
    const HfTensorSource grads = HfSourceFromMap(ref_grads);
    int checked = 0;
    for (const auto& item : model.named_parameters()) {
      if (!item.value().requires_grad()) continue;  // the expert bias
      VERL_ASSIGN_OR_RETURN(at::Tensor want,
                            MegatronShardFromHf(model, item.key(), grads));
      VERL_RETURN_IF_ERROR(step_cmp.Expect(tag + item.key() + " grad",
                                           item.value().grad(), want));
      ++checked;
    }
    // 6 per layer at least (norms, qkv, proj, fc1, fc2), the embedding.
    if (checked < 6 * static_cast<int>(model.layers.size()) +
                      (model.is_first_stage() ? 1 : 0)) {
      return absl::InternalError(absl::StrCat("only ", checked, " parameters"));
    }
    if (step == steps) break;
    at::NoGradGuard no_grad;
    for (auto* m : std::vector<torch::nn::Module*>{ref.get(), &model}) {
      for (const auto& item : m->named_parameters()) {
        if (item.value().grad().defined()) {
          item.value().sub_(item.value().grad() * kLr);
        }
      }
    }
    const std::map<std::string, at::Tensor> want = ref_params();
    const HfTensorSource updated = HfSourceFromMap(want);
    for (const auto& item : model.named_parameters()) {
      VERL_ASSIGN_OR_RETURN(at::Tensor w,
                            MegatronShardFromHf(model, item.key(), updated));
      VERL_RETURN_IF_ERROR(
          cmp.Expect(absl::StrCat(c.name, " step ", step + 1, ": ", item.key()),
                     item.value(), w));
    }
  }
  if (mpu->pp_size() == 1) return absl::OkStatus();
  // Forward only: the last stage's log-probs (values) broadcast to every
  // stage equal the reference on every rank (the weights of the last
  // forward-backward above, after `steps` updates).
  const std::string tag = absl::StrCat(c.name, ": ");
  mg::Comparer& fwd_cmp = steps == 0 ? cmp : after_update;
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> outs = mg::PipelineForwardOnly(fns, n, pp);
  for (int64_t m = 0; m < n; ++m) {
    at::Tensor result = at::empty({mbs[m].cu.back()});
    if (model.is_last_stage()) {
      result = c.value ? outs[m]
                       : mg::VocabParallelLogProbsAndEntropy(
                             outs[m], mbs[m].labels, config.vocab_size,
                             mpu->tp(), kTemperature)
                             .log_probs;
    }
    mg::BroadcastFromLastStage(result, pp);
    VERL_RETURN_IF_ERROR(
        fwd_cmp.Expect(absl::StrCat(tag, "forward-only mb ", m), result,
                       c.value ? ref_fwd[m].values : ref_out[m].log_probs));
  }
  return absl::OkStatus();
}

// ---- MoE (expert parallelism) ---------------------------------------------
//
// Every dp rank d runs its own packed batch (lengths differ per d, so the
// all-to-all splits differ); the reference runs each dp rank's batch
// through the single-process CausalLM. After FinalizeGrads a rank's dense
// gradients equal its own batch's, its local experts' the sum over every dp
// rank's batch (the dispatch brought their tokens); logits, log-probs,
// entropy, the aux loss and the expert load equal its batch's.
//
// Capacity cases (capacity > 0) drop tokens, which the single-process
// CausalLM does not: their reference is the MegatronGPTModel on a world of
// one process (no collectives) run on every dp rank's batch, whose
// routing and kept set must equal the ep ranks' (the kept set is checked
// against plain loops in megatron_gpt_test and router_test, and here for
// the position policy). Bias cases (bias_steps > 0) run that many
// forward-backward + FinalizeGrads steps with the expert-bias update on:
// each step's bias equals the one-process model's (which runs every dp
// batch), and the first step's equals the closed form from the step's
// expert load summed over the dp ranks.
struct MoeCase {
  const char* name;
  bool sigmoid;  // DeepSeek-V3 router (+ 1 shared expert); else softmax
  bool shared;   // softmax: Qwen2-MoE's gated shared expert
  bool sp;
  double capacity = 0.0;  // moe_expert_capacity_factor (0: null)
  const char* policy = "probs";
  int bias_steps = 0;  // moe_router_enable_expert_bias steps
};

const std::vector<MoeCase>& MoeCases() {
  static const auto* cases = new std::vector<MoeCase>{
      {"qwen3_moe", false, false, false},
      {"qwen3_moe_sp", false, false, true},
      {"qwen2_moe_shared_sp", false, true, true},
      {"dsv3_router", true, true, false},
      {"dsv3_router_sp", true, true, true},
      {"qwen3_moe_capacity", false, false, false, 0.5, "probs"},
      {"dsv3_capacity_position_sp", true, true, true, 0.5, "position"},
      {"dsv3_bias", true, true, false, 0.0, "probs", 3},
  };
  return *cases;
}

MegatronModelOptions MoeOptions(const MoeCase& c) {
  MegatronModelOptions options;
  options.sequence_parallel = c.sp;
  options.make_vocab_size_divisible_by = 4;
  if (c.capacity > 0) options.moe_expert_capacity_factor = c.capacity;
  options.moe_token_drop_policy = c.policy;
  options.moe_router_enable_expert_bias = c.bias_steps > 0;
  options.moe_router_bias_update_rate = 0.05;  // large enough to reroute
  options.moe_hf_aux_loss = true;  // compared with the HF model's aux_loss
  return options;
}

// A ParallelState of one process (every group the process itself).
std::shared_ptr<mg::ParallelState> OneProcessMpu() {
  mg::ModelParallelSizes sizes;
  sizes.etp = 1;
  absl::StatusOr<std::shared_ptr<mg::ParallelState>> one =
      mg::ParallelState::Initialize(parallel::SingleProcessCommunicator(),
                                    sizes);
  VERL_CHECK_OK(one.status());
  return *one;
}

// The HF-named gradients of a one-process model (zeros where none).
std::map<std::string, at::Tensor> HfGrads(const MegatronGPTModel& model) {
  const ParamTensorFn grad = [](const at::Tensor& p) {
    return p.grad().defined() ? p.grad() : at::zeros_like(p);
  };
  std::map<std::string, at::Tensor> out =
      GatherHfTensors(model, kMegatronRootStage, grad);
  for (int64_t l = 0; l < model.config().num_hidden_layers; ++l) {
    out.merge(GatherHfTensors(model, l, grad));
  }
  return out;
}

ModelConfig MoeConfig(const MoeCase& c) {
  ModelConfig config = TinyConfig({"",
                                   2,
                                   !c.sigmoid && c.shared,
                                   !c.sigmoid && !c.shared,
                                   false,
                                   c.sp,
                                   "",
                                   "uniform",
                                   1,
                                   {}});
  config.model_type = c.sigmoid  ? "deepseek_v3"
                      : c.shared ? "qwen2_moe"
                                 : "qwen3_moe";
  config.architecture = c.sigmoid  ? "DeepseekV3ForCausalLM"
                        : c.shared ? "Qwen2MoeForCausalLM"
                                   : "Qwen3MoeForCausalLM";
  config.num_experts = 8;
  config.num_experts_per_tok = 2;
  config.moe_intermediate_size = 16;
  config.router_aux_loss_coef = 0.5;  // large enough to show in gradients
  if (c.sigmoid) {  // the DeepSeek-V3 architecture, MLA included
    MakeMla(/*q_lora_rank=*/12, config);
    config.scoring_func = "sigmoid";
    config.n_group = 4;
    config.topk_group = 2;
    config.norm_topk_prob = true;
    config.routed_scaling_factor = 2.5;
    config.n_shared_experts = 1;
    config.first_k_dense_replace = 1;
  } else {
    config.norm_topk_prob = !c.shared;
    config.mlp_only_layers = {1};
    if (c.shared) config.shared_expert_intermediate_size = 24;
  }
  return config;
}

ModelConfig MoeCaseConfig(const std::string& name) {
  for (const MoeCase& c : MoeCases()) {
    if (name == c.name) return MoeConfig(c);
  }
  LOG(FATAL) << "unknown MoE case " << name;
}

struct MoeBatch {
  std::vector<int64_t> cu;
  at::Tensor ids, labels, pos, a, b;
};

MoeBatch MakeMoeBatch(int64_t dp_rank, int64_t vocab) {
  MoeBatch m;
  m.cu = dp_rank % 2 == 0 ? std::vector<int64_t>{0, 5, 12, 17}
                          : std::vector<int64_t>{0, 9, 11, 20};
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(7 + dp_rank);
  const int64_t t = m.cu.back();
  m.ids = at::randint(vocab, {t}, gen, at::kLong);
  m.labels = at::randint(vocab, {t}, gen, at::kLong);
  std::vector<at::Tensor> pos;
  for (size_t s = 0; s + 1 < m.cu.size(); ++s) {
    pos.push_back(at::arange(m.cu[s + 1] - m.cu[s], at::kLong));
  }
  m.pos = at::cat(pos);
  m.a = at::randn({t}, gen);
  m.b = at::randn({t}, gen);
  return m;
}

// A MoE case's config and options (validated for `mpu`'s sizes) and its
// reference model (the same on every rank) with its parameters by name.
struct MoeCaseSetup {
  ModelConfig config;
  MegatronModelOptions options;
  std::shared_ptr<CausalLM> ref;
  std::map<std::string, at::Tensor> params;
};

absl::StatusOr<MoeCaseSetup> SetUpMoeCase(const MoeCase& c,
                                          const mg::ParallelState& mpu) {
  MoeCaseSetup s{MoeConfig(c), MoeOptions(c), nullptr, {}};
  VERL_RETURN_IF_ERROR(
      ValidateMegatronModel(s.config, s.options, mpu.layout().sizes()));
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(2);
  s.ref = ReferenceModel(s.config, gen);
  s.params = NamedParams(*s.ref);
  return s;
}

absl::Status RunMoeCase(const MoeCase& c, bool check_folder,
                        const std::shared_ptr<mg::ParallelState>& mpu,
                        mg::Comparer& cmp) {
  VERL_ASSIGN_OR_RETURN(const MoeCaseSetup setup, SetUpMoeCase(c, *mpu));
  const ModelConfig& config = setup.config;
  const MegatronModelOptions& options = setup.options;
  const std::shared_ptr<CausalLM>& ref = setup.ref;
  const std::map<std::string, at::Tensor>& ref_params = setup.params;
  // The reference per dp rank: outputs of this rank's batch, gradients of
  // every batch.
  const int64_t dp = mpu->layout().dp(), me = mpu->dp_rank();
  std::map<std::string, at::Tensor> want_grads;
  ForwardOutput ref_fwd;
  LogProbEntropy ref_out;
  std::vector<at::Tensor> ref_router_logits;
  // Capacity cases: the one-process model's expert load and kept pairs of
  // this rank's batch.
  std::vector<double> one_load;
  std::vector<at::Tensor> one_kept;
  for (const auto& item : ref->named_parameters()) {  // no token: zero grad
    want_grads[item.key()] = at::zeros_like(item.value());
  }
  for (int64_t d = 0; d < dp; ++d) {
    const MoeBatch batch = MakeMoeBatch(d, config.vocab_size);
    if (c.capacity > 0) {
      const std::shared_ptr<mg::ParallelState> single = OneProcessMpu();
      MegatronGPTModel one(config, options, single);
      VERL_RETURN_IF_ERROR(
          LoadMegatronFromHf(HfSourceFromMap(ref_params), &one));
      at::Tensor shard = one.Forward(batch.ids, batch.pos, batch.cu);
      mg::VocabParallelOutput out = mg::VocabParallelLogProbsAndEntropy(
          shard, batch.labels, config.vocab_size, single->tp(), kTemperature);
      at::Tensor loss = (out.log_probs * batch.a + out.entropy * batch.b).sum();
      if (one.moe_aux_loss().defined()) {
        loss = loss + config.router_aux_loss_coef * one.moe_aux_loss();
      }
      loss.backward();
      one.FinalizeGrads();
      for (const auto& [name, g] : HfGrads(one)) {
        const bool expert = name.find(".mlp.experts.") != std::string::npos;
        if (d == me || expert) want_grads[name] = want_grads[name] + g;
      }
      if (d == me) {
        ref_fwd.logits = mg::GatherVocabParallelLogits(
            shard.detach(), config.vocab_size, single->tp());
        ref_fwd.aux_loss = one.moe_aux_loss();
        ref_out = {out.log_probs, out.entropy};
        for (const auto& [layer, counts] : one.TakeExpertLoad()) {
          one_load.insert(one_load.end(), counts.begin(), counts.end());
        }
        for (const auto& layer : one.layers) {
          if (layer->moe) one_kept.push_back(layer->moe->last_kept);
        }
      }
      continue;
    }
    ref->zero_grad();
    ForwardOutput fwd = ref->ForwardPacked(batch.ids, batch.pos, batch.cu);
    LogProbEntropy out =
        LogProbsAndEntropy(fwd.logits, batch.labels, kTemperature);
    at::Tensor loss = (out.log_probs * batch.a + out.entropy * batch.b).sum();
    if (fwd.aux_loss.defined()) {
      loss = loss + config.router_aux_loss_coef * fwd.aux_loss;
    }
    loss.backward();
    for (const auto& [name, g] : NamedGrads(*ref)) {
      if (!g.defined()) continue;
      const bool expert = name.find(".mlp.experts.") != std::string::npos;
      if (d == me || expert) want_grads[name] = want_grads[name] + g;
    }
    if (d == me) {
      ref_fwd = fwd;
      ref_out = out;
      VarlenCausalAttention attention(batch.cu);
      at::NoGradGuard no_grad;
      ref->Forward(batch.ids, batch.pos, attention, &ref_router_logits);
    }
  }

  MegatronGPTModel model(config, options, mpu);
  VERL_RETURN_IF_ERROR(LoadMegatronFromHf(HfSourceFromMap(ref_params), &model));
  if (check_folder) VERL_RETURN_IF_ERROR(CheckFolderLoad(*ref, model, mpu));
  VERL_RETURN_IF_ERROR(CheckGatherToHf(model, ref_params));

  const MoeBatch batch = MakeMoeBatch(me, config.vocab_size);
  const std::string tag = absl::StrCat(c.name, ": ");
  at::Tensor shard = model.Forward(batch.ids, batch.pos, batch.cu);
  mg::VocabParallelOutput out = mg::VocabParallelLogProbsAndEntropy(
      shard, batch.labels, config.vocab_size, mpu->tp(), kTemperature);
  at::Tensor loss = (out.log_probs * batch.a + out.entropy * batch.b).sum();
  if (model.moe_aux_loss().defined() != ref_fwd.aux_loss.defined()) {
    return absl::InternalError(tag + "aux loss defined differently");
  }
  if (model.moe_aux_loss().defined()) {
    VERL_RETURN_IF_ERROR(
        cmp.Expect(tag + "aux_loss", model.moe_aux_loss(), ref_fwd.aux_loss));
    loss = loss + config.router_aux_loss_coef * model.moe_aux_loss();
  }
  loss.backward();
  model.FinalizeGrads();
  VERL_RETURN_IF_ERROR(
      cmp.Expect(tag + "logits",
                 mg::GatherVocabParallelLogits(shard.detach(),
                                               config.vocab_size, mpu->tp()),
                 ref_fwd.logits));
  VERL_RETURN_IF_ERROR(
      cmp.Expect(tag + "log_probs", out.log_probs, ref_out.log_probs));
  VERL_RETURN_IF_ERROR(
      cmp.Expect(tag + "entropy", out.entropy, ref_out.entropy));
  const HfTensorSource grads = HfSourceFromMap(want_grads);
  int checked = 0, experts = 0;
  for (const auto& item : model.named_parameters()) {
    if (!item.value().requires_grad()) continue;
    VERL_ASSIGN_OR_RETURN(at::Tensor want,
                          MegatronShardFromHf(model, item.key(), grads));
    VERL_RETURN_IF_ERROR(
        cmp.Expect(tag + item.key() + " grad", item.value().grad(), want));
    ++checked;
    experts += item.key().find("local_experts") != std::string::npos;
  }
  const int64_t moe_layers = config.num_hidden_layers - 1;
  if (experts !=
      moe_layers * 2 * config.num_experts / mpu->layout().sizes().ep) {
    return absl::InternalError(
        absl::StrCat("checked ", experts, " expert parameters of ", checked));
  }
  // Expert tensor parallelism: each expert's fc1 rows / fc2 columns split.
  const int64_t etp = mpu->layout().sizes().etp;
  for (const auto& layer : model.layers) {
    if (!layer->moe) continue;
    const auto& e = *layer->moe->local_experts.front();
    if (e.linear_fc1->weight.size(0) !=
            2 * config.moe_intermediate_size / etp ||
        e.linear_fc2->weight.size(1) != config.moe_intermediate_size / etp) {
      return absl::InternalError(tag + "expert shards not split over etp");
    }
  }
  // Expert load: this dp rank's tokens, k slots each; the softmax router's
  // counts equal the reference routing's.
  const std::map<int64_t, std::vector<double>> load = model.TakeExpertLoad();
  if (static_cast<int64_t>(load.size()) != moe_layers) {
    return absl::InternalError(
        absl::StrCat("load of ", load.size(), " layers"));
  }
  size_t i = 0;
  const int64_t pairs = batch.cu.back() * config.num_experts_per_tok;
  if (c.capacity > 0) {
    // Dropping: the kept pairs and the load equal the one-process model's;
    // some pairs were dropped in every layer.
    std::vector<double> got_load;
    for (const auto& [layer, counts] : load) {
      got_load.insert(got_load.end(), counts.begin(), counts.end());
      double sum = 0;
      for (double v : counts) sum += v;
      if (!(sum < static_cast<double>(pairs))) {
        return absl::InternalError(absl::StrCat(
            tag, "layer ", layer, " dropped nothing (", sum, " pairs)"));
      }
    }
    if (got_load != one_load) {
      return absl::InternalError(tag + "expert load differs from one process");
    }
    size_t m = 0;
    for (const auto& layer : model.layers) {
      if (!layer->moe) continue;
      const at::Tensor& kept = layer->moe->last_kept;
      if (!kept.defined() || !at::equal(kept, one_kept.at(m++))) {
        return absl::InternalError(tag + "kept pairs differ from one process");
      }
      if (std::string(c.policy) != "position") continue;
      // Plain loop: each expert keeps its first `capacity` routed pairs in
      // token order (no padding here: every row is a real token).
      const int64_t k = config.num_experts_per_tok, n = kept.size(0);
      const int64_t cap = static_cast<int64_t>(std::ceil(
          static_cast<double>(n * k) / config.num_experts * c.capacity));
      std::vector<int64_t> used(config.num_experts, 0);
      const at::Tensor& idx = layer->moe->last_indices;
      for (int64_t t = 0; t < n; ++t) {
        for (int64_t j = 0; j < k; ++j) {
          const bool want = used[idx[t][j].item<int64_t>()]++ < cap;
          if (kept[t][j].item<bool>() != want) {
            return absl::InternalError(absl::StrCat(
                tag, "pair ", t, ",", j, " kept differs from the loop"));
          }
        }
      }
    }
  }
  for (const auto& [layer, counts] : load) {
    at::Tensor got = at::tensor(counts, at::kDouble);
    if (c.capacity == 0 &&
        got.sum().item<double>() != static_cast<double>(pairs)) {
      return absl::InternalError(absl::StrCat(tag, "layer ", layer, " routed ",
                                              got.sum().item<double>()));
    }
    if (!c.sigmoid && c.capacity == 0) {
      Routing r =
          SoftmaxTopK(ref_router_logits.at(i++), config.num_experts_per_tok,
                      config.norm_topk_prob);
      at::Tensor want =
          at::bincount(r.indices.reshape({-1}), {}, config.num_experts)
              .to(at::kDouble);
      if (!at::equal(got, want)) {
        return absl::InternalError(
            absl::StrCat(tag, "expert load of layer ", layer, " differs"));
      }
    }
  }
  const std::map<std::string, double> metrics = ExpertLoadMetrics(load);
  if (!metrics.count("moe/imbalance_max") ||
      metrics.at("moe/imbalance_max") < 1.0) {
    return absl::InternalError(tag + "no moe/imbalance_max metric");
  }
  return absl::OkStatus();
}

// Every MoE layer's router.expert_bias, in layer order.
std::vector<at::Tensor> ExpertBiases(const MegatronGPTModel& model) {
  std::vector<at::Tensor> out;
  for (const auto& layer : model.layers) {
    if (layer->moe) out.push_back(layer->moe->router->expert_bias.clone());
  }
  return out;
}

// One training step of `model` on `batch`: forward, loss, backward and
// FinalizeGrads (which updates the expert bias).
void MoeTrainStep(MegatronGPTModel& model, const MoeBatch& batch,
                  const ModelConfig& config) {
  at::Tensor shard = model.Forward(batch.ids, batch.pos, batch.cu);
  mg::VocabParallelOutput out = mg::VocabParallelLogProbsAndEntropy(
      shard, batch.labels, config.vocab_size, model.tp(), kTemperature);
  (out.log_probs * batch.a + out.entropy * batch.b).sum().backward();
}

absl::Status RunMoeBiasCase(const MoeCase& c,
                            const std::shared_ptr<mg::ParallelState>& mpu,
                            mg::Comparer& cmp) {
  VERL_ASSIGN_OR_RETURN(const MoeCaseSetup setup, SetUpMoeCase(c, *mpu));
  const ModelConfig& config = setup.config;
  const MegatronModelOptions& options = setup.options;
  const std::map<std::string, at::Tensor>& params = setup.params;
  MegatronGPTModel model(config, options, mpu);
  VERL_RETURN_IF_ERROR(LoadMegatronFromHf(HfSourceFromMap(params), &model));
  MegatronGPTModel one(config, options, OneProcessMpu());
  VERL_RETURN_IF_ERROR(LoadMegatronFromHf(HfSourceFromMap(params), &one));
  const int64_t dp = mpu->layout().dp(), me = mpu->dp_rank();
  const std::string tag = absl::StrCat(c.name, ": ");
  for (int step = 1; step <= c.bias_steps; ++step) {
    const std::vector<at::Tensor> before = ExpertBiases(model);
    model.zero_grad();
    MoeTrainStep(model, MakeMoeBatch(me, config.vocab_size), config);
    // The step's load of every dp rank (TakeExpertLoad: this rank's), for
    // the closed form.
    std::vector<at::Tensor> load;
    for (const auto& [layer, counts] : model.TakeExpertLoad()) {
      load.push_back(
          mg::AllReduceSum(at::tensor(counts, at::kDouble), *mpu->dp()));
    }
    model.FinalizeGrads();
    one.zero_grad();
    for (int64_t d = 0; d < dp; ++d) {
      MoeTrainStep(one, MakeMoeBatch(d, config.vocab_size), config);
    }
    one.FinalizeGrads();
    const std::vector<at::Tensor> got = ExpertBiases(model),
                                  want = ExpertBiases(one);
    for (size_t l = 0; l < got.size(); ++l) {
      const std::string name = absl::StrCat(tag, "step ", step, " layer ", l);
      VERL_RETURN_IF_ERROR(cmp.Expect(name + " bias", got[l], want[l]));
      if (step > 1) continue;
      // bias += rate * sign(mean load - load), by hand.
      at::Tensor closed = before[l].to(at::kDouble);
      const double mean = load[l].mean().item<double>();
      for (int64_t e = 0; e < config.num_experts; ++e) {
        const double n = load[l][e].item<double>();
        const double sign = n < mean ? 1.0 : n > mean ? -1.0 : 0.0;
        closed[e] += sign * options.moe_router_bias_update_rate;
      }
      VERL_RETURN_IF_ERROR(
          cmp.Expect(name + " bias (closed form)", got[l], closed));
      if (at::equal(got[l], before[l])) {
        return absl::InternalError(name + ": the bias did not move");
      }
    }
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  parallel::DistributedContext dist = parallel::JoinTestJob();
  const int rank = dist.env.rank;
  mg::ModelParallelSizes sizes;
  sizes.cp = absl::GetFlag(FLAGS_cp);
  sizes.pp = absl::GetFlag(FLAGS_pp);
  sizes.vpp = absl::GetFlag(FLAGS_vpp);
  sizes.tp =
      dist.world->size() / (sizes.cp * sizes.pp * absl::GetFlag(FLAGS_tp_div));
  sizes.ep = absl::GetFlag(FLAGS_ep);
  sizes.etp = absl::GetFlag(FLAGS_etp);
  absl::StatusOr<std::shared_ptr<mg::ParallelState>> mpu =
      mg::ParallelState::Initialize(dist.world, sizes);
  if (!mpu.ok()) return mg::RankFailed(rank, mpu.status());
  bool first = true;
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_cases), ',', absl::SkipEmpty())) {
    if (name == "hf_mmap") {
      absl::Status s = RunHfMmapCase(*mpu);
      if (!s.ok()) return mg::RankFailed(rank, s);
      continue;
    }
    const Case* found = nullptr;
    for (const Case& c : Cases()) {
      if (name == c.name) found = &c;
    }
    const MoeCase* moe = nullptr;
    for (const MoeCase& c : MoeCases()) {
      if (name == c.name) moe = &c;
    }
    if (found == nullptr && moe == nullptr) {
      std::cout << "rank " << rank << " FAILED: unknown case " << name
                << std::endl;
      return 1;
    }
    mg::Comparer cmp(kTol);
    absl::Status s = moe == nullptr        ? RunCase(*found, first, *mpu, cmp)
                     : moe->bias_steps > 0 ? RunMoeBiasCase(*moe, *mpu, cmp)
                                           : RunMoeCase(*moe, first, *mpu, cmp);
    first = false;
    if (mg::RankResult(rank, s, cmp, absl::StrCat(name, " ")) != 0) return 1;
  }
  return 0;
}

}  // namespace
}  // namespace verl::models

int main(int argc, char** argv) { return verl::models::Main(argc, argv); }
