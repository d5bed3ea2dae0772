// File: tools/generate.cc
//
// Offline batch generation with the rollout engine (verl/infer):
//   generate --model=/path/to/hf_folder | --preset=tiny-qwen2
//            --input=prompts.jsonl --output=responses.jsonl [sampling flags]
// Each input line is one of
//   {"prompt": "raw text"}                    encoded as is
//   {"prompt": [{"role": ..., "content": ...}, ...]}  (verl row format) or
//   {"messages": [...]}                       chat template applied with
//                                             add_generation_prompt
//   {"prompt_token_ids": [1, 2, 3]}           used as is
// With a vision-language model (--model folder whose config.json has
// vision_config, or --preset=tiny-qwen2.5-vl / tiny-qwen2-vl) a messages
// row may carry images in verl's multimodal row format:
//   {"prompt": [messages with "<image>" placeholders],
//    "images": [{"path": "a.png"} | {"bytes": "<base64>"} | "a.png", ...]}
// (relative paths resolve against --input's folder); the row is processed
// as the trainer's datasets do (rl::PromptEncoder: chat template, image
// preprocessing, <|image_pad|> expansion) and the pixel values go to the
// engine with the prompt. A bad image or a placeholder/image count mismatch
// is an {"index", "error"} line.
// Each output line: {"index", "prompt_token_ids", "outputs": [{"index",
// "text", "token_ids", "logprobs", "finish_reason"}]} or {"index", "error"}
// for a bad line (the others are still served). A progress bar goes to
// stderr, a summary (requests, tokens, tokens/s, prefix-cache hit rate,
// preemptions, prefill and decode tok/s) to stdout.
#include <glog/logging.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "tools/engine_flags.h"
#include "tools/model_loading.h"
#include "verl/core/file_util.h"
#include "verl/core/main_guard.h"
#include "verl/core/malloc_tuning.h"
#include "verl/core/status.h"
#include "verl/infer/engine.h"
#include "verl/models/tokenizer/chat_template.h"
#include "verl/models/tokenizer/tokenizer.h"
#include "verl/models/vlm/vlm_processor.h"
#include "verl/rl/data/prompt_encoder.h"

ABSL_FLAG(std::string, model, "", "HF model folder (config.json, safetensors)");
ABSL_FLAG(std::string, preset, "",
          "built-in model preset (random weights) instead of --model");
ABSL_FLAG(std::string, tokenizer, "",
          "tokenizer folder (default: --model; built-in for --preset)");
ABSL_FLAG(uint64_t, model_seed, 0, "init seed for --preset weights");
ABSL_FLAG(std::string, input, "", "input JSONL of prompts");
ABSL_FLAG(std::string, output, "", "output JSONL of responses");
// Sampling.
ABSL_FLAG(int64_t, n, 1, "samples per prompt");
ABSL_FLAG(double, temperature, 1.0, "sampling temperature (0: greedy)");
ABSL_FLAG(int64_t, top_k, -1, "top-k (-1: off)");
ABSL_FLAG(double, top_p, 1.0, "top-p in (0, 1]");
ABSL_FLAG(bool, do_sample, true, "false: greedy");
ABSL_FLAG(int64_t, max_tokens, 256, "max new tokens (response_length)");
ABSL_FLAG(bool, ignore_eos, false, "do not stop at EOS");
ABSL_FLAG(std::string, stop_token_ids, "", "comma-separated extra stop ids");
ABSL_FLAG(int64_t, seed, -1, "sampling seed (-1: per-request default)");
ABSL_FLAG(bool, progress, true, "progress bar on stderr");

