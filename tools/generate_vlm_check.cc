// File: tools/generate_vlm_check.cc
//
// Test helper of generate_test.sh for images through //tools:generate.
//   --mode=setup --dir=D   writes D/tiny_vl (the sharp tiny Qwen2.5-VL with
//                          its tokenizer), D/a.png, D/b.png and D/in.jsonl:
//                          0: a.png by relative path, 1: b.png as base64
//                          bytes ("messages"), 2: two <image> for one image,
//                          3: a missing file, 4: a text-only row.
//   --mode=check --dir=D --output=out.jsonl [engine flags, --max_tokens]
//                          runs rows 0, 1 and 4 through the engine directly
//                          (PromptEncoder on absolute paths, greedy,
//                          ignore_eos) and checks generate's lines 0 and 1
//                          hold the same prompt ids, tokens and log-probs,
//                          and that the two images give different log-probs.
#include <cmath>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "tools/engine_flags.h"
#include "verl/core/file_util.h"
#include "verl/core/main_guard.h"
#include "verl/core/status.h"
#include "verl/infer/engine.h"
#include "verl/models/tokenizer/tokenizer.h"
#include "verl/models/vlm/image.h"
#include "verl/models/vlm/image_processor.h"
#include "verl/models/vlm/testing/sharp_tiny_vlm.h"
#include "verl/models/vlm/testing/test_images.h"
#include "verl/models/vlm/vlm_checkpoint.h"
#include "verl/models/vlm/vlm_processor.h"
#include "verl/rl/data/prompt_encoder.h"

ABSL_FLAG(std::string, mode, "", "setup | check");
ABSL_FLAG(std::string, dir, "", "work folder");
ABSL_FLAG(std::string, output, "", "generate's output JSONL (check)");
ABSL_FLAG(int64_t, max_tokens, 8, "max new tokens (as given to generate)");

