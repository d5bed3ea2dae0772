// File: verl/models/gguf_export.cc
#include "verl/models/gguf_export.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/tensor.h>

#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "verl/ckpt/safetensors_sharded.h"
#include "verl/core/file_util.h"
#include "verl/core/status.h"
#include "verl/models/hf_config.h"
#include "verl/models/model_config.h"

namespace verl::models {
namespace {

using ckpt::GgmlType;
using ckpt::GgufMetadata;
using ckpt::GgufValue;
using nlohmann::json;

// llama.cpp's token types.
constexpr int32_t kTokenNormal = 1;
constexpr int32_t kTokenControl = 3;
constexpr int32_t kTokenUserDefined = 4;
constexpr int32_t kTokenUnused = 5;

// Pre-tokenizer split patterns llama.cpp knows by name.
constexpr char kQwen2Pattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr char kLlama3Pattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

absl::Status Refuse(const std::string& dir, const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat(dir, ": cannot export to GGUF: ", why));
}

uint32_t FileType(GgmlType type) {  // llama_ftype
  switch (type) {
    case GgmlType::kF32:
      return 0;
    case GgmlType::kF16:
      return 1;
    case GgmlType::kQ8_0:
      return 7;
    case GgmlType::kBF16:
      return 32;
  }
  return 0;
}

// llama.cpp's architecture for a dense HF model_type.
absl::StatusOr<std::string> Architecture(const ModelConfig& c,
                                         const std::string& dir) {
  if (c.is_value_model) return Refuse(dir, "value models have no LM head");
  if (c.IsMoe()) return Refuse(dir, "MoE models are not supported yet");
  if (c.rope_scaling.rope_type != "default" &&
      !(c.rope_scaling.rope_type == "llama3" &&
        (c.model_type == "llama" || c.model_type == "mistral"))) {
    return Refuse(dir,
                  absl::StrCat("rope_scaling type '", c.rope_scaling.rope_type,
                               "' is not supported"));
  }
  if (c.hidden_act != "silu") {
    return Refuse(dir, absl::StrCat("hidden_act '", c.hidden_act, "'"));
  }
  if (c.model_type == "llama" || c.model_type == "mistral") return "llama";
  if (c.model_type == "qwen2" || c.model_type == "qwen3") return c.model_type;
  return Refuse(dir, absl::StrCat("model_type '", c.model_type,
                                  "' (supported: llama, mistral, qwen2, "
                                  "qwen3)"));
}

// HF tensor name -> llama.cpp's, or nullopt for tensors llama.cpp does not
// read (e.g. rotary inv_freq buffers).
std::optional<std::string> GgufName(const std::string& hf) {
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  static const std::vector<std::pair<std::string, std::string>> kLayer = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
  };
  constexpr absl::string_view kPrefix = "model.layers.";
  if (!absl::StartsWith(hf, kPrefix)) return std::nullopt;
  const std::string rest = hf.substr(kPrefix.size());
  const size_t dot = rest.find('.');
  int layer = 0;
  if (dot == std::string::npos ||
      !absl::SimpleAtoi(rest.substr(0, dot), &layer))
    return std::nullopt;
  const std::string suffix = rest.substr(dot + 1);
  for (const auto& [from, to] : kLayer) {
    if (suffix == from) return absl::StrCat("blk.", layer, ".", to);
  }
  return std::nullopt;
}

// convert_hf_to_gguf's LlamaModel.permute: HF rotate-half rows back to
// interleaved pairs, per head.
at::Tensor PermuteForLlamaRope(const at::Tensor& w, int64_t heads) {
  std::vector<int64_t> shape = w.sizes().vec();
  std::vector<int64_t> split = {heads, 2, w.size(0) / heads / 2};
  for (size_t i = 1; i < shape.size(); ++i) split.push_back(shape[i]);
  return w.reshape(split).transpose(1, 2).reshape(shape);
}

