// File: verl/models/presets.cc
#include "verl/models/presets.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace verl::models {
namespace {

// Shared shape of the tiny presets (~1M parameters).
ModelConfig Tiny(const std::string& arch, const std::string& type) {
  ModelConfig c;
  c.architecture = arch;
  c.model_type = type;
  c.vocab_size = 1024;
  c.hidden_size = 128;
  c.intermediate_size = 352;
  c.num_hidden_layers = 4;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.max_position_embeddings = 4096;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1000000.0;
  c.tie_word_embeddings = true;
  return c;
}

ModelConfig TinyQwen2() {
  ModelConfig c = Tiny("Qwen2ForCausalLM", "qwen2");
  c.attention_bias = true;
  return c;
}

ModelConfig Qwen2_30m() {
  ModelConfig c = TinyQwen2();
  c.vocab_size = 16384;
  c.hidden_size = 512;
  c.intermediate_size = 1408;
  c.num_hidden_layers = 8;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 2;
  return c;
}

// Qwen2.5-0.5B's shape (its config.json) with random weights: what a real
// small model costs here (~494M parameters, ~2 GB in fp32).
ModelConfig Qwen25_05b() {
  ModelConfig c = TinyQwen2();
  c.vocab_size = 151936;
  c.hidden_size = 896;
  c.intermediate_size = 4864;
  c.num_hidden_layers = 24;
  c.num_attention_heads = 14;
  c.num_key_value_heads = 2;
  c.max_position_embeddings = 32768;
  return c;
}

ModelConfig TinyQwen3() {
  ModelConfig c = Tiny("Qwen3ForCausalLM", "qwen3");
  c.qk_norm = true;
  c.head_dim = 48;  // Qwen3 sets head_dim independently of hidden/heads
  return c;
}

ModelConfig TinyLlama3() {
  ModelConfig c = Tiny("LlamaForCausalLM", "llama");
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 500000.0;
  c.rope_scaling.rope_type = "llama3";
  c.rope_scaling.factor = 8.0;
  c.rope_scaling.low_freq_factor = 1.0;
  c.rope_scaling.high_freq_factor = 4.0;
  c.rope_scaling.original_max_position_embeddings = 8192;
  c.tie_word_embeddings = false;
  return c;
}

ModelConfig TinyMistral() {
  ModelConfig c = Tiny("MistralForCausalLM", "mistral");
  c.rms_norm_eps = 1e-5;
  c.sliding_window = 8;
  c.tie_word_embeddings = false;
  return c;
}

ModelConfig TinyQwen2Moe() {
  ModelConfig c = Tiny("Qwen2MoeForCausalLM", "qwen2_moe");
  c.attention_bias = true;
  c.num_experts = 4;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 96;
  c.shared_expert_intermediate_size = 192;
  c.norm_topk_prob = false;
  c.tie_word_embeddings = false;
  return c;
}

ModelConfig TinyQwen3Moe() {
  ModelConfig c = Tiny("Qwen3MoeForCausalLM", "qwen3_moe");
  c.qk_norm = true;
  c.head_dim = 32;
  c.num_experts = 8;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 64;
  c.norm_topk_prob = true;
  c.tie_word_embeddings = false;
  return c;
}

// DeepSeek-V3 shape in miniature: MLA with q and kv compression, YaRN,
// one dense layer then sigmoid-routed MoE layers (4 groups of 2 experts, 2
// groups kept) with a shared expert.
ModelConfig TinyDeepseekV3() {
  ModelConfig c = Tiny("DeepseekV3ForCausalLM", "deepseek_v3");
  c.num_key_value_heads = 4;
  c.q_lora_rank = 64;
  c.kv_lora_rank = 32;
  c.qk_nope_head_dim = 32;
  c.qk_rope_head_dim = 16;
  c.v_head_dim = 32;
  c.head_dim = 16;  // = qk_rope_head_dim, as HF sets it
  c.rope_theta = 10000.0;
  c.max_position_embeddings = 4096;
  c.rope_scaling.rope_type = "yarn";
  c.rope_scaling.factor = 4.0;
  c.rope_scaling.original_max_position_embeddings = 1024;
  c.rope_scaling.mscale = 1.0;
  c.rope_scaling.mscale_all_dim = 1.0;
  c.scoring_func = "sigmoid";
  c.num_experts = 8;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 64;
  c.n_shared_experts = 1;
  c.first_k_dense_replace = 1;
  c.n_group = 4;
  c.topk_group = 2;
  c.norm_topk_prob = true;
  c.routed_scaling_factor = 2.5;
  c.tie_word_embeddings = false;
  return c;
}

struct Preset {
  const char* name;
  ModelConfig (*make)();
};

constexpr Preset kPresets[] = {
    {"tiny-qwen2", TinyQwen2},
    {"qwen2-30m", Qwen2_30m},
    {"qwen2.5-0.5b", Qwen25_05b},
    {"tiny-qwen3", TinyQwen3},
    {"tiny-llama3", TinyLlama3},
    {"tiny-mistral", TinyMistral},
    {"tiny-qwen2-moe", TinyQwen2Moe},
    {"tiny-qwen3-moe", TinyQwen3Moe},
    {"tiny-deepseek-v3", TinyDeepseekV3},
};

}  // namespace

std::vector<std::string> PresetNames() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.push_back(p.name);
  return names;
}

absl::StatusOr<ModelConfig> MakePreset(const std::string& name,
                                       int64_t vocab_size) {
  for (const Preset& p : kPresets) {
    if (name != p.name) continue;
    ModelConfig c = p.make();
    if (vocab_size > 0) c.vocab_size = vocab_size;
    c.eos_token_ids = {c.vocab_size - 1};
    c.pad_token_id = c.vocab_size - 1;
    return c;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown model preset '", name,
                   "'; known: ", absl::StrJoin(PresetNames(), ", ")));
}

}  // namespace verl::models