namespace verl {
namespace {

using nlohmann::json;

absl::StatusOr<tools::LoadedModel> LoadModel() {
  return tools::LoadModel(
      {absl::GetFlag(FLAGS_model), absl::GetFlag(FLAGS_preset),
       absl::GetFlag(FLAGS_tokenizer), absl::GetFlag(FLAGS_model_seed)});
}

// Whether the row carries images (a non-empty, non-null "images").
bool HasImages(const json& row) {
  auto it = row.find("images");
  return it != row.end() && !it->is_null() && !(it->is_array() && it->empty());
}

// Token ids and processed images of a row with images: "messages" becomes
// the encoder's "prompt", relative image paths resolve against `base`,
// base64 "bytes" are decoded; then the trainer's PromptEncoder.
absl::StatusOr<std::vector<int64_t>> ImageRowIds(
    json row, const std::optional<rl::PromptEncoder>& encoder,
    const std::filesystem::path& base, infer::MultiModalInput* mm) {
  if (!encoder) {
    return absl::InvalidArgumentError(
        "the row has images but the model is not a vision-language model "
        "(or has no tokenizer)");
  }
  if (row.contains("messages")) row["prompt"] = row["messages"];
  json& images = row["images"];
  if (!images.is_array()) {
    return absl::InvalidArgumentError("\"images\" must be a list of images");
  }
  for (size_t k = 0; k < images.size(); ++k) {
    json& e = images[k];
    const std::string name = absl::StrCat("images[", k, "]");
    if (e.is_object() && e.contains("bytes")) {
      std::string raw;
      if (!e["bytes"].is_string() ||
          !absl::Base64Unescape(e["bytes"].get<std::string>(), &raw)) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ".bytes is not a base64 string"));
      }
      e = json::binary(std::vector<uint8_t>(raw.begin(), raw.end()));
      continue;
    }
    json* path = e.is_object() && e.contains("path") ? &e["path"] : &e;
    if (!path->is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, " must be {\"path\": ...}, {\"bytes\": <base64>} or a path"));
    }
    std::filesystem::path p(path->get<std::string>());
    if (p.is_relative()) p = base / p;
    e = p.string();
  }
  VERL_ASSIGN_OR_RETURN(models::vlm::ProcessedPrompt processed,
                        encoder->EncodeRowMultimodal(row));
  *mm = {processed.pixel_values, processed.image_grid_thw};
  return std::move(processed.input_ids);
}

// Token ids of one input row.
absl::StatusOr<std::vector<int64_t>> PromptIds(
    const json& row, const std::optional<models::Tokenizer>& tok) {
  if (row.contains("prompt_token_ids")) {
    const json& ids = row["prompt_token_ids"];
    if (!ids.is_array()) {
      return absl::InvalidArgumentError("prompt_token_ids must be an array");
    }
    std::vector<int64_t> out;
    for (const json& t : ids) {
      if (!t.is_number_integer()) {
        return absl::InvalidArgumentError(
            "prompt_token_ids must hold integers");
      }
      out.push_back(t.get<int64_t>());
    }
    return out;
  }
  const json* messages = nullptr;
  std::string text;
  if (row.contains("messages")) {
    messages = &row["messages"];
  } else if (row.contains("prompt") && row["prompt"].is_array()) {
    messages = &row["prompt"];
  } else if (row.contains("prompt") && row["prompt"].is_string()) {
    text = row["prompt"].get<std::string>();
  } else {
    return absl::InvalidArgumentError(
        "row needs \"prompt\" (text or messages), \"messages\" or "
        "\"prompt_token_ids\"");
  }
  if (!tok) {
    return absl::FailedPreconditionError(
        "no tokenizer loaded; give prompt_token_ids");
  }
  if (messages != nullptr) {
    models::ChatRequest req;
    req.messages_json = messages->dump();
    req.add_generation_prompt = true;
    VERL_ASSIGN_OR_RETURN(text, models::ApplyChatTemplate(*tok, req));
  }
  return tok->Encode(text);
}

void DrawProgress(int64_t done, int64_t total, int64_t tokens, double secs) {
  constexpr int kWidth = 30;
  const int filled =
      total == 0 ? kWidth : static_cast<int>(kWidth * done / total);
  std::fprintf(stderr, "\r[%s%s] %lld/%lld requests  %lld tokens  %.1f tok/s",
               std::string(filled, '#').c_str(),
               std::string(kWidth - filled, '.').c_str(),
               static_cast<long long>(done), static_cast<long long>(total),
               static_cast<long long>(tokens), secs > 0 ? tokens / secs : 0.0);
  std::fflush(stderr);
}

