// File: verl/models/decoder_test.cc
//
// The decoder against an independent naive implementation written here with
// plain loops over tokens/heads (double precision, per sequence, full
// attention with an explicit causal mask), for every supported family; the
// padded and packed layouts against each other and the naive model; gradient
// checkpointing against the plain backward; a finite-difference gradient
// check; MoE top-k = E against the dense mixture; HF parameter names.
#include "verl/models/decoder.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "verl/core/test_util.h"
#include "verl/models/attention.h"
#include "verl/models/presets.h"

namespace verl::models {
namespace {

using ::verl::core::testing::StatusIs;

using Params = std::map<std::string, at::Tensor>;

Params GetParams(const torch::nn::Module& m) {
  Params p;
  for (const auto& it : m.named_parameters()) {
    p[it.key()] = it.value().detach().to(at::kDouble).contiguous();
  }
  return p;
}

ModelConfig Preset(const std::string& name) {
  absl::StatusOr<ModelConfig> c = MakePreset(name);
  CHECK(c.ok()) << c.status();
  return *c;
}

// Model with larger random weights than HF's init, random norm weights and
// biases, so that every parameter visibly matters.
std::shared_ptr<CausalLM> RandomModel(const ModelConfig& c, uint64_t seed) {
  auto model = CreateModel(c, seed, /*init_std=*/0.08);
  at::manual_seed(seed + 1);
  torch::NoGradGuard ng;
  for (const auto& it : model->named_parameters()) {
    const std::string& n = it.key();
    if (n.find("norm") != std::string::npos) {
      it.value().copy_(1.0 + 0.2 * at::randn_like(it.value()));
    } else if (n.size() > 5 && n.substr(n.size() - 5) == ".bias") {
      it.value().copy_(0.1 * at::randn_like(it.value()));
    }
  }
  return model;
}

// ---- Naive reference -------------------------------------------------------

at::Tensor Rows(const at::Tensor& x) { return x.to(at::kDouble).contiguous(); }

at::Tensor RmsRows(const at::Tensor& x, const at::Tensor& w, double eps) {
  at::Tensor out = at::empty_like(x);
  auto xa = x.accessor<double, 2>();
  auto oa = out.accessor<double, 2>();
  auto wa = w.accessor<double, 1>();
  for (int64_t i = 0; i < x.size(0); ++i) {
    double ms = 0;
    for (int64_t j = 0; j < x.size(1); ++j) ms += xa[i][j] * xa[i][j];
    const double inv = 1.0 / std::sqrt(ms / x.size(1) + eps);
    for (int64_t j = 0; j < x.size(1); ++j) oa[i][j] = xa[i][j] * inv * wa[j];
  }
  return out;
}

at::Tensor Lin(const at::Tensor& x, const Params& p, const std::string& name) {
  at::Tensor y = at::matmul(x, p.at(name + ".weight").t());
  auto b = p.find(name + ".bias");
  if (b != p.end()) y = y + b->second;
  return y.contiguous();
}

at::Tensor NaiveMlp(const at::Tensor& x, const Params& p,
                    const std::string& pre) {
  at::Tensor g = Lin(x, p, pre + ".gate_proj");
  at::Tensor silu = g / (1.0 + at::exp(-g));
  return Lin(silu * Lin(x, p, pre + ".up_proj"), p, pre + ".down_proj");
}

// Scalar RoPE frequency i of head_dim d (HF default / llama3 formulas).
double InvFreq(const ModelConfig& c, int64_t i, int64_t d) {
  double f = 1.0 / std::pow(c.rope_theta, 2.0 * i / d);
  const RopeScaling& rs = c.rope_scaling;
  if (rs.rope_type != "llama3") return f;
  const double old_len = rs.original_max_position_embeddings;
  const double wavelen = 2 * M_PI / f;
  if (wavelen < old_len / rs.high_freq_factor) return f;
  if (wavelen > old_len / rs.low_freq_factor) return f / rs.factor;
  const double s = (old_len / wavelen - rs.low_freq_factor) /
                   (rs.high_freq_factor - rs.low_freq_factor);
  return (1 - s) * f / rs.factor + s * f;
}

// x [L, d] of one head at positions 0..L-1.
at::Tensor NaiveRope(const at::Tensor& x, const ModelConfig& c) {
  const int64_t d = x.size(1), half = d / 2;
  at::Tensor out = at::empty_like(x);
  auto xa = x.accessor<double, 2>();
  auto oa = out.accessor<double, 2>();
  for (int64_t t = 0; t < x.size(0); ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const double a = t * InvFreq(c, i, d);
      oa[t][i] = xa[t][i] * std::cos(a) - xa[t][i + half] * std::sin(a);
      oa[t][i + half] = xa[t][i + half] * std::cos(a) + xa[t][i] * std::sin(a);
    }
  }
  return out;
}

// Full softmax attention of one head with causal (+window) mask.
at::Tensor NaiveHeadAttention(const at::Tensor& q, const at::Tensor& k,
                              const at::Tensor& v, int64_t window) {
  const int64_t L = q.size(0), d = q.size(1);
  at::Tensor s = at::matmul(q, k.t()).contiguous() / std::sqrt(double(d));
  auto sa = s.accessor<double, 2>();
  for (int64_t i = 0; i < L; ++i) {
    double mx = -1e300, sum = 0;
    std::vector<bool> ok(L);
    for (int64_t j = 0; j < L; ++j) {
      ok[j] = j <= i && (window == 0 || i - j < window);
      if (ok[j]) mx = std::max(mx, sa[i][j]);
    }
    for (int64_t j = 0; j < L; ++j) {
      sa[i][j] = ok[j] ? std::exp(sa[i][j] - mx) : 0.0;
      sum += sa[i][j];
    }
    for (int64_t j = 0; j < L; ++j) sa[i][j] /= sum;
  }
  return at::matmul(s, v);
}

// One token's MoE output; appends its router logits row.
at::Tensor NaiveMoeToken(const at::Tensor& x, const Params& p,
                         const std::string& pre, const ModelConfig& c) {
  at::Tensor logits = Lin(x, p, pre + ".gate").reshape({-1});
  const int64_t E = c.num_experts;
  std::vector<double> prob(E);
  double mx = logits.max().item<double>(), sum = 0;
  for (int64_t e = 0; e < E; ++e)
    sum += prob[e] = std::exp(logits[e].item<double>() - mx);
  for (double& q : prob) q /= sum;
  std::vector<int64_t> idx(E);
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(),
            [&](int64_t a, int64_t b) { return prob[a] > prob[b]; });
  double wsum = 0;
  for (int64_t j = 0; j < c.num_experts_per_tok; ++j) wsum += prob[idx[j]];
  at::Tensor y = at::zeros_like(x);
  for (int64_t j = 0; j < c.num_experts_per_tok; ++j) {
    const double w = c.norm_topk_prob ? prob[idx[j]] / wsum : prob[idx[j]];
    y = y + w * NaiveMlp(x, p, pre + ".experts." + std::to_string(idx[j]));
  }
  if (c.shared_expert_intermediate_size > 0) {
    const double g = Lin(x, p, pre + ".shared_expert_gate").item<double>();
    y = y + NaiveMlp(x, p, pre + ".shared_expert") / (1.0 + std::exp(-g));
  }
  return y;
}

