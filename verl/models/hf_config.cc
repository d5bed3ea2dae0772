#include "verl/models/hf_config.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "verl/core/file_util.h"
#include "verl/core/status.h"

namespace verl::models {
namespace {

using Json = nlohmann::json;

// What each supported family encodes in code rather than in config keys.
struct Family {
  const char* model_type;
  const char* class_prefix;     // "Qwen2" -> Qwen2ForCausalLM
  bool qkv_bias_implied;        // Qwen2: q/k/v always biased
  bool has_attention_bias_key;  // Llama, Qwen3: `attention_bias`
  bool qk_norm;                 // Qwen3: per-head q/k RMSNorm
  int64_t default_head_dim;     // Qwen3: 128; others hidden / heads
  bool qwen_sliding;            // use_sliding_window + max_window_layers
  bool mistral_sliding;         // `sliding_window` applies to all layers
  bool moe;
  bool shared_expert;       // Qwen2-MoE
  int64_t default_experts;  // HF config class defaults
  int64_t default_experts_per_tok;
  int64_t default_moe_intermediate;
  int64_t default_shared_intermediate;
  bool deepseek = false;  // MLA + sigmoid-router MoE, own keys (see below)
};

constexpr Family kFamilies[] = {
    {"llama", "Llama", false, true, false, 0, false, false, false, false},
    {"qwen2", "Qwen2", true, false, false, 0, true, false, false, false},
    {"qwen3", "Qwen3", false, true, true, 128, true, false, false, false},
    {"mistral", "Mistral", false, false, false, 0, false, true, false, false},
    {"qwen2_moe", "Qwen2Moe", true, false, false, 0, true, false, true, true,
     60, 4, 1408, 5632},
    {"qwen3_moe", "Qwen3Moe", false, true, true, 128, true, false, true, false,
     128, 8, 768, 0},
    {"deepseek_v3", "DeepseekV3", false, true, false, 0, false, false, false,
     false, 0, 0, 0, 0, /*deepseek=*/true},
};

constexpr char kCausalLm[] = "ForCausalLM";
constexpr char kTokenClassification[] = "ForTokenClassification";

const Family* FamilyByModelType(absl::string_view model_type) {
  for (const Family& f : kFamilies) {
    if (model_type == f.model_type) return &f;
  }
  return nullptr;
}

std::string ArchitectureName(const Family& f, bool value_model) {
  return absl::StrCat(f.class_prefix,
                      value_model ? kTokenClassification : kCausalLm);
}

// Typed access to the keys of one JSON object; the first type error sticks.
// Absent and null keys leave the output unchanged (the HF default applies).
class Fields {
 public:
  Fields(const Json& json, std::string source)
      : json_(json), source_(std::move(source)) {}

  bool Has(const char* key) const {
    auto it = json_.find(key);
    return it != json_.end() && !it->is_null();
  }
  void Int(const char* key, int64_t* out) {
    if (const Json* v = Get(key)) {
      if (v->is_number_integer()) {
        *out = v->get<int64_t>();
      } else {
        Fail(key, "an integer", *v);
      }
    }
  }
  void Double(const char* key, double* out) {
    if (const Json* v = Get(key)) {
      if (v->is_number()) {
        *out = v->get<double>();
      } else {
        Fail(key, "a number", *v);
      }
    }
  }
  void Bool(const char* key, bool* out) {
    if (const Json* v = Get(key)) {
      if (v->is_boolean()) {
        *out = v->get<bool>();
      } else {
        Fail(key, "true or false", *v);
      }
    }
  }
  void String(const char* key, std::string* out) {
    if (const Json* v = Get(key)) {
      if (v->is_string()) {
        *out = v->get<std::string>();
      } else {
        Fail(key, "a string", *v);
      }
    }
  }
  // An integer or a list of integers (eos_token_id, mlp_only_layers).
  void IntList(const char* key, std::vector<int64_t>* out) {
    const Json* v = Get(key);
    if (v == nullptr) return;
    std::vector<int64_t> ids;
    if (v->is_number_integer()) {
      ids.push_back(v->get<int64_t>());
    } else if (v->is_array()) {
      for (const Json& x : *v) {
        if (!x.is_number_integer()) return Fail(key, "a list of integers", *v);
        ids.push_back(x.get<int64_t>());
      }
    } else {
      return Fail(key, "an integer or a list of integers", *v);
    }
    *out = std::move(ids);
  }
  template <typename T>
  void Optional(const char* key, std::optional<T>* out) {
    if (!Has(key)) return;
    T value{};
    if constexpr (std::is_same_v<T, bool>) {
      Bool(key, &value);
    } else if constexpr (std::is_same_v<T, double>) {
      Double(key, &value);
    } else {
      Int(key, &value);
    }
    *out = value;
  }
  void Check(bool ok, absl::string_view what) {
    if (!ok && status_.ok()) {
      status_ = absl::InvalidArgumentError(absl::StrCat(source_, ": ", what));
    }
  }
  const absl::Status& status() const { return status_; }

