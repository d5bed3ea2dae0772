#include "verl/profiler/flops_counter.h"

#include <utility>

namespace verl::profiler {
namespace {

// Parameters touched per token, excluding attention scores.
double ActiveDenseParams(const FlopsModelDims& d) {
  const double h = d.hidden_size;
  const double q = d.num_attention_heads * d.head_dim;
  const double kv = d.num_key_value_heads * d.head_dim;
  const double attn_linear = h * (q + 2 * kv + q);
  const double dense_mlp = 3.0 * h * d.intermediate_size;
  const double moe_mlp =
      3.0 * h * d.num_experts_per_tok * d.moe_intermediate_size +
      3.0 * h * d.shared_expert_intermediate_size +
      h * d.num_experts;  // router
  const int64_t sparse = d.num_experts > 0 ? d.moe_layers : 0;
  const int64_t dense_layers = d.num_hidden_layers - sparse;
  return d.num_hidden_layers * attn_linear + dense_layers * dense_mlp +
         sparse * moe_mlp + 2.0 * d.vocab_size * h;
}

}  // namespace

double TrainingFlops(const FlopsModelDims& dims,
                     const std::vector<int64_t>& seqlens) {
  double tokens = 0, square_sum = 0;
  for (int64_t l : seqlens) {
    tokens += l;
    square_sum += static_cast<double>(l) * l;
  }
  const double dense = 6.0 * ActiveDenseParams(dims) * tokens;
  const double attn = 6.0 * square_sum * dims.head_dim *
                      dims.num_attention_heads * dims.num_hidden_layers;
  return dense + attn;
}

double ForwardFlops(const FlopsModelDims& dims,
                    const std::vector<int64_t>& seqlens) {
  return TrainingFlops(dims, seqlens) / 3.0;
}

double PromisedFlops(const std::string& device_name) {
  static const std::pair<const char*, double> kTable[] = {
      {"GB200", 2.5e15},  {"B200", 2.25e15}, {"MI300X", 1336e12},
      {"H100", 989e12},   {"H800", 989e12},  {"H200", 989e12},
      {"A100", 312e12},   {"A800", 312e12},  {"L40S", 362.05e12},
      {"L40", 181.05e12}, {"A40", 149.7e12}, {"L20", 119.5e12},
      {"H20", 148e12},    {"910B", 354e12},  {"Ascend910", 354e12},
      {"CPU", 448e9},
  };
  // Longest names first so "L40S" wins over "L40" and "GB200" over "B200".
  for (const auto& [name, flops] : kTable) {
    if (device_name.find(name) != std::string::npos) return flops;
  }
  return 0;
}

double Mfu(double flops, double seconds, double peak_flops_per_device,
           int64_t world_size) {
  if (seconds <= 0 || peak_flops_per_device <= 0 || world_size <= 0) return 0;
  return flops / seconds / (peak_flops_per_device * world_size);
}

}  // namespace verl::profiler