struct NaiveOut {
  at::Tensor logits;                      // [L, V]
  std::vector<at::Tensor> router_logits;  // per MoE layer [L, E]
};

// One sequence through the model described by `c` and HF-named params `p`.
NaiveOut NaiveForward(const ModelConfig& c, const Params& p,
                      const std::vector<int64_t>& ids,
                      const std::vector<int64_t>& windows) {
  const int64_t L = ids.size(), nh = c.num_attention_heads,
                nkv = c.num_key_value_heads, d = c.HeadDim();
  NaiveOut out;
  at::Tensor x = at::empty({L, c.hidden_size}, at::kDouble);
  for (int64_t t = 0; t < L; ++t)
    x[t] = p.at("model.embed_tokens.weight")[ids[t]];
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string pre = "model.layers." + std::to_string(l);
    at::Tensor h =
        RmsRows(x, p.at(pre + ".input_layernorm.weight"), c.rms_norm_eps);
    at::Tensor q = Lin(h, p, pre + ".self_attn.q_proj");
    at::Tensor k = Lin(h, p, pre + ".self_attn.k_proj");
    at::Tensor v = Lin(h, p, pre + ".self_attn.v_proj");
    std::vector<at::Tensor> heads;
    for (int64_t hd = 0; hd < nh; ++hd) {
      const int64_t kvh = hd / (nh / nkv);
      at::Tensor qh = q.narrow(1, hd * d, d).contiguous();
      at::Tensor kh = k.narrow(1, kvh * d, d).contiguous();
      at::Tensor vh = v.narrow(1, kvh * d, d);
      if (c.qk_norm) {
        qh =
            RmsRows(qh, p.at(pre + ".self_attn.q_norm.weight"), c.rms_norm_eps);
        kh =
            RmsRows(kh, p.at(pre + ".self_attn.k_norm.weight"), c.rms_norm_eps);
      }
      heads.push_back(NaiveHeadAttention(NaiveRope(qh, c), NaiveRope(kh, c), vh,
                                         windows[l]));
    }
    x = x + Lin(at::cat(heads, 1), p, pre + ".self_attn.o_proj");
    h = RmsRows(x.contiguous(), p.at(pre + ".post_attention_layernorm.weight"),
                c.rms_norm_eps);
    if (c.LayerIsMoe(l)) {
      std::vector<at::Tensor> ys;
      for (int64_t t = 0; t < L; ++t)
        ys.push_back(NaiveMoeToken(h.narrow(0, t, 1), p, pre + ".mlp", c));
      out.router_logits.push_back(Lin(h, p, pre + ".mlp.gate"));
      x = x + at::cat(ys, 0);
    } else {
      x = x + NaiveMlp(h, p, pre + ".mlp");
    }
    x = x.contiguous();
  }
  x = RmsRows(x, p.at("model.norm.weight"), c.rms_norm_eps);
  auto head = p.find("lm_head.weight");
  out.logits = at::matmul(
      x,
      (head != p.end() ? head->second : p.at("model.embed_tokens.weight")).t());
  return out;
}