 private:
  const Json* Get(const char* key) const {
    auto it = json_.find(key);
    if (it == json_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  void Fail(const char* key, absl::string_view want, const Json& got) {
    Check(false,
          absl::StrCat("'", key, "' must be ", want, ", got ", got.dump()));
  }

  const Json& json_;
  std::string source_;
  absl::Status status_;
};

// Reads an HF rope-scaling object (rope_scaling or rope_parameters).
absl::Status ParseRope(const Json& rope, const std::string& source,
                       bool allow_yarn, RopeScaling* out) {
  if (rope.is_null()) return absl::OkStatus();
  if (!rope.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": must be an object or null"));
  }
  Fields f(rope, source);
  std::string type = "default";
  f.String("type", &type);  // older files
  f.String("rope_type", &type);
  if (type == "default") {
    *out = RopeScaling();
  } else if (type == "llama3") {
    out->rope_type = type;
    for (const char* key : {"factor", "low_freq_factor", "high_freq_factor",
                            "original_max_position_embeddings"}) {
      f.Check(f.Has(key),
              absl::StrCat("llama3 rope scaling needs '", key, "'"));
    }
    f.Double("factor", &out->factor);
    f.Double("low_freq_factor", &out->low_freq_factor);
    f.Double("high_freq_factor", &out->high_freq_factor);
    f.Int("original_max_position_embeddings",
          &out->original_max_position_embeddings);
  } else if (type == "yarn" && allow_yarn) {
    *out = RopeScaling();
    out->rope_type = type;
    for (const char* key : {"factor", "original_max_position_embeddings"}) {
      f.Check(f.Has(key), absl::StrCat("yarn rope scaling needs '", key, "'"));
    }
    f.Double("factor", &out->factor);
    f.Int("original_max_position_embeddings",
          &out->original_max_position_embeddings);
    f.Double("beta_fast", &out->beta_fast);
    f.Double("beta_slow", &out->beta_slow);
    f.Double("attention_factor", &out->attention_factor);
    f.Double("mscale", &out->mscale);
    f.Double("mscale_all_dim", &out->mscale_all_dim);
    bool truncate = true;
    f.Bool("truncate", &truncate);
    f.Check(truncate, "yarn truncate=false is not supported");
    f.Check(out->factor >= 1 && out->original_max_position_embeddings > 0,
            "yarn needs factor >= 1 and original_max_position_embeddings > 0");
  } else {
    f.Check(false, absl::StrCat("rope type '", type,
                                "' is not supported (supported: default, "
                                "llama3",
                                allow_yarn ? ", yarn)" : ")"));
  }
  return f.status();
}

bool SameRope(const RopeScaling& a, const RopeScaling& b) {
  if (a.rope_type != b.rope_type) return false;
  if (a.rope_type == "default") return true;
  if (a.rope_type == "yarn") {
    return a.factor == b.factor &&
           a.original_max_position_embeddings ==
               b.original_max_position_embeddings &&
           a.beta_fast == b.beta_fast && a.beta_slow == b.beta_slow &&
           a.attention_factor == b.attention_factor && a.mscale == b.mscale &&
           a.mscale_all_dim == b.mscale_all_dim;
  }
  return a.factor == b.factor && a.low_freq_factor == b.low_freq_factor &&
         a.high_freq_factor == b.high_freq_factor &&
         a.original_max_position_embeddings ==
             b.original_max_position_embeddings;
}

Json RopeToJson(const RopeScaling& r) {
  if (r.rope_type == "default") return {{"rope_type", "default"}};
  if (r.rope_type == "yarn") {
    Json out = {{"rope_type", r.rope_type},
                {"factor", r.factor},
                {"original_max_position_embeddings",
                 r.original_max_position_embeddings},
                {"beta_fast", r.beta_fast},
                {"beta_slow", r.beta_slow}};
    if (r.attention_factor > 0) out["attention_factor"] = r.attention_factor;
    if (r.mscale != 0) out["mscale"] = r.mscale;
    if (r.mscale_all_dim != 0) out["mscale_all_dim"] = r.mscale_all_dim;
    return out;
  }
  return {
      {"rope_type", r.rope_type},
      {"factor", r.factor},
      {"low_freq_factor", r.low_freq_factor},
      {"high_freq_factor", r.high_freq_factor},
      {"original_max_position_embeddings", r.original_max_position_embeddings}};
}

// Sets `key` unless `out` already holds an equal value (numbers compare by
// value, so 10000 in the source stays 10000, not 10000.0).
void Put(Json& out, const char* key, const Json& value) {
  auto it = out.find(key);
  if (it == out.end() || *it != value) out[key] = value;
}
// Like Put, but a null value is not added where the key is absent.
void PutOptional(Json& out, const char* key, const Json& value) {
  if (value.is_null() && !out.contains(key)) return;
  Put(out, key, value);
}
Json IdOrNull(int64_t id) { return id >= 0 ? Json(id) : Json(nullptr); }
// The ids without repeats; one id stays an int unless the source had a list
// (a list that collapses to one id is written as that id); none is null.
Json IdList(const std::vector<int64_t>& ids, const Json& out, const char* key) {
  if (ids.empty()) return nullptr;
  std::vector<int64_t> unique;
  for (int64_t id : ids) {
    if (std::find(unique.begin(), unique.end(), id) == unique.end()) {
      unique.push_back(id);
    }
  }
  auto it = out.find(key);
  const bool was_list = it != out.end() && it->is_array();
  if (unique.size() == 1 && (!was_list || ids.size() > 1)) return unique[0];
  return unique;
}

void ReadIds(Fields& f, int64_t* bos, std::vector<int64_t>* eos, int64_t* pad) {
  f.Int("bos_token_id", bos);
  f.IntList("eos_token_id", eos);
  f.Int("pad_token_id", pad);
}

void WriteIds(Json& out, int64_t bos, const std::vector<int64_t>& eos,
              int64_t pad) {
  PutOptional(out, "bos_token_id", IdOrNull(bos));
  PutOptional(out, "eos_token_id", IdList(eos, out, "eos_token_id"));
  PutOptional(out, "pad_token_id", IdOrNull(pad));
}

// DeepSeek-V3 keys (HF DeepseekV3Config defaults). transformers' model
// always routes with sigmoid scores and "noaux_tc" and makes every layer
// from first_k_dense_replace on an MoE layer, so other values of
// scoring_func, topk_method and moe_layer_freq are refused, not ignored.
void ReadDeepseekKeys(const Json& json, Fields& f, ModelConfig* c) {
  auto null_is_zero = [&](const char* key, int64_t* out) {
    auto it = json.find(key);
    if (it != json.end() && it->is_null()) *out = 0;
    f.Int(key, out);
  };
  c->q_lora_rank = 1536;
  c->kv_lora_rank = 512;
  c->qk_nope_head_dim = 128;
  c->qk_rope_head_dim = 64;
  c->v_head_dim = 128;
  c->num_experts = 256;
  c->num_experts_per_tok = 8;
  c->moe_intermediate_size = 2048;
  c->n_shared_experts = 1;
  c->first_k_dense_replace = 3;
  c->n_group = 8;
  c->topk_group = 4;
  c->routed_scaling_factor = 2.5;
  c->norm_topk_prob = true;
  c->scoring_func = "sigmoid";
  null_is_zero("q_lora_rank", &c->q_lora_rank);
  f.Int("kv_lora_rank", &c->kv_lora_rank);
  f.Int("qk_nope_head_dim", &c->qk_nope_head_dim);
  f.Int("qk_rope_head_dim", &c->qk_rope_head_dim);
  f.Int("v_head_dim", &c->v_head_dim);
  f.Bool("rope_interleave", &c->rope_interleave);
  null_is_zero("n_routed_experts", &c->num_experts);
  null_is_zero("n_shared_experts", &c->n_shared_experts);
  f.Int("num_experts_per_tok", &c->num_experts_per_tok);
  f.Int("moe_intermediate_size", &c->moe_intermediate_size);
  f.Int("first_k_dense_replace", &c->first_k_dense_replace);
  f.Int("n_group", &c->n_group);
  f.Int("topk_group", &c->topk_group);
  f.Double("routed_scaling_factor", &c->routed_scaling_factor);
  f.Bool("norm_topk_prob", &c->norm_topk_prob);
  f.String("scoring_func", &c->scoring_func);
  std::string topk_method = "noaux_tc";
  f.String("topk_method", &topk_method);
  int64_t moe_layer_freq = 1;
  f.Int("moe_layer_freq", &moe_layer_freq);
  f.Check(c->scoring_func == "sigmoid",
          absl::StrCat("scoring_func '", c->scoring_func,
                       "' is not supported for deepseek_v3 (only 'sigmoid')"));
  f.Check(topk_method == "noaux_tc",
          absl::StrCat("topk_method '", topk_method,
                       "' is not supported for deepseek_v3 (only 'noaux_tc')"));
  f.Check(moe_layer_freq == 1,
          absl::StrCat("moe_layer_freq ", moe_layer_freq,
                       " is not supported (only 1, as transformers has it)"));
  c->head_dim = c->qk_rope_head_dim;  // the RoPE width, as HF sets head_dim
}

void CheckDeepseek(const ModelConfig& c, Fields& f) {
  f.Check(c.kv_lora_rank > 0 && c.q_lora_rank >= 0 && c.qk_nope_head_dim > 0 &&
              c.qk_rope_head_dim > 0 && c.qk_rope_head_dim % 2 == 0 &&
              c.v_head_dim > 0,
          absl::StrCat("invalid MLA shape: q_lora_rank=", c.q_lora_rank,
                       " kv_lora_rank=", c.kv_lora_rank,
                       " qk_nope_head_dim=", c.qk_nope_head_dim,
                       " qk_rope_head_dim=", c.qk_rope_head_dim,
                       " (must be even) v_head_dim=", c.v_head_dim));
  const RopeScaling& rs = c.rope_scaling;
  if (rs.rope_type == "yarn") {
    // transformers versions differ on which factor yarn uses when these two
    // disagree; real DeepSeek configs keep them equal.
    const double ratio = static_cast<double>(c.max_position_embeddings) /
                         rs.original_max_position_embeddings;
    f.Check(ratio == rs.factor,
            absl::StrCat("yarn factor ", rs.factor,
                         " must equal max_position_embeddings / "
                         "original_max_position_embeddings = ",
                         ratio));
  }
  if (c.num_experts == 0) return;  // dense
  const int64_t per_group = c.n_group > 0 ? c.num_experts / c.n_group : 0;
  f.Check(c.n_group > 0 && c.num_experts % c.n_group == 0 && per_group >= 2 &&
              c.topk_group > 0 && c.topk_group <= c.n_group &&
              c.num_experts_per_tok > 0 &&
              c.num_experts_per_tok <= c.topk_group * per_group &&
              c.moe_intermediate_size > 0 && c.n_shared_experts >= 0 &&
              c.first_k_dense_replace >= 0,
          absl::StrCat(
              "invalid MoE settings: n_routed_experts=", c.num_experts,
              " n_group=", c.n_group, " topk_group=", c.topk_group,
              " num_experts_per_tok=", c.num_experts_per_tok,
              " moe_intermediate_size=", c.moe_intermediate_size,
              " n_shared_experts=", c.n_shared_experts,
              " first_k_dense_replace=", c.first_k_dense_replace,
              " (groups need >= 2 experts, top-k must fit the kept groups)"));
}

// 0 is written as null: absent keys would read back as HF's defaults.
void WriteDeepseekKeys(const ModelConfig& c, Json& out) {
  Put(out, "q_lora_rank",
      c.q_lora_rank > 0 ? Json(c.q_lora_rank) : Json(nullptr));
  Put(out, "kv_lora_rank", c.kv_lora_rank);
  Put(out, "qk_nope_head_dim", c.qk_nope_head_dim);
  Put(out, "qk_rope_head_dim", c.qk_rope_head_dim);
  Put(out, "v_head_dim", c.v_head_dim);
  Put(out, "rope_interleave", c.rope_interleave);
  Put(out, "n_routed_experts",
      c.num_experts > 0 ? Json(c.num_experts) : Json(nullptr));
  Put(out, "n_shared_experts",
      c.n_shared_experts > 0 ? Json(c.n_shared_experts) : Json(nullptr));
  Put(out, "num_experts_per_tok", c.num_experts_per_tok);
  Put(out, "moe_intermediate_size", c.moe_intermediate_size);
  Put(out, "first_k_dense_replace", c.first_k_dense_replace);
  Put(out, "n_group", c.n_group);
  Put(out, "topk_group", c.topk_group);
  Put(out, "routed_scaling_factor", c.routed_scaling_factor);
  Put(out, "norm_topk_prob", c.norm_topk_prob);
  Put(out, "scoring_func", c.scoring_func);
  Put(out, "topk_method", "noaux_tc");
}

absl::Status WriteJson(const std::string& path, const Json& json) {
  return core::WriteFileAtomic(path, json.dump(2) + "\n");
}

}  // namespace

std::vector<std::string> SupportedHfArchitectures() {
  std::vector<std::string> out;
  for (bool value : {false, true}) {
    for (const Family& f : kFamilies) out.push_back(ArchitectureName(f, value));
  }
  return out;
}

absl::StatusOr<ModelConfig> ModelConfigFromHfJson(const Json& json,
                                                  absl::string_view source) {
  const std::string src(source);
  if (!json.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(src, ": not a JSON object"));
  }
  Fields f(json, src);
  ModelConfig c;
  // Architecture: architectures[0], else the causal LM of model_type.
  std::string model_type;
  f.String("model_type", &model_type);
  std::string arch;
  auto archs = json.find("architectures");
  if (archs != json.end() && !archs->is_null()) {
    if (!archs->is_array() || archs->empty() || !(*archs)[0].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(
          src, ": 'architectures' must be a non-empty list of strings"));
    }
    arch = (*archs)[0].get<std::string>();
  } else if (const Family* fam = FamilyByModelType(model_type)) {
    arch = ArchitectureName(*fam, false);
  }
  const Family* family = nullptr;
  for (const Family& fam : kFamilies) {
    for (bool value : {false, true}) {
      if (arch == ArchitectureName(fam, value)) {
        family = &fam;
        c.is_value_model = value;
      }
    }
  }
  if (family == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        src, ": unsupported architecture '",
        arch.empty() ? absl::StrCat("model_type=", model_type) : arch,
        "' (supported: ", absl::StrJoin(SupportedHfArchitectures(), ", "),
        ")"));
  }
  if (!model_type.empty() && model_type != family->model_type) {
    return absl::InvalidArgumentError(
        absl::StrCat(src, ": model_type '", model_type, "' does not match ",
                     arch, " (expected '", family->model_type, "')"));
  }
  c.architecture = arch;
  c.model_type = family->model_type;

  for (const char* key : {"vocab_size", "hidden_size", "intermediate_size",
                          "num_hidden_layers", "num_attention_heads"}) {
    f.Check(f.Has(key), absl::StrCat("missing required key '", key, "'"));
  }
  f.Int("vocab_size", &c.vocab_size);
  f.Int("hidden_size", &c.hidden_size);
  f.Int("intermediate_size", &c.intermediate_size);
  f.Int("num_hidden_layers", &c.num_hidden_layers);
  f.Int("num_attention_heads", &c.num_attention_heads);
  c.num_key_value_heads = c.num_attention_heads;  // null / absent => MHA
  f.Int("num_key_value_heads", &c.num_key_value_heads);
  c.head_dim = family->default_head_dim;
  f.Int("head_dim", &c.head_dim);
  f.Int("max_position_embeddings", &c.max_position_embeddings);
  f.Double("rms_norm_eps", &c.rms_norm_eps);
  f.Bool("tie_word_embeddings", &c.tie_word_embeddings);
  f.String("hidden_act", &c.hidden_act);
  f.String("torch_dtype", &c.torch_dtype);
  f.String("dtype", &c.torch_dtype);  // transformers v5 name

  // RoPE: top-level rope_theta + rope_scaling, or v5 rope_parameters.
  f.Double("rope_theta", &c.rope_theta);
  VERL_RETURN_IF_ERROR(f.status());
  if (json.contains("rope_scaling")) {
    VERL_RETURN_IF_ERROR(ParseRope(json["rope_scaling"], src + ": rope_scaling",
                                   family->deepseek, &c.rope_scaling));
  }
  if (f.Has("rope_parameters")) {
    const Json& params = json["rope_parameters"];
    VERL_RETURN_IF_ERROR(ParseRope(params, src + ": rope_parameters",
                                   family->deepseek, &c.rope_scaling));
    Fields pf(params, src + ": rope_parameters");
    pf.Double("rope_theta", &c.rope_theta);
    VERL_RETURN_IF_ERROR(pf.status());
  }

  // Attention bias and norms the family implies.
  c.attention_bias = family->qkv_bias_implied;
  if (family->has_attention_bias_key)
    f.Bool("attention_bias", &c.attention_bias);
  c.qk_norm = family->qk_norm;
  bool mlp_bias = false;
  f.Bool("mlp_bias", &mlp_bias);
  f.Check(!mlp_bias, "mlp_bias=true is not supported");

  // Sliding windows.
  if (family->qwen_sliding) {
    c.max_window_layers = 28;  // HF default
    f.Bool("use_sliding_window", &c.use_sliding_window);
    f.Int("sliding_window", &c.sliding_window);
    f.Int("max_window_layers", &c.max_window_layers);
  } else if (family->mistral_sliding) {
    f.Int("sliding_window", &c.sliding_window);
    c.use_sliding_window = c.sliding_window > 0;
  }

  // Mixture of experts.
  if (family->moe) {
    c.num_experts = family->default_experts;
    c.num_experts_per_tok = family->default_experts_per_tok;
    c.moe_intermediate_size = family->default_moe_intermediate;
    f.Int("num_experts", &c.num_experts);
    f.Int("num_experts_per_tok", &c.num_experts_per_tok);
    f.Int("moe_intermediate_size", &c.moe_intermediate_size);
    if (family->shared_expert) {
      c.shared_expert_intermediate_size = family->default_shared_intermediate;
      f.Int("shared_expert_intermediate_size",
            &c.shared_expert_intermediate_size);
    }
    f.Bool("norm_topk_prob", &c.norm_topk_prob);
    f.Int("decoder_sparse_step", &c.decoder_sparse_step);
    f.IntList("mlp_only_layers", &c.mlp_only_layers);
    f.Double("router_aux_loss_coef", &c.router_aux_loss_coef);
  }
  if (family->deepseek) ReadDeepseekKeys(json, f, &c);
  ReadIds(f, &c.bos_token_id, &c.eos_token_ids, &c.pad_token_id);

  // Value model: one label.
  if (c.is_value_model) {
    auto labels = json.find("id2label");
    if (labels != json.end() && labels->is_object()) {
      f.Check(
          labels->size() == 1,
          absl::StrCat(arch, " as a value model needs 1 label, id2label has ",
                       labels->size()));
    }
    int64_t num_labels = 1;
    f.Int("num_labels", &num_labels);
    f.Check(num_labels == 1, "a value model needs num_labels = 1");
  }
  VERL_RETURN_IF_ERROR(f.status());

  // Shape sanity.
  f.Check(c.vocab_size > 0 && c.hidden_size > 0 && c.intermediate_size > 0 &&
              c.num_hidden_layers > 0 && c.num_attention_heads > 0,
          "vocab_size, hidden_size, intermediate_size, num_hidden_layers and "
          "num_attention_heads must be positive");
  f.Check(c.num_key_value_heads > 0 &&
              c.num_attention_heads % c.num_key_value_heads == 0,
          absl::StrCat("num_attention_heads (", c.num_attention_heads,
                       ") must be a multiple of num_key_value_heads (",
                       c.num_key_value_heads, ")"));
  f.Check(c.head_dim > 0 || c.hidden_size % c.num_attention_heads == 0,
          "hidden_size must be a multiple of num_attention_heads when "
          "head_dim is not set");
  f.Check(c.head_dim >= 0 && c.sliding_window >= 0,
          "negative head_dim or "
          "sliding_window");
  if (family->moe) {
    f.Check(c.num_experts > 0 && c.num_experts_per_tok > 0 &&
                c.num_experts_per_tok <= c.num_experts &&
                c.moe_intermediate_size > 0 && c.decoder_sparse_step > 0,
            absl::StrCat("invalid MoE settings: num_experts=", c.num_experts,
                         " num_experts_per_tok=", c.num_experts_per_tok,
                         " moe_intermediate_size=", c.moe_intermediate_size,
                         " decoder_sparse_step=", c.decoder_sparse_step));
  }
  if (family->deepseek) CheckDeepseek(c, f);
  VERL_RETURN_IF_ERROR(f.status());
  return c;
}

