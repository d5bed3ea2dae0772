// File: verl/models/vlm/vlm_processor.cc
#include "verl/models/vlm/vlm_processor.h"

#include <torch/types.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "verl/core/status.h"
#include "verl/models/tokenizer/tokenizer_builtin.h"

namespace verl::models::vlm {
namespace {

using Json = nlohmann::json;

// Does a structured content item render as an image (the template's test)?
bool IsImageItem(const Json& item) {
  if (!item.is_object()) return false;
  auto type = item.find("type");
  if (type != item.end() && type->is_string() && *type == "image") return true;
  return item.contains("image") || item.contains("image_url");
}

int64_t CountSubstr(absl::string_view text, absl::string_view needle) {
  int64_t n = 0;
  for (size_t pos = text.find(needle); pos != absl::string_view::npos;
       pos = text.find(needle, pos + needle.size())) {
    ++n;
  }
  return n;
}

}  // namespace

const std::string& Qwen2VLChatTemplate() {
  static const std::string* kTemplate = new std::string(
      "{% set image_count = namespace(value=0) %}{% set video_count = "
      "namespace(value=0) %}{% for message in messages %}{% if loop.first and "
      "message['role'] != 'system' %}<|im_start|>system\nYou are a helpful "
      "assistant.<|im_end|>\n{% endif %}<|im_start|>{{ message['role'] "
      "}}\n{% if message['content'] is string %}{{ message['content'] "
      "}}<|im_end|>\n{% else %}{% for content in message['content'] %}{% if "
      "content['type'] == 'image' or 'image' in content or 'image_url' in "
      "content %}{% set image_count.value = image_count.value + 1 %}{% if "
      "add_vision_id %}Picture {{ image_count.value }}: {% endif "
      "%}<|vision_start|><|image_pad|><|vision_end|>{% elif content['type'] "
      "== 'video' or 'video' in content %}{% set video_count.value = "
      "video_count.value + 1 %}{% if add_vision_id %}Video {{ "
      "video_count.value }}: {% endif "
      "%}<|vision_start|><|video_pad|><|vision_end|>{% elif 'text' in content "
      "%}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endif "
      "%}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% "
      "endif %}");
  return *kTemplate;
}

Json StructureImagePlaceholders(const Json& messages) {
  Json out = messages;
  if (!out.is_array()) return out;
  for (Json& message : out) {
    if (!message.is_object()) continue;
    auto content = message.find("content");
    if (content == message.end() || !content->is_string()) continue;
    const std::string text = content->get<std::string>();
    Json items = Json::array();
    size_t start = 0;
    auto push_text = [&](size_t end) {
      if (end > start) {
        items.push_back(
            {{"type", "text"}, {"text", text.substr(start, end - start)}});
      }
    };
    for (size_t i = 0; i < text.size();) {
      const bool image = text.compare(i, 7, "<image>") == 0;
      const bool video = !image && text.compare(i, 7, "<video>") == 0;
      if (!image && !video) {
        ++i;
        continue;
      }
      push_text(i);
      items.push_back({{"type", image ? "image" : "video"}});
      i += 7;
      start = i;
    }
    push_text(text.size());
    *content = std::move(items);
  }
  return out;
}

int64_t CountImageItems(const Json& messages) {
  int64_t n = 0;
  if (!messages.is_array()) return 0;
  for (const Json& message : messages) {
    if (!message.is_object()) continue;
    auto content = message.find("content");
    if (content == message.end()) continue;
    if (content->is_string()) {
      n += CountSubstr(content->get_ref<const std::string&>(), "<image>");
    } else if (content->is_array()) {
      for (const Json& item : *content) n += IsImageItem(item) ? 1 : 0;
    }
  }
  return n;
}

absl::StatusOr<std::string> ExpandImagePads(
    absl::string_view text, const std::vector<std::array<int64_t, 3>>& grids,
    int64_t merge_size, absl::string_view image_token) {
  const int64_t found = CountSubstr(text, image_token);
  if (found != static_cast<int64_t>(grids.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("the prompt has ", found, " ", image_token,
                     " placeholders but ", grids.size(), " images were given"));
  }
  std::string out;
  size_t start = 0;
  for (const auto& g : grids) {
    const size_t pos = text.find(image_token, start);
    absl::StrAppend(&out, text.substr(start, pos - start));
    const int64_t n = NumImageTokens(g[0], g[1], g[2], merge_size);
    for (int64_t i = 0; i < n; ++i) absl::StrAppend(&out, image_token);
    start = pos + image_token.size();
  }
  absl::StrAppend(&out, text.substr(start));
  return out;
}

absl::StatusOr<Tokenizer> MakeVlmTokenizer(const VlmConfig& config) {
  const std::pair<const char*, int64_t> specials[] = {
      {"<|vision_start|>", config.vision_start_token_id},
      {"<|vision_end|>", config.vision_end_token_id},
      {"<|image_pad|>", config.image_token_id},
      {"<|video_pad|>", config.video_token_id}};
  Json tokenizer = Json::parse(BuiltinTokenizerJson());
  Json tok_config = Json::parse(BuiltinTokenizerConfigJson());
  for (const auto& [content, id] : specials) {
    if (id < kBuiltinVocabSize || id >= config.text.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          content, " id ", id, " must lie in [", kBuiltinVocabSize, ", ",
          config.text.vocab_size, ") for the built-in tokenizer"));
    }
    Json token = {
        {"id", id},        {"content", content}, {"single_word", false},
        {"lstrip", false}, {"rstrip", false},    {"normalized", false},
        {"special", true}};
    tokenizer["added_tokens"].push_back(token);
    token.erase("id");
    tok_config["added_tokens_decoder"][std::to_string(id)] = token;
  }
  tok_config["chat_template"] = Qwen2VLChatTemplate();
  return Tokenizer::FromJson(tokenizer.dump(), tok_config.dump(), "",
                             "built-in VLM tokenizer");
}

