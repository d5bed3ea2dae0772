// File: verl/models/fused_ops.cc
#include "verl/models/fused_ops.h"

#include <ATen/Parallel.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>
#include <glog/logging.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "verl/core/parallel_for.h"

namespace verl::models {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rows per parallel task: enough work (~16k floats) to amortise a task.
int64_t Grain(int64_t row_len) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, row_len));
}

const float* F(const at::Tensor& t) { return t.data_ptr<float>(); }
float* Fm(const at::Tensor& t) { return t.data_ptr<float>(); }

class RmsNormFn : public torch::autograd::Function<RmsNormFn> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in,
                            const at::Tensor& w_in, double eps) {
    const int64_t n = x_in.size(-1);
    const at::Tensor x = x_in.contiguous(), w = w_in.contiguous();
    const int64_t rows = n == 0 ? 0 : x.numel() / n;
    at::Tensor y = at::empty_like(x);
    at::Tensor rstd = at::empty({rows}, x.options());
    const FusedKernelTable& k = FusedKernels();
    core::ParallelFor(0, rows, Grain(n), [&](int64_t b, int64_t e) {
      k.rms_norm_fwd(F(x), F(w), static_cast<float>(eps), n, b, e, Fm(y),
                     Fm(rstd));
    });
    ctx->save_for_backward({x, w, rstd});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    variable_list saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1], &rstd = saved[2];
    const at::Tensor dy = grads[0].contiguous();
    const int64_t n = x.size(-1), rows = rstd.numel();
    at::Tensor dx = at::empty_like(x);
    // Per-task partial weight gradients, summed after.
    const int64_t parts =
        std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), rows));
    at::Tensor dw_parts = at::zeros({parts, n}, x.options());
    const FusedKernelTable& k = FusedKernels();
    core::ParallelFor(0, parts, 1, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        k.rms_norm_bwd(F(x), F(w), F(rstd), F(dy), n, rows * p / parts,
                       rows * (p + 1) / parts, Fm(dx), Fm(dw_parts) + p * n);
      }
    });
    return {dx, dw_parts.sum(0), at::Tensor()};
  }
};

class SwiGluFn : public torch::autograd::Function<SwiGluFn> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& g_in,
                            const at::Tensor& u_in) {
    const at::Tensor g = g_in.contiguous(), u = u_in.contiguous();
    const int64_t n = g.size(-1);
    const int64_t rows = n == 0 ? 0 : g.numel() / n;
    at::Tensor y = at::empty_like(g);
    const FusedKernelTable& k = FusedKernels();
    core::ParallelFor(0, rows, Grain(n), [&](int64_t b, int64_t e) {
      k.swiglu_fwd(F(g), n, F(u), n, n, b, e, Fm(y), n);
    });
    ctx->save_for_backward({g, u});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    variable_list saved = ctx->get_saved_variables();
    const at::Tensor &g = saved[0], &u = saved[1];
    const at::Tensor dy = grads[0].contiguous();
    const int64_t n = g.size(-1);
    const int64_t rows = n == 0 ? 0 : g.numel() / n;
    at::Tensor dg = at::empty_like(g), du = at::empty_like(u);
    const FusedKernelTable& k = FusedKernels();
    core::ParallelFor(0, rows, Grain(n), [&](int64_t b, int64_t e) {
      k.swiglu_bwd(F(g), n, F(u), n, F(dy), n, n, b, e, Fm(dg), n, Fm(du), n);
    });
    return {dg, du};
  }
};

// x [T, heads, d] with unit last stride and head stride d (else copied).
at::Tensor RopeRows(const at::Tensor& x_in, const at::Tensor& cos,
                    const at::Tensor& sin, bool backward) {
  const at::Tensor x = (x_in.stride(2) == 1 && x_in.stride(1) == x_in.size(2))
                           ? x_in
                           : x_in.contiguous();
  const int64_t t = x.size(0), heads = x.size(1), d = x.size(2);
  at::Tensor out = at::empty({t, heads, d}, x.options());
  const FusedKernelTable& k = FusedKernels();
  core::ParallelFor(0, t, Grain(heads * d), [&](int64_t b, int64_t e) {
    k.rope(F(x), x.stride(0), heads, d, F(cos), F(sin), backward, b, e,
           Fm(out));
  });
  return out;
}

