// File: verl/profiler/flops_counter.h
//
// Training FLOPs of a decoder step as verl's FlopsCounter counts them
// (verl/utils/flops_counter.py), so perf/mfu/* match verl runs:
//   dense  = 6 * N_dense * sum(L_i),
//            N_dense = layers * (3*h*ffn + h*(q+k+v+o)) + 2*V*h
//   attn   = 6 * sum(L_i^2) * head_dim * n_heads * layers  (causal half of
//   PaLM's 12)
// MoE layers count router (h*E) + top-k routed experts + the shared expert.
// The counter takes plain dimensions (this library sits below verl/models).
#ifndef VERL_PROFILER_FLOPS_COUNTER_H_
#define VERL_PROFILER_FLOPS_COUNTER_H_

#include <cstdint>
#include <string>
#include <vector>

namespace verl::profiler {

struct FlopsModelDims {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;  // dense MLP width
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  // MoE (num_experts == 0 => dense). `moe_layers` = how many layers are sparse.
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  int64_t shared_expert_intermediate_size = 0;
  int64_t moe_layers = 0;
};

// Forward+backward FLOPs (6x rule) for sequences of the given lengths.
double TrainingFlops(const FlopsModelDims& dims,
                     const std::vector<int64_t>& seqlens);

// Forward-only FLOPs (one third of the above): log-prob recompute, rollout.
double ForwardFlops(const FlopsModelDims& dims,
                    const std::vector<int64_t>& seqlens);

// Peak dense bf16 FLOP/s of a device by name, verl's _DEVICE_FLOPS table
// ("H100", "A100", "CPU", ...); 0 when unknown (MFU then reports 0).
double PromisedFlops(const std::string& device_name);

// MFU = flops / seconds / (peak * world_size); 0 if peak or time is 0.
double Mfu(double flops, double seconds, double peak_flops_per_device,
           int64_t world_size);

}  // namespace verl::profiler

#endif  // VERL_PROFILER_FLOPS_COUNTER_H_