std::string PreTokenizerName(const json& tok, const std::string& dir,
                             absl::Status* status) {
  const json& pre = tok.value("pre_tokenizer", json());
  std::vector<json> parts;
  if (pre.is_object() && pre.value("type", "") == "Sequence") {
    for (const json& p : pre.value("pretokenizers", json::array()))
      parts.push_back(p);
  } else if (pre.is_object()) {
    parts.push_back(pre);
  }
  std::string pattern;
  bool byte_level = false, byte_level_regex = false;
  for (const json& p : parts) {
    const std::string type = p.value("type", "");
    if (type == "Split" && p.contains("pattern") && p["pattern"].is_object() &&
        p["pattern"].contains("Regex")) {
      pattern = p["pattern"]["Regex"].get<std::string>();
    } else if (type == "ByteLevel") {
      byte_level = true;
      byte_level_regex = p.value("use_regex", true);
    }
  }
  if (!byte_level) {
    *status = Refuse(dir, "the tokenizer is not byte-level BPE");
    return "";
  }
  if (pattern == kQwen2Pattern) return "qwen2";
  if (pattern == kLlama3Pattern) return "llama-bpe";
  if (pattern.empty() && byte_level_regex) return "gpt-2";
  *status = Refuse(dir,
                   "its pre-tokenizer split pattern is not one llama.cpp "
                   "knows by name (Qwen2, Llama-3, GPT-2)");
  return "";
}

// tokenizer.ggml.* from tokenizer.json / tokenizer_config.json, with
// convert_hf_to_gguf's rules (vocab padded to the model's vocab_size with
// unused [PAD<i>] tokens; added special tokens are control tokens).
absl::StatusOr<GgufMetadata> TokenizerKv(const std::string& dir,
                                         const ModelConfig& config) {
  VERL_ASSIGN_OR_RETURN(json tok, core::ReadJsonFile(dir + "/tokenizer.json"));
  json tok_config = json::object();
  if (absl::StatusOr<json> c =
          core::ReadJsonFile(dir + "/tokenizer_config.json");
      c.ok() && c->is_object()) {
    tok_config = *std::move(c);
  }
  const json& model = tok.value("model", json::object());
  if (!model.is_object() || model.value("type", "") != "BPE" ||
      !model.contains("vocab") || !model["vocab"].is_object()) {
    return Refuse(dir, "tokenizer.json has no BPE model with a vocab");
  }
  absl::Status pre_status;
  const std::string pre = PreTokenizerName(tok, dir, &pre_status);
  if (!pre_status.ok()) return pre_status;

  std::map<int64_t, std::pair<std::string, int32_t>> by_id;
  for (const auto& [token, id] : model["vocab"].items()) {
    if (!id.is_number_integer()) return Refuse(dir, "vocab id not an integer");
    by_id[id.get<int64_t>()] = {token, kTokenNormal};
  }
  for (const json& added : tok.value("added_tokens", json::array())) {
    if (!added.contains("id") || !added.contains("content")) continue;
    by_id[added["id"].get<int64_t>()] = {
        added["content"].get<std::string>(),
        added.value("special", false) ? kTokenControl : kTokenUserDefined};
  }
  const int64_t vocab = std::max<int64_t>(
      config.vocab_size, by_id.empty() ? 0 : by_id.rbegin()->first + 1);
  if (vocab != config.vocab_size) {
    return Refuse(
        dir, absl::StrCat("the tokenizer has id ", vocab - 1,
                          " past the model's vocab_size ", config.vocab_size));
  }
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int64_t i = 0; i < vocab; ++i) {
    auto it = by_id.find(i);
    if (it == by_id.end()) {
      tokens.push_back(absl::StrCat("[PAD", i, "]"));
      types.push_back(kTokenUnused);
    } else {
      tokens.push_back(it->second.first);
      types.push_back(it->second.second);
    }
  }
  std::vector<std::string> merges;
  for (const json& m : model.value("merges", json::array())) {
    if (m.is_string()) {
      merges.push_back(m.get<std::string>());
    } else if (m.is_array() && m.size() == 2) {
      merges.push_back(
          absl::StrCat(m[0].get<std::string>(), " ", m[1].get<std::string>()));
    } else {
      return Refuse(dir, "tokenizer.json has a malformed merge");
    }
  }
  GgufMetadata kv = {
      {"tokenizer.ggml.model", GgufValue::String("gpt2")},
      {"tokenizer.ggml.pre", GgufValue::String(pre)},
      {"tokenizer.ggml.tokens", GgufValue::StringArray(tokens)},
      {"tokenizer.ggml.token_type", GgufValue::Int32Array(types)},
      {"tokenizer.ggml.merges", GgufValue::StringArray(merges)},
  };
  // Special ids: tokenizer_config's tokens, else config.json's ids.
  auto id_of = [&](const char* key, int64_t fallback) -> int64_t {
    const json& v = tok_config.value(key, json());
    std::string content;
    if (v.is_string()) content = v.get<std::string>();
    if (v.is_object()) content = v.value("content", "");
    for (int64_t i = 0; i < vocab && !content.empty(); ++i) {
      if (tokens[i] == content) return i;
    }
    return fallback;
  };
  const int64_t eos = id_of(
      "eos_token", config.eos_token_ids.empty() ? -1 : config.eos_token_ids[0]);
  const int64_t bos = id_of("bos_token", config.bos_token_id);
  const int64_t pad = id_of("pad_token", config.pad_token_id);
  if (bos >= 0)
    kv.push_back({"tokenizer.ggml.bos_token_id", GgufValue::Uint32(bos)});
  if (eos >= 0)
    kv.push_back({"tokenizer.ggml.eos_token_id", GgufValue::Uint32(eos)});
  if (pad >= 0) {
    kv.push_back({"tokenizer.ggml.padding_token_id", GgufValue::Uint32(pad)});
  }
  kv.push_back({"tokenizer.ggml.add_bos_token",
                GgufValue::Bool(tok_config.value("add_bos_token", false))});
  const json& tmpl = tok_config.value("chat_template", json());
  if (tmpl.is_string()) {
    kv.push_back({"tokenizer.chat_template", GgufValue::String(tmpl)});
  }
  return kv;
}

