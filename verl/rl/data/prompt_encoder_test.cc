#include "verl/rl/data/prompt_encoder.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>

#include <algorithm>
#include <optional>

#include "gtest/gtest.h"
#include "verl/core/file_util.h"
#include "verl/core/test_util.h"
#include "verl/models/tokenizer/tokenizer_builtin.h"
#include "verl/models/vlm/image.h"
#include "verl/models/vlm/image_processor.h"
#include "verl/models/vlm/vlm_config.h"
#include "verl/models/vlm/vlm_processor.h"
#include "verl/rl/data/parquet/dataset_file.h"
#include "verl/rl/data/rl_dataset.h"

namespace verl::rl {
namespace {

using ::verl::core::testing::StatusIs;

nlohmann::json Row(const std::string& content) {
  return {{"data_source", "arithmetic"},
          {"prompt",
           nlohmann::json::array({{{"role", "user"}, {"content", content}}})},
          {"reward_model", {{"ground_truth", "3"}}},
          {"extra_info", {{"index", 7}}}};
}

TEST(PromptEncoderTest, LeftPadsTemplatedPromptsWithPositions) {
  models::Tokenizer tok = models::MakeBuiltinTokenizer();
  PromptEncoderOptions o;
  o.max_prompt_length = 40;
  PromptEncoder enc(&tok, o);
  auto ids = enc.EncodeRow(Row("1+2=?"));
  ASSERT_TRUE(ids.ok()) << ids.status();
  models::ChatRequest req;
  req.messages_json = Row("1+2=?")["prompt"].dump();
  req.add_generation_prompt = true;
  EXPECT_EQ(*ids, tok.Encode(*models::ApplyChatTemplate(
                      tok, req)));  // chat template + encode

  auto batch = enc.Encode({Row("1+2=?"), Row("10+20=?")}, {"u0", "u1"});
  ASSERT_TRUE(batch.ok()) << batch.status();
  const at::Tensor& mask = batch->tensor("attention_mask");
  const int64_t n = ids->size();
  EXPECT_EQ(mask[0].sum().item<int64_t>(), n);
  EXPECT_EQ(mask[0][40 - n - 1].item<int64_t>(), 0);  // padding on the left
  EXPECT_EQ(MaskedIds(batch->tensor("input_ids"), mask, 0), *ids);
  EXPECT_EQ(batch->tensor("position_ids")[0][39].item<int64_t>(), n - 1);
  EXPECT_EQ(batch->tensor("position_ids")[0][0].item<int64_t>(), 0);
  EXPECT_EQ(batch->non_tensor("uid")[1], "u1");
  EXPECT_EQ(batch->non_tensor("reward_model")[0]["ground_truth"], "3");
  EXPECT_FALSE(batch->HasNonTensor("raw_prompt"));

  // data.return_raw_chat: the messages and the agent name travel along.
  o.return_raw_chat = true;
  nlohmann::json tool_row = Row("1+2=?");
  tool_row["agent_name"] = "tool_agent";
  auto raw = PromptEncoder(&tok, o).Encode({Row("7?"), tool_row}, {"a", "b"});
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_EQ(raw->non_tensor("raw_prompt")[0], Row("7?")["prompt"]);
  EXPECT_EQ(raw->non_tensor("agent_name")[0], "");
  EXPECT_EQ(raw->non_tensor("agent_name")[1], "tool_agent");
}

TEST(PromptEncoderTest, TruncationModesKeepTheNamedSide) {
  models::Tokenizer tok = models::MakeBuiltinTokenizer();
  PromptEncoderOptions o;
  o.max_prompt_length = 8;
  auto full = PromptEncoder(&tok, o).EncodeRow(
      Row("a long question that will not fit"));
  ASSERT_TRUE(full.ok());
  ASSERT_GT(full->size(), 8u);
  for (const std::string mode : {"left", "right", "middle"}) {
    o.truncation = mode;
    auto b = PromptEncoder(&tok, o).Encode(
        {Row("a long question that will not fit")}, {"u"});
    ASSERT_TRUE(b.ok()) << mode;
    std::vector<int64_t> got =
        MaskedIds(b->tensor("input_ids"), b->tensor("attention_mask"), 0);
    std::vector<int64_t> want;
    if (mode == "left") want.assign(full->end() - 8, full->end());
    if (mode == "right") want.assign(full->begin(), full->begin() + 8);
    if (mode == "middle") {
      want.assign(full->begin(), full->begin() + 4);
      want.insert(want.end(), full->end() - 4, full->end());
    }
    EXPECT_EQ(got, want) << mode;
  }
  o.truncation = "error";
  auto err = PromptEncoder(&tok, o).Encode(
      {Row("a long question that will not fit")}, {"u"});
  ASSERT_THAT(err,
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "prompt of 49 tokens exceeds data.max_prompt_length=8"));
  EXPECT_NE(err.status().message().find("max_prompt_length=8"),
            std::string::npos);
}

TEST(PromptEncoderTest, DottedKeysAndMissingPrompt) {
  nlohmann::json row = {{"extra_info", {{"answer", "42"}}}};
  EXPECT_EQ(*GetDotted(row, "extra_info.answer"), "42");
  EXPECT_NE(GetDotted(row, "extra_info.question")
                .status()
                .message()
                .find("extra_info.question"),
            std::string::npos);
  models::Tokenizer tok = models::MakeBuiltinTokenizer();
  PromptEncoder enc(&tok, {});
  EXPECT_THAT(enc.EncodeRow(row), StatusIs(absl::StatusCode::kInvalidArgument,
                                           "row has no \"prompt\""));
}

// verl's multimodal rows: "<image>" placeholders in the prompt and an
// images column with bytes or paths, encoded with the tiny VLM preset's
// tokenizer and a small pixel budget.
class MultimodalRowsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto config = models::vlm::MakeVlmPreset("tiny-qwen2.5-vl");
    ASSERT_TRUE(config.ok());
    config_ = *config;
    auto tok = models::vlm::MakeVlmTokenizer(config_);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tok_.emplace(*tok);
    image_config_.min_pixels = 28 * 28;
    image_config_.max_pixels = 28 * 28 * 16;
    options_.max_prompt_length = 128;
    options_.image_processor = image_config_;
  }

  static models::vlm::Image MakeImage(int64_t w, int64_t h, int seed) {
    models::vlm::Image im;
    im.width = w;
    im.height = h;
    im.rgb.resize(w * h * 3);
    for (size_t i = 0; i < im.rgb.size(); ++i)
      im.rgb[i] = static_cast<uint8_t>((i * 13 + seed * 71) % 256);
    return im;
  }
  static nlohmann::json Bytes(const std::string& s) {
    return nlohmann::json::binary(std::vector<uint8_t>(s.begin(), s.end()));
  }
  static nlohmann::json ImageRow(const std::string& content,
                                 nlohmann::json images, int index) {
    nlohmann::json row = Row(content);
    row["data_source"] = "geo";
    row["extra_info"] = {{"index", index}};
    row["images"] = std::move(images);
    return row;
  }

  models::vlm::VlmConfig config_;
  std::optional<models::Tokenizer> tok_;
  models::vlm::ImageProcessorConfig image_config_;
  PromptEncoderOptions options_;
};