class RopeFn : public torch::autograd::Function<RopeFn> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& cos_in,
                            const at::Tensor& sin_in) {
    const at::Tensor cos = cos_in.contiguous(), sin = sin_in.contiguous();
    ctx->save_for_backward({cos, sin});
    return RopeRows(x, cos, sin, /*backward=*/false);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    variable_list saved = ctx->get_saved_variables();
    return {RopeRows(grads[0], saved[0], saved[1], /*backward=*/true),
            at::Tensor(), at::Tensor()};
  }
};

class LinearLogProbFn : public torch::autograd::Function<LinearLogProbFn> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& hidden,
                               const at::Tensor& weight,
                               const at::Tensor& labels, double temperature,
                               bool with_entropy) {
    const int64_t n = hidden.size(0), v = weight.size(0);
    at::Tensor logits = at::mm(hidden, weight.t());  // [N, V]
    at::Tensor logp = at::empty({n}, hidden.options());
    at::Tensor lse = at::empty({n}, hidden.options());
    at::Tensor ent =
        with_entropy ? at::empty({n}, hidden.options()) : at::Tensor();
    const float inv_t = static_cast<float>(1.0 / temperature);
    const FusedKernelTable& k = FusedKernels();
    const int64_t* lab = labels.data_ptr<int64_t>();
    core::ParallelFor(0, n, 1, [&](int64_t b, int64_t e) {
      k.log_prob_fwd(F(logits), v, lab, inv_t, b, e, Fm(logp), Fm(lse),
                     with_entropy ? Fm(ent) : nullptr);
    });
    ctx->set_materialize_grads(false);
    ctx->save_for_backward(
        {hidden, weight, labels, logits, lse, with_entropy ? ent : lse});
    ctx->saved_data["inv_t"] = static_cast<double>(inv_t);
    ctx->saved_data["with_entropy"] = with_entropy;
    return with_entropy ? variable_list{logp, ent} : variable_list{logp};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    variable_list saved = ctx->get_saved_variables();
    const at::Tensor &hidden = saved[0], &weight = saved[1];
    const at::Tensor &labels = saved[2], &logits = saved[3];
    const at::Tensor &lse = saved[4], &ent = saved[5];
    const bool with_entropy = ctx->saved_data["with_entropy"].toBool();
    const at::Tensor g_logp =
        grads[0].defined() ? grads[0].contiguous() : at::Tensor();
    const at::Tensor g_ent =
        with_entropy && grads.size() > 1 && grads[1].defined()
            ? grads[1].contiguous()
            : at::Tensor();
    if (!g_logp.defined() && !g_ent.defined()) {
      return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(),
              at::Tensor()};
    }
    const int64_t n = logits.size(0), v = logits.size(1);
    const float inv_t = static_cast<float>(ctx->saved_data["inv_t"].toDouble());
    const FusedKernelTable& k = FusedKernels();
    const int64_t* lab = labels.data_ptr<int64_t>();
    // The logits' gradient overwrites the saved logits (they are not needed
    // after this pass); the version bump makes a second backward through
    // this node (retain_graph) fail loudly instead of reading gradients.
    core::ParallelFor(0, n, 1, [&](int64_t b, int64_t e) {
      k.log_prob_bwd(F(logits), v, lab, inv_t, F(lse),
                     with_entropy ? F(ent) : nullptr,
                     g_logp.defined() ? F(g_logp) : nullptr,
                     g_ent.defined() ? F(g_ent) : nullptr, b, e, Fm(logits));
    });
    torch::autograd::impl::bump_version(logits);
    const at::Tensor& dz = logits;
    at::Tensor d_hidden, d_weight;
    if (ctx->needs_input_grad(0)) d_hidden = at::mm(dz, weight);
    if (ctx->needs_input_grad(1)) d_weight = at::mm(dz.t(), hidden);
    return {d_hidden, d_weight, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// ---- Fused varlen attention ----

// Runs run(task, part) for tasks [0, n) on `parts` workers that take the
// next task as they finish one (tasks ordered longest first balance; a
// worker slowed by another process on the machine takes fewer).
template <typename F>
void RunTasks(int64_t n, int64_t parts, const F& run) {
  std::atomic<int64_t> next{0};
  core::ParallelFor(0, parts, 1, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      for (int64_t t = next.fetch_add(1); t < n; t = next.fetch_add(1)) {
        run(t, p);
      }
    }
  });
}

