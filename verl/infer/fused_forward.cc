// File: verl/infer/fused_forward.cc
#include "verl/infer/fused_forward.h"

#include <ATen/ATen.h>
#include <glog/logging.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <utility>

#include "verl/core/parallel_for.h"
#include "verl/infer/kernels.h"
#include "verl/infer/tensor_parallel.h"
#include "verl/models/layers.h"

namespace verl::infer {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Rows of `x` ([rows, n] with row stride `ld`) normalised into `out`
// ([rows, n] contiguous), in parallel over rows.
void RmsNormRows(const at::Tensor& x, const at::Tensor& weight, double eps,
                 at::Tensor& out) {
  const int64_t rows = x.size(0), n = x.size(1), ld = x.stride(0);
  const float* xp = x.data_ptr<float>();
  const float* wp = weight.data_ptr<float>();
  float* op = out.data_ptr<float>();
  const float e = static_cast<float>(eps);
  const KernelTable& k = Kernels();
  // Parallel only for long batches: a parallel region costs more than a
  // few rows of work (and far more on an oversubscribed machine).
  core::ParallelFor(0, rows, std::max<int64_t>(1, 65536 / n),
                    [&](int64_t b, int64_t end) {
                      for (int64_t r = b; r < end; ++r) {
                        k.rms_norm_row(xp + r * ld, wp, e, n, op + r * n);
                      }
                    });
}

// Grows `buf` to at least [rows, cols] and returns its first `rows` rows.
at::Tensor Rows(at::Tensor& buf, int64_t rows, int64_t cols) {
  if (!buf.defined() || buf.size(0) < rows || buf.size(1) != cols) {
    buf = at::empty({std::max<int64_t>(rows, 64), cols}, at::kFloat);
  }
  return buf.narrow(0, 0, rows);
}

// out = x w^T (+ bias), or out += x w^T, through the small-batch kernel
// (kernels.h) when x has <= 8 fp32 rows (decode of few sequences), w
// [n, k] (the LM head); in parallel over column blocks. False (nothing
// done) when it does not apply. BLIS packs the weight matrix on every call,
// which at these sizes reads the weights ~3 times; the kernel reads them
// once.
bool SmallGemm(at::Tensor& out, const at::Tensor& x, const at::Tensor& w,
               const at::Tensor& bias, bool accumulate) {
  const int64_t m = x.size(0);
  if (m < 1 || m > kMaxSmallGemmRows || x.scalar_type() != at::kFloat ||
      w.scalar_type() != at::kFloat || x.stride(1) != 1 || w.stride(1) != 1 ||
      out.stride(1) != 1 || (bias.defined() && !bias.is_contiguous())) {
    return false;
  }
  SmallGemmArgs a;
  a.m = m;
  a.k = x.size(1);
  a.x = x.data_ptr<float>();
  a.ldx = x.stride(0);
  a.w = w.data_ptr<float>();
  a.ldw = w.stride(0);
  a.bias = bias.defined() ? bias.data_ptr<float>() : nullptr;
  a.out = out.data_ptr<float>();
  a.ldo = out.stride(0);
  a.accumulate = accumulate;
  const int64_t n = w.size(0);
  const KernelTable& k = Kernels();
  // Column blocks of 64: whole vectors at every ISA, enough work per task.
  constexpr int64_t kBlock = 64;
  core::ParallelFor(0, (n + kBlock - 1) / kBlock, 1, [&](int64_t b, int64_t e) {
    k.small_gemm_nt(a, b * kBlock, std::min(n, e * kBlock));
  });
  return true;
}

// out = x w (+ bias), or out += x w, w a [k, n] panel-packed copy
// (kernel_table.h), x repacked into `xpack` (grown on demand, reused), in
// parallel over x's row blocks and then over panels; x and out fp32 with
// unit column stride.
void PanelGemm(at::Tensor& out, const at::Tensor& x, const at::Tensor& panels,
               int64_t n, const at::Tensor& bias, bool accumulate,
               at::Tensor& xpack) {
  CHECK(x.scalar_type() == at::kFloat && x.stride(1) == 1 &&
        out.stride(1) == 1 && (!bias.defined() || bias.is_contiguous()));
  const int64_t m = x.size(0), kdim = x.size(1);
  if (!xpack.defined() || xpack.numel() < m * kdim) {
    xpack = at::empty({std::max<int64_t>(m * kdim, 64 * kdim)}, at::kFloat);
  }
  PanelGemmArgs a;
  a.m = m;
  a.k = kdim;
  a.n = n;
  a.x = x.data_ptr<float>();
  a.ldx = x.stride(0);
  a.xpack = xpack.data_ptr<float>();
  a.w = panels.data_ptr<float>();
  a.bias = bias.defined() ? bias.data_ptr<float>() : nullptr;
  a.out = out.data_ptr<float>();
  a.ldo = out.stride(0);
  a.accumulate = accumulate;
  const KernelTable& k = Kernels();
  // Packing a row block costs ~k * rows copies: parallel only when there
  // are many.
  core::ParallelFor(0, k.panel_row_blocks(m), 16,
                    [&](int64_t b, int64_t e) { k.panel_pack_x(a, b, e); });
  core::ParallelFor(0, (n + kGemmPanel - 1) / kGemmPanel, 1,
                    [&](int64_t b, int64_t e) { k.panel_gemm(a, b, e); });
}

// out (+)= x [w_0; w_1; ...]^T (+ bias) for x with <= 8 fp32 rows, read
// straight from the model's own weights w_i ([n_i, k], nn.Linear layout)
// whose outputs the engine's packed [k, sum n_i] copy concatenates: each
// weight row is one contiguous stream, where the NN kernel walks the packed
// copy down its columns. Taken at every row count on AVX-512 and AVX2
// (infer_benchmark's BM_SmallGemm, CPU time, qwen2-30m shapes at 8 rows:
// AVX-512 q/k/v 148 vs 558 us, gate/up 338 vs 1031, down 342 vs 788; AVX2
// q/k/v 224 vs 804, gate/up 597 vs 1492; 2-4x at 2-4 rows too); at the
// baseline ISA (16 registers, unmeasured) for one row, and for a few rows
// when the weight is taller than wide (down_proj).
// One parallel region over 64-row blocks of all sources; no allocation.
// False (nothing done) when it does not apply.
bool SmallGemmSources(at::Tensor& out, const at::Tensor& x,
                      const std::vector<at::Tensor>& sources,
                      const at::Tensor& bias, bool accumulate) {
  constexpr int64_t kBlock = 64;
  constexpr size_t kMaxSources = 4;
  const int64_t m = x.size(0), k = x.size(1);
  if (m < 1 || m > kMaxSmallGemmRows || sources.size() > kMaxSources ||
      x.scalar_type() != at::kFloat || x.stride(1) != 1 || out.stride(1) != 1 ||
      (bias.defined() && !bias.is_contiguous())) {
    return false;
  }
  int64_t first_block[kMaxSources + 1] = {0};
  int64_t offset[kMaxSources + 1] = {0};
  for (size_t i = 0; i < sources.size(); ++i) {
    const at::Tensor& w = sources[i];
    if (w.scalar_type() != at::kFloat || !w.is_contiguous() || w.dim() != 2 ||
        w.size(1) != k) {
      return false;
    }
    first_block[i + 1] = first_block[i] + (w.size(0) + kBlock - 1) / kBlock;
    offset[i + 1] = offset[i] + w.size(0);
  }
  const KernelTable& kt = Kernels();
  if (m > 1 && k <= offset[sources.size()] && kt.isa == CpuIsa::kBaseline) {
    return false;
  }
  const int64_t blocks = first_block[sources.size()];
  core::ParallelFor(0, blocks, 1, [&](int64_t b, int64_t e) {
    for (size_t i = 0; i < sources.size(); ++i) {
      const int64_t lo = std::max(b, first_block[i]);
      const int64_t hi = std::min(e, first_block[i + 1]);
      if (lo >= hi) continue;
      const int64_t n = sources[i].size(0);
      SmallGemmArgs a;
      a.m = m;
      a.k = k;
      a.x = x.data_ptr<float>();
      a.ldx = x.stride(0);
      a.w = sources[i].data_ptr<float>();
      a.ldw = k;
      a.bias = bias.defined() ? bias.data_ptr<float>() + offset[i] : nullptr;
      a.out = out.data_ptr<float>() + offset[i];
      a.ldo = out.stride(0);
      a.accumulate = accumulate;
      kt.small_gemm_nt(a, (lo - first_block[i]) * kBlock,
                       std::min(n, (hi - first_block[i]) * kBlock));
    }
  });
  return true;
}

}  // namespace