absl::StatusOr<Json> ModelConfigToHfJson(const ModelConfig& c,
                                         const Json& base) {
  const Family* family = FamilyByModelType(c.model_type);
  if (family == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot write config.json for model_type '", c.model_type,
        "' (supported: ", absl::StrJoin(SupportedHfArchitectures(), ", "),
        ")"));
  }
  auto invalid = [&c](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("model_type ", c.model_type, ": ", what));
  };
  if (c.num_attention_heads <= 0) return invalid("num_attention_heads <= 0");
  if (c.qk_norm != family->qk_norm) {
    return invalid(absl::StrCat("qk_norm must be ", family->qk_norm));
  }
  if (family->qkv_bias_implied && !c.attention_bias) {
    return invalid("q/k/v projections always have bias");
  }
  if (!family->qkv_bias_implied && !family->has_attention_bias_key &&
      c.attention_bias) {
    return invalid("attention_bias is not expressible");
  }
  if (!family->moe && !family->deepseek && c.num_experts > 0) {
    return invalid("not a mixture-of-experts family");
  }
  Json out = base.is_object() ? base : Json::object();
  Put(out, "architectures",
      Json::array({ArchitectureName(*family, c.is_value_model)}));
  Put(out, "model_type", c.model_type);
  Put(out, "vocab_size", c.vocab_size);
  Put(out, "hidden_size", c.hidden_size);
  Put(out, "intermediate_size", c.intermediate_size);
  Put(out, "num_hidden_layers", c.num_hidden_layers);
  Put(out, "num_attention_heads", c.num_attention_heads);
  Put(out, "num_key_value_heads", c.num_key_value_heads);
  if (family->deepseek) {
    out.erase("head_dim");  // HF derives it from qk_rope_head_dim
  } else if (family->default_head_dim > 0) {
    Put(out, "head_dim", c.HeadDim());
  } else if (c.head_dim > 0) {
    Put(out, "head_dim", c.head_dim);
  } else {
    out.erase("head_dim");
  }
  Put(out, "max_position_embeddings", c.max_position_embeddings);
  Put(out, "rms_norm_eps", c.rms_norm_eps);
  Put(out, "tie_word_embeddings", c.tie_word_embeddings);
  Put(out, "hidden_act", c.hidden_act);
  const bool v5_dtype = out.contains("dtype") && !out.contains("torch_dtype");
  Put(out, v5_dtype ? "dtype" : "torch_dtype", c.torch_dtype);

  // RoPE in the style the source used; untouched when it already matches.
  const bool v5_rope =
      out.contains("rope_parameters") && !out.contains("rope_scaling");
  if (v5_rope) {
    Json& params = out["rope_parameters"];
    RopeScaling old;
    double old_theta = 0;
    bool same = params.is_object() &&
                ParseRope(params, "", family->deepseek, &old).ok() &&
                SameRope(old, c.rope_scaling);
    if (same) {
      Fields pf(params, "");
      pf.Double("rope_theta", &old_theta);
      same = pf.status().ok() && old_theta == c.rope_theta;
    }
    if (!same) {
      params = RopeToJson(c.rope_scaling);
      params["rope_theta"] = c.rope_theta;
    }
  } else {
    Put(out, "rope_theta", c.rope_theta);
    RopeScaling old;
    const bool same =
        out.contains("rope_scaling") &&
        ParseRope(out["rope_scaling"], "", family->deepseek, &old).ok() &&
        SameRope(old, c.rope_scaling);
    if (!same) {
      PutOptional(out, "rope_scaling",
                  c.rope_scaling.rope_type == "default"
                      ? Json(nullptr)
                      : RopeToJson(c.rope_scaling));
    }
  }

  if (family->has_attention_bias_key)
    Put(out, "attention_bias", c.attention_bias);
  if (family->qwen_sliding) {
    Put(out, "use_sliding_window", c.use_sliding_window);
    PutOptional(out, "sliding_window",
                c.sliding_window > 0 ? Json(c.sliding_window) : Json(nullptr));
    Put(out, "max_window_layers", c.max_window_layers);
  } else if (family->mistral_sliding) {
    PutOptional(out, "sliding_window",
                c.sliding_window > 0 ? Json(c.sliding_window) : Json(nullptr));
  }
  if (family->moe) {
    Put(out, "num_experts", c.num_experts);
    Put(out, "num_experts_per_tok", c.num_experts_per_tok);
    Put(out, "moe_intermediate_size", c.moe_intermediate_size);
    if (family->shared_expert) {
      Put(out, "shared_expert_intermediate_size",
          c.shared_expert_intermediate_size);
    }
    Put(out, "norm_topk_prob", c.norm_topk_prob);
    Put(out, "decoder_sparse_step", c.decoder_sparse_step);
    if (!c.mlp_only_layers.empty() || out.contains("mlp_only_layers")) {
      Put(out, "mlp_only_layers", c.mlp_only_layers);  // HF default: []
    }
    Put(out, "router_aux_loss_coef", c.router_aux_loss_coef);
  }
  if (family->deepseek) WriteDeepseekKeys(c, out);
  WriteIds(out, c.bos_token_id, c.eos_token_ids, c.pad_token_id);
  if (c.is_value_model && !out.contains("id2label")) {
    out["id2label"] = {{"0", "LABEL_0"}};
    out["label2id"] = {{"LABEL_0", 0}};
  }
  return out;
}