TEST_F(MultimodalRowsTest, BytesAndPathsBecomeIdsAndMultiModalInputs) {
  const models::vlm::Image a = MakeImage(84, 56, 1), b = MakeImage(40, 70, 2);
  const std::string a_png = *models::vlm::EncodePng(a);
  const std::string b_path = core::testing::FreshTestDir("mm_rows") + ".png";
  ASSERT_TRUE(core::WriteFileAtomic(b_path, *models::vlm::EncodePng(b)).ok());
  const std::vector<nlohmann::json> rows = {
      // Parquet binary as HF datasets' Image feature stores it.
      ImageRow("<image>Which landmark is north?",
               {{{"bytes", Bytes(a_png)}, {"path", nullptr}}}, 0),
      Row("1+2=?"),  // a text row in the same batch
      // Two images: plain bytes and a path.
      ImageRow("Compare <image> with <image>.",
               {Bytes(a_png), {{"path", b_path}}}, 2)};
  PromptEncoder enc(&*tok_, options_);
  auto batch = enc.Encode(rows, {"u0", "u1", "u2"});
  ASSERT_TRUE(batch.ok()) << batch.status();

  // Equal to the processor on the decoded images.
  const models::vlm::VlmProcessor proc(*tok_, image_config_);
  auto want0 = proc.ProcessMessages(rows[0]["prompt"], {a});
  auto want2 = proc.ProcessMessages(rows[2]["prompt"], {a, b});
  ASSERT_TRUE(want0.ok() && want2.ok());
  const at::Tensor& ids = batch->tensor("input_ids");
  const at::Tensor& mask = batch->tensor("attention_mask");
  EXPECT_EQ(MaskedIds(ids, mask, 0), want0->input_ids);
  EXPECT_EQ(MaskedIds(ids, mask, 2), want2->input_ids);
  const std::vector<nlohmann::json>& mm =
      batch->non_tensor("multi_modal_inputs");
  ASSERT_EQ(mm.size(), 3u);
  EXPECT_TRUE(mm[1].is_null());
  auto in2 = models::vlm::MultiModalInputsFromJson(mm[2]);
  ASSERT_TRUE(in2.ok()) << in2.status();
  EXPECT_TRUE(at::equal(in2->pixel_values, want2->pixel_values));
  EXPECT_TRUE(at::equal(in2->image_grid_thw, want2->image_grid_thw));
  // One pad per merged patch: 84x56 -> grid 4x6 -> 6; 40x70 -> 56x28... .
  int64_t pads = 0;
  for (int64_t i = 0; i < in2->image_grid_thw.size(0); ++i) {
    pads += in2->image_grid_thw[i].prod().item<int64_t>() / 4;
  }
  const std::vector<int64_t> row2 = MaskedIds(ids, mask, 2);
  EXPECT_EQ(std::count(row2.begin(), row2.end(), config_.image_token_id), pads);
  EXPECT_GE(pads, 6 + 2);

  // EncodeRow (data.filter_overlong_prompts' length) counts the pads too.
  auto row2_ids = enc.EncodeRow(rows[2]);
  ASSERT_TRUE(row2_ids.ok()) << row2_ids.status();
  EXPECT_EQ(*row2_ids, want2->input_ids);

  // The batch's images concatenate in row order (a packed forward's input).
  auto all = models::vlm::ConcatMultiModalInputs(mm);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->image_grid_thw.size(0), 3);
}