Json MultiModalInputsToJson(const at::Tensor& pixel_values,
                            const at::Tensor& image_grid_thw) {
  const at::Tensor pv = pixel_values.to(at::kFloat).cpu().contiguous();
  const auto* bytes = reinterpret_cast<const uint8_t*>(pv.data_ptr<float>());
  Json grids = Json::array();
  const at::Tensor thw = image_grid_thw.to(at::kLong).cpu().contiguous();
  const int64_t* g = thw.data_ptr<int64_t>();
  for (int64_t i = 0; i < thw.size(0); ++i) {
    grids.push_back({g[3 * i], g[3 * i + 1], g[3 * i + 2]});
  }
  return {{"pixel_values",
           {{"dtype", "float32"},
            {"shape", {pv.size(0), pv.size(1)}},
            {"data", Json::binary(std::vector<uint8_t>(
                         bytes, bytes + pv.numel() * sizeof(float)))}}},
          {"image_grid_thw", grids}};
}

absl::StatusOr<MultiModalInputs> MultiModalInputsFromJson(const Json& json) {
  auto bad = [](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("multi_modal_inputs: ", what));
  };
  if (!json.is_object() || !json.contains("pixel_values") ||
      !json.contains("image_grid_thw")) {
    return bad("needs \"pixel_values\" and \"image_grid_thw\"");
  }
  const Json& pv = json["pixel_values"];
  if (!pv.is_object() || pv.value("dtype", "") != "float32" ||
      !pv.contains("shape") || !pv["shape"].is_array() ||
      pv["shape"].size() != 2 || !pv.contains("data") ||
      !pv["data"].is_binary()) {
    return bad("pixel_values must be {dtype: float32, shape: [n, d], data}");
  }
  const int64_t rows = pv["shape"][0].get<int64_t>();
  const int64_t cols = pv["shape"][1].get<int64_t>();
  const auto& data = pv["data"].get_binary();
  if (rows < 0 || cols <= 0 ||
      static_cast<int64_t>(data.size()) != rows * cols * 4) {
    return bad("pixel_values data does not match its shape");
  }
  MultiModalInputs out;
  out.pixel_values = at::empty({rows, cols}, at::kFloat);
  std::memcpy(out.pixel_values.data_ptr<float>(), data.data(), data.size());
  const Json& grids = json["image_grid_thw"];
  if (!grids.is_array()) return bad("image_grid_thw must be a list");
  out.image_grid_thw =
      at::empty({static_cast<int64_t>(grids.size()), 3}, at::kLong);
  int64_t* g = out.image_grid_thw.data_ptr<int64_t>();
  int64_t patches = 0;
  for (size_t i = 0; i < grids.size(); ++i) {
    if (!grids[i].is_array() || grids[i].size() != 3) {
      return bad("image_grid_thw rows must be [t, h, w]");
    }
    for (int k = 0; k < 3; ++k) {
      if (!grids[i][k].is_number_integer() || grids[i][k].get<int64_t>() <= 0)
        return bad("image_grid_thw entries must be positive integers");
      g[3 * i + k] = grids[i][k].get<int64_t>();
    }
    patches += g[3 * i] * g[3 * i + 1] * g[3 * i + 2];
  }
  if (patches != rows) {
    return bad(absl::StrCat("image_grid_thw covers ", patches,
                            " patches, pixel_values has ", rows));
  }
  return out;
}

