// File: verl/models/fused_ops_test.cc
//
// The fused training ops (fused_ops.h) against the unfused ATen graphs they
// replace, computed in double: forward values and the gradients of every
// differentiable input under a random upstream gradient, at odd sizes (row
// lengths that are not a multiple of any vector width, strided inputs);
// every ISA variant of the row kernels this CPU can run against the same
// references; the ops' fallback for non-fp32 tensors; the fused varlen
// attention against VarlenCausalAttention's ATen graph in double (values,
// dq/dk/dv, GQA, windows, odd head dims, every ISA). Part of decoder_test.
#include "verl/models/fused_ops.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <string>
#include <vector>

#include "verl/core/cpu_isa.h"
#include "verl/models/attention.h"
#include "verl/models/layers.h"

namespace verl::models {
namespace {

// max |a - b| / (atol + rtol |b|) <= 1.
void ExpectClose(const at::Tensor& a, const at::Tensor& b, const char* what,
                 double atol = 1e-5, double rtol = 1e-5) {
  ASSERT_TRUE(a.defined()) << what;
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const at::Tensor ad = a.to(at::kDouble), bd = b.to(at::kDouble);
  const double worst =
      ((ad - bd).abs() / (atol + rtol * bd.abs())).max().item<double>();
  EXPECT_LE(worst, 1.0) << what << " max err "
                        << (ad - bd).abs().max().item<double>();
}

at::Tensor Leaf(const at::Tensor& t) {
  return t.detach().clone().requires_grad_(true);
}

std::vector<core::CpuIsa> RunnableIsas() {
  std::vector<core::CpuIsa> out;
  for (core::CpuIsa isa :
       {core::CpuIsa::kBaseline, core::CpuIsa::kAvx2, core::CpuIsa::kAvx512}) {
    if (FusedKernelsFor(isa) != nullptr) out.push_back(isa);
  }
  return out;
}

TEST(FusedOpsTest, RmsNormForwardAndGradientsMatchAten) {
  at::manual_seed(0);
  for (int64_t n : {1, 37, 512}) {
    const at::Tensor x0 = at::randn({2, 5, n}) * 3.0;
    const at::Tensor w0 = at::randn({n});
    const at::Tensor gy = at::randn({2, 5, n});
    at::Tensor x = Leaf(x0), w = Leaf(w0);
    at::Tensor y = FusedRmsNorm(x, w, 1e-6);
    (y * gy).sum().backward();
    at::Tensor xr = Leaf(x0.to(at::kDouble)), wr = Leaf(w0.to(at::kDouble));
    at::Tensor yr = wr * (xr * at::rsqrt(xr.pow(2).mean(-1, true) + 1e-6));
    (yr * gy.to(at::kDouble)).sum().backward();
    ExpectClose(y, yr, "rmsnorm y");
    ExpectClose(x.grad(), xr.grad(), "rmsnorm dx");
    ExpectClose(w.grad(), wr.grad(), "rmsnorm dw", 1e-4);
  }
}

TEST(FusedOpsTest, SwiGluForwardAndGradientsMatchAten) {
  at::manual_seed(1);
  for (int64_t n : {1, 29, 1408}) {
    const at::Tensor g0 = at::randn({7, n}) * 4.0, u0 = at::randn({7, n});
    const at::Tensor gy = at::randn({7, n});
    at::Tensor g = Leaf(g0), u = Leaf(u0);
    at::Tensor y = FusedSwiGlu(g, u);
    (y * gy).sum().backward();
    at::Tensor gr = Leaf(g0.to(at::kDouble)), ur = Leaf(u0.to(at::kDouble));
    at::Tensor yr = at::silu(gr) * ur;
    (yr * gy.to(at::kDouble)).sum().backward();
    ExpectClose(y, yr, "swiglu y");
    ExpectClose(g.grad(), gr.grad(), "swiglu dg");
    ExpectClose(u.grad(), ur.grad(), "swiglu du");
  }
}

// The unfused rotate-half RoPE (layers.cc's ATen graph).
at::Tensor RopeRef(const at::Tensor& x, const at::Tensor& cos,
                   const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  at::Tensor rot =
      at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos.unsqueeze(1) + rot * sin.unsqueeze(1);
}

TEST(FusedOpsTest, RopeForwardAndGradientsMatchAten) {
  at::manual_seed(2);
  for (int64_t d : {2, 10, 64}) {
    const int64_t t = 5, heads = 3;
    // A strided view: heads of a wider fused projection row.
    const at::Tensor wide = at::randn({t, (heads + 2) * d});
    const at::Tensor ang = at::randn({t, d});
    const at::Tensor cos = ang.cos() * 1.3, sin = ang.sin() * 0.7;
    const at::Tensor gy = at::randn({t, heads, d});
    at::Tensor base = Leaf(wide);
    at::Tensor x = base.narrow(1, d, heads * d).view({t, heads, d});
    ASSERT_FALSE(x.is_contiguous());
    at::Tensor y = FusedRope(x, cos, sin);
    (y * gy).sum().backward();
    at::Tensor base_r = Leaf(wide.to(at::kDouble));
    at::Tensor yr = RopeRef(base_r.narrow(1, d, heads * d).view({t, heads, d}),
                            cos.to(at::kDouble), sin.to(at::kDouble));
    (yr * gy.to(at::kDouble)).sum().backward();
    ExpectClose(y, yr, "rope y");
    ExpectClose(base.grad(), base_r.grad(), "rope dx");
    // ApplyRope (the layers' entry point) takes the fused path for fp32 and
    // the ATen graph for double: the same values.
    ExpectClose(ApplyRope(x.detach(), cos, sin),
                ApplyRope(x.detach().to(at::kDouble), cos.to(at::kDouble),
                          sin.to(at::kDouble)),
                "ApplyRope fp32 vs fp64");
  }
}

TEST(FusedOpsTest, LinearLogProbsForwardAndGradientsMatchAten) {
  at::manual_seed(3);
  struct Case {
    int64_t n, h, v;
    double temperature;
    bool entropy;
  };
  for (const Case& c : {Case{7, 13, 101, 0.7, true}, Case{1, 5, 3, 1.0, false},
                        Case{33, 64, 1000, 1.0, true}}) {
    const at::Tensor h0 = at::randn({c.n, c.h});
    const at::Tensor w0 = at::randn({c.v, c.h}) * 0.5;
    const at::Tensor labels = at::randint(0, c.v, {c.n}, at::kLong);
    const at::Tensor g_lp = at::randn({c.n}), g_ent = at::randn({c.n});
    at::Tensor h = Leaf(h0), w = Leaf(w0);
    FusedLogProbs f =
        FusedLinearLogProbs(h, w, labels, c.temperature, c.entropy);
    at::Tensor loss = (f.log_probs * g_lp).sum();
    if (c.entropy) loss = loss + (f.entropy * g_ent).sum();
    loss.backward();

    at::Tensor hr = Leaf(h0.to(at::kDouble)), wr = Leaf(w0.to(at::kDouble));
    at::Tensor z = at::mm(hr, wr.t()) / c.temperature;
    at::Tensor logp_all = at::log_softmax(z, -1);
    at::Tensor lp = logp_all.gather(1, labels.unsqueeze(1)).squeeze(1);
    at::Tensor ent = -(logp_all.exp() * logp_all).sum(-1);
    at::Tensor loss_r = (lp * g_lp.to(at::kDouble)).sum();
    if (c.entropy) loss_r = loss_r + (ent * g_ent.to(at::kDouble)).sum();
    loss_r.backward();
    ExpectClose(f.log_probs, lp, "log_probs");
    if (c.entropy) ExpectClose(f.entropy, ent, "entropy");
    ExpectClose(h.grad(), hr.grad(), "d hidden", 1e-5, 1e-4);
    ExpectClose(w.grad(), wr.grad(), "d weight", 1e-5, 1e-4);
  }
}

TEST(FusedOpsTest, LinearLogProbsRefusesASecondBackward) {
  at::Tensor h = Leaf(at::randn({3, 4})), w = Leaf(at::randn({9, 4}));
  at::Tensor lp =
      FusedLinearLogProbs(h, w, at::tensor({1, 2, 3}, at::kLong), 1.0, false)
          .log_probs.sum();
  lp.backward({}, /*retain_graph=*/true);
  EXPECT_ANY_THROW(lp.backward());
}

// Every ISA's row kernels against double references on raw buffers.
TEST(FusedOpsTest, EveryIsaKernelMatchesReference) {
  at::manual_seed(4);
  const int64_t rows = 3, n = 53, v = 77;
  const at::Tensor x = at::randn({rows, n}) * 2.0, w = at::randn({n});
  const at::Tensor xd = x.to(at::kDouble), wd = w.to(at::kDouble);
  const at::Tensor rms_ref =
      wd * (xd * at::rsqrt(xd.pow(2).mean(-1, true) + 1e-5));
  const at::Tensor u = at::randn({rows, n});
  const at::Tensor swi_ref = at::silu(xd) * u.to(at::kDouble);
  const at::Tensor logits = at::randn({rows, v}) * 3.0;
  const at::Tensor labels = at::tensor({0, 76, 40}, at::kLong);
  const at::Tensor z = logits.to(at::kDouble) / 0.8;
  const at::Tensor lsm = at::log_softmax(z, -1);
  const at::Tensor lp_ref = lsm.gather(1, labels.unsqueeze(1)).squeeze(1);
  const at::Tensor ent_ref = -(lsm.exp() * lsm).sum(-1);
  for (core::CpuIsa isa : RunnableIsas()) {
    SCOPED_TRACE(core::CpuIsaName(isa));
    const FusedKernelTable& k = *FusedKernelsFor(isa);
    EXPECT_EQ(k.isa, isa);
    at::Tensor y = at::empty({rows, n}), rstd = at::empty({rows});
    k.rms_norm_fwd(x.data_ptr<float>(), w.data_ptr<float>(), 1e-5f, n, 0, rows,
                   y.data_ptr<float>(), rstd.data_ptr<float>());
    ExpectClose(y, rms_ref, "rms_norm_fwd");
    at::Tensor s = at::empty({rows, n});
    k.swiglu_fwd(x.data_ptr<float>(), n, u.data_ptr<float>(), n, n, 0, rows,
                 s.data_ptr<float>(), n);
    ExpectClose(s, swi_ref, "swiglu_fwd");
    at::Tensor lp = at::empty({rows}), lse = at::empty({rows}),
               ent = at::empty({rows});
    k.log_prob_fwd(logits.data_ptr<float>(), v, labels.data_ptr<int64_t>(),
                   1.f / 0.8f, 0, rows, lp.data_ptr<float>(),
                   lse.data_ptr<float>(), ent.data_ptr<float>());
    ExpectClose(lp, lp_ref, "log_prob_fwd logp");
    ExpectClose(ent, ent_ref, "log_prob_fwd entropy");
    ExpectClose(lse, at::logsumexp(z, -1), "log_prob_fwd lse");
  }
}

// The ATen attention (VarlenCausalAttention's unfused graph) in double.
struct AttnRef {
  at::Tensor out, dq, dk, dv;
};
AttnRef AttentionReference(const at::Tensor& q0, const at::Tensor& k0,
                           const at::Tensor& v0, const at::Tensor& gy,
                           const std::vector<int64_t>& cu, int64_t window) {
  at::Tensor q = Leaf(q0.to(at::kDouble)), k = Leaf(k0.to(at::kDouble)),
             v = Leaf(v0.to(at::kDouble));
  VarlenCausalAttention attn(cu, {window}, /*fused=*/false);
  at::Tensor out = attn.Attend(0, q, k, v);
  (out * gy.to(at::kDouble)).sum().backward();
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

TEST(FusedOpsTest, VarlenAttentionForwardAndGradientsMatchAten) {
  at::manual_seed(5);
  struct Case {
    std::vector<int64_t> cu;
    int64_t n_heads, n_kv, d, window;
  };
  // Sequences of 1 token, empty ones, and longer than a block (64) with a
  // partial last block; GQA groups 1, 2 and 7; head dims a multiple of 16,
  // odd and below one vector; windows inside one block and across blocks.
  const std::vector<Case> cases = {
      {{0, 1, 71, 71, 76, 206}, 2, 2, 32, 0},
      {{0, 130, 131, 140}, 4, 2, 32, 3},
      {{0, 1, 2, 67}, 7, 1, 13, 0},
      {{0, 150, 159}, 7, 1, 32, 70},
      {{0, 5, 100}, 4, 2, 5, 5},
      {{0, 66}, 2, 1, 40, 0},
  };
  // Two workers: tasks pulled concurrently, dq summed over per-worker parts.
  const int threads = at::get_num_threads();
  at::set_num_threads(2);
  for (const Case& c : cases) {
    const int64_t t = c.cu.back();
    SCOPED_TRACE("heads " + std::to_string(c.n_heads) + "/" +
                 std::to_string(c.n_kv) + " d " + std::to_string(c.d) +
                 " window " + std::to_string(c.window) + " T " +
                 std::to_string(t));
    const at::Tensor q0 = at::randn({t, c.n_heads, c.d}) * 1.5;
    const at::Tensor k0 = at::randn({t, c.n_kv, c.d}) * 1.5;
    const at::Tensor v0 = at::randn({t, c.n_kv, c.d});
    const at::Tensor gy = at::randn({t, c.n_heads, c.d});
    const AttnRef ref = AttentionReference(q0, k0, v0, gy, c.cu, c.window);
    for (core::CpuIsa isa : RunnableIsas()) {
      SCOPED_TRACE(core::CpuIsaName(isa));
      at::Tensor q = Leaf(q0), k = Leaf(k0), v = Leaf(v0);
      at::Tensor out =
          FusedVarlenAttention(q, k, v, c.cu, c.window, FusedKernelsFor(isa));
      (out * gy).sum().backward();
      ExpectClose(out, ref.out, "attention out");
      ExpectClose(q.grad(), ref.dq, "attention dq", 1e-5, 1e-4);
      ExpectClose(k.grad(), ref.dk, "attention dk", 1e-5, 1e-4);
      ExpectClose(v.grad(), ref.dv, "attention dv", 1e-5, 1e-4);
    }
    // VarlenCausalAttention takes the fused path for fp32 CPU inputs.
    VarlenCausalAttention attn(c.cu, {c.window});
    ExpectClose(attn.Attend(0, q0, k0, v0), ref.out, "Attend fp32");
  }
  at::set_num_threads(threads);
}

TEST(FusedOpsTest, VarlenAttentionStridedInputsAndNoGrad) {
  at::manual_seed(6);
  const std::vector<int64_t> cu = {0, 40, 97};
  // q/k/v as views of one fused projection (non-contiguous).
  const at::Tensor qkv = at::randn({97, 6 * 16});
  const at::Tensor q = qkv.narrow(1, 0, 64).view({97, 4, 16});
  const at::Tensor k = qkv.narrow(1, 64, 16).view({97, 1, 16});
  const at::Tensor v = qkv.narrow(1, 80, 16).view({97, 1, 16});
  ASSERT_FALSE(q.is_contiguous());
  const at::Tensor gy = at::zeros({97, 4, 16});
  const AttnRef ref = AttentionReference(q, k, v, gy, cu, 0);
  at::NoGradGuard no_grad;
  ExpectClose(FusedVarlenAttention(q, k, v, cu, 0), ref.out, "strided out");
}

TEST(FusedOpsTest, VarlenAttentionRefusesDoubleBackward) {
  at::Tensor q = Leaf(at::randn({5, 2, 8})), k = Leaf(at::randn({5, 1, 8})),
             v = Leaf(at::randn({5, 1, 8}));
  at::Tensor y = FusedVarlenAttention(q, k, v, {0, 2, 5}, 0).pow(2).sum();
  EXPECT_ANY_THROW(torch::autograd::grad({y}, {q}, {}, /*retain_graph=*/true,
                                         /*create_graph=*/true));
  // A plain second backward (retain_graph) is fine.
  y.backward({}, /*retain_graph=*/true);
  const at::Tensor g1 = q.grad().clone();
  y.backward();
  ExpectClose(q.grad(), 2 * g1, "second backward");
}

TEST(FusedOpsTest, ApplyOnlyToFp32Cpu) {
  EXPECT_TRUE(FusedOpsApply({at::zeros({2}), at::Tensor()}));
  EXPECT_FALSE(FusedOpsApply({at::zeros({2}), at::zeros({2}, at::kDouble)}));
  EXPECT_FALSE(FusedOpsApply({at::zeros({2}, at::kBFloat16)}));
  EXPECT_EQ(FusedKernels().isa, core::ActiveCpuIsa());
}

}  // namespace
}  // namespace verl::models