absl::StatusOr<ModelConfig> ReadHfConfig(const std::string& path, Json* raw) {
  VERL_ASSIGN_OR_RETURN(Json json, core::ReadJsonFile(path));
  VERL_ASSIGN_OR_RETURN(ModelConfig config, ModelConfigFromHfJson(json, path));
  if (raw != nullptr) *raw = std::move(json);
  return config;
}

absl::Status WriteHfConfig(const std::string& path, const ModelConfig& config,
                           const Json& base) {
  auto json = ModelConfigToHfJson(config, base);
  if (!json.ok()) return Annotate(json.status(), path);
  return WriteJson(path, *json);
}

absl::StatusOr<GenerationConfig> GenerationConfigFromJson(
    const Json& json, absl::string_view source) {
  if (!json.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not a JSON object"));
  }
  Fields f(json, std::string(source));
  GenerationConfig g;
  ReadIds(f, &g.bos_token_id, &g.eos_token_ids, &g.pad_token_id);
  f.Optional("do_sample", &g.do_sample);
  f.Optional("temperature", &g.temperature);
  f.Optional("top_p", &g.top_p);
  f.Optional("top_k", &g.top_k);
  f.Optional("repetition_penalty", &g.repetition_penalty);
  f.Optional("max_new_tokens", &g.max_new_tokens);
  VERL_RETURN_IF_ERROR(f.status());
  return g;
}

