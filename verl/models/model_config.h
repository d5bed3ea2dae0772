// File: verl/models/model_config.h
//
// The architecture description every model-side library shares: the decoder
// (verl/models), HF config.json load/save, the rollout engine (verl/infer) and
// the FLOPs counter. Field names follow HF config.json keys.
#ifndef VERL_MODELS_MODEL_CONFIG_H_
#define VERL_MODELS_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

namespace verl::models {

// Rotary-embedding scaling (HF `rope_scaling`): "default", "llama3", and
// "yarn" (DeepSeek-V3 only).
struct RopeScaling {
  std::string rope_type = "default";  // "default" | "llama3" | "yarn"
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
  // yarn: ramp bounds, cos/sin scale (0 => derived from mscale and
  // mscale_all_dim as HF does) and the mscales (0 => key absent).
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double attention_factor = 0.0;
  double mscale = 0.0;
  double mscale_all_dim = 0.0;
};

struct ModelConfig {
  // HF `architectures[0]`, e.g. "Qwen2ForCausalLM"; `model_type`, e.g. "qwen2".
  std::string architecture = "Qwen2ForCausalLM";
  std::string model_type = "qwen2";

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;  // 0 => hidden_size / num_attention_heads
  int64_t max_position_embeddings = 32768;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  // Multimodal RoPE (Qwen2-VL, HF rope_scaling.mrope_section): how many of
  // the head_dim/2 frequencies follow the temporal, height and width
  // position rows. Empty => 1-D RoPE.
  std::vector<int64_t> mrope_section;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v bias (Qwen2 sets it implicitly)
  bool qk_norm = false;         // per-head RMSNorm on q and k (Qwen3)
  std::string hidden_act = "silu";
  std::string torch_dtype = "float32";

  // Sliding-window attention (Mistral; Qwen2 when use_sliding_window).
  bool use_sliding_window = false;
  int64_t sliding_window = 0;     // 0 => none
  int64_t max_window_layers = 0;  // Qwen2: layers >= this use the window

  // Mixture of experts (Qwen2-MoE / Qwen3-MoE). num_experts == 0 => dense.
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  int64_t shared_expert_intermediate_size = 0;  // Qwen2-MoE shared expert
  bool norm_topk_prob = false;
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;
  double router_aux_loss_coef = 0.001;

  // DeepSeek-V3 (model_type "deepseek_v3"). Multi-head latent attention when
  // kv_lora_rank > 0: q (q_lora_rank > 0) and kv low-rank compression,
  // per-head q/k = [nope | rope] with the rope key shared by all heads;
  // head_dim then holds qk_rope_head_dim (the RoPE width, as HF sets it).
  int64_t q_lora_rank = 0;  // 0 => HF null: q_proj directly
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  bool rope_interleave = true;  // HF's interleaved rope layout of q/k rope
  // DeepSeek MoE: sigmoid router with a per-expert selection bias,
  // group-limited top-k; the first `first_k_dense_replace` layers are dense.
  // num_experts holds n_routed_experts.
  std::string scoring_func = "softmax";  // "softmax" (Qwen) | "sigmoid"
  int64_t n_shared_experts = 0;  // shared MLP of n * moe_intermediate_size
  int64_t first_k_dense_replace = 0;
  int64_t n_group = 1;
  int64_t topk_group = 1;
  double routed_scaling_factor = 1.0;

  // Special token ids (generation_config.json may list several eos ids).
  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;
  int64_t pad_token_id = -1;

  // Value head (critic / reward model): HF *ForTokenClassification, 1 label.
  bool is_value_model = false;

  int64_t HeadDim() const {
    return head_dim > 0 ? head_dim : hidden_size / num_attention_heads;
  }
  bool IsMoe() const { return num_experts > 0; }
  bool IsMla() const { return kv_lora_rank > 0; }
  // Whether decoder layer `layer` uses a sparse MoE block (HF rule).
  bool LayerIsMoe(int64_t layer) const {
    if (!IsMoe() || layer < first_k_dense_replace) return false;
    for (int64_t l : mlp_only_layers) {
      if (l == layer) return false;
    }
    return (layer + 1) % decoder_sparse_step == 0;
  }
  // Sliding window size for `layer` (0 => full attention).
  int64_t LayerSlidingWindow(int64_t layer) const {
    if (sliding_window <= 0) return 0;
    if (model_type == "mistral") return sliding_window;
    if (!use_sliding_window) return 0;
    return layer >= max_window_layers ? sliding_window : 0;
  }
};

}  // namespace verl::models

#endif  // VERL_MODELS_MODEL_CONFIG_H_
