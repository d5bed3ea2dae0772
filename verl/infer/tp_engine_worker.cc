// File: verl/infer/tp_engine_worker.cc
//
// Multi-process worker of engine_test's tensor-parallel case: every rank
// builds the same fp32 tiny model and runs, on the same prompts, a tp = 1
// engine (the whole model, no communication) and a tp = world engine over
// the world group. For each model — tiny-qwen2 (kv_heads 2), tiny-qwen2
// with kv_heads 1 (< tp: KV heads replicated) and tiny-qwen3 (q/k norm,
// head_dim 48) and tiny-qwen3-moe (8 experts split by their intermediate
// size, replicated router) on the fused fp32 path, and tiny-qwen2 and
// tiny-qwen2-moe (with its gated shared expert) on the model's own forward
// (fp32 with fused_forward=false; bf16), where o_proj / down_proj / the MoE
// block all-reduce through their output hooks, and tiny-deepseek-v3 (multi-
// head latent attention split by heads over a replicated latent cache with
// the absorbed decode; sigmoid-routed experts and shared experts split by
// intermediate size; a dense first layer) — it checks:
//  - greedy tokens equal tp = 1's, token for token, over 12 prompts (with
//    chunked prefill and prefix sharing), log-probs within 1e-4 (bf16:
//    equal on every rank only; the partial sums round differently);
//  - sampled tokens (n = 2, seeded) equal on every rank of the group;
//  - KV cache bytes per block = tp = 1's x (local KV heads / KV heads):
//    1/tp when tp divides kv_heads (MLA: equal, the latent is replicated);
//  - after UpdateWeights with another model's full tensors (layer by
//    layer), greedy tokens equal a tp = 1 engine updated the same way.
// Exits non-zero with the first mismatch.
#include <ATen/ops/tensor.h>
#include <glog/logging.h>

#include <cmath>
#include <iostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "verl/core/status.h"
#include "verl/infer/engine.h"
#include "verl/models/presets.h"
#include "verl/parallel/distributed.h"
#include "verl/parallel/test_worker.h"