namespace verl {
namespace {

using nlohmann::json;

json Messages(const std::string& content) {
  return json::array({{{"role", "user"}, {"content", content}}});
}
const char kPrompt[] = "<image>Which region is darker?";

using ::verl::models::vlm::testing::MakeRampImage;

absl::Status Setup(const std::string& dir) {
  auto model = models::vlm::testing::MakeSharpTinyVlm(/*seed=*/3);
  VERL_ASSIGN_OR_RETURN(models::Tokenizer tok,
                        models::vlm::MakeVlmTokenizer(model->vlm_config()));
  models::vlm::VlmSaveOptions save;
  save.tokenizer = &tok;
  VERL_RETURN_IF_ERROR(models::vlm::SaveVlmCheckpoint(
      dir + "/tiny_vl", *model, models::vlm::ImageProcessorConfig(), {}, save));
  std::string b_png;
  for (bool second : {false, true}) {
    VERL_ASSIGN_OR_RETURN(std::string png,
                          models::vlm::EncodePng(MakeRampImage(second)));
    VERL_RETURN_IF_ERROR(
        core::WriteFileAtomic(dir + (second ? "/b.png" : "/a.png"), png));
    if (second) b_png = png;
  }
  std::vector<json> rows = {
      {{"prompt", Messages(kPrompt)}, {"images", {{{"path", "a.png"}}}}},
      {{"messages", Messages(kPrompt)},
       {"images", {{{"bytes", absl::Base64Escape(b_png)}}}}},
      {{"prompt", Messages("<image><image>Compare.")},
       {"images", {{{"path", "a.png"}}}}},
      {{"prompt", Messages(kPrompt)}, {"images", {{{"path", "missing.png"}}}}},
      {{"prompt", Messages("hello")}}};
  return core::WriteJsonlAtomic(dir + "/in.jsonl", rows);
}

absl::Status Check(const std::string& dir) {
  VERL_ASSIGN_OR_RETURN(models::vlm::VlmCheckpoint ckpt,
                        models::vlm::LoadVlmCheckpoint(dir + "/tiny_vl"));
  if (!ckpt.tokenizer) return absl::InternalError("no tokenizer saved");
  rl::PromptEncoderOptions eo;
  eo.image_processor = ckpt.processor;
  rl::PromptEncoder encoder(&*ckpt.tokenizer, eo);
  VERL_ASSIGN_OR_RETURN(
      auto engine,
      infer::LLMEngine::Create(ckpt.model, tools::EngineOptionsFromFlags()));
  infer::SamplingParams params;
  params.do_sample = false;
  params.temperature = 0;
  params.max_tokens = absl::GetFlag(FLAGS_max_tokens);
  params.ignore_eos = true;
  const std::vector<json> rows = {
      {{"prompt", Messages(kPrompt)}, {"images", {dir + "/a.png"}}},
      {{"prompt", Messages(kPrompt)}, {"images", {dir + "/b.png"}}},
      {{"prompt", Messages("hello")}}};
  std::vector<std::vector<int64_t>> prompts;
  for (const json& row : rows) {
    VERL_ASSIGN_OR_RETURN(models::vlm::ProcessedPrompt p,
                          encoder.EncodeRowMultimodal(row));
    VERL_RETURN_IF_ERROR(engine
                             ->AddRequest(p.input_ids, params,
                                          {p.pixel_values, p.image_grid_thw})
                             .status());
    prompts.push_back(p.input_ids);
  }
  std::vector<infer::RequestOutput> direct = engine->RunUntilDone();
  std::sort(direct.begin(), direct.end(), [](const auto& a, const auto& b) {
    return a.request_id < b.request_id;
  });
  VERL_ASSIGN_OR_RETURN(std::vector<json> out,
                        core::ReadJsonl(absl::GetFlag(FLAGS_output)));
  if (out.size() != 5) return absl::InternalError("want 5 output lines");
  for (int i = 0; i < 2; ++i) {
    const json& o = out[i]["outputs"][0];
    const infer::CompletionOutput& d = direct[i].outputs[0];
    if (out[i]["prompt_token_ids"].get<std::vector<int64_t>>() != prompts[i])
      return absl::InternalError(absl::StrCat("line ", i, ": prompt ids"));
    if (o["token_ids"].get<std::vector<int64_t>>() != d.token_ids)
      return absl::InternalError(absl::StrCat("line ", i, ": tokens differ"));
    const std::vector<float> lp = o["logprobs"].get<std::vector<float>>();
    for (size_t t = 0; t < lp.size(); ++t) {
      if (std::abs(lp[t] - d.logprobs[t]) > 1e-5) {
        return absl::InternalError(
            absl::StrFormat("line %d token %d: log-prob %g vs the engine's %g",
                            i, t, lp[t], d.logprobs[t]));
      }
    }
  }
  // The images are used: same prompt, different images, different log-probs
  // of the first token.
  const float lp_a = out[0]["outputs"][0]["logprobs"][0].get<float>();
  const float lp_b = out[1]["outputs"][0]["logprobs"][0].get<float>();
  absl::PrintF("first-token log-probs: a.png %.7g b.png %.7g (diff %.3g)\n",
               lp_a, lp_b, std::abs(lp_a - lp_b));
  if (!(std::abs(lp_a - lp_b) > 1e-4)) {
    return absl::InternalError("the two images give the same log-probs");
  }
  return absl::OkStatus();
}

absl::Status Run() {
  const std::string dir = absl::GetFlag(FLAGS_dir);
  if (absl::GetFlag(FLAGS_mode) == "setup") return Setup(dir);
  if (absl::GetFlag(FLAGS_mode) == "check") return Check(dir);
  return absl::InvalidArgumentError("--mode=setup|check");
}

}  // namespace
}  // namespace verl

int main(int argc, char** argv) {
  return verl::core::RunToolMain(argc, argv, "generate_vlm_check", "",
                                 verl::Run);
}
