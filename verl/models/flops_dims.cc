// File: verl/models/flops_dims.cc
#include "verl/models/flops_dims.h"

namespace verl::models {

profiler::FlopsModelDims FlopsDims(const ModelConfig& c) {
  profiler::FlopsModelDims d;
  d.vocab_size = c.vocab_size;
  d.hidden_size = c.hidden_size;
  d.intermediate_size = c.intermediate_size;
  d.num_hidden_layers = c.num_hidden_layers;
  d.num_attention_heads = c.num_attention_heads;
  d.num_key_value_heads = c.num_key_value_heads;
  d.head_dim = c.HeadDim();
  if (c.IsMoe()) {
    d.num_experts = c.num_experts;
    d.num_experts_per_tok = c.num_experts_per_tok;
    d.moe_intermediate_size = c.moe_intermediate_size;
    d.shared_expert_intermediate_size = c.shared_expert_intermediate_size;
    for (int64_t l = 0; l < c.num_hidden_layers; ++l)
      d.moe_layers += c.LayerIsMoe(l) ? 1 : 0;
  }
  return d;
}

}  // namespace verl::models