// HF load_balancing_loss_func with explicit counting loops.
double NaiveAuxLoss(const std::vector<at::Tensor>& router_logits, int64_t E,
                    int64_t k) {
  at::Tensor all = at::cat(router_logits, 0);
  const int64_t n = all.size(0);
  std::vector<double> frac(E, 0), mean_p(E, 0);
  for (int64_t t = 0; t < n; ++t) {
    at::Tensor pr = at::softmax(all[t], 0);
    std::vector<int64_t> idx(E);
    std::iota(idx.begin(), idx.end(), 0);
    std::sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
      return pr[a].item<double>() > pr[b].item<double>();
    });
    for (int64_t j = 0; j < k; ++j)
      frac[idx[j]] += 1.0 / n;  // HF sums the k slots
    for (int64_t e = 0; e < E; ++e) mean_p[e] += pr[e].item<double>() / n;
  }
  double loss = 0;
  for (int64_t e = 0; e < E; ++e) loss += frac[e] * mean_p[e];
  return loss * E;
}

// ---- Helpers
// ------------------------------------------------------------------

struct Packed {
  std::vector<std::vector<int64_t>> seqs;
  at::Tensor ids, pos;
  std::vector<int64_t> cu;
};

Packed MakePacked(const std::vector<int64_t>& lens, int64_t vocab,
                  uint64_t seed) {
  at::manual_seed(seed);
  Packed pk;
  pk.cu = {0};
  std::vector<int64_t> ids, pos;
  for (int64_t len : lens) {
    at::Tensor s = at::randint(0, vocab, {len}, at::kLong);
    pk.seqs.emplace_back(s.data_ptr<int64_t>(), s.data_ptr<int64_t>() + len);
    ids.insert(ids.end(), pk.seqs.back().begin(), pk.seqs.back().end());
    for (int64_t i = 0; i < len; ++i) pos.push_back(i);
    pk.cu.push_back(pk.cu.back() + len);
  }
  pk.ids = at::tensor(ids, at::kLong);
  pk.pos = at::tensor(pos, at::kLong);
  return pk;
}

double MaxDiff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

std::vector<int64_t> Windows(const ModelConfig& c, int64_t w,
                             int64_t from_layer) {
  std::vector<int64_t> out(c.num_hidden_layers, 0);
  for (int64_t l = from_layer; l < c.num_hidden_layers; ++l) out[l] = w;
  return out;
}