int64_t Workers(int64_t tasks) {
  return std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), tasks));
}

// [n_kv, d, T + kAttnBlock]: x transposed per head, zero tail.
at::Tensor Transposed(const at::Tensor& x) {
  const int64_t t = x.size(0);
  at::Tensor out =
      at::zeros({x.size(1), x.size(2), t + kAttnBlock}, x.options());
  out.narrow(2, 0, t).copy_(x.permute({1, 2, 0}));
  return out;
}

// x [T, heads, d] with the last dim zero-padded to dp.
at::Tensor PadHead(const at::Tensor& x, int64_t dp) {
  return dp == x.size(2) ? x : at::constant_pad_nd(x, {0, dp - x.size(2)});
}

struct AttnTask {
  int64_t start, len, head, b0, b1, cost;
};

void SortByCost(std::vector<AttnTask>* tasks) {
  std::stable_sort(
      tasks->begin(), tasks->end(),
      [](const AttnTask& a, const AttnTask& b) { return a.cost > b.cost; });
}

class VarlenAttentionFn : public torch::autograd::Function<VarlenAttentionFn> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q_in,
                            const at::Tensor& k_in, const at::Tensor& v_in,
                            const std::vector<int64_t>& cu, int64_t window,
                            int64_t isa) {
    const at::Tensor q = q_in.contiguous(), k = k_in.contiguous(),
                     v = v_in.contiguous();
    const int64_t t = q.size(0), n_heads = q.size(1), d = q.size(2);
    const int64_t dp = (d + 15) / 16 * 16;
    const at::Tensor kt = Transposed(k), vp = PadHead(v, dp);
    AttnArgs a{};
    a.q = F(q);
    a.kt = F(kt);
    a.ldt = kt.size(2);
    a.vp = F(vp);
    a.n_heads = n_heads;
    a.n_kv = k.size(1);
    a.d = d;
    a.dp = dp;
    a.window = window;
    a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
    // One task per (sequence, head, query block), cost ~ keys seen.
    std::vector<AttnTask> tasks;
    for (size_t s = 0; s + 1 < cu.size(); ++s) {
      const int64_t start = cu[s], len = cu[s + 1] - cu[s];
      for (int64_t q0 = 0; q0 < len; q0 += kAttnBlock) {
        const int64_t q1 = std::min(len, q0 + kAttnBlock);
        const int64_t keys = window > 0 ? std::min(q1, window + q1 - q0) : q1;
        for (int64_t h = 0; h < n_heads; ++h) {
          tasks.push_back({start, len, h, q0, q1, keys * (q1 - q0)});
        }
      }
    }
    SortByCost(&tasks);
    at::Tensor out = at::empty({t, n_heads, d}, q.options());
    at::Tensor lse = at::empty({t, n_heads}, q.options());
    const int64_t parts = Workers(static_cast<int64_t>(tasks.size()));
    const int64_t ws_len = AttnWorkspaceFloats(dp);
    at::Tensor ws = at::empty({parts, ws_len}, q.options());
    const FusedKernelTable& kern =
        *FusedKernelsFor(static_cast<core::CpuIsa>(isa));
    RunTasks(static_cast<int64_t>(tasks.size()), parts,
             [&](int64_t i, int64_t p) {
               const AttnTask& tk = tasks[i];
               kern.attn_fwd(a, tk.start, tk.len, tk.head, tk.b0, tk.b1,
                             Fm(ws) + p * ws_len, Fm(out), Fm(lse));
             });
    ctx->save_for_backward({q, k, v, out, lse});
    ctx->saved_data["cu"] = cu;
    ctx->saved_data["window"] = window;
    ctx->saved_data["isa"] = isa;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    // The kernels' gradients are not themselves differentiable.
    TORCH_CHECK(!at::GradMode::is_enabled(),
                "FusedVarlenAttention: double backward (create_graph) is not "
                "supported");
    variable_list saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2];
    const at::Tensor &out = saved[3], &lse = saved[4];
    const std::vector<int64_t> cu = ctx->saved_data["cu"].toIntVector();
    const int64_t window = ctx->saved_data["window"].toInt();
    const at::Tensor dout = grads[0].contiguous();
    const int64_t t = q.size(0), n_heads = q.size(1), d = q.size(2);
    const int64_t n_kv = k.size(1);
    const int64_t dp = (d + 15) / 16 * 16;
    const at::Tensor kt = Transposed(k), vt = Transposed(v);
    const at::Tensor qp = PadHead(q, dp), kp = PadHead(k, dp),
                     doutp = PadHead(dout, dp);
    const at::Tensor delta = (dout * out).sum(-1).contiguous();  // [T, H]
    AttnArgs a{};
    a.q = F(q);
    a.dout = F(dout);
    a.kt = F(kt);
    a.vt = F(vt);
    a.ldt = kt.size(2);
    a.qp = F(qp);
    a.doutp = F(doutp);
    a.kp = F(kp);
    a.lse = F(lse);
    a.delta = F(delta);
    a.n_heads = n_heads;
    a.n_kv = n_kv;
    a.d = d;
    a.dp = dp;
    a.window = window;
    a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
    // One task per (sequence, kv head, key block), cost ~ queries seeing it.
    std::vector<AttnTask> tasks;
    for (size_t s = 0; s + 1 < cu.size(); ++s) {
      const int64_t start = cu[s], len = cu[s + 1] - cu[s];
      for (int64_t k0 = 0; k0 < len; k0 += kAttnBlock) {
        const int64_t k1 = std::min(len, k0 + kAttnBlock);
        const int64_t queries =
            window > 0 ? std::min(len, k1 - 1 + window) - k0 : len - k0;
        for (int64_t g = 0; g < n_kv; ++g) {
          tasks.push_back({start, len, g, k0, k1, queries * (k1 - k0)});
        }
      }
    }
    SortByCost(&tasks);
    at::Tensor dk = at::empty({t, n_kv, d}, q.options());
    at::Tensor dv = at::empty({t, n_kv, d}, q.options());
    const int64_t parts = Workers(static_cast<int64_t>(tasks.size()));
    // Each worker adds its key blocks' dq into its own buffer.
    at::Tensor dq_parts = at::zeros({parts, t, n_heads, dp}, q.options());
    const int64_t ws_len = AttnWorkspaceFloats(dp);
    at::Tensor ws = at::empty({parts, ws_len}, q.options());
    const FusedKernelTable& kern = *FusedKernelsFor(
        static_cast<core::CpuIsa>(ctx->saved_data["isa"].toInt()));
    RunTasks(static_cast<int64_t>(tasks.size()), parts,
             [&](int64_t i, int64_t p) {
               const AttnTask& tk = tasks[i];
               kern.attn_bwd(a, tk.start, tk.len, tk.head, tk.b0, tk.b1,
                             Fm(ws) + p * ws_len, Fm(dk), Fm(dv),
                             Fm(dq_parts) + p * t * n_heads * dp);
             });
    at::Tensor dq = parts == 1 ? dq_parts[0] : dq_parts.sum(0);
    if (dp != d) dq = dq.narrow(2, 0, d).contiguous();
    return {dq, dk, dv, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

const FusedKernelTable* FusedKernelsFor(core::CpuIsa isa) {
  if (!core::CpuSupports(isa)) return nullptr;
  switch (isa) {
    case core::CpuIsa::kAvx512:
      return &fused_kernels_avx512::Table();
    case core::CpuIsa::kAvx2:
      return &fused_kernels_avx2::Table();
    case core::CpuIsa::kBaseline:
      return &fused_kernels_baseline::Table();
  }
  return nullptr;
}

const FusedKernelTable& FusedKernels() {
  static const FusedKernelTable* table = FusedKernelsFor(core::ActiveCpuIsa());
  return *table;
}

bool FusedOpsApply(std::initializer_list<at::Tensor> tensors) {
  static const bool enabled = [] {
    const char* env = std::getenv("VERL_FUSED_OPS");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  if (!enabled) return false;
  for (const at::Tensor& t : tensors) {
    if (!t.defined()) continue;
    if (!t.device().is_cpu() || t.scalar_type() != at::kFloat) return false;
  }
  return true;
}

at::Tensor FusedRmsNorm(const at::Tensor& x, const at::Tensor& weight,
                        double eps) {
  CHECK_EQ(weight.numel(), x.size(-1)) << "RMSNorm weight/input size mismatch";
  return RmsNormFn::apply(x, weight, eps);
}

at::Tensor FusedSwiGlu(const at::Tensor& gate, const at::Tensor& up) {
  CHECK(gate.sizes() == up.sizes()) << "SwiGLU gate/up shapes differ";
  return SwiGluFn::apply(gate, up);
}

at::Tensor FusedRope(const at::Tensor& x, const at::Tensor& cos,
                     const at::Tensor& sin) {
  CHECK_EQ(x.dim(), 3) << "RoPE input must be [T, heads, head_dim]";
  CHECK_EQ(x.size(2) % 2, 0) << "head_dim must be even for RoPE";
  CHECK(cos.dim() == 2 && cos.size(0) == x.size(0) && cos.size(1) == x.size(2))
      << "RoPE tables must be [T, head_dim]";
  CHECK(cos.sizes() == sin.sizes());
  return RopeFn::apply(x, cos, sin);
}

FusedLogProbs FusedLinearLogProbs(const at::Tensor& hidden,
                                  const at::Tensor& weight,
                                  const at::Tensor& labels, double temperature,
                                  bool with_entropy) {
  CHECK_GT(temperature, 0.0) << "temperature must be > 0";
  CHECK_EQ(hidden.dim(), 2) << "hidden must be [N, H]";
  CHECK_EQ(weight.dim(), 2) << "LM head weight must be [V, H]";
  CHECK_EQ(hidden.size(1), weight.size(1)) << "hidden/LM head size mismatch";
  const at::Tensor lab = labels.reshape({-1}).to(at::kLong).contiguous();
  CHECK_EQ(lab.numel(), hidden.size(0)) << "one label per hidden row";
  if (lab.numel() > 0) {
    CHECK(lab.min().item<int64_t>() >= 0 &&
          lab.max().item<int64_t>() < weight.size(0))
        << "label out of the vocabulary [0, " << weight.size(0) << ")";
  }
  variable_list out = LinearLogProbFn::apply(hidden.contiguous(), weight, lab,
                                             temperature, with_entropy);
  FusedLogProbs r;
  r.log_probs = out[0];
  if (with_entropy) r.entropy = out[1];
  return r;
}

at::Tensor FusedVarlenAttention(const at::Tensor& q, const at::Tensor& k,
                                const at::Tensor& v,
                                const std::vector<int64_t>& cu_seqlens,
                                int64_t window,
                                const FusedKernelTable* kernels) {
  CHECK(q.dim() == 3 && k.dim() == 3 && v.dim() == 3)
      << "attention inputs must be [T, heads, head_dim]";
  CHECK(k.sizes() == v.sizes()) << "k and v shapes differ";
  CHECK(q.size(0) == k.size(0) && q.size(2) == k.size(2))
      << "q and k must have the same tokens and head_dim";
  CHECK(k.size(1) > 0 && q.size(1) % k.size(1) == 0)
      << "n_heads must be a multiple of n_kv_heads";
  CHECK(!cu_seqlens.empty() && cu_seqlens.front() == 0 &&
        cu_seqlens.back() == q.size(0))
      << "cu_seqlens must run from 0 to the token count";
  for (size_t i = 1; i < cu_seqlens.size(); ++i) {
    CHECK_GE(cu_seqlens[i], cu_seqlens[i - 1]) << "cu_seqlens not sorted";
  }
  if (kernels == nullptr) kernels = &FusedKernels();
  return VarlenAttentionFn::apply(q, k, v, cu_seqlens, window,
                                  static_cast<int64_t>(kernels->isa));
}

}  // namespace verl::models