absl::Status Run() {
  if (absl::GetFlag(FLAGS_input).empty() ||
      absl::GetFlag(FLAGS_output).empty()) {
    return absl::InvalidArgumentError("--input and --output are required");
  }
  VERL_ASSIGN_OR_RETURN(std::vector<json> rows,
                        core::ReadJsonl(absl::GetFlag(FLAGS_input)));
  VERL_ASSIGN_OR_RETURN(tools::LoadedModel loaded, LoadModel());
  std::optional<rl::PromptEncoder> encoder;
  if (loaded.image_processor && loaded.tokenizer) {
    rl::PromptEncoderOptions eo;
    eo.image_processor = loaded.image_processor;
    encoder.emplace(&*loaded.tokenizer, std::move(eo));
  }
  const std::filesystem::path input_dir =
      std::filesystem::path(absl::GetFlag(FLAGS_input)).parent_path();

  const infer::EngineOptions opt = tools::EngineOptionsFromFlags();
  VERL_ASSIGN_OR_RETURN(auto engine,
                        infer::LLMEngine::Create(loaded.model, opt));

  infer::SamplingParams params;
  params.n = absl::GetFlag(FLAGS_n);
  params.temperature = absl::GetFlag(FLAGS_temperature);
  params.top_k = absl::GetFlag(FLAGS_top_k);
  params.top_p = absl::GetFlag(FLAGS_top_p);
  params.do_sample = absl::GetFlag(FLAGS_do_sample);
  params.max_tokens = absl::GetFlag(FLAGS_max_tokens);
  params.ignore_eos = absl::GetFlag(FLAGS_ignore_eos);
  if (absl::GetFlag(FLAGS_seed) >= 0) params.seed = absl::GetFlag(FLAGS_seed);
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_stop_token_ids),
                                            ',', absl::SkipEmpty())) {
    int64_t id;
    if (!absl::SimpleAtoi(s, &id)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--stop_token_ids: '", s, "' is not an integer"));
    }
    params.stop_token_ids.push_back(id);
  }
  VERL_RETURN_IF_ERROR(infer::ValidateSamplingParams(params));

  std::vector<json> out(rows.size());
  std::map<int64_t, size_t> line_of;
  int64_t bad = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    infer::MultiModalInput mm;
    absl::StatusOr<std::vector<int64_t>> ids =
        HasImages(rows[i]) ? ImageRowIds(rows[i], encoder, input_dir, &mm)
                           : PromptIds(rows[i], loaded.tokenizer);
    absl::StatusOr<int64_t> id =
        ids.ok() ? engine->AddRequest(*ids, params, mm) : ids.status();
    if (!id.ok()) {
      out[i] = {{"index", i}, {"error", std::string(id.status().message())}};
      LOG(WARNING) << absl::GetFlag(FLAGS_input) << " line " << i + 1 << ": "
                   << id.status().message();
      ++bad;
      continue;
    }
    line_of[*id] = i;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto secs = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
        .count();
  };
  const int64_t total = static_cast<int64_t>(line_of.size());
  int64_t done = 0, tokens = 0;
  const bool progress = absl::GetFlag(FLAGS_progress);
  // Steps that computed prompt tokens count as prefill time, the others
  // (one new token per running sequence) as decode time.
  double prefill_s = 0, decode_s = 0;
  int64_t decode_only_tokens = 0;
  while (engine->HasUnfinished()) {
    const infer::EngineStats before = engine->stats();
    const double step0 = secs();
    std::vector<infer::RequestOutput> finished = engine->Step();
    const infer::EngineStats after = engine->stats();
    if (after.prefill_tokens > before.prefill_tokens) {
      prefill_s += secs() - step0;
    } else {
      decode_s += secs() - step0;
      decode_only_tokens += after.decode_tokens - before.decode_tokens;
    }
    for (infer::RequestOutput& r : finished) {
      json outputs = json::array();
      for (const infer::CompletionOutput& c : r.outputs) {
        json o = {{"index", c.index},
                  {"token_ids", c.token_ids},
                  {"logprobs", c.logprobs},
                  {"finish_reason", c.finish_reason}};
        if (loaded.tokenizer) {
          o["text"] =
              loaded.tokenizer->Decode(c.token_ids, /*skip_special=*/true);
        }
        tokens += static_cast<int64_t>(c.token_ids.size());
        outputs.push_back(std::move(o));
      }
      const size_t line = line_of.at(r.request_id);
      out[line] = {{"index", line},
                   {"prompt_token_ids", r.prompt_token_ids},
                   {"outputs", std::move(outputs)}};
      ++done;
    }
    if (progress) DrawProgress(done, total, tokens, secs());
  }
  if (progress) std::fprintf(stderr, "\n");
  VERL_RETURN_IF_ERROR(
      core::WriteJsonlAtomic(absl::GetFlag(FLAGS_output), out));
  const infer::EngineStats s = engine->stats();
  const double elapsed = secs();
  absl::PrintF(
      "requests=%d failed=%d prompt_tokens=%d generated_tokens=%d "
      "time_s=%.2f tokens_per_s=%.1f prefix_cache_hit_rate=%.3f "
      "preemptions=%d steps=%d prefill_tok_s=%.1f decode_tok_s=%.1f\n",
      total, bad, s.prompt_tokens, tokens, elapsed,
      elapsed > 0 ? tokens / elapsed : 0.0, s.prefix_cache_hit_rate,
      s.preemptions, s.steps,
      prefill_s > 0 ? s.prefill_tokens / prefill_s : 0.0,
      decode_s > 0 ? decode_only_tokens / decode_s : 0.0);
  return absl::OkStatus();
}

}  // namespace
}  // namespace verl

int main(int argc, char** argv) {
  // Freed tensors stay in the heap instead of being faulted in again every
  // step (core/malloc_tuning.h).
  verl::core::ReexecWithHeapRetainingMalloc(argv);
  return verl::core::RunToolMain(argc, argv, "generate", "", verl::Run);
}