FusedForward::FusedForward(models::CausalLM* model, int64_t max_positions)
    : model_(model), max_positions_(max_positions) {
  CHECK(model_ != nullptr);
  if (model_->config().IsMla()) return;  // never applies (see Applies())
  for (const auto& layer : model_->model->layers) {
    const models::Attention& a = *layer->self_attn;
    for (const auto* lin :
         {a.q_proj.get(), a.k_proj.get(), a.v_proj.get(), a.o_proj.get()}) {
      linears_.push_back(lin);
    }
    if (layer->mlp) {
      const models::MLP& m = *layer->mlp;
      for (const auto* lin :
           {m.gate_proj.get(), m.up_proj.get(), m.down_proj.get()}) {
        linears_.push_back(lin);
      }
    }
  }
}

bool FusedForward::Applies() const {
  if (model_->config().IsMla()) return false;  // the model's own MLA forward
  const at::Tensor& w = model_->model->embed_tokens->weight;
  if (w.scalar_type() != at::kFloat || !w.device().is_cpu()) return false;
  for (const models::Linear* lin : linears_) {
    if (lin->lora.lora_A && lin->lora.enabled && !lin->lora.merged) {
      return false;
    }
  }
  return true;
}

FusedForward::Packed FusedForward::MakePacked(std::vector<at::Tensor> sources,
                                              bool bias) {
  Packed p;
  p.sources = std::move(sources);
  p.bias = bias;
  p.versions.assign(p.sources.size(), -1);
  p.data.assign(p.sources.size(), nullptr);
  return p;
}

