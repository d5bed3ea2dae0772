// File: tools/vlm_probe.cc
//
// How fast does a vision-language preset learn to read images? Supervised
// training of answer tokens after image prompts, outside the trainer (plain
// AdamW on ForwardMultimodal, no RL machinery), printing the loss and the
// teacher-forced exact-match accuracy on held-out rows per question type.
// docs/vlm.md ("Why the quickstart's curve does not rise yet") reports its
// figures. Tasks (--task):
//   colour   an 84x84 image of one flat colour out of 4; "What colour is the
//            image?" -> R / G / B / Y (the answer is in all 9 image tokens)
//   corner   a red 28x28 square (one merged token) in one corner of a beige
//            84x84 image; "Which corner is the red square in?" -> NE / NW /
//            SE / SW (the answer is in 1 of the 9 image tokens, by position)
//   geo_map  the built-in geo_map rows (--geo_* as the builtin dataset's
//            options: types, landmarks, districts, grid, cell_px)
// --long_question pads the colour/corner question to the length of the
// geo_map one, --rope_theta overrides the preset's text rope_theta.
//   bazel run //tools:vlm_probe -- --task=corner --steps=300
#include <ATen/ATen.h>
#include <torch/optim/adamw.h>

#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "verl/core/status.h"
#include "verl/models/vlm/image.h"
#include "verl/models/vlm/image_processor.h"
#include "verl/models/vlm/qwen2_vl.h"
#include "verl/models/vlm/vlm_processor.h"
#include "verl/rl/data/geo_map_task.h"

ABSL_FLAG(std::string, task, "corner", "colour | corner | geo_map");
ABSL_FLAG(std::string, preset, "tiny-qwen2.5-vl", "vision-language preset");
ABSL_FLAG(int64_t, steps, 300, "AdamW steps");
ABSL_FLAG(int64_t, batch, 16, "rows per step");
ABSL_FLAG(double, lr, 2e-3, "AdamW learning rate (no weight decay)");
ABSL_FLAG(double, rope_theta, 0, "text rope_theta (0: the preset's)");
ABSL_FLAG(int64_t, eval_every, 50, "held-out accuracy every N steps");
ABSL_FLAG(int64_t, seed, 1, "init and data seed");
ABSL_FLAG(bool, long_question, false, "colour/corner: geo_map-length text");
ABSL_FLAG(std::string, geo_types, "quadrant+nearest+distance+bearing",
          "geo_map question types, '+'-separated");
ABSL_FLAG(int32_t, geo_landmarks, 3, "geo_map landmarks per map");
ABSL_FLAG(bool, geo_districts, false, "geo_map districts");
ABSL_FLAG(int32_t, geo_grid, 6, "geo_map grid");
ABSL_FLAG(int32_t, geo_cell_px, 14, "geo_map cell size in pixels");