// convert_hf_to_gguf's rope_freqs for Llama-3 rope scaling: per frequency
// pair the factor llama.cpp divides the frequency by (HF's
// _compute_llama3_parameters in llama.cpp's form), float32 as there.
at::Tensor Llama3RopeFactors(const ModelConfig& c) {
  const int64_t dim = c.HeadDim();
  const RopeScaling& rs = c.rope_scaling;
  const double old_len = rs.original_max_position_embeddings;
  const double low_wavelen = old_len / rs.low_freq_factor;
  const double high_wavelen = old_len / rs.high_freq_factor;
  std::vector<float> factors;
  for (int64_t i = 0; i < dim; i += 2) {
    const float freq = 1.0f / std::pow(static_cast<float>(c.rope_theta),
                                       static_cast<float>(i) / dim);
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < high_wavelen) {
      factors.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      factors.push_back(rs.factor);
    } else {
      const double smooth = (old_len / wavelen - rs.low_freq_factor) /
                            (rs.high_freq_factor - rs.low_freq_factor);
      factors.push_back(1.0 / ((1 - smooth) / rs.factor + smooth));
    }
  }
  return at::tensor(factors, at::kFloat);
}

struct Planned {
  std::string hf_name;
  ckpt::GgufTensorSpec spec;
  int64_t permute_heads = 0;  // > 0: llama rope permutation
};

}  // namespace