namespace verl::infer {
namespace {

using Prompts = std::vector<std::vector<int64_t>>;

Prompts MakePrompts(int64_t vocab) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int64_t> tok(0, vocab - 1);
  std::vector<int64_t> system(21);
  for (auto& t : system) t = tok(rng);
  Prompts prompts;
  for (int64_t i = 0; i < 12; ++i) {
    std::vector<int64_t> p;
    if (i % 3 == 0) p = system;
    for (int64_t j = 0; j < 1 + (i * 13) % 29; ++j) p.push_back(tok(rng));
    prompts.push_back(std::move(p));
  }
  return prompts;
}

absl::StatusOr<models::ModelConfig> Config(const std::string& preset,
                                           int64_t kv_heads) {
  VERL_ASSIGN_OR_RETURN(models::ModelConfig c, models::MakePreset(preset));
  c.max_position_embeddings = 256;
  if (kv_heads > 0) c.num_key_value_heads = kv_heads;
  return c;
}

struct Mode {
  std::string dtype = "float32";
  bool fused = true;
};

EngineOptions Options(std::shared_ptr<parallel::Communicator> tp,
                      const Mode& mode) {
  EngineOptions o;
  o.block_size = 8;
  o.max_model_len = 128;
  o.num_kv_blocks = 128;
  o.max_num_seqs = 8;
  o.max_num_batched_tokens = 40;  // chunked prefill
  o.dtype = mode.dtype;
  o.fused_forward = mode.fused;
  o.tp_group = std::move(tp);
  return o;
}

absl::StatusOr<std::vector<RequestOutput>> Run(LLMEngine& engine,
                                               const Prompts& prompts,
                                               const SamplingParams& params) {
  std::vector<RequestOutput> out;
  for (auto& r : engine.Generate(prompts, params)) {
    VERL_RETURN_IF_ERROR(r.status());
    out.push_back(std::move(*r));
  }
  return out;
}

// Every sample's tokens, concatenated (with a -1 after each).
std::vector<int64_t> Flat(const std::vector<RequestOutput>& outs) {
  std::vector<int64_t> flat;
  for (const auto& o : outs) {
    for (const auto& c : o.outputs) {
      flat.insert(flat.end(), c.token_ids.begin(), c.token_ids.end());
      flat.push_back(-1);
    }
  }
  return flat;
}

// The same tokens on every rank of `world`.
absl::Status ExpectSameOnRanks(parallel::Communicator& world,
                               const std::vector<RequestOutput>& outs,
                               const std::string& what) {
  const at::Tensor t = at::tensor(Flat(outs), at::kLong);
  VERL_ASSIGN_OR_RETURN(std::vector<at::Tensor> all, world.AllGather(t));
  for (const at::Tensor& other : all) {
    if (!other.equal(all[0])) {
      return absl::InternalError(what + ": tokens differ over ranks");
    }
  }
  return absl::OkStatus();
}

absl::Status ExpectSame(const std::vector<RequestOutput>& want,
                        const std::vector<RequestOutput>& got,
                        const std::string& what) {
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& a = want[i].outputs[0];
    const auto& b = got[i].outputs[0];
    if (a.token_ids != b.token_ids) {
      return absl::InternalError(
          absl::StrCat(what, ": prompt ", i, " tokens differ from tp=1"));
    }
    for (size_t t = 0; t < a.logprobs.size(); ++t) {
      if (std::abs(a.logprobs[t] - b.logprobs[t]) > 1e-4) {
        return absl::InternalError(absl::StrCat(what, ": prompt ", i, " token ",
                                                t, " log-prob ", b.logprobs[t],
                                                " vs tp=1 ", a.logprobs[t]));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckModel(const std::shared_ptr<parallel::Communicator>& world,
                        const std::string& preset, int64_t kv_heads,
                        const Mode& mode) {
  const std::string what =
      absl::StrCat(preset, " kv_heads=", kv_heads, " ", mode.dtype,
                   mode.fused ? "" : " unfused");
  const bool exact = mode.dtype == "float32";
  VERL_ASSIGN_OR_RETURN(models::ModelConfig cfg, Config(preset, kv_heads));
  const int tp = world->size();
  VERL_ASSIGN_OR_RETURN(
      auto one,
      LLMEngine::Create(models::CreateModel(cfg, 7, 0.1), Options({}, mode)));
  VERL_ASSIGN_OR_RETURN(auto sharded,
                        LLMEngine::Create(models::CreateModel(cfg, 7, 0.1),
                                          Options(world, mode)));
  if (sharded->tensor_parallel_size() != tp) {
    return absl::InternalError(what + ": engine is not tensor-parallel");
  }
  // KV cache: only the local KV heads (MLA: the one latent per token, the
  // same on every rank).
  const int64_t kv = cfg.IsMla() ? 1 : cfg.num_key_value_heads;
  const int64_t local_kv = std::max<int64_t>(kv / tp, 1);
  const int64_t per_block_one = one->kv_cache_bytes() / one->num_kv_blocks();
  const int64_t per_block =
      sharded->kv_cache_bytes() / sharded->num_kv_blocks();
  if (per_block * kv != per_block_one * local_kv) {
    return absl::InternalError(absl::StrCat(
        what, ": KV bytes per block ", per_block, " vs tp=1 ", per_block_one));
  }

  const Prompts prompts = MakePrompts(cfg.vocab_size);
  SamplingParams greedy;
  greedy.do_sample = false;
  greedy.max_tokens = 10;
  greedy.ignore_eos = true;
  VERL_ASSIGN_OR_RETURN(auto want, Run(*one, prompts, greedy));
  VERL_ASSIGN_OR_RETURN(auto got, Run(*sharded, prompts, greedy));
  VERL_RETURN_IF_ERROR(ExpectSameOnRanks(*world, got, what + " greedy"));
  if (exact) VERL_RETURN_IF_ERROR(ExpectSame(want, got, what + " greedy"));

  // Sampling: the same tokens on every rank of the group.
  SamplingParams sampled = greedy;
  sampled.do_sample = true;
  sampled.n = 2;
  sampled.seed = 5;
  VERL_ASSIGN_OR_RETURN(auto mine, Run(*sharded, prompts, sampled));
  VERL_RETURN_IF_ERROR(ExpectSameOnRanks(*world, mine, what + " sampled"));

  // Weight sync: another model's full tensors, one layer at a time.
  auto next = models::CreateModel(cfg, 9, 0.1);
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (const auto& item : next->named_parameters(/*recurse=*/true)) {
    named.emplace_back(item.key(), item.value().detach());
  }
  for (const auto& one_tensor : named) {
    VERL_RETURN_IF_ERROR(one->UpdateWeights({one_tensor}));
    VERL_RETURN_IF_ERROR(sharded->UpdateWeights({one_tensor}));
  }
  VERL_ASSIGN_OR_RETURN(want, Run(*one, prompts, greedy));
  VERL_ASSIGN_OR_RETURN(got, Run(*sharded, prompts, greedy));
  VERL_RETURN_IF_ERROR(
      ExpectSameOnRanks(*world, got, what + " after UpdateWeights"));
  if (!exact) return absl::OkStatus();
  return ExpectSame(want, got, what + " after UpdateWeights");
}

int Main() {
  parallel::DistributedContext dist = parallel::JoinTestJob();
  const int rank = dist.env.rank;
  struct Case {
    std::string preset;
    int64_t kv_heads;
    Mode mode;
  };
  const Mode fused, unfused{"float32", false}, bf16{"bfloat16", true};
  for (const Case& c : std::vector<Case>{{"tiny-qwen2", 0, fused},
                                         {"tiny-qwen2", 1, fused},
                                         {"tiny-qwen3", 0, fused},
                                         {"tiny-qwen3-moe", 0, fused},
                                         {"tiny-qwen2-moe", 0, unfused},
                                         {"tiny-deepseek-v3", 0, fused},
                                         {"tiny-qwen2", 1, unfused},
                                         {"tiny-qwen2", 0, bf16}}) {
    const absl::Status s = CheckModel(dist.world, c.preset, c.kv_heads, c.mode);
    if (!s.ok()) {
      std::cout << "rank " << rank << " FAILED: " << s << std::endl;
      return 1;
    }
  }
  std::cout << "rank " << rank << ": OK" << std::endl;
  return 0;
}

}  // namespace
}  // namespace verl::infer

int main() { return verl::infer::Main(); }