absl::StatusOr<MultiModalInputs> ConcatMultiModalInputs(
    const std::vector<Json>& rows) {
  std::vector<at::Tensor> pvs, grids;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].is_null()) continue;
    auto one = MultiModalInputsFromJson(rows[i]);
    if (!one.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("row ", i, ": ", one.status().message()));
    }
    pvs.push_back(one->pixel_values);
    grids.push_back(one->image_grid_thw);
  }
  MultiModalInputs out;
  if (!pvs.empty()) {
    out.pixel_values = at::cat(pvs, 0);
    out.image_grid_thw = at::cat(grids, 0);
  }
  return out;
}

VlmProcessor::VlmProcessor(Tokenizer tokenizer,
                           ImageProcessorConfig image_config,
                           const std::string& chat_template)
    : tokenizer_(std::move(tokenizer)),
      formatter_(chat_template.empty()
                     ? ChatFormatter(tokenizer_)
                     : ChatFormatter({{"default", chat_template}},
                                     {{"bos_token", tokenizer_.bos_token()},
                                      {"eos_token", tokenizer_.eos_token()},
                                      {"pad_token", tokenizer_.pad_token()},
                                      {"unk_token", tokenizer_.unk_token()}},
                                     "processor chat template")),
      image_config_(std::move(image_config)) {}

absl::StatusOr<ProcessedPrompt> VlmProcessor::ProcessMessages(
    const Json& messages, const std::vector<Image>& images,
    bool add_generation_prompt, absl::string_view kwargs_json) const {
  const Json structured = StructureImagePlaceholders(messages);
  const int64_t items = CountImageItems(structured);
  if (items != static_cast<int64_t>(images.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("the prompt has ", items, " image items (<image>) but ",
                     images.size(), " images were given"));
  }
  ChatRequest request;
  request.messages_json = structured.dump();
  request.add_generation_prompt = add_generation_prompt;
  request.kwargs_json = std::string(kwargs_json);
  VERL_ASSIGN_OR_RETURN(std::string text, formatter_.Apply(request));
  return ProcessText(text, images);
}

absl::StatusOr<ProcessedPrompt> VlmProcessor::ProcessText(
    absl::string_view text, const std::vector<Image>& images) const {
  ProcessedPrompt out;
  std::vector<std::array<int64_t, 3>> grids;
  if (!images.empty()) {
    VERL_ASSIGN_OR_RETURN(ProcessedImages processed,
                          PreprocessImages(images, image_config_));
    at::Tensor thw = processed.image_grid_thw.to(at::kLong).contiguous();
    const int64_t* p = thw.data_ptr<int64_t>();
    for (int64_t i = 0; i < thw.size(0); ++i) {
      grids.push_back({p[3 * i], p[3 * i + 1], p[3 * i + 2]});
    }
    out.pixel_values = std::move(processed.pixel_values);
    out.image_grid_thw = std::move(thw);
  }
  VERL_ASSIGN_OR_RETURN(out.text,
                        ExpandImagePads(text, grids, image_config_.merge_size));
  out.input_ids = tokenizer_.Encode(out.text);
  return out;
}

}  // namespace verl::models::vlm