void FusedForward::Sync(Packed& p) {
  bool changed = !p.value.defined();
  for (size_t i = 0; i < p.sources.size() && !changed; ++i) {
    changed = p.sources[i]._version() != p.versions[i] ||
              p.sources[i].data_ptr() != p.data[i];
  }
  if (!changed) return;
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> parts;
  int64_t rows = 0;
  for (size_t i = 0; i < p.sources.size(); ++i) {
    parts.push_back(p.sources[i].detach().to(at::kFloat).contiguous());
    rows += parts.back().size(0);
    p.versions[i] = p.sources[i]._version();
    p.data[i] = p.sources[i].data_ptr();
  }
  // A fresh tensor each time: the copy may be made under InferenceMode.
  if (p.bias) {
    p.value = at::cat(parts, 0);
    return;
  }
  // Each [out_i, in] source packed straight into its columns of the
  // panel-packed [in, sum out_i] copy (one pass over the weights, in
  // parallel over tiles of source rows).
  const int64_t in = parts[0].size(1);
  p.k = in;
  p.n = rows;
  const int64_t floats = PanelGemmFloats(in, rows);
  p.value = rows % kGemmPanel == 0 ? at::empty({floats}, at::kFloat)
                                   : at::zeros({floats}, at::kFloat);
  float* dst = p.value.data_ptr<float>();
  constexpr int64_t kTile = 32;
  int64_t offset = 0;
  for (const at::Tensor& part : parts) {
    CHECK_EQ(part.size(1), in);
    const float* src = part.data_ptr<float>();
    const int64_t n = part.size(0);
    core::ParallelFor(0, (n + kTile - 1) / kTile, 1, [&](int64_t b, int64_t e) {
      PackRowsIntoPanels(src, in, offset, b * kTile, std::min(n, e * kTile),
                         dst);
    });
    offset += n;
  }
}

