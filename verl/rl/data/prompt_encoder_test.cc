#include "verl/rl/data/prompt_encoder.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>

#include "gtest/gtest.h"
#include "verl/core/test_util.h"
#include "verl/models/tokenizer/tokenizer_builtin.h"

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

}  // namespace
}  // namespace verl::rl