namespace verl {
namespace {

using models::vlm::Image;

struct Example {
  std::string type;
  std::vector<int64_t> prompt, answer;  // answer ends with EOS
  at::Tensor pixel_values, grid;
};

// An 84x84 image: `rgb` everywhere, or beige with a red square in corner q
// (0 NW, 1 NE, 2 SW, 3 SE).
Image Synthetic(const uint8_t rgb[3], int corner) {
  static const uint8_t kBeige[3] = {230, 220, 190}, kRed[3] = {200, 40, 40};
  Image im;
  im.width = im.height = 84;
  im.rgb.resize(84 * 84 * 3);
  for (int y = 0; y < 84; ++y) {
    for (int x = 0; x < 84; ++x) {
      const bool in = corner >= 0 && y / 28 == (corner / 2) * 2 &&
                      x / 28 == (corner % 2) * 2;
      const uint8_t* c = corner < 0 ? rgb : in ? kRed : kBeige;
      for (int k = 0; k < 3; ++k) im.rgb[(y * 84 + x) * 3 + k] = c[k];
    }
  }
  return im;
}

absl::StatusOr<std::vector<Example>> MakeExamples(
    const models::vlm::VlmProcessor& proc, int64_t eos, int64_t rows,
    uint64_t seed) {
  const std::string task = absl::GetFlag(FLAGS_task);
  std::vector<nlohmann::json> geo;
  if (task == "geo_map") {
    rl::GeoMapTaskOptions o;
    o.num_rows = rows;
    o.seed = seed;
    o.question_types = absl::StrSplit(absl::GetFlag(FLAGS_geo_types), '+');
    o.num_landmarks = absl::GetFlag(FLAGS_geo_landmarks);
    o.districts = absl::GetFlag(FLAGS_geo_districts);
    o.grid = absl::GetFlag(FLAGS_geo_grid);
    o.cell_px = absl::GetFlag(FLAGS_geo_cell_px);
    VERL_ASSIGN_OR_RETURN(geo, rl::MakeGeoMapRows(o));
  } else if (task != "colour" && task != "corner") {
    return absl::InvalidArgumentError("--task: colour, corner or geo_map");
  }
  static const uint8_t kColours[4][3] = {
      {200, 40, 40}, {40, 200, 40}, {40, 40, 200}, {220, 220, 40}};
  static const char* const kColourNames[4] = {"R", "G", "B", "Y"};
  static const char* const kCorners[4] = {"NW", "NE", "SW", "SE"};
  std::string question = task == "colour"
                             ? "What colour is the image?"
                             : "Which corner is the red square in?";
  if (absl::GetFlag(FLAGS_long_question)) {
    question = "Grid map, north up. " + question +
               " Answer with one word only, nothing else please.";
  }
  std::mt19937_64 rng(seed);
  std::vector<Example> out;
  for (int64_t i = 0; i < rows; ++i) {
    Image image;
    nlohmann::json messages;
    std::string answer;
    Example e;
    if (!geo.empty()) {
      const auto& bytes = geo[i]["images"][0]["bytes"].get_binary();
      VERL_ASSIGN_OR_RETURN(
          image, models::vlm::DecodeImage(
                     std::string(bytes.begin(), bytes.end()), "geo_map row"));
      messages = geo[i]["prompt"];
      answer = geo[i]["extra_info"]["answer"];
      e.type = geo[i]["extra_info"]["question_type"];
    } else {
      const int k = static_cast<int>(rng() % 4);
      image =
          task == "colour" ? Synthetic(kColours[k], -1) : Synthetic(nullptr, k);
      messages = nlohmann::json::array(
          {{{"role", "user"}, {"content", "<image>" + question}}});
      answer = task == "colour" ? kColourNames[k] : kCorners[k];
      e.type = task;
    }
    VERL_ASSIGN_OR_RETURN(models::vlm::ProcessedPrompt p,
                          proc.ProcessMessages(messages, {image}));
    e.prompt = p.input_ids;
    e.pixel_values = p.pixel_values;
    e.grid = p.image_grid_thw;
    e.answer = proc.tokenizer().Encode(answer);
    e.answer.push_back(eos);
    out.push_back(std::move(e));
  }
  return out;
}

// The examples packed into one forward: logits at the answer positions,
// their targets and the example each belongs to.
struct Packed {
  at::Tensor logits, targets;
  std::vector<int64_t> owner;
};

absl::StatusOr<Packed> Forward(models::vlm::Qwen2VLForConditionalGeneration& m,
                               const std::vector<const Example*>& exs) {
  std::vector<int64_t> ids, cu = {0}, at_answer, targets;
  std::vector<at::Tensor> pixels, grids;
  Packed out;
  for (size_t k = 0; k < exs.size(); ++k) {
    const Example& e = *exs[k];
    for (size_t j = 0; j < e.answer.size(); ++j) {
      at_answer.push_back(ids.size() + e.prompt.size() - 1 + j);
      targets.push_back(e.answer[j]);
      out.owner.push_back(k);
    }
    ids.insert(ids.end(), e.prompt.begin(), e.prompt.end());
    ids.insert(ids.end(), e.answer.begin(), e.answer.end());
    cu.push_back(ids.size());
    pixels.push_back(e.pixel_values);
    grids.push_back(e.grid);
  }
  VERL_ASSIGN_OR_RETURN(models::ForwardOutput f,
                        m.ForwardMultimodal(at::tensor(ids, at::kLong), cu,
                                            at::cat(pixels), at::cat(grids)));
  out.logits = f.logits.index_select(0, at::tensor(at_answer, at::kLong));
  out.targets = at::tensor(targets, at::kLong);
  return out;
}

absl::Status Run() {
  VERL_ASSIGN_OR_RETURN(
      models::vlm::VlmConfig config,
      models::vlm::MakeVlmPreset(absl::GetFlag(FLAGS_preset)));
  if (absl::GetFlag(FLAGS_rope_theta) > 0) {
    config.text.rope_theta = absl::GetFlag(FLAGS_rope_theta);
  }
  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  auto model = models::vlm::CreateVlmModel(config, seed);
  VERL_ASSIGN_OR_RETURN(models::Tokenizer tok,
                        models::vlm::MakeVlmTokenizer(config));
  models::vlm::VlmProcessor proc(tok, models::vlm::ImageProcessorConfig{});
  const int64_t eos = config.text.eos_token_ids.at(0);
  VERL_ASSIGN_OR_RETURN(std::vector<Example> train,
                        MakeExamples(proc, eos, 4000, seed));
  VERL_ASSIGN_OR_RETURN(std::vector<Example> test,
                        MakeExamples(proc, eos, 128, seed + 1000));
  std::printf("prompt of row 0: %zu tokens\n", train[0].prompt.size());
  torch::optim::AdamW opt(
      model->parameters(),
      torch::optim::AdamWOptions(absl::GetFlag(FLAGS_lr)).weight_decay(0));
  std::mt19937_64 rng(seed);
  const int64_t steps = absl::GetFlag(FLAGS_steps);
  const int64_t eval_every = absl::GetFlag(FLAGS_eval_every);
  double sum = 0;
  for (int64_t step = 0; step <= steps; ++step) {
    if (step % eval_every == 0 || step == steps) {
      at::NoGradGuard no_grad;
      std::map<std::string, std::pair<int, int>> acc;  // type -> right, all
      for (size_t s = 0; s < test.size(); s += 32) {
        std::vector<const Example*> exs;
        for (size_t k = s; k < std::min(test.size(), s + 32); ++k) {
          exs.push_back(&test[k]);
        }
        VERL_ASSIGN_OR_RETURN(Packed p, Forward(*model, exs));
        const at::Tensor ok = p.logits.argmax(-1).eq(p.targets);
        std::vector<int> right(exs.size(), 1);
        for (size_t j = 0; j < p.owner.size(); ++j) {
          if (!ok[j].item<bool>()) right[p.owner[j]] = 0;
        }
        for (size_t k = 0; k < exs.size(); ++k) {
          acc[exs[k]->type].first += right[k];
          ++acc[exs[k]->type].second;
        }
      }
      std::printf("step %ld held-out exact match:", static_cast<long>(step));
      for (const auto& [type, a] : acc) {
        std::printf(" %s %d/%d", type.c_str(), a.first, a.second);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
    if (step == steps) break;
    std::vector<const Example*> exs;
    for (int64_t b = 0; b < absl::GetFlag(FLAGS_batch); ++b) {
      exs.push_back(&train[rng() % train.size()]);
    }
    VERL_ASSIGN_OR_RETURN(Packed p, Forward(*model, exs));
    at::Tensor loss = at::cross_entropy_loss(p.logits, p.targets);
    opt.zero_grad();
    loss.backward();
    opt.step();
    sum += loss.item<double>();
    if ((step + 1) % 25 == 0) {
      std::printf("step %ld loss %.4f (mean of the last 25)\n",
                  static_cast<long>(step + 1), sum / 25);
      std::fflush(stdout);
      sum = 0;
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace verl

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const absl::Status s = verl::Run();
  if (!s.ok()) {
    std::fprintf(stderr, "vlm_probe: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