void FusedForward::SyncAll() {
  if (!built_) {
    const models::ModelConfig& c = model_->config();
    for (const auto& layer : model_->model->layers) {
      const models::Attention& a = *layer->self_attn;
      Layer L;
      L.qkv = MakePacked({a.q_proj->weight, a.k_proj->weight, a.v_proj->weight},
                         false);
      L.has_bias = a.q_proj->bias.defined();
      if (L.has_bias) {
        L.qkv_bias =
            MakePacked({a.q_proj->bias, a.k_proj->bias, a.v_proj->bias}, true);
      }
      L.o = MakePacked({a.o_proj->weight}, false);
      L.moe = layer->moe != nullptr;
      if (!L.moe) {
        const models::MLP& m = *layer->mlp;
        L.gate_up = MakePacked({m.gate_proj->weight, m.up_proj->weight}, false);
        L.down = MakePacked({m.down_proj->weight}, false);
      }
      layers_.push_back(std::move(L));
    }
    torch::NoGradGuard no_grad;
    auto [cos, sin] =
        models::RopeCosSin(models::RopeInvFreq(c),
                           at::arange(max_positions_, at::kLong), at::kFloat);
    cos_ = cos.contiguous();
    sin_ = sin.contiguous();
    built_ = true;
  }
  SyncHead();
  for (Layer& L : layers_) {
    Sync(L.qkv);
    if (L.has_bias) Sync(L.qkv_bias);
    Sync(L.o);
    if (!L.moe) {
      Sync(L.gate_up);
      Sync(L.down);
    }
  }
}

bool FusedForward::SyncHead() {
  const at::Tensor w = PlainHeadWeight();
  if (!w.defined()) return false;
  if (lm_head_.sources.empty() ||
      lm_head_.sources[0].data_ptr() != w.data_ptr()) {
    lm_head_ = MakePacked({w}, false);
  }
  Sync(lm_head_);
  return true;
}

void FusedForward::Prepack() {
  if (Applies()) SyncAll();
}

int64_t FusedForward::WeightBytes() const {
  int64_t n = 0;
  for (const Layer& L : layers_) {
    for (const Packed* p : {&L.qkv, &L.qkv_bias, &L.o, &L.gate_up, &L.down}) {
      if (p->value.defined()) n += p->value.numel() * 4;
    }
  }
  if (lm_head_.value.defined()) n += lm_head_.value.numel() * 4;
  return n;
}

void FusedForward::Gemm(at::Tensor& out, const at::Tensor& x, const Packed& p,
                        const at::Tensor& bias, bool accumulate) {
  const auto t0 = Clock::now();
  if (!SmallGemmSources(out, x, p.sources, bias, accumulate)) {
    PanelGemm(out, x, p.value, p.n, bias, accumulate, xpack_);
  }
  stats_.gemm_s += Since(t0);
  stats_.gemm_flops += 2.0 * x.size(0) * x.size(1) * p.n;
}

void FusedForward::Attention(int64_t l, const at::Tensor& x, const int64_t* pos,
                             models::AttentionBackend& attention,
                             at::Tensor& h) {
  const models::Attention& a = *model_->model->layers[l]->self_attn;
  Layer& L = layers_[l];
  const int64_t t = x.size(0), d = a.head_dim;
  const int64_t nq = a.num_heads, nkv = a.num_kv_heads;
  const int64_t width = (nq + 2 * nkv) * d;
  at::Tensor qkv = Rows(qkv_, t, width);
  Gemm(qkv, x, L.qkv, L.has_bias ? L.qkv_bias.value : at::Tensor(), false);

  // q/k-norm (Qwen3) and RoPE in place, per token and head.
  const auto t0 = Clock::now();
  float* base = qkv.data_ptr<float>();
  const float* cos = cos_.data_ptr<float>();
  const float* sin = sin_.data_ptr<float>();
  const float* qn = a.q_norm ? a.q_norm->weight.data_ptr<float>() : nullptr;
  const float* kn = a.k_norm ? a.k_norm->weight.data_ptr<float>() : nullptr;
  const float qe = a.q_norm ? static_cast<float>(a.q_norm->eps) : 0.f;
  const float ke = a.k_norm ? static_cast<float>(a.k_norm->eps) : 0.f;
  const KernelTable& kernels = Kernels();
  core::ParallelFor(
      0, t, std::max<int64_t>(1, 65536 / width), [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          CHECK(pos[r] >= 0 && pos[r] < max_positions_)
              << "position " << pos[r] << " outside the RoPE table";
          const float* c = cos + pos[r] * d;
          const float* s = sin + pos[r] * d;
          float* row = base + r * width;
          for (int64_t hd = 0; hd < nq + nkv; ++hd) {
            float* x = row + hd * d;
            const float* nw = hd < nq ? qn : kn;
            if (nw != nullptr) {
              kernels.rms_norm_row(x, nw, hd < nq ? qe : ke, d, x);
            }
            kernels.rope_head(x, c, s, d);
          }
        }
      });
  stats_.other_s += Since(t0);

  at::Tensor q = qkv.narrow(1, 0, nq * d).view({t, nq, d});
  at::Tensor k = qkv.narrow(1, nq * d, nkv * d).view({t, nkv, d});
  at::Tensor v = qkv.narrow(1, (nq + nkv) * d, nkv * d).view({t, nkv, d});
  at::Tensor o = attention.Attend(l, q, k, v).reshape({t, nq * d});
  RowParallelGemm(h, o, L.o);
}