// Packed forward of `c` in double and fp32 vs the naive model.
void CheckAgainstNaive(const ModelConfig& c,
                       const std::vector<int64_t>& windows) {
  auto model = RandomModel(c, 7);
  Packed pk = MakePacked({5, 13, 9}, c.vocab_size, 11);
  torch::NoGradGuard ng;
  ForwardOutput f32 = model->ForwardPacked(pk.ids, pk.pos, pk.cu);
  model->to(at::kDouble);
  ForwardOutput f64 = model->ForwardPacked(pk.ids, pk.pos, pk.cu);
  Params p = GetParams(*model);
  std::vector<at::Tensor> all_logits, router_logits(c.num_hidden_layers);
  std::vector<std::vector<at::Tensor>> per_layer;
  std::vector<at::Tensor> rl_all;
  for (const auto& s : pk.seqs) {
    NaiveOut n = NaiveForward(c, p, s, windows);
    all_logits.push_back(n.logits);
    if (per_layer.empty()) per_layer.resize(n.router_logits.size());
    for (size_t l = 0; l < n.router_logits.size(); ++l)
      per_layer[l].push_back(n.router_logits[l]);
  }
  at::Tensor ref = at::cat(all_logits, 0);
  EXPECT_LT(MaxDiff(f64.logits, ref), 1e-9) << c.architecture;
  EXPECT_LT(MaxDiff(f32.logits, ref), 2e-4) << c.architecture;
  EXPECT_GT(ref.std().item<double>(), 0.1)
      << "logits too flat to test anything";
  if (c.IsMoe()) {
    for (auto& l : per_layer) rl_all.push_back(at::cat(l, 0));
    ASSERT_TRUE(f64.aux_loss.defined());
    EXPECT_NEAR(f64.aux_loss.item<double>(),
                NaiveAuxLoss(rl_all, c.num_experts, c.num_experts_per_tok),
                1e-9);
  } else {
    EXPECT_FALSE(f64.aux_loss.defined());
  }
}

// ---- Tests
// ---------------------------------------------------------------------

TEST(DecoderTest, Qwen2BiasMatchesNaive) {
  ModelConfig c = Preset("tiny-qwen2");
  c.num_hidden_layers = 2;
  CheckAgainstNaive(c, Windows(c, 0, 0));
}

TEST(DecoderTest, Qwen3QkNormMatchesNaive) {
  ModelConfig c = Preset("tiny-qwen3");
  c.num_hidden_layers = 2;
  CheckAgainstNaive(c, Windows(c, 0, 0));
}

TEST(DecoderTest, Llama3RopeScalingMatchesNaive) {
  ModelConfig c = Preset("tiny-llama3");
  c.num_hidden_layers = 2;
  CheckAgainstNaive(c, Windows(c, 0, 0));
  // The scaled frequencies differ from the default ones (scaling is live).
  ModelConfig plain = c;
  plain.rope_scaling.rope_type = "default";
  EXPECT_GT(MaxDiff(RopeInvFreq(c), RopeInvFreq(plain)), 1e-6);
}

TEST(DecoderTest, MistralSlidingWindowMatchesNaive) {
  ModelConfig c = Preset("tiny-mistral");
  c.num_hidden_layers = 2;
  c.sliding_window = 4;  // shorter than the 9- and 13-token sequences
  CheckAgainstNaive(c, Windows(c, 4, 0));
}

TEST(DecoderTest, Qwen2SlidingWindowFromMaxWindowLayers) {
  ModelConfig c = Preset("tiny-qwen2");
  c.num_hidden_layers = 3;
  c.use_sliding_window = true;
  c.sliding_window = 3;
  c.max_window_layers = 1;  // layers 1 and 2 use the window
  CheckAgainstNaive(c, Windows(c, 3, 1));
}

TEST(DecoderTest, Qwen2MoeSharedExpertMatchesNaive) {
  ModelConfig c = Preset("tiny-qwen2-moe");
  c.num_hidden_layers = 2;
  CheckAgainstNaive(c, Windows(c, 0, 0));
}