absl::Status ExportHfFolderToGguf(const std::string& hf_dir,
                                  const std::string& gguf_path,
                                  const GgufExportOptions& options) {
  json raw;
  VERL_ASSIGN_OR_RETURN(ModelConfig config,
                        ReadHfConfig(hf_dir + "/config.json", &raw));
  VERL_ASSIGN_OR_RETURN(std::string arch, Architecture(config, hf_dir));
  VERL_ASSIGN_OR_RETURN(GgufMetadata tokenizer_kv, TokenizerKv(hf_dir, config));

  std::string name = options.name;
  if (name.empty()) {
    std::vector<std::string> parts =
        absl::StrSplit(hf_dir, '/', absl::SkipEmpty());
    name = parts.empty() ? "model" : parts.back();
  }
  const std::string a = arch;
  GgufMetadata kv = {
      {"general.architecture", GgufValue::String(a)},
      {"general.name", GgufValue::String(name)},
      {"general.file_type", GgufValue::Uint32(FileType(options.type))},
      {"general.quantization_version", GgufValue::Uint32(2)},
      {a + ".context_length",
       GgufValue::Uint32(config.max_position_embeddings)},
      {a + ".embedding_length", GgufValue::Uint32(config.hidden_size)},
      {a + ".block_count", GgufValue::Uint32(config.num_hidden_layers)},
      {a + ".feed_forward_length", GgufValue::Uint32(config.intermediate_size)},
      {a + ".attention.head_count",
       GgufValue::Uint32(config.num_attention_heads)},
      {a + ".attention.head_count_kv",
       GgufValue::Uint32(config.num_key_value_heads)},
      {a + ".rope.freq_base", GgufValue::Float32(config.rope_theta)},
      {a + ".attention.layer_norm_rms_epsilon",
       GgufValue::Float32(config.rms_norm_eps)},
      {a + ".attention.key_length", GgufValue::Uint32(config.HeadDim())},
      {a + ".attention.value_length", GgufValue::Uint32(config.HeadDim())},
  };
  if (arch == "llama") {
    kv.push_back({a + ".vocab_size", GgufValue::Uint32(config.vocab_size)});
    kv.push_back(
        {a + ".rope.dimension_count", GgufValue::Uint32(config.HeadDim())});
  }
  kv.insert(kv.end(), tokenizer_kv.begin(), tokenizer_kv.end());

  // Pass 1: names, shapes and types (the mapping reads no data).
  std::vector<Planned> plan;
  std::set<std::string> seen;
  VERL_RETURN_IF_ERROR(ckpt::ForEachTensorInFolder(
      hf_dir, [&](const std::string& hf, const at::Tensor& t) -> absl::Status {
        if (hf == "lm_head.weight" && config.tie_word_embeddings) {
          return absl::OkStatus();  // llama.cpp reuses token_embd
        }
        std::optional<std::string> g = GgufName(hf);
        if (!g) {
          if (absl::EndsWith(hf, "rotary_emb.inv_freq"))
            return absl::OkStatus();
          return Refuse(
              hf_dir, absl::StrCat("no llama.cpp name for tensor '", hf, "'"));
        }
        Planned p;
        p.hf_name = hf;
        p.spec.name = *g;
        p.spec.shape = t.sizes().vec();
        p.spec.type = t.dim() == 2 ? options.type : GgmlType::kF32;
        if (p.spec.type == GgmlType::kQ8_0 && t.size(-1) % 32 != 0) {
          p.spec.type = GgmlType::kF16;  // as the converter falls back
        }
        if (arch == "llama" && absl::EndsWith(hf, "q_proj.weight")) {
          p.permute_heads = config.num_attention_heads;
        }
        if (arch == "llama" && absl::EndsWith(hf, "k_proj.weight")) {
          p.permute_heads = config.num_key_value_heads;
        }
        if (arch == "llama" && (absl::EndsWith(hf, "q_proj.bias") ||
                                absl::EndsWith(hf, "k_proj.bias"))) {
          return Refuse(hf_dir, "Llama q/k biases are not supported");
        }
        seen.insert(*g);
        plan.push_back(std::move(p));
        return absl::OkStatus();
      }));
  for (const char* required : {"token_embd.weight", "output_norm.weight"}) {
    if (!seen.count(required)) {
      return Refuse(hf_dir, absl::StrCat("missing tensor for ", required));
    }
  }
  std::vector<ckpt::GgufTensorSpec> specs;
  std::map<std::string, const Planned*> by_hf;
  for (const Planned& p : plan) {
    specs.push_back(p.spec);
    by_hf[p.hf_name] = &p;
  }
  at::Tensor rope_freqs;
  if (config.rope_scaling.rope_type == "llama3") {
    rope_freqs = Llama3RopeFactors(config);
    specs.push_back(
        {"rope_freqs.weight", {rope_freqs.size(0)}, GgmlType::kF32});
  }
  VERL_ASSIGN_OR_RETURN(std::unique_ptr<ckpt::GgufWriter> writer,
                        ckpt::GgufWriter::Create(gguf_path, kv, specs));
  // Pass 2: one tensor at a time.
  VERL_RETURN_IF_ERROR(ckpt::ForEachTensorInFolder(
      hf_dir, [&](const std::string& hf, const at::Tensor& t) -> absl::Status {
        auto it = by_hf.find(hf);
        if (it == by_hf.end()) return absl::OkStatus();
        at::Tensor w = t.to(at::kFloat);
        if (it->second->permute_heads > 0) {
          w = PermuteForLlamaRope(w, it->second->permute_heads);
        }
        return writer->Write(it->second->spec.name, w);
      }));
  if (rope_freqs.defined()) {
    VERL_RETURN_IF_ERROR(writer->Write("rope_freqs.weight", rope_freqs));
  }
  return writer->Finish();
}

}  // namespace verl::models
