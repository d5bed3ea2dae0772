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
#include "verl/infer/paged_attention.h"
#include "verl/infer/tensor_parallel.h"
#include "verl/models/fused_ops.h"
#include "verl/models/layers.h"

namespace verl::infer {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Rows of x normalised into out (contiguous), in parallel over rows.
void RmsNormRows(RowsView x, const at::Tensor& weight, double eps,
                 RowsView out) {
  const int64_t n = x.cols;
  const float* wp = weight.data_ptr<float>();
  const float e = static_cast<float>(eps);
  const KernelTable& k = Kernels();
  // Parallel only for long batches: a parallel region costs more than a
  // few rows of work (and far more on an oversubscribed machine).
  core::ParallelFor(0, x.rows, std::max<int64_t>(1, 65536 / n),
                    [&](int64_t b, int64_t end) {
                      for (int64_t r = b; r < end; ++r) {
                        k.rms_norm_row(x.row(r), wp, e, n, out.row(r));
                      }
                    });
}

// `buf` grown to hold at least rows x cols floats (a flat buffer reused for
// any shape), viewed as [rows, cols] contiguous.
RowsView Rows(at::Tensor& buf, int64_t rows, int64_t cols) {
  if (!buf.defined() || buf.numel() < rows * cols) {
    buf = at::empty({std::max<int64_t>(rows, 64) * cols}, at::kFloat);
  }
  return {buf.data_ptr<float>(), rows, cols, cols};
}

// A [rows, cols] fp32 tensor's rows (unit column stride), or CHECK-fails.
RowsView ViewOf(const at::Tensor& t) {
  CHECK(t.scalar_type() == at::kFloat && t.dim() == 2 && t.stride(1) == 1);
  return {t.data_ptr<float>(), t.size(0), t.size(1), t.stride(0)};
}

// The view as a tensor sharing its memory (for the paths that take
// tensors: MoE blocks, tensor-parallel collectives, other backends).
at::Tensor TensorOf(RowsView v) {
  return at::from_blob(v.data, {v.rows, v.cols}, {v.ld, 1}, at::kFloat);
}

// out = x w^T (+ bias), or out += x w^T, through the small-batch kernel
// (kernels.h) when x has <= 8 rows (decode of few sequences), w [n, k]
// fp32 with row stride ldw (the LM head); in parallel over column blocks.
// False (nothing done) when it does not apply. BLIS packs the weight matrix
// on every call, which at these sizes reads the weights ~3 times; the
// kernel reads them once.
bool SmallGemm(RowsView out, RowsView x, const float* w, int64_t ldw, int64_t n,
               const float* bias, bool accumulate) {
  const int64_t m = x.rows;
  if (m < 1 || m > kMaxSmallGemmRows) return false;
  SmallGemmArgs a;
  a.m = m;
  a.k = x.cols;
  a.x = x.data;
  a.ldx = x.ld;
  a.w = w;
  a.ldw = ldw;
  a.bias = bias;
  a.out = out.data;
  a.ldo = out.ld;
  a.accumulate = accumulate;
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
// parallel over x's row blocks and then over panels.
void PanelGemm(RowsView out, RowsView x, const float* panels, int64_t n,
               const float* bias, bool accumulate, at::Tensor& xpack) {
  const int64_t m = x.rows, kdim = x.cols;
  if (!xpack.defined() || xpack.numel() < m * kdim) {
    xpack = at::empty({std::max<int64_t>(m * kdim, 64 * kdim)}, at::kFloat);
  }
  PanelGemmArgs a;
  a.m = m;
  a.k = kdim;
  a.n = n;
  a.x = x.data;
  a.ldx = x.ld;
  a.xpack = xpack.data_ptr<float>();
  a.w = panels;
  a.bias = bias;
  a.out = out.data;
  a.ldo = out.ld;
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
bool SmallGemmSources(RowsView out, RowsView x,
                      const std::vector<at::Tensor>& sources, const float* bias,
                      bool accumulate) {
  constexpr int64_t kBlock = 64;
  constexpr size_t kMaxSources = 4;
  const int64_t m = x.rows, k = x.cols;
  if (m < 1 || m > kMaxSmallGemmRows || sources.size() > kMaxSources) {
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
      a.x = x.data;
      a.ldx = x.ld;
      a.w = sources[i].data_ptr<float>();
      a.ldw = k;
      a.bias = bias != nullptr ? bias + offset[i] : nullptr;
      a.out = out.data + offset[i];
      a.ldo = out.ld;
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
  const at::Tensor* w = PlainHeadWeight();
  if (w == nullptr) return false;
  if (lm_head_.sources.empty() ||
      lm_head_.sources[0].data_ptr() != w->data_ptr()) {
    lm_head_ = MakePacked({w->detach()}, false);
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

void FusedForward::Gemm(RowsView out, RowsView x, const Packed& p,
                        const float* bias, bool accumulate) {
  const auto t0 = Clock::now();
  if (!SmallGemmSources(out, x, p.sources, bias, accumulate)) {
    PanelGemm(out, x, p.value.data_ptr<float>(), p.n, bias, accumulate, xpack_);
  }
  stats_.gemm_s += Since(t0);
  stats_.gemm_flops += 2.0 * x.rows * x.cols * p.n;
}

void FusedForward::Attention(int64_t l, RowsView x, const int64_t* pos,
                             models::AttentionBackend& attention, RowsView h) {
  const models::Attention& a = *model_->model->layers[l]->self_attn;
  Layer& L = layers_[l];
  const int64_t t = x.rows, d = a.head_dim;
  const int64_t nq = a.num_heads, nkv = a.num_kv_heads;
  const int64_t width = (nq + 2 * nkv) * d;
  const RowsView qkv = Rows(qkv_, t, width);
  Gemm(qkv, x, L.qkv, L.has_bias ? L.qkv_bias.value.data_ptr<float>() : nullptr,
       false);

  // q/k-norm (Qwen3) and RoPE in place, per token and head.
  const auto t0 = Clock::now();
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
          float* row = qkv.row(r);
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

  const RowsView o = Rows(attn_out_, t, nq * d);
  const float* q = qkv.data;
  const float* k = q + nq * d;
  const float* v = k + nkv * d;
  auto* paged = dynamic_cast<PagedAttention*>(&attention);
  if (paged == nullptr || !paged->AttendRows(l, q, k, v, width, nq, o.data)) {
    // Another backend (or dtype): through tensors.
    auto heads = [&](const float* p, int64_t n) {
      return at::from_blob(const_cast<float*>(p), {t, n, d}, {width, d, 1},
                           at::kFloat);
    };
    const at::Tensor out =
        attention.Attend(l, heads(q, nq), heads(k, nkv), heads(v, nkv))
            .reshape({t, nq * d});
    TensorOf(o).copy_(out);
  }
  RowParallelGemm(h, o, L.o);
}

void FusedForward::RowParallelGemm(RowsView h, RowsView x, const Packed& w) {
  if (tp_ == nullptr) {
    Gemm(h, x, w, nullptr, /*accumulate=*/true);
    return;
  }
  const RowsView part = Rows(partial_, h.rows, h.cols);
  Gemm(part, x, w, nullptr, /*accumulate=*/false);
  at::Tensor part_t = TensorOf(part);
  AllReduceSum(part_t, *tp_);
  TensorOf(h).add_(part_t);
}

at::Tensor FusedForward::Forward(const at::Tensor& input_ids,
                                 const at::Tensor& position_ids,
                                 models::AttentionBackend& attention) {
  // (Under tensor parallelism the model's row-parallel layers all-reduce
  // through their output hooks; see tensor_parallel.h.)
  if (!Applies()) return model_->Forward(input_ids, position_ids, attention);
  CHECK_EQ(input_ids.dim(), 1);
  CHECK_EQ(position_ids.numel(), input_ids.numel());
  const at::Tensor ids = input_ids.to(at::kLong).contiguous();
  const at::Tensor pos = position_ids.to(at::kLong).contiguous();
  const RowsView out = ForwardRows(
      ids.data_ptr<int64_t>(), pos.data_ptr<int64_t>(), ids.numel(), attention);
  return TensorOf(out).clone();
}

RowsView FusedForward::ForwardRows(const int64_t* ids, const int64_t* pos,
                                   int64_t t,
                                   models::AttentionBackend& attention) {
  CHECK(Applies()) << "FusedForward::ForwardRows on a model it does not "
                      "apply to";
  SyncAll();
  const models::DecoderModel& m = *model_->model;
  const int64_t hidden = model_->config().hidden_size;

  // The embedding rows (ids are validated by the engine; CHECKed here).
  auto t0 = Clock::now();
  const RowsView h = Rows(residual_, t, hidden);
  const at::Tensor& table = m.embed_tokens->weight;
  CHECK(table.is_contiguous());
  const int64_t vocab = table.size(0);
  const float* emb = table.data_ptr<float>();
  for (int64_t r = 0; r < t; ++r) {
    CHECK(ids[r] >= 0 && ids[r] < vocab) << "token id " << ids[r];
    std::memcpy(h.row(r), emb + ids[r] * hidden, hidden * sizeof(float));
  }
  stats_.other_s += Since(t0);
  const RowsView normed = Rows(normed_, t, hidden);
  const models::FusedKernelTable& fk = models::FusedKernels();
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
      TensorOf(h).add_(layer.moe->Forward(TensorOf(normed)).first);
      stats_.other_s += Since(t0);
      continue;
    }
    const int64_t inter = L.down.k;
    const RowsView gate_up = Rows(gate_up_, t, 2 * inter);
    Gemm(gate_up, normed, L.gate_up, nullptr, false);
    t0 = Clock::now();
    const RowsView act = Rows(act_, t, inter);
    core::ParallelFor(
        0, t, std::max<int64_t>(1, 65536 / inter), [&](int64_t b, int64_t e) {
          fk.swiglu_fwd(gate_up.data, gate_up.ld, gate_up.data + inter,
                        gate_up.ld, inter, b, e, act.data, act.ld);
        });
    stats_.other_s += Since(t0);
    RowParallelGemm(h, act, L.down);
  }
  t0 = Clock::now();
  const RowsView out = Rows(final_, t, hidden);
  RmsNormRows(h, m.norm->weight, m.norm->eps, out);
  stats_.other_s += Since(t0);
  return out;
}

const at::Tensor* FusedForward::PlainHeadWeight() const {
  const models::Linear* head = model_->lm_head.get();
  const bool plain =
      Applies() &&
      (head == nullptr ||
       (!head->bias.defined() &&
        !(head->lora.lora_A && head->lora.enabled && !head->lora.merged)));
  if (!plain) return nullptr;
  const at::Tensor& w =
      head != nullptr ? head->weight : model_->model->embed_tokens->weight;
  if (w.scalar_type() != at::kFloat || !w.is_contiguous()) return nullptr;
  return &w;
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
          !SmallGemm(ViewOf(local), ViewOf(x), ws.data_ptr<float>(),
                     ws.stride(0), e - b, nullptr, false)) {
        at::mm_out(local, x, ws.t());
      }
    }
    stats_.gemm_s += Since(t0);
    stats_.gemm_flops += 2.0 * x.size(0) * x.size(1) * (e - b);
    return GatherVocabShards(local, *tp_);
  }
  const at::Tensor x = hidden.contiguous();
  const int64_t vocab = HeadVocab();
  if (vocab > 0 && x.scalar_type() == at::kFloat) {
    logits = at::empty({x.size(0), vocab}, at::kFloat);
    HeadChunk(ViewOf(x), 0, vocab, logits.data_ptr<float>());
    return logits;  // (timed by HeadChunk)
  }
  logits = model_->Logits(hidden);
  if (Applies()) {
    stats_.gemm_s += Since(t0);
    stats_.gemm_flops += 2.0 * hidden.size(0) * hidden.size(1) *
                         static_cast<double>(logits.size(1));
  }
  return logits;
}

int64_t FusedForward::HeadVocab() {
  const at::Tensor* w = PlainHeadWeight();
  if (tp_ != nullptr || w == nullptr) return 0;
  CHECK(SyncHead());
  return w->size(0);
}

void FusedForward::HeadChunk(RowsView x, int64_t v0, int64_t v1, float* out) {
  const auto t0 = Clock::now();
  // The head HeadVocab() synced: the model's [V, H] weight and its packed
  // copy.
  CHECK(!lm_head_.sources.empty() && tp_ == nullptr)
      << "HeadChunk without a plain head (call HeadVocab first)";
  const at::Tensor& w = lm_head_.sources[0];
  CHECK_EQ(w.size(1), x.cols);
  const int64_t n = v1 - v0;
  const RowsView o{out, x.rows, n, n};
  // The weight-streaming kernel at <= 8 rows, else the panel GEMM over the
  // chunk's panels (a value depends on neither the chunk nor the rows).
  if (!SmallGemm(o, x, w.data_ptr<float>() + v0 * x.cols, x.cols, n, nullptr,
                 false)) {
    CHECK_EQ(v0 % kGemmPanel, 0);
    PanelGemm(o, x, lm_head_.value.data_ptr<float>() + v0 * lm_head_.k, n,
              nullptr, false, xpack_);
  }
  stats_.gemm_s += Since(t0);
  stats_.gemm_flops += 2.0 * x.rows * x.cols * n;
}

}  // namespace verl::infer