TEST_F(MultimodalRowsTest, ParquetRowsLoadAndEncode) {
  const std::string png = *models::vlm::EncodePng(MakeImage(60, 60, 3));
  std::vector<nlohmann::json> rows;
  for (int i = 0; i < 3; ++i) {
    rows.push_back(ImageRow("<image>How many roads?",
                            {{{"bytes", Bytes(png)}, {"path", nullptr}}}, i));
  }
  const std::string path =
      core::testing::FreshTestDir("mm_parquet") + ".parquet";
  ASSERT_TRUE(parquet::WriteDatasetFile(path, rows).ok());
  RLDatasetOptions o;
  o.files = {path};
  auto ds = RLDataset::Load(o);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ(ds->size(), 3);
  ASSERT_TRUE(ds->row(0)["images"][0]["bytes"].is_binary());
  auto batch =
      PromptEncoder(&*tok_, options_).Encode(ds->rows(), {"a", "b", "c"});
  ASSERT_TRUE(batch.ok()) << batch.status();
  auto in = models::vlm::MultiModalInputsFromJson(
      batch->non_tensor("multi_modal_inputs")[1]);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->image_grid_thw.size(0), 1);

  // A malformed images column is refused at load with file and line.
  const std::string jsonl = core::testing::FreshTestDir("mm_jsonl") + ".jsonl";
  std::vector<nlohmann::json> bad = {
      ImageRow("<image>?", {{{"path", "a.png"}}}, 0),
      ImageRow("<image>?", "not a list", 1)};
  ASSERT_TRUE(parquet::WriteDatasetFile(jsonl, bad).ok());
  o.files = {jsonl};
  EXPECT_THAT(RLDataset::Load(o),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ".jsonl:2: \"images\" must be a list of images"));
  bad[1]["images"] = {42};
  ASSERT_TRUE(parquet::WriteDatasetFile(jsonl, bad).ok());
  EXPECT_THAT(RLDataset::Load(o),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ".jsonl:2: \"images\"[0] must be image bytes"));
}

TEST_F(MultimodalRowsTest, BadImagesNameTheRow) {
  const std::string png = *models::vlm::EncodePng(MakeImage(30, 30, 4));
  PromptEncoder enc(&*tok_, options_);
  // Corrupt bytes.
  std::string corrupt = png.substr(0, png.size() / 2);
  auto err = enc.Encode({ImageRow("<image>?", {Bytes(png)}, 0),
                         ImageRow("<image>?", {Bytes(corrupt)}, 17)},
                        {"a", "b"});
  EXPECT_THAT(err, StatusIs(absl::StatusCode::kInvalidArgument,
                            "row 1 of the batch (extra_info.index 17, "
                            "data_source geo): images[0]: corrupt"));
  // A huge image is refused before decoding its pixels.
  PromptEncoderOptions small = options_;
  small.image_limits.max_pixels = 20 * 20;
  EXPECT_THAT(PromptEncoder(&*tok_, small)
                  .Encode({ImageRow("<image>?", {Bytes(png)}, 5)}, {"a"}),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       "row 0 of the batch (extra_info.index 5"));
  // A missing file names the path.
  EXPECT_THAT(
      enc.Encode({ImageRow("<image>?", {{{"path", "/nonexistent/x.png"}}}, 3)},
                 {"a"}),
      StatusIs(absl::StatusCode::kNotFound, "/nonexistent/x.png"));
  // Placeholders and images must agree.
  EXPECT_THAT(enc.Encode({ImageRow("<image><image>?", {Bytes(png)}, 4)}, {"a"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "2 image items (<image>) but 1 images"));
  // Rows with images and a text-only model.
  PromptEncoderOptions text_only = options_;
  text_only.image_processor.reset();
  EXPECT_THAT(
      PromptEncoder(&*tok_, text_only)
          .Encode({ImageRow("<image>?", {Bytes(png)}, 6)}, {"a"}),
      StatusIs(absl::StatusCode::kInvalidArgument, "no image processor"));
  // Truncation would cut image tokens.
  PromptEncoderOptions tight = options_;
  tight.max_prompt_length = 10;
  tight.truncation = "left";
  EXPECT_THAT(PromptEncoder(&*tok_, tight)
                  .Encode({ImageRow("<image>?", {Bytes(png)}, 8)}, {"a"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "truncation would cut image tokens"));
}

}  // namespace
}  // namespace verl::rl