Json GenerationConfigToJson(const GenerationConfig& g, const Json& base) {
  Json out = base.is_object() ? base : Json::object();
  WriteIds(out, g.bos_token_id, g.eos_token_ids, g.pad_token_id);
  auto put = [&out](const char* key, const auto& value) {
    if (value.has_value()) {
      Put(out, key, *value);
    } else {
      out.erase(key);
    }
  };
  put("do_sample", g.do_sample);
  put("temperature", g.temperature);
  put("top_p", g.top_p);
  put("top_k", g.top_k);
  put("repetition_penalty", g.repetition_penalty);
  put("max_new_tokens", g.max_new_tokens);
  return out;
}

absl::StatusOr<GenerationConfig> ReadGenerationConfig(const std::string& path,
                                                      Json* raw) {
  VERL_ASSIGN_OR_RETURN(Json json, core::ReadJsonFile(path));
  VERL_ASSIGN_OR_RETURN(GenerationConfig g,
                        GenerationConfigFromJson(json, path));
  if (raw != nullptr) *raw = std::move(json);
  return g;
}

absl::Status WriteGenerationConfig(const std::string& path,
                                   const GenerationConfig& config,
                                   const Json& base) {
  return WriteJson(path, GenerationConfigToJson(config, base));
}

std::vector<int64_t> StopTokenIds(const ModelConfig& config,
                                  const GenerationConfig* generation) {
  std::vector<int64_t> ids;
  auto add = [&ids](const std::vector<int64_t>& more) {
    for (int64_t id : more) {
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
    }
  };
  if (generation != nullptr) add(generation->eos_token_ids);
  add(config.eos_token_ids);
  return ids;
}

}  // namespace verl::models