TEST(DecoderTest, Qwen3MoeNormTopkMatchesNaive) {
  ModelConfig c = Preset("tiny-qwen3-moe");
  c.num_hidden_layers = 2;
  c.mlp_only_layers = {0};  // layer 0 dense MLP, layer 1 sparse
  c.intermediate_size = 96;
  CheckAgainstNaive(c, Windows(c, 0, 0));
}

// verl's position ids: clip(cumsum(mask) - 1, 0).
at::Tensor PositionIds(const at::Tensor& mask) {
  return (mask.cumsum(1) - 1).clamp_min(0);
}

// Builds a [B, L] batch with the given real lengths, left or right padded.
struct PaddedBatch {
  at::Tensor ids, mask, pos;
  std::vector<std::vector<int64_t>> seqs;
};

PaddedBatch MakePadded(const std::vector<int64_t>& lens, int64_t L, bool left,
                       int64_t vocab) {
  at::manual_seed(5);
  const int64_t B = lens.size();
  PaddedBatch pb;
  pb.ids = at::full({B, L}, vocab - 1, at::kLong);
  pb.mask = at::zeros({B, L}, at::kLong);
  for (int64_t b = 0; b < B; ++b) {
    at::Tensor s = at::randint(0, vocab, {lens[b]}, at::kLong);
    pb.seqs.emplace_back(s.data_ptr<int64_t>(),
                         s.data_ptr<int64_t>() + lens[b]);
    const int64_t start = left ? L - lens[b] : 0;
    pb.ids[b].narrow(0, start, lens[b]).copy_(s);
    pb.mask[b].narrow(0, start, lens[b]).fill_(1);
  }
  pb.pos = PositionIds(pb.mask);
  return pb;
}

TEST(DecoderTest, PaddedLeftAndRightEqualPackedAndNaive) {
  ModelConfig c = Preset("tiny-qwen2");
  c.num_hidden_layers = 2;
  auto model = RandomModel(c, 3);
  const std::vector<int64_t> lens = {10, 6, 3};
  torch::NoGradGuard ng;
  for (bool left : {true, false}) {
    PaddedBatch pb = MakePadded(lens, 10, left, c.vocab_size);
    ForwardOutput padded = model->ForwardPadded(pb.ids, pb.mask, pb.pos);
    ASSERT_EQ(padded.logits.sizes(), (at::IntArrayRef{3, 10, c.vocab_size}));
    // Packed layout on the same sequences.
    std::vector<int64_t> flat, pos, cu = {0};
    for (const auto& s : pb.seqs) {
      flat.insert(flat.end(), s.begin(), s.end());
      for (size_t i = 0; i < s.size(); ++i) pos.push_back(i);
      cu.push_back(cu.back() + s.size());
    }
    ForwardOutput packed = model->ForwardPacked(at::tensor(flat, at::kLong),
                                                at::tensor(pos, at::kLong), cu);
    Params p = GetParams(*model);
    for (int64_t b = 0; b < 3; ++b) {
      const int64_t start = left ? 10 - lens[b] : 0;
      at::Tensor real = padded.logits[b].narrow(0, start, lens[b]);
      EXPECT_LT(MaxDiff(real, packed.logits.narrow(0, cu[b], lens[b])), 1e-5);
      NaiveOut n = NaiveForward(c, p, pb.seqs[b], Windows(c, 0, 0));
      EXPECT_LT(MaxDiff(real, n.logits), 2e-4);
      // Padding positions are zero.
      at::Tensor pad_mask = pb.mask[b].eq(0);
      EXPECT_EQ(padded.logits[b].index({pad_mask}).abs().sum().item<double>(),
                0.0);
    }
  }
}

// Sum of all parameter gradients after backward of a fixed random
// projection of the logits (+ aux loss for MoE).
std::map<std::string, at::Tensor> Grads(CausalLM& model, const Packed& pk) {
  model.zero_grad();
  ForwardOutput out = model.ForwardPacked(pk.ids, pk.pos, pk.cu);
  at::manual_seed(99);
  at::Tensor w = at::randn_like(out.logits);
  at::Tensor loss = (out.logits * w).sum();
  if (out.aux_loss.defined()) loss = loss + 10.0 * out.aux_loss;
  loss.backward();
  std::map<std::string, at::Tensor> g;
  for (const auto& it : model.named_parameters()) {
    if (it.value().grad().defined()) g[it.key()] = it.value().grad().clone();
  }
  return g;
}

