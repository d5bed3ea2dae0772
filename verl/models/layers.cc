// File: verl/models/layers.cc
#include "verl/models/layers.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <glog/logging.h>

#include <algorithm>
#include <cmath>

#include "verl/models/fused_ops.h"

namespace verl::models {

c10::ScalarType ComputeDtype(c10::ScalarType dtype) {
  return dtype == at::kDouble ? at::kDouble : at::kFloat;
}

bool UpcastGemm(const at::Tensor& t) {
  return t.device().is_cpu() &&
         (t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf);
}

at::Tensor LinearOp(const at::Tensor& x, const at::Tensor& w,
                    const at::Tensor& b) {
  if (!UpcastGemm(w)) return at::linear(x, w, b);
  return at::linear(x.to(at::kFloat), w.to(at::kFloat),
                    b.defined() ? b.to(at::kFloat) : b)
      .to(x.scalar_type());
}

WeightHolder::WeightHolder(const at::Tensor& w) {
  weight = register_parameter("weight", w);
}

Linear::Linear(int64_t in, int64_t out, bool with_bias)
    : in_features(in), out_features(out) {
  weight = register_parameter("weight", at::zeros({out, in}));
  if (with_bias) bias = register_parameter("bias", at::zeros({out}));
}

at::Tensor Linear::Forward(const at::Tensor& x) const {
  at::Tensor y = LinearOp(x, weight, bias);
  if (lora.lora_A && lora.enabled && !lora.merged) {
    at::Tensor delta =
        LinearOp(LinearOp(x, lora.lora_A->weight), lora.lora_B->weight);
    y = y + delta * lora.scale;
  }
  return output_hook ? output_hook(y) : y;
}

RMSNorm::RMSNorm(int64_t dim, double eps_in) : eps(eps_in) {
  weight = register_parameter("weight", at::ones({dim}));
}

at::Tensor RMSNorm::Forward(const at::Tensor& x) const {
  if (FusedOpsApply({x, weight})) return FusedRmsNorm(x, weight, eps);
  at::Tensor xf = x.to(ComputeDtype(x.scalar_type()));
  at::Tensor var = xf.pow(2).mean(-1, /*keepdim=*/true);
  xf = xf * at::rsqrt(var + eps);
  return weight * xf.to(x.scalar_type());
}

MLP::MLP(int64_t hidden, int64_t intermediate) {
  gate_proj = register_module(
      "gate_proj", std::make_shared<Linear>(hidden, intermediate, false));
  up_proj = register_module(
      "up_proj", std::make_shared<Linear>(hidden, intermediate, false));
  down_proj = register_module(
      "down_proj", std::make_shared<Linear>(intermediate, hidden, false));
}

at::Tensor MLP::Forward(const at::Tensor& x) const {
  const at::Tensor gate = gate_proj->Forward(x), up = up_proj->Forward(x);
  return down_proj->Forward(FusedOpsApply({gate, up}) ? FusedSwiGlu(gate, up)
                                                      : at::silu(gate) * up);
}

at::Tensor RopeInvFreq(const ModelConfig& config) {
  const int64_t dim = config.HeadDim();
  CHECK_EQ(dim % 2, 0) << "head_dim must be even for RoPE";
  at::Tensor inv_freq =
      1.0 / at::pow(config.rope_theta, at::arange(0, dim, 2, at::kDouble) /
                                           static_cast<double>(dim));
  const RopeScaling& rs = config.rope_scaling;
  if (rs.rope_type == "llama3") {
    // HF _compute_llama3_parameters: long wavelengths are divided by
    // `factor`, short ones kept, the band in between interpolated smoothly.
    const double old_len =
        static_cast<double>(rs.original_max_position_embeddings);
    const double low_wavelen = old_len / rs.low_freq_factor;
    const double high_wavelen = old_len / rs.high_freq_factor;
    at::Tensor wavelen = 2.0 * M_PI / inv_freq;
    at::Tensor scaled =
        at::where(wavelen > low_wavelen, inv_freq / rs.factor, inv_freq);
    at::Tensor smooth = (old_len / wavelen - rs.low_freq_factor) /
                        (rs.high_freq_factor - rs.low_freq_factor);
    at::Tensor smoothed = (1.0 - smooth) * scaled / rs.factor + smooth * scaled;
    at::Tensor is_medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen);
    inv_freq = at::where(is_medium, smoothed, scaled);
  } else if (rs.rope_type == "yarn") {
    // HF _compute_yarn_parameters: frequencies below the beta_fast..beta_slow
    // rotation band are interpolated (divided by factor), those above kept,
    // a linear ramp in between.
    const double orig =
        static_cast<double>(rs.original_max_position_embeddings);
    const double log_base = std::log(config.rope_theta);
    auto correction_dim = [&](double rotations) {
      return dim * std::log(orig / (rotations * 2.0 * M_PI)) / (2.0 * log_base);
    };
    const double low = std::max(std::floor(correction_dim(rs.beta_fast)), 0.0);
    double high = std::min(std::ceil(correction_dim(rs.beta_slow)),
                           static_cast<double>(dim - 1));
    if (low == high) high += 0.001;
    at::Tensor ramp =
        ((at::arange(dim / 2, at::kDouble) - low) / (high - low)).clamp(0, 1);
    at::Tensor extrapolation = 1.0 - ramp;
    inv_freq =
        inv_freq / rs.factor * (1.0 - extrapolation) + inv_freq * extrapolation;
  } else {
    CHECK(rs.rope_type == "default" || rs.rope_type.empty())
        << "unsupported rope_type " << rs.rope_type;
  }
  return inv_freq;
}

double YarnMscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

double RopeAttentionFactor(const ModelConfig& config) {
  const RopeScaling& rs = config.rope_scaling;
  if (rs.rope_type != "yarn") return 1.0;
  if (rs.attention_factor > 0) return rs.attention_factor;
  if (rs.mscale != 0 && rs.mscale_all_dim != 0) {
    return YarnMscale(rs.factor, rs.mscale) /
           YarnMscale(rs.factor, rs.mscale_all_dim);
  }
  return YarnMscale(rs.factor, 1.0);
}

std::pair<at::Tensor, at::Tensor> RopeCosSin(const at::Tensor& inv_freq,
                                             const at::Tensor& position_ids,
                                             c10::ScalarType dtype) {
  const c10::ScalarType ct = ComputeDtype(dtype);
  at::Tensor f = inv_freq.to(position_ids.device(), ct);
  at::Tensor freqs = position_ids.to(ct).unsqueeze(1) * f.unsqueeze(0);
  at::Tensor emb = at::cat({freqs, freqs}, -1);
  return {emb.cos().to(dtype), emb.sin().to(dtype)};
}

std::pair<at::Tensor, at::Tensor> MropeCosSin(
    const at::Tensor& inv_freq, const at::Tensor& position_ids,
    const std::vector<int64_t>& mrope_section, c10::ScalarType dtype) {
  CHECK_EQ(position_ids.dim(), 2);
  CHECK_EQ(position_ids.size(0), 3) << "M-RoPE position_ids must be [3, T]";
  std::vector<int64_t> rows;
  for (int64_t s = 0; s < static_cast<int64_t>(mrope_section.size()); ++s) {
    rows.insert(rows.end(), mrope_section[s], s);
  }
  CHECK_EQ(static_cast<int64_t>(rows.size()), inv_freq.numel())
      << "mrope_section must sum to head_dim / 2";
  const c10::ScalarType ct = ComputeDtype(dtype);
  at::Tensor f = inv_freq.to(position_ids.device(), ct);
  at::Tensor row_index = at::tensor(rows, at::kLong).to(position_ids.device());
  // [hd/2, T] positions per frequency -> [T, hd/2] angles.
  at::Tensor freqs =
      position_ids.to(ct).index_select(0, row_index).t() * f.unsqueeze(0);
  at::Tensor emb = at::cat({freqs, freqs}, -1);
  return {emb.cos().to(dtype), emb.sin().to(dtype)};
}

at::Tensor ApplyRope(const at::Tensor& x, const at::Tensor& cos,
                     const at::Tensor& sin) {
  if (x.dim() == 3 && x.size(2) % 2 == 0 && cos.dim() == 2 &&
      cos.size(0) == x.size(0) && cos.size(1) == x.size(2) &&
      cos.sizes() == sin.sizes() && !cos.requires_grad() &&
      !sin.requires_grad() && FusedOpsApply({x, cos, sin})) {
    return FusedRope(x, cos, sin);
  }
  const int64_t half = x.size(-1) / 2;
  at::Tensor x1 = x.narrow(-1, 0, half);
  at::Tensor x2 = x.narrow(-1, half, half);
  at::Tensor rotated = at::cat({-x2, x1}, -1);
  return x * cos.unsqueeze(1) + rotated * sin.unsqueeze(1);
}

}  // namespace verl::models