void FusedForward::RowParallelGemm(at::Tensor& h, const at::Tensor& x,
                                   const Packed& w) {
  if (tp_ == nullptr) {
    Gemm(h, x, w, at::Tensor(), /*accumulate=*/true);
    return;
  }
  at::Tensor part = Rows(partial_, h.size(0), h.size(1));
  Gemm(part, x, w, at::Tensor(), /*accumulate=*/false);
  AllReduceSum(part, *tp_);
  h.add_(part);
}

at::Tensor FusedForward::Forward(const at::Tensor& input_ids,
                                 const at::Tensor& position_ids,
                                 models::AttentionBackend& attention) {
  // (Under tensor parallelism the model's row-parallel layers all-reduce
  // through their output hooks; see tensor_parallel.h.)
  if (!Applies()) return model_->Forward(input_ids, position_ids, attention);
  CHECK_EQ(input_ids.dim(), 1);
  CHECK_EQ(position_ids.numel(), input_ids.numel());
  SyncAll();
  const models::DecoderModel& m = *model_->model;
  const int64_t t = input_ids.size(0);
  const int64_t hidden = model_->config().hidden_size;
  const at::Tensor pos_t = position_ids.to(at::kLong).contiguous();
  const int64_t* pos = pos_t.data_ptr<int64_t>();

  auto t0 = Clock::now();
  at::Tensor h =
      at::embedding(m.embed_tokens->weight.detach(), input_ids).contiguous();
  stats_.other_s += Since(t0);
  at::Tensor normed = Rows(normed_, t, hidden);
  for (size_t l = 0; l < m.layers.size(); ++l) {
    const models::DecoderLayer& layer = *m.layers[l];
    t0 = Clock::now();
    RmsNormRows(h, layer.input_layernorm->weight, layer.input_layernorm->eps,
                normed);
    stats_.other_s += Since(t0);
    Attention(static_cast<int64_t>(l), normed, pos, attention, h);
    t0 = Clock::now();
    RmsNormRows(h, layer.post_attention_layernorm->weight,
                layer.post_attention_layernorm->eps, normed);
    stats_.other_s += Since(t0);
    const Layer& L = layers_[l];
    if (L.moe) {
      t0 = Clock::now();
      h.add_(layer.moe->Forward(normed).first);
      stats_.other_s += Since(t0);
      continue;
    }
    const int64_t inter = L.down.k;
    at::Tensor gate_up = Rows(gate_up_, t, 2 * inter);
    Gemm(gate_up, normed, L.gate_up, at::Tensor(), false);
    t0 = Clock::now();
    at::Tensor act = Rows(act_, t, inter);
    at::silu_out(act, gate_up.narrow(1, 0, inter));
    act.mul_(gate_up.narrow(1, inter, inter));
    stats_.other_s += Since(t0);
    RowParallelGemm(h, act, L.down);
  }
  t0 = Clock::now();
  at::Tensor out = at::empty({t, hidden}, at::kFloat);
  RmsNormRows(h, m.norm->weight, m.norm->eps, out);
  stats_.other_s += Since(t0);
  return out;
}