TEST(DecoderTest, GradientCheckpointingGivesIdenticalGradients) {
  for (const char* name : {"tiny-qwen2", "tiny-qwen2-moe"}) {
    ModelConfig c = Preset(name);
    c.num_hidden_layers = 2;
    auto model = RandomModel(c, 4);
    Packed pk = MakePacked({7, 11}, c.vocab_size, 2);
    auto plain = Grads(*model, pk);
    model->enable_gradient_checkpointing();
    auto ckpt = Grads(*model, pk);
    ASSERT_EQ(plain.size(), model->parameters().size()) << name;
    ASSERT_EQ(ckpt.size(), plain.size()) << name;
    for (const auto& [n, g] : plain) {
      EXPECT_TRUE(at::allclose(g, ckpt[n], 1e-5, 1e-7)) << name << " " << n;
      EXPECT_GT(g.abs().sum().item<double>(), 0) << name << " " << n;
    }
  }
}

// The actor's path (packed forward, label log-probs, backward) in fp32 with
// the fused attention (FusedVarlenAttention) and with the ATen graph
// (fused=false, what VERL_FUSED_OPS=0 runs): same log-probs and gradients
// within fp32 rounding.
TEST(DecoderTest, FusedAttentionEqualsAtenAttention) {
  for (const char* name : {"tiny-qwen2", "tiny-qwen3"}) {
    SCOPED_TRACE(name);
    ModelConfig c = Preset(name);
    c.num_hidden_layers = 3;
    if (std::string(name) == "tiny-qwen2") {
      c.use_sliding_window = true;
      c.sliding_window = 5;
      c.max_window_layers = 1;  // layers 1 and 2 windowed
    }
    auto model = RandomModel(c, 12);
    Packed pk = MakePacked({1, 70, 9, 33}, c.vocab_size, 13);
    const at::Tensor labels = at::roll(pk.ids, -1);
    at::manual_seed(14);
    const at::Tensor w = at::randn({pk.ids.size(0)});
    auto run = [&](bool fused) {
      model->zero_grad();
      VarlenCausalAttention attention(pk.cu, model->LayerWindows(), fused);
      at::Tensor hidden = model->Forward(pk.ids, pk.pos, attention);
      at::Tensor lp =
          model->LabelLogProbs(hidden, labels, 1.0, false).log_probs;
      (lp * w).sum().backward();
      std::map<std::string, at::Tensor> g;
      for (const auto& it : model->named_parameters()) {
        g[it.key()] = it.value().grad().clone();
      }
      return std::make_pair(lp.detach(), g);
    };
    auto [lp_fused, g_fused] = run(true);
    auto [lp_aten, g_aten] = run(false);
    EXPECT_LT(MaxDiff(lp_fused, lp_aten), 2e-5);
    for (const auto& [n, g] : g_aten) {
      const double scale = g.abs().max().item<double>();
      EXPECT_LT(MaxDiff(g_fused[n], g), 1e-4 * scale + 1e-6) << n;
    }
  }
}

