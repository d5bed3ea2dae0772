// File: verl/models/logprob.cc
#include "verl/models/logprob.h"

#include <ATen/ATen.h>
#include <glog/logging.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <vector>

namespace verl::models {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

c10::ScalarType ComputeType(const at::Tensor& logits) {
  return logits.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

// Rows [s, s+m) of `logits` divided by the temperature, as a fresh tensor
// of the compute type (safe to modify in place).
at::Tensor ScaledChunk(const at::Tensor& logits, int64_t s, int64_t m,
                       c10::ScalarType ct, double temperature) {
  return at::mul(logits.narrow(0, s, m).to(ct), 1.0 / temperature);
}

// Forward and backward over row chunks of 2-D logits [N, V].
class ChunkedLogProb : public torch::autograd::Function<ChunkedLogProb> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& logits,
                               const at::Tensor& labels, double temperature,
                               bool with_entropy, int64_t chunk) {
    const int64_t n = logits.size(0);
    const c10::ScalarType ct = ComputeType(logits);
    at::TensorOptions opts = logits.options().dtype(ct);
    at::Tensor logp = at::empty({n}, opts);
    at::Tensor lse = at::empty({n}, opts);
    at::Tensor ent = with_entropy ? at::empty({n}, opts) : at::Tensor();
    for (int64_t s = 0; s < n; s += chunk) {
      const int64_t m = std::min(chunk, n - s);
      at::Tensor z = ScaledChunk(logits, s, m, ct, temperature);
      at::Tensor l = at::logsumexp(z, -1);
      lse.narrow(0, s, m).copy_(l);
      at::Tensor label_z =
          z.gather(1, labels.narrow(0, s, m).unsqueeze(1)).squeeze(1);
      logp.narrow(0, s, m).copy_(label_z - l);
      if (with_entropy) {
        // H = lse - sum(p * z), p = exp(z - lse).
        at::Tensor p = at::softmax(z, -1);
        ent.narrow(0, s, m).copy_(l - p.mul_(z).sum(-1));
      }
    }
    ctx->save_for_backward({logits, labels, lse, with_entropy ? ent : lse});
    ctx->saved_data["temperature"] = temperature;
    ctx->saved_data["with_entropy"] = with_entropy;
    ctx->saved_data["chunk"] = chunk;
    return with_entropy ? variable_list{logp, ent} : variable_list{logp};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    variable_list saved = ctx->get_saved_variables();
    const at::Tensor& logits = saved[0];
    const at::Tensor& labels = saved[1];
    const at::Tensor& lse = saved[2];
    const at::Tensor& ent = saved[3];
    const double temperature = ctx->saved_data["temperature"].toDouble();
    const bool with_entropy = ctx->saved_data["with_entropy"].toBool();
    const int64_t chunk = ctx->saved_data["chunk"].toInt();
    const at::Tensor g_logp = grads[0];
    const at::Tensor g_ent = with_entropy ? grads[1] : at::Tensor();
    const c10::ScalarType ct = ComputeType(logits);
    const int64_t n = logits.size(0);
    at::Tensor grad = at::empty_like(logits);
    for (int64_t s = 0; s < n; s += chunk) {
      const int64_t m = std::min(chunk, n - s);
      // logp = z - lse (in place on the fresh chunk copy), p = exp(logp).
      at::Tensor logp = ScaledChunk(logits, s, m, ct, temperature)
                            .sub_(lse.narrow(0, s, m).unsqueeze(1));
      at::Tensor p = at::exp(logp);
      // dz = -p * (g_lp + g_H * (logp + H)) + onehot(label) * g_lp, using
      // d logp[label]/dz = onehot - p and dH/dz = -p * (logp + H).
      at::Tensor coef;
      if (g_ent.defined()) {
        coef = logp.add_(ent.narrow(0, s, m).unsqueeze(1))
                   .mul_(g_ent.narrow(0, s, m).to(ct).unsqueeze(1));
        if (g_logp.defined())
          coef.add_(g_logp.narrow(0, s, m).to(ct).unsqueeze(1));
      } else {
        coef = g_logp.narrow(0, s, m).to(ct).unsqueeze(1);
      }
      at::Tensor gz = p.mul_(coef).neg_();
      if (g_logp.defined()) {
        gz.scatter_add_(1, labels.narrow(0, s, m).unsqueeze(1),
                        g_logp.narrow(0, s, m).to(ct).unsqueeze(1));
      }
      if (temperature != 1.0) gz.mul_(1.0 / temperature);
      grad.narrow(0, s, m).copy_(gz);
    }
    return {grad, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

LogProbEntropy LogProbsAndEntropy(const at::Tensor& logits,
                                  const at::Tensor& labels, double temperature,
                                  bool with_entropy, int64_t chunk_rows) {
  CHECK_GT(temperature, 0.0) << "temperature must be > 0";
  CHECK_GT(chunk_rows, 0);
  CHECK_GE(logits.dim(), 1);
  const int64_t vocab = logits.size(-1);
  std::vector<int64_t> out_shape(logits.sizes().begin(),
                                 logits.sizes().end() - 1);
  CHECK(labels.sizes() == at::IntArrayRef(out_shape))
      << "labels must have the logits' shape without the vocab dim";
  at::Tensor flat_logits = logits.reshape({-1, vocab});
  at::Tensor flat_labels = labels.reshape({-1}).to(at::kLong);
  variable_list out = ChunkedLogProb::apply(
      flat_logits, flat_labels, temperature, with_entropy, chunk_rows);
  LogProbEntropy r;
  r.log_probs = out[0].view(out_shape);
  if (with_entropy) r.entropy = out[1].view(out_shape);
  return r;
}

at::Tensor LogProbsFromLogits(const at::Tensor& logits,
                              const at::Tensor& labels, double temperature,
                              int64_t chunk_rows) {
  return LogProbsAndEntropy(logits, labels, temperature, false, chunk_rows)
      .log_probs;
}

at::Tensor EntropyFromLogits(const at::Tensor& logits, double temperature,
                             int64_t chunk_rows) {
  at::Tensor dummy_labels = at::zeros(
      at::IntArrayRef(logits.sizes().begin(), logits.sizes().end() - 1),
      logits.options().dtype(at::kLong));
  return LogProbsAndEntropy(logits, dummy_labels, temperature, true, chunk_rows)
      .entropy;
}

at::Tensor SumPiSquaredFromLogits(const at::Tensor& logits, double temperature,
                                  int64_t chunk_rows) {
  at::NoGradGuard no_grad;
  const c10::ScalarType ct = ComputeType(logits);
  const at::Tensor flat = logits.reshape({-1, logits.size(-1)});
  const int64_t n = flat.size(0);
  at::Tensor out = at::empty({n}, flat.options().dtype(ct));
  for (int64_t s = 0; s < n; s += chunk_rows) {
    const int64_t m = std::min(chunk_rows, n - s);
    at::Tensor z = ScaledChunk(flat, s, m, ct, temperature);
    out.narrow(0, s, m).copy_(
        at::exp(at::logsumexp(z * 2.0, -1) - 2.0 * at::logsumexp(z, -1)));
  }
  return out.view(
      at::IntArrayRef(logits.sizes().begin(), logits.sizes().end() - 1));
}

}  // namespace verl::models
