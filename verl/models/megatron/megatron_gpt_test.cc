// File: verl/models/megatron/megatron_gpt_test.cc
//
// The tensor-parallel decoder against the single-process one: runs
// :megatron_gpt_worker as tp = 2 and tp = 4 processes over loopback (and
// context parallel: cp = 2, tp = 2 x cp = 2), each
// with a few cases (Qwen2 q/k/v bias, Qwen3 q/k norm, Llama; KV heads
// >= tp and < tp; sequence parallel on/off; no, full (uniform/block) and
// selective recompute; tied embeddings; value heads). The worker checks
// logits, log-probs, entropy (values for the critic cases) and every
// parameter gradient to 1e-5 relative and
// exits non-zero on a mismatch. Option validation is checked in-process.
#include "verl/models/megatron/megatron_gpt.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verl/core/test_util.h"
#include "verl/models/megatron/moe_layer.h"
#include "verl/models/moe/router.h"
#include "verl/parallel/megatron/pipeline_schedule.h"
#include "verl/parallel/process_group.h"
#include "verl/parallel/test_worker.h"

namespace verl::models {
namespace {

using core::testing::StatusIs;

int RunWorker(int nproc, const std::vector<std::string>& args) {
  return parallel::RunTestWorker("verl/models/megatron/megatron_gpt_worker",
                                 nproc, args);
}

TEST(MegatronGptTest, Tp2MatchesSingleProcess) {
  EXPECT_EQ(RunWorker(2, {"--cases=qwen2,qwen3_sp_full_uniform_tied,"
                          "llama_kv1_sp_selective,qwen2_value_sp_selective,"
                          "dsv3_mla,dsv3_mla_noq_sp_core_attn,"
                          "dsv3_moe_sp_full,qwen2_moe_sp_selective_mlp,"
                          "hf_mmap"}),
            0);
}

TEST(MegatronGptTest, Tp4WithFewerKvHeadsMatchesSingleProcess) {
  EXPECT_EQ(RunWorker(4, {"--cases=qwen2_kv2_sp_core_attn,"
                          "qwen3_kv4_full_block_tied,qwen3_kv1_sp_full,"
                          "llama_kv2_value_full,dsv3_mla_noq_sp_core_attn"}),
            0);
}

// Context parallelism: every sequence of the packed batch (lengths 5, 7, 5)
// split over cp ranks in the load-balanced order, attention over the ring;
// logits, log-probs, entropy, values and every gradient equal cp = 1.
TEST(MegatronGptTest, Cp2MatchesSingleProcess) {
  EXPECT_EQ(RunWorker(2, {"--cp=2",
                          "--cases=qwen2,qwen3_sp_full_uniform_tied,"
                          "llama_kv1_sp_selective,llama_kv2_value_full,"
                          "dsv3_mla,qwen3_moe_pp"}),
            0);
}

TEST(MegatronGptTest, Tp2Cp2MatchesSingleProcess) {
  EXPECT_EQ(
      RunWorker(4, {"--cp=2",
                    "--cases=qwen2,qwen3_sp_full_uniform_tied,"
                    "llama_kv1_sp_selective,"
                    "qwen2_value_sp_selective,dsv3_mla_noq_sp_core_attn"}),
      0);
}

// Pipeline parallelism: 3 micro-batches through 1F1B (and forward-only)
// over 2 stages (3 layers split 1 + 2 by num_layers_in_first_pipeline_stage;
// tied embeddings: the last stage's head copy; a value head), then tp 2 x
// pp 2 with sequence parallelism and recompute (4 layers, uniform), and
// 4 stages with 5 micro-batches (middle stages, the embedding group over
// the first and last stage only): logits, log-probs, entropy, values and
// every gradient equal the single-process model.
TEST(MegatronGptTest, Pp2MatchesSingleProcess) {
  EXPECT_EQ(
      RunWorker(2, {"--pp=2", "--microbatches=3", "--first_stage_layers=1",
                    "--cases=qwen2,qwen3_sp_full_uniform_tied,"
                    "llama_kv2_value_full,dsv3_mla,qwen3_moe_pp"}),
      0);
}

TEST(MegatronGptTest, Tp2Pp2MatchesSingleProcess) {
  EXPECT_EQ(RunWorker(4, {"--pp=2", "--microbatches=3", "--layers=4",
                          "--cases=qwen3_sp_full_uniform_tied,"
                          "llama_kv1_sp_selective,qwen2_value_sp_selective"}),
            0);
}

// Virtual pipeline stages: 4 layers over pp 2 x vpp 2 (stage 0 holds
// layers 0 and 2, stage 1 layers 1 and 3), 4 micro-batches through the
// interleaved schedule (warm-up, steady 1F1B, cool-down) and 3 SGD steps:
// outputs, gradients and the updated parameters (the tied head's copy
// included) equal the single-process model after every step, and the
// interleaved forward-only schedule its log-probs / values. Then tp 2 x
// pp 2 x vpp 2 with m = pp (Megatron's all-forwards-first case).
TEST(MegatronGptTest, Pp2Vpp2MatchesSingleProcess) {
  EXPECT_EQ(RunWorker(2, {"--pp=2", "--vpp=2", "--layers=4", "--microbatches=4",
                          "--steps=3",
                          "--cases=qwen3_sp_full_uniform_tied,"
                          "llama_kv2_value_full"}),
            0);
  EXPECT_EQ(RunWorker(4, {"--pp=2", "--vpp=2", "--layers=4", "--microbatches=2",
                          "--steps=1", "--cases=qwen2_kv2_sp_core_attn"}),
            0);
}

// MoE layers over pipeline stages with recompute: tp 2 (sequence
// parallel) x pp 2 x ep 2 (the ep group is the tp pair), 4 layers split
// 2 + 2, 3 micro-batches through 1F1B; DeepSeek-V3 (MLA, sigmoid router,
// first layer dense) with full recompute, Qwen2-MoE with selective mlp
// recompute (the MoE dispatch runs again in backward): logits, log-probs,
// entropy and every gradient equal the single-process model.
TEST(MegatronGptTest, Tp2Pp2Ep2MoeMatchesSingleProcess) {
  EXPECT_EQ(RunWorker(4, {"--pp=2", "--ep=2", "--layers=4", "--microbatches=3",
                          "--cases=dsv3_moe_sp_full,"
                          "qwen2_moe_sp_selective_mlp"}),
            0);
}

TEST(MegatronGptTest, Pp4MatchesSingleProcess) {
  EXPECT_EQ(RunWorker(4, {"--pp=4", "--microbatches=5", "--layers=4",
                          "--cases=qwen3_sp_full_uniform_tied"}),
            0);
}

// Expert parallelism: ep = 2 over 2 dp ranks (tp 1), each with its own
// batch; Qwen3-MoE (softmax top-k, renormalised, a dense layer between),
// Qwen2-MoE (gated shared expert) and DeepSeek-V3's router (sigmoid + bias,
// group-limited, shared expert, first layer dense; multi-head latent
// attention).
// Logits, log-probs, entropy, the aux loss, the expert load and every
// gradient (experts: summed over the dp ranks' batches) equal the
// single-process model's. With capacity dropping (factor 0.5; probs and
// position policies) they, the kept pairs and the load equal the
// one-process Megatron model's on each dp batch; with the expert-bias
// update (DeepSeek-V3, 3 steps) the biases equal the one-process model's
// after every step and the closed form after the first.
TEST(MegatronGptTest, Ep2MatchesSingleProcess) {
  EXPECT_EQ(RunWorker(2, {"--ep=2", "--tp_div=2",
                          "--cases=qwen3_moe,qwen2_moe_shared_sp,dsv3_router,"
                          "qwen3_moe_capacity,dsv3_capacity_position_sp,"
                          "dsv3_bias"}),
            0);
}

// tp 2 (sequence parallel: each tp rank routes its half of the tokens) x
// ep 2 x dp 2 on 4 processes: with etp 1 (the ep group is the tp group),
// then with etp 2 (each expert's fc1 / fc2 split over the tp pair, which
// all-gathers the dispatched rows and reduce-scatters the partial outputs;
// ep over the dp pair; the HF export gathers the shards back).
TEST(MegatronGptTest, Tp2Ep2MatchesSingleProcess) {
  EXPECT_EQ(RunWorker(4, {"--ep=2", "--tp_div=2",
                          "--cases=qwen3_moe_sp,dsv3_router_sp"}),
            0);
  EXPECT_EQ(RunWorker(4, {"--ep=2", "--etp=2", "--tp_div=2",
                          "--cases=qwen3_moe_sp,dsv3_router_sp"}),
            0);
}

// etp 2 with tp 1: 4 dp ranks, the expert grid etp 2 x ep 2 (each expert
// split over a dp pair holding different batches); Qwen3-MoE, and
// DeepSeek-V3's router with position dropping (the kept pairs gathered over
// etp).
TEST(MegatronGptTest, Etp2Ep2Tp1MatchesSingleProcess) {
  EXPECT_EQ(RunWorker(4, {"--ep=2", "--etp=2", "--tp_div=4",
                          "--cases=qwen3_moe,dsv3_capacity_position_sp"}),
            0);
}

// ep 4 over 4 dp ranks (tp 1): 2 experts per rank, four batches (all-to-
// alls with 4 variable splits); Qwen3-MoE without dropping, DeepSeek-V3's
// router with position dropping, and the expert-bias update.
TEST(MegatronGptTest, Ep4MatchesSingleProcess) {
  EXPECT_EQ(RunWorker(4, {"--ep=4", "--tp_div=4",
                          "--cases=qwen3_moe,dsv3_capacity_position_sp,"
                          "dsv3_bias"}),
            0);
}

// cp 2 x ep 2 on 2 processes: one dp rank, its sequences split over the
// cp ranks, which are also the ep ranks; then ep 1 with etp 2 (every expert
// split over the cp pair, each rank's chunks gathered to both).
TEST(MegatronGptTest, Cp2Ep2MatchesSingleProcess) {
  EXPECT_EQ(RunWorker(2, {"--cp=2", "--ep=2", "--cases=qwen2_moe_shared_sp"}),
            0);
  EXPECT_EQ(RunWorker(2, {"--cp=2", "--ep=1", "--etp=2",
                          "--cases=qwen2_moe_shared_sp"}),
            0);
}

parallel::megatron::ModelParallelSizes Tp(int tp, int pp = 1, int cp = 1) {
  parallel::megatron::ModelParallelSizes sizes;
  sizes.tp = tp;
  sizes.pp = pp;
  sizes.cp = cp;
  return sizes;
}

ModelConfig Config() {
  ModelConfig c;
  c.vocab_size = 10;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  return c;
}

TEST(MegatronGptTest, ValidationNamesTheKey) {
  MegatronModelOptions o;
  EXPECT_TRUE(ValidateMegatronModel(Config(), o, Tp(4)).ok());
  EXPECT_THAT(ValidateMegatronModel(Config(), o, Tp(3)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "megatron.tensor_model_parallel_size=3: does not "
                       "divide num_attention_heads 4"));
  ModelConfig c = Config();
  c.num_attention_heads = 12;  // 6 KV groups over tp 4
  c.num_key_value_heads = 6;
  EXPECT_THAT(
      ValidateMegatronModel(c, o, Tp(4)),
      StatusIs(absl::StatusCode::kInvalidArgument, "num_key_value_heads 6"));
  c = Config();
  c.intermediate_size = 22;
  EXPECT_THAT(
      ValidateMegatronModel(c, o, Tp(4)),
      StatusIs(absl::StatusCode::kInvalidArgument, "intermediate_size"));
  c = Config();
  c.num_experts = 4;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 8;
  auto ep = [](int tp, int ep, int etp = 1) {
    parallel::megatron::ModelParallelSizes s = Tp(tp);
    s.ep = ep;
    s.etp = etp;
    return s;
  };
  // Expert tensor parallelism: etp (null: tp) must divide the experts' ffn.
  EXPECT_THAT(ValidateMegatronModel(c, o, ep(1, 2, 3)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "megatron.expert_tensor_parallel_size=3: must be >= 1 "
                       "and divide moe_intermediate_size 8"));
  EXPECT_TRUE(ValidateMegatronModel(c, o, ep(1, 2, 2)).ok());
  EXPECT_TRUE(ValidateMegatronModel(c, o, ep(1, 2, 8)).ok());
  EXPECT_TRUE(ValidateMegatronModel(c, o, ep(1, 4)).ok());
  EXPECT_THAT(ValidateMegatronModel(c, o, ep(1, 3)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "megatron.expert_model_parallel_size=3: does not "
                       "divide num_experts 4"));
  EXPECT_THAT(ValidateMegatronModel(c, o, ep(2, 2)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "megatron.sequence_parallel=false"));
  MegatronModelOptions sp;
  sp.sequence_parallel = true;
  EXPECT_TRUE(ValidateMegatronModel(c, sp, ep(2, 2)).ok());
  sp.recompute_granularity = "full";  // MoE layers recomputed too
  EXPECT_TRUE(ValidateMegatronModel(c, sp, ep(2, 2)).ok());
  parallel::megatron::ModelParallelSizes pp = ep(1, 2);
  pp.pp = 2;  // MoE over pipeline stages
  c.num_hidden_layers = 2;
  EXPECT_TRUE(ValidateMegatronModel(c, o, pp).ok());
  c.num_hidden_layers = 1;
  EXPECT_THAT(
      ValidateMegatronModel(Config(), o, ep(1, 2)),
      StatusIs(absl::StatusCode::kInvalidArgument, "the model has no experts"));
  EXPECT_THAT(ValidateMegatronModel(Config(), o, Tp(2, 2)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "megatron.pipeline_model_parallel_size=2: the other "
                       "2 stage(s) cannot split 1 of num_hidden_layers 1"));
  parallel::megatron::ModelParallelSizes vpp = Tp(1, 2);
  vpp.vpp = 2;
  EXPECT_THAT(ValidateMegatronModel(Config(), o, vpp),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "megatron.virtual_pipeline_model_parallel_size=2: "
                       "pipeline_model_parallel_size 2 x 2 virtual stages "
                       "cannot split num_hidden_layers 1 evenly"));
  ModelConfig four = Config();
  four.num_hidden_layers = 4;
  EXPECT_TRUE(ValidateMegatronModel(four, o, vpp).ok());
  MegatronModelOptions first = o;
  first.num_layers_in_first_pipeline_stage = 2;
  EXPECT_THAT(ValidateMegatronModel(four, first, vpp),
              StatusIs(absl::StatusCode::kUnimplemented,
                       "num_layers_in_first/last_pipeline_stage) with "
                       "virtual stages are not built"));
  EXPECT_TRUE(ValidateMegatronModel(Config(), o, Tp(2, 1, 2)).ok());
  EXPECT_THAT(ValidateMegatronModel(Config(), o, Tp(2, 1, 0)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "megatron.context_parallel_size=0"));
  o.recompute_granularity = "partial";
  EXPECT_THAT(ValidateMegatronModel(Config(), o, Tp(2)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "override_transformer_config.recompute_granularity"));
  o.recompute_granularity = "selective";
  o.recompute_modules = {"moe_act"};
  EXPECT_THAT(ValidateMegatronModel(Config(), o, Tp(2)),
              StatusIs(absl::StatusCode::kUnimplemented, "moe_act"));
}

// Multi-head latent attention: heads split over tp; what MLA does not serve
// named.
TEST(MegatronGptTest, MlaValidation) {
  ModelConfig c = Config();
  c.num_key_value_heads = 4;
  c.q_lora_rank = 6;
  c.kv_lora_rank = 8;
  c.qk_nope_head_dim = 4;
  c.qk_rope_head_dim = 2;
  c.v_head_dim = 3;
  MegatronModelOptions o;
  EXPECT_TRUE(ValidateMegatronModel(c, o, Tp(4)).ok());
  c.attention_bias = true;
  EXPECT_THAT(ValidateMegatronModel(c, o, Tp(2)),
              StatusIs(absl::StatusCode::kUnimplemented,
                       "attention_bias=true with multi-head latent attention"));
  c.attention_bias = false;
  c.qk_rope_head_dim = 3;
  EXPECT_THAT(ValidateMegatronModel(c, o, Tp(2)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "qk_rope_head_dim=3: must be even"));
  c.qk_rope_head_dim = 2;
  c.v_head_dim = 0;
  EXPECT_THAT(ValidateMegatronModel(c, o, Tp(2)),
              StatusIs(absl::StatusCode::kInvalidArgument, "v_head_dim=0"));
}

// The MoE keys of override_transformer_config: refused on a dense model,
// with bad values, and the expert bias with the softmax router.
TEST(MegatronGptTest, MoeOptionsValidation) {
  ModelConfig c = Config();
  c.num_experts = 4;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 8;
  MegatronModelOptions o;
  o.moe_expert_capacity_factor = 1.25;
  o.moe_token_drop_policy = "position";
  EXPECT_TRUE(ValidateMegatronModel(c, o, Tp(1)).ok());
  EXPECT_THAT(ValidateMegatronModel(Config(), o, Tp(1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "megatron.override_transformer_config.moe_expert_"
                       "capacity_factor=1.25: the model has no experts"));
  o.moe_expert_capacity_factor = 0.0;
  EXPECT_THAT(ValidateMegatronModel(c, o, Tp(1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "moe_expert_capacity_factor=0: must be > 0"));
  o.moe_expert_capacity_factor.reset();
  o.moe_token_drop_policy = "random";
  EXPECT_THAT(ValidateMegatronModel(c, o, Tp(1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "moe_token_drop_policy='random': expected 'probs' or "
                       "'position'"));
  o.moe_token_drop_policy = "probs";
  o.moe_router_enable_expert_bias = true;
  EXPECT_THAT(ValidateMegatronModel(c, o, Tp(1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "moe_router_enable_expert_bias=true: the expert bias "
                       "of aux-loss-free balancing needs the sigmoid router"));
  c.scoring_func = "sigmoid";
  c.n_group = 1;
  c.topk_group = 1;
  EXPECT_TRUE(ValidateMegatronModel(c, o, Tp(1)).ok());
  o.moe_router_bias_update_rate = -1e-3;
  EXPECT_THAT(ValidateMegatronModel(c, o, Tp(1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "moe_router_bias_update_rate=-0.001: must be >= 0"));
  o.moe_router_bias_update_rate = 1e-3;
  o.moe_router_load_balancing_type = "sinkhorn";
  EXPECT_THAT(ValidateMegatronModel(c, o, Tp(1)),
              StatusIs(absl::StatusCode::kUnimplemented,
                       "moe_router_load_balancing_type=sinkhorn: not built"));
  o.moe_router_load_balancing_type = "seq_aux";
  EXPECT_THAT(ValidateMegatronModel(c, o, Tp(1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "moe_router_load_balancing_type='seq_aux': expected "
                       "'none', 'aux_loss' or 'seq_aux_loss'"));
  o.moe_router_load_balancing_type = "seq_aux_loss";
  o.moe_z_loss_coeff = -1;
  EXPECT_THAT(ValidateMegatronModel(c, o, Tp(1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "moe_z_loss_coeff=-1: must be a finite number >= 0"));
  o.moe_z_loss_coeff = 0;
  EXPECT_TRUE(ValidateMegatronModel(c, o, Tp(1)).ok());
  c.num_experts = 0;  // dense
  EXPECT_THAT(ValidateMegatronModel(c, o, Tp(1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "moe_router_enable_expert_bias=true: the model has no "
                       "experts"));
  o.moe_router_enable_expert_bias = false;
  EXPECT_THAT(ValidateMegatronModel(c, o, Tp(1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "moe_router_load_balancing_type=seq_aux_loss: the "
                       "model has no experts"));
}

// One in-process MoE layer (tp = ep = 1) of a 4-expert top-2 Qwen3-MoE
// config (`sigmoid`: DeepSeek-V3's router), float64, parameters ~ N(0, 0.5)
// from `seed`.
std::unique_ptr<MegatronMoeLayer> SeededMoeLayer(const MegatronModelOptions& o,
                                                 uint64_t seed,
                                                 bool sigmoid = false) {
  ModelConfig c = Config();
  c.model_type = "qwen3_moe";
  c.num_experts = 4;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 8;
  c.norm_topk_prob = true;
  if (sigmoid) {
    c.scoring_func = "sigmoid";
    c.n_group = 1;
    c.topk_group = 1;
  }
  auto one = parallel::SingleProcessCommunicator();
  auto layer = std::make_unique<MegatronMoeLayer>(c, o, one, one);
  layer->to(at::kDouble);
  at::manual_seed(seed);
  at::NoGradGuard no_grad;
  for (at::Tensor& p : layer->parameters()) p.normal_(0, 0.5);
  return layer;
}

// Capacity dropping in one MoE layer (tp = ep = 1, in process): 13 rows,
// the last a padding row, 4 experts, top-2, factor 0.5: capacity
// ceil(12 * 2 / 4 * 0.5) = 3 pairs per expert. The kept pairs equal plain
// loops (position: each expert's first 3 in token order; probs: its 3
// highest weights), and the output and every gradient equal a per-token
// loop over the kept pairs with the experts' SwiGLU written out.
TEST(MegatronGptTest, MoeCapacityDroppingEqualsPerTokenLoop) {
  const int64_t n = 13, real = 12, k = 2, e = 4, h = Config().hidden_size;
  for (const std::string policy : {"position", "probs"}) {
    SCOPED_TRACE(policy);
    MegatronModelOptions o;
    o.moe_expert_capacity_factor = 0.5;
    o.moe_token_drop_policy = policy;
    std::unique_ptr<MegatronMoeLayer> owned = SeededMoeLayer(o, 11);
    MegatronMoeLayer& layer = *owned;
    at::Tensor x = at::randn({n, h}, at::kDouble).requires_grad_(true);
    auto real_rows = std::make_shared<MoeRows>();
    real_rows->real = at::arange(n) < real;
    layer.rows = real_rows;
    at::Tensor out = layer.Forward(x);
    // The dropped set by plain loops.
    Routing r = SoftmaxTopK(at::linear(x, layer.router->weight), k, true);
    std::vector<std::vector<bool>> keep(n, std::vector<bool>(k, false));
    for (int64_t ex = 0; ex < e; ++ex) {
      std::vector<std::pair<double, int64_t>> pairs;  // (-weight, t*k + j)
      for (int64_t t = 0; t < real; ++t) {
        for (int64_t j = 0; j < k; ++j) {
          if (r.indices[t][j].item<int64_t>() != ex) continue;
          const double w =
              policy == "probs" ? r.weights[t][j].item<double>() : 0.0;
          pairs.emplace_back(-w, t * k + j);
        }
      }
      std::sort(pairs.begin(), pairs.end());
      for (size_t i = 0; i < pairs.size() && i < 3; ++i) {
        keep[pairs[i].second / k][pairs[i].second % k] = true;
      }
    }
    int64_t kept = 0;
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t j = 0; j < k; ++j) {
        EXPECT_EQ(layer.last_kept[t][j].item<bool>(), keep[t][j])
            << "pair " << t << "," << j;
        kept += keep[t][j];
      }
    }
    EXPECT_LT(kept, real * k);  // some dropped
    EXPECT_GT(kept, 0);
    // The output by a per-token loop over the kept pairs.
    std::vector<at::Tensor> rows;
    for (int64_t t = 0; t < n; ++t) {
      at::Tensor y = at::zeros({h}, at::kDouble);
      for (int64_t j = 0; j < k; ++j) {
        if (!keep[t][j]) continue;
        const auto& ex = layer.local_experts[r.indices[t][j].item<int64_t>()];
        std::vector<at::Tensor> gu = ex->linear_fc1->weight.chunk(2, /*dim=*/0);
        at::Tensor a = at::silu(at::mv(gu[0], x[t])) * at::mv(gu[1], x[t]);
        y = y + r.weights[t][j] * at::mv(ex->linear_fc2->weight, a);
      }
      rows.push_back(y);
    }
    at::Tensor want = at::stack(rows);
    EXPECT_TRUE(at::allclose(out, want, 1e-10, 1e-12));
    // Gradients of sum(out * g) against the loop's.
    at::Tensor g = at::randn({n, h}, at::kDouble);
    std::vector<at::Tensor> inputs = {x};
    for (const at::Tensor& p : layer.parameters()) inputs.push_back(p);
    std::vector<at::Tensor> got_grads = torch::autograd::grad(
        {(out * g).sum()}, inputs, {}, /*retain_graph=*/true, false,
        /*allow_unused=*/true);
    std::vector<at::Tensor> want_grads = torch::autograd::grad(
        {(want * g).sum()}, inputs, {}, true, false, true);
    for (size_t i = 0; i < inputs.size(); ++i) {
      at::Tensor a =
          got_grads[i].defined() ? got_grads[i] : at::zeros_like(inputs[i]);
      at::Tensor b =
          want_grads[i].defined() ? want_grads[i] : at::zeros_like(inputs[i]);
      EXPECT_TRUE(at::allclose(a, b, 1e-10, 1e-12)) << "input " << i;
    }
  }
}

// Megatron's load-balancing losses in one MoE layer (in process, float64):
// 13 rows, the last a padding row, in sequences of 5, 4 and 3 tokens;
// softmax and sigmoid routers, aux_loss and seq_aux_loss with the z-loss.
// The layer's output is unchanged, the recorded parts equal the closed forms
// written out per sequence, and the gradient of sum(out * g) with the losses
// attached equals that of sum(out * g) + scale * (aux_coeff * balance +
// z_coeff * z) from the closed forms.
TEST(MegatronGptTest, MoeLoadBalancingLossesEqualClosedForm) {
  const int64_t n = 13, k = 2, e = 4;
  const std::vector<int64_t> starts = {0, 5, 9, 12};  // sequence boundaries
  const double aux_coeff = 0.3, z_coeff = 0.05, scale = 0.5;
  for (const bool sigmoid : {false, true}) {
    for (const std::string type : {"aux_loss", "seq_aux_loss"}) {
      SCOPED_TRACE(std::string(sigmoid ? "sigmoid " : "softmax ") + type);
      MegatronModelOptions o;
      o.moe_router_load_balancing_type = type;
      o.moe_aux_loss_coeff = aux_coeff;
      o.moe_z_loss_coeff = z_coeff;
      std::unique_ptr<MegatronMoeLayer> owned = SeededMoeLayer(o, 5, sigmoid);
      MegatronMoeLayer& layer = *owned;
      const int64_t h = Config().hidden_size;
      at::Tensor x = at::randn({n, h}, at::kDouble);
      x.requires_grad_(true);
      std::vector<int64_t> seq(n, -1);
      for (size_t s = 0; s + 1 < starts.size(); ++s) {
        for (int64_t t = starts[s]; t < starts[s + 1]; ++t) seq[t] = s;
      }
      auto rows = std::make_shared<MoeRows>();
      rows->sequence = at::tensor(seq, at::kLong);
      rows->real = rows->sequence >= 0;
      rows->num_sequences = 3;
      layer.rows = rows;
      layer.aux_scale = scale;
      at::Tensor out = layer.Forward(x);
      EXPECT_EQ(layer.loss_forwards, 1);
      // The closed forms from the router logits, sequence by sequence.
      at::Tensor logits = at::linear(x, layer.router->weight);
      at::Tensor scores = at::softmax(logits, -1);
      if (sigmoid) {
        scores = at::sigmoid(logits);
        scores = scores / scores.sum(-1, true);
      }
      const at::Tensor top = std::get<1>(at::topk(scores.detach(), k, 1));
      std::vector<std::pair<int64_t, int64_t>> groups;  // [begin, end)
      if (type == "aux_loss") {
        groups = {{0, 12}};
      } else {
        groups = {{0, 5}, {5, 9}, {9, 12}};
      }
      at::Tensor balance = at::zeros({}, at::kDouble);
      for (const auto& [begin, end] : groups) {
        const double len = static_cast<double>(end - begin);
        for (int64_t ex = 0; ex < e; ++ex) {
          int64_t chosen = 0;
          for (int64_t t = begin; t < end; ++t) {
            for (int64_t j = 0; j < k; ++j) {
              chosen += top[t][j].item<int64_t>() == ex;
            }
          }
          balance =
              balance +
              static_cast<double>(chosen * e) / (len * len * k) *
                  scores.narrow(0, begin, end - begin).select(1, ex).sum();
        }
      }
      balance = balance / static_cast<double>(groups.size());
      const at::Tensor z =
          at::logsumexp(logits.narrow(0, 0, 12), -1).pow(2).mean();
      EXPECT_NEAR(layer.balance_sum, balance.item<double>(), 1e-12);
      EXPECT_NEAR(layer.z_sum, z.item<double>(), 1e-12);
      // The same layer without the losses: the same output; gradients of
      // the closed forms added by hand.
      layer.aux_coeff = layer.z_coeff = 0.0;
      at::Tensor plain = layer.Forward(x);
      EXPECT_TRUE(at::allclose(out, plain, 0, 0));
      at::Tensor g = at::randn({n, h}, at::kDouble);
      std::vector<at::Tensor> inputs = {x, layer.router->weight};
      for (const auto& ex : layer.local_experts) {
        for (const at::Tensor& p : ex->parameters()) inputs.push_back(p);
      }
      const std::vector<at::Tensor> got = torch::autograd::grad(
          {(out * g).sum()}, inputs, {}, true, false, /*allow_unused=*/true);
      const std::vector<at::Tensor> want = torch::autograd::grad(
          {(plain * g).sum() + scale * (aux_coeff * balance + z_coeff * z)},
          inputs, {}, true, false, true);
      for (size_t i = 0; i < inputs.size(); ++i) {
        at::Tensor a = got[i].defined() ? got[i] : at::zeros_like(inputs[i]);
        at::Tensor b = want[i].defined() ? want[i] : at::zeros_like(inputs[i]);
        EXPECT_TRUE(at::allclose(a, b, 1e-10, 1e-12))
            << "input " << i << " max diff " << (a - b).abs().max();
      }
      // Without the losses attached, the router gradient differs.
      const at::Tensor router_plain = torch::autograd::grad(
          {(plain * g).sum()}, {layer.router->weight}, {}, true)[0];
      EXPECT_GT((router_plain - got[1]).abs().max().item<double>(), 1e-6);
    }
  }
}

// The interleaved schedule needs a multiple of pp micro-batches
// (Megatron's requirement); 1F1B and one stage take any count.
TEST(MegatronGptTest, InterleavedMicrobatchCount) {
  EXPECT_TRUE(parallel::megatron::CheckPipelineMicrobatches(4, 2, 2).ok());
  EXPECT_TRUE(parallel::megatron::CheckPipelineMicrobatches(3, 2, 1).ok());
  EXPECT_THAT(parallel::megatron::CheckPipelineMicrobatches(3, 2, 2),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "virtual_pipeline_model_parallel_size=2) needs the "
                       "number of micro-batches to be a multiple of "
                       "pipeline_model_parallel_size=2, got 3"));
}

// Megatron's get_num_layers_to_build: uniform, or the first / last stage's
// override with the rest split evenly.
TEST(MegatronGptTest, PipelineStageLayers) {
  MegatronModelOptions o;
  EXPECT_THAT(*PipelineStageLayers(8, 4, o), testing::ElementsAre(2, 2, 2, 2));
  o.num_layers_in_first_pipeline_stage = 1;
  EXPECT_THAT(*PipelineStageLayers(7, 4, o), testing::ElementsAre(1, 2, 2, 2));
  o.num_layers_in_last_pipeline_stage = 3;
  EXPECT_THAT(*PipelineStageLayers(8, 4, o), testing::ElementsAre(1, 2, 2, 3));
  EXPECT_THAT(*PipelineStageLayers(4, 2, o), testing::ElementsAre(1, 3));
  EXPECT_THAT(PipelineStageLayers(5, 2, o),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "num_layers_in_first/last_pipeline_stage"));
  EXPECT_THAT(PipelineStageLayers(9, 4, o),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "cannot split 5 of num_hidden_layers 9"));
  o.num_layers_in_last_pipeline_stage = -1;
  o.num_layers_in_first_pipeline_stage = 9;
  EXPECT_THAT(PipelineStageLayers(8, 2, o),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "megatron.override_transformer_config.num_layers_in_"
                       "first_pipeline_stage=9: exceeds"));
  EXPECT_THAT(PipelineStageLayers(8, 1, o),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "needs pipeline_model_parallel_size > 1"));
  // Virtual stages: an even split over pp x vpp.
  MegatronModelOptions plain;
  EXPECT_THAT(*VirtualStageLayers(8, 2, 2, plain),
              testing::ElementsAre(2, 2, 2, 2));
  EXPECT_THAT(*VirtualStageLayers(8, 2, 0, plain), testing::ElementsAre(4, 4));
  EXPECT_THAT(VirtualStageLayers(6, 2, 2, plain),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "cannot split num_hidden_layers 6 evenly"));
}

// tp = 4 over 4 heads and 2 KV groups: one query head per rank, each pair
// of ranks shares a group (Megatron's ng < tp layout).
TEST(MegatronGptTest, HeadLayout) {
  TpHeadLayout h = MakeTpHeadLayout(Config(), 4);
  EXPECT_EQ(h.heads_per_rank, 1);
  EXPECT_TRUE(h.gather_groups);
  EXPECT_EQ(h.groups_per_rank, 1);
  // head_dim 4: 2 groups x (2 q + k + v) x 4 / 4 ranks.
  EXPECT_EQ(h.fused_per_rank, 8);
  h = MakeTpHeadLayout(Config(), 2);
  EXPECT_FALSE(h.gather_groups);
  EXPECT_EQ(h.groups_per_rank, 1);
  EXPECT_EQ(h.heads_per_rank, 2);
}

}  // namespace
}  // namespace verl::models