TEST(DecoderTest, FiniteDifferenceGradients) {
  ModelConfig c = Preset("tiny-qwen3-moe");
  c.vocab_size = 32;
  c.hidden_size = 16;
  c.head_dim = 8;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.num_hidden_layers = 1;
  c.num_experts = 3;
  c.moe_intermediate_size = 8;
  c.shared_expert_intermediate_size = 8;
  c.attention_bias = true;
  auto model = RandomModel(c, 21);
  model->to(at::kDouble);
  Packed pk = MakePacked({4, 3}, c.vocab_size, 8);
  at::manual_seed(3);
  at::Tensor w = at::randn({7, c.vocab_size}, at::kDouble);
  auto loss_fn = [&]() {
    ForwardOutput o = model->ForwardPacked(pk.ids, pk.pos, pk.cu);
    return (o.logits * w).sum() + o.aux_loss;
  };
  model->zero_grad();
  loss_fn().backward();
  torch::NoGradGuard ng;
  int checked = 0;
  for (const auto& it : model->named_parameters()) {
    at::Tensor p = it.value();
    at::Tensor flat = p.view({-1});
    for (int64_t i : {int64_t{0}, p.numel() / 2, p.numel() - 1}) {
      const double orig = flat[i].item<double>();
      const double eps = 1e-6;
      flat[i].fill_(orig + eps);
      const double up = loss_fn().item<double>();
      flat[i].fill_(orig - eps);
      const double down = loss_fn().item<double>();
      flat[i].fill_(orig);
      const double fd = (up - down) / (2 * eps);
      const double an = p.grad().view({-1})[i].item<double>();
      EXPECT_NEAR(an, fd, 1e-6 + 1e-5 * std::abs(fd))
          << it.key() << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 60);
}

TEST(DecoderTest, MoeTopkAllExpertsEqualsDenseMixture) {
  for (bool shared : {false, true}) {
    for (bool norm : {false, true}) {
      ModelConfig c = Preset("tiny-qwen2-moe");
      c.num_experts_per_tok = c.num_experts;
      c.norm_topk_prob = norm;
      c.shared_expert_intermediate_size = shared ? 64 : 0;
      auto model = RandomModel(c, 12);
      const MoeBlock& moe = *model->model->layers[0]->moe;
      at::manual_seed(1);
      at::Tensor x = at::randn({9, c.hidden_size});
      torch::NoGradGuard ng;
      at::Tensor out = moe.Forward(x).first;
      at::Tensor probs = at::softmax(moe.gate->Forward(x), -1);
      at::Tensor dense = at::zeros_like(x);
      for (int64_t e = 0; e < c.num_experts; ++e) {
        dense = dense +
                probs.select(1, e).unsqueeze(1) * moe.experts[e]->Forward(x);
      }
      if (shared) {
        dense = dense + at::sigmoid(moe.shared_expert_gate->Forward(x)) *
                            moe.shared_expert->Forward(x);
      }
      EXPECT_LT(MaxDiff(out, dense), 1e-6) << shared << norm;
    }
  }
}

bool Has(const Params& p, const std::string& name) { return p.count(name) > 0; }

TEST(DecoderTest, ParameterNamesAreHf) {
  Params q2 = GetParams(*CreateModel(Preset("tiny-qwen2"), 1));
  EXPECT_TRUE(Has(q2, "model.embed_tokens.weight"));
  EXPECT_TRUE(Has(q2, "model.layers.3.self_attn.q_proj.bias"));
  EXPECT_TRUE(Has(q2, "model.layers.0.self_attn.o_proj.weight"));
  EXPECT_FALSE(Has(q2, "model.layers.0.self_attn.o_proj.bias"));
  EXPECT_TRUE(Has(q2, "model.layers.0.mlp.gate_proj.weight"));
  EXPECT_TRUE(Has(q2, "model.layers.0.input_layernorm.weight"));
  EXPECT_TRUE(Has(q2, "model.layers.0.post_attention_layernorm.weight"));
  EXPECT_TRUE(Has(q2, "model.norm.weight"));
  EXPECT_FALSE(Has(q2, "lm_head.weight"));  // tied
  EXPECT_EQ(q2.size(), 1 + 4 * 12 + 1);

  Params q3 = GetParams(*CreateModel(Preset("tiny-qwen3"), 1));
  EXPECT_TRUE(Has(q3, "model.layers.0.self_attn.q_norm.weight"));
  EXPECT_EQ(q3["model.layers.0.self_attn.k_norm.weight"].numel(), 48);
  EXPECT_EQ(q3["model.layers.0.self_attn.q_proj.weight"].size(0), 4 * 48);
  EXPECT_FALSE(Has(q3, "model.layers.0.self_attn.q_proj.bias"));

  Params ll = GetParams(*CreateModel(Preset("tiny-llama3"), 1));
  EXPECT_TRUE(Has(ll, "lm_head.weight"));

  Params m2 = GetParams(*CreateModel(Preset("tiny-qwen2-moe"), 1));
  EXPECT_TRUE(Has(m2, "model.layers.1.mlp.gate.weight"));
  EXPECT_TRUE(Has(m2, "model.layers.1.mlp.experts.3.down_proj.weight"));
  EXPECT_TRUE(Has(m2, "model.layers.1.mlp.shared_expert.up_proj.weight"));
  EXPECT_EQ(m2["model.layers.1.mlp.shared_expert_gate.weight"].sizes(),
            (at::IntArrayRef{1, 128}));
  Params m3 = GetParams(*CreateModel(Preset("tiny-qwen3-moe"), 1));
  EXPECT_TRUE(Has(m3, "model.layers.0.mlp.experts.7.gate_proj.weight"));
  EXPECT_FALSE(Has(m3, "model.layers.0.mlp.shared_expert_gate.weight"));
}

TEST(DecoderTest, ValueHeadShapes) {
  ModelConfig c = Preset("tiny-qwen2");
  c.num_hidden_layers = 1;
  c.is_value_model = true;
  auto model = RandomModel(c, 2);
  Params p = GetParams(*model);
  EXPECT_EQ(p.at("score.weight").sizes(), (at::IntArrayRef{1, 128}));
  EXPECT_EQ(p.at("score.bias").numel(), 1);
  EXPECT_FALSE(Has(p, "lm_head.weight"));
  PaddedBatch pb = MakePadded({5, 3}, 6, true, c.vocab_size);
  ForwardOutput out = model->ForwardPadded(pb.ids, pb.mask, pb.pos);
  EXPECT_FALSE(out.logits.defined());
  ASSERT_EQ(out.values.sizes(), (at::IntArrayRef{2, 6}));
  // Value of the last token equals score(hidden) of the packed forward.
  VarlenCausalAttention attn({0, 5});
  at::Tensor ids = pb.ids[0].narrow(0, 1, 5);
  at::Tensor h = model->Forward(ids, at::arange(5, at::kLong), attn);
  EXPECT_LT(MaxDiff(out.values[0].narrow(0, 1, 5), model->Values(h)), 1e-5);
}

TEST(DecoderTest, Bf16CloseToFp32) {
  ModelConfig c = Preset("tiny-qwen2");
  c.num_hidden_layers = 2;
  auto model = RandomModel(c, 5);
  Packed pk = MakePacked({6, 9}, c.vocab_size, 4);
  at::Tensor ref;
  {
    torch::NoGradGuard ng;
    ref = model->ForwardPacked(pk.ids, pk.pos, pk.cu).logits;
  }
  model->to(at::kBFloat16);
  ForwardOutput out = model->ForwardPacked(pk.ids, pk.pos, pk.cu);
  EXPECT_EQ(out.logits.scalar_type(), at::kBFloat16);
  const double scale = ref.abs().max().item<double>();
  EXPECT_LT(MaxDiff(out.logits, ref), 0.05 * scale);
  out.logits.to(at::kFloat).sum().backward();
  EXPECT_TRUE(model->model->embed_tokens->weight.grad().defined());
}

TEST(PresetsTest, SizesAndErrors) {
  EXPECT_THAT(
      MakePreset("gpt-5"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "unknown model preset 'gpt-5'; known: tiny-qwen2, qwen2-30m"));
  // qwen2.5-0.5b: Qwen2.5-0.5B's config.json (not built here: 2 GB).
  absl::StatusOr<ModelConfig> q = MakePreset("qwen2.5-0.5b");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->vocab_size, 151936);
  EXPECT_EQ(q->hidden_size, 896);
  EXPECT_EQ(q->intermediate_size, 4864);
  EXPECT_EQ(q->num_hidden_layers, 24);
  EXPECT_EQ(q->num_attention_heads, 14);
  EXPECT_EQ(q->num_key_value_heads, 2);
  EXPECT_TRUE(q->attention_bias && q->tie_word_embeddings);
  for (const std::string& name : PresetNames()) {
    if (name == "qwen2.5-0.5b") continue;
    absl::StatusOr<ModelConfig> c =
        MakePreset(name, name == "qwen2-30m" ? 0 : 512);
    ASSERT_TRUE(c.ok()) << name;
    const int64_t n = NumParameters(*CreateModel(*c, 1));
    if (name == "qwen2-30m") {
      EXPECT_GT(n, 25'000'000);
      EXPECT_LT(n, 35'000'000);
    } else {
      EXPECT_GT(n, 400'000) << name;
      EXPECT_LT(n, 2'500'000) << name;
    }
  }
}

}  // namespace
}  // namespace verl::models