at::Tensor FusedForward::PlainHeadWeight() const {
  const models::Linear* head = model_->lm_head.get();
  const bool plain =
      Applies() &&
      (head == nullptr ||
       (!head->bias.defined() &&
        !(head->lora.lora_A && head->lora.enabled && !head->lora.merged)));
  if (!plain) return at::Tensor();
  at::Tensor w =
      (head != nullptr ? head->weight : model_->model->embed_tokens->weight)
          .detach();
  if (w.scalar_type() != at::kFloat || !w.is_contiguous()) return at::Tensor();
  return w;
}

at::Tensor FusedForward::Logits(const at::Tensor& hidden) {
  const auto t0 = Clock::now();
  at::Tensor logits;
  const models::Linear* head = model_->lm_head.get();
  if (tp_ != nullptr) {
    // Vocabulary-parallel head: this rank's rows of the (replicated) head
    // weight, the shards (fp32) all-gathered.
    CHECK(head == nullptr || !head->bias.defined())
        << "tensor-parallel rollout: the LM head has a bias";
    const at::Tensor w =
        (head != nullptr ? head->weight : model_->model->embed_tokens->weight)
            .detach();
    const auto [b, e] = ShardRange(w.size(0), tp_->rank(), tp_->size());
    const at::Tensor ws = w.narrow(0, b, e - b);
    const at::Tensor x = hidden.contiguous();
    at::Tensor local;
    if (w.scalar_type() != at::kFloat || x.scalar_type() != at::kFloat) {
      local = at::linear(x.to(w.scalar_type()), ws).to(at::kFloat);
    } else {
      local = at::empty({x.size(0), e - b}, at::kFloat);
      if (!ws.is_contiguous() ||
          !SmallGemm(local, x, ws, at::Tensor(), false)) {
        at::mm_out(local, x, ws.t());
      }
    }
    stats_.gemm_s += Since(t0);
    stats_.gemm_flops += 2.0 * x.size(0) * x.size(1) * (e - b);
    return GatherVocabShards(local, *tp_);
  }
  const at::Tensor w = PlainHeadWeight();
  const at::Tensor x = hidden.contiguous();
  if (w.defined() && x.scalar_type() == at::kFloat) {
    logits = at::empty({x.size(0), w.size(0)}, at::kFloat);
    if (!SmallGemm(logits, x, w, at::Tensor(), false)) {
      CHECK(SyncHead());
      PanelGemm(logits, x, lm_head_.value, lm_head_.n, at::Tensor(), false,
                xpack_);
    }
  } else {
    logits = model_->Logits(hidden);
  }
  if (Applies()) {
    stats_.gemm_s += Since(t0);
    stats_.gemm_flops += 2.0 * hidden.size(0) * hidden.size(1) *
                         static_cast<double>(logits.size(1));
  }
  return logits;
}

std::function<void(int64_t, int64_t, float*)> FusedForward::LogitChunks(
    const at::Tensor& hidden, int64_t* vocab) {
  const at::Tensor w = PlainHeadWeight();
  if (tp_ != nullptr || !w.defined() || hidden.scalar_type() != at::kFloat) {
    return nullptr;
  }
  *vocab = w.size(0);
  const at::Tensor x = hidden.contiguous();
  if (x.size(0) > kMaxSmallGemmRows) CHECK(SyncHead());
  return [this, w, x](int64_t v0, int64_t v1, float* out) {
    const auto t0 = Clock::now();
    at::Tensor o = at::from_blob(out, {x.size(0), v1 - v0}, at::kFloat);
    // The same kernel per element as Logits: weight-streaming at <= 8
    // rows, else the panel GEMM over the chunk's panels (a value does not
    // depend on the panel range).
    if (!SmallGemm(o, x, w.narrow(0, v0, v1 - v0), at::Tensor(), false)) {
      CHECK_EQ(v0 % kGemmPanel, 0);
      const at::Tensor panels = lm_head_.value.narrow(
          0, v0 * lm_head_.k, PanelGemmFloats(lm_head_.k, v1 - v0));
      PanelGemm(o, x, panels, v1 - v0, at::Tensor(), false, xpack_);
    }
    stats_.gemm_s += Since(t0);
    stats_.gemm_flops += 2.0 * x.size(0) * x.size(1) * (v1 - v0);
  };
}

}  // namespace verl::infer
