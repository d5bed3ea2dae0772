// File: verl/rl/data/sft_dataset_test.cc
#include "verl/rl/data/sft_dataset.h"

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verl/core/test_util.h"
#include "verl/models/tokenizer/chat_template.h"
#include "verl/models/tokenizer/tokenizer_builtin.h"
#include "verl/rl/data/parquet/dataset_file.h"

namespace verl::rl {
namespace {

using ::verl::core::testing::StatusIs;

using nlohmann::json;
using ::testing::HasSubstr;

class SftDatasetTest : public ::testing::Test {
 protected:
  SftDatasetTest() : tok_(models::MakeBuiltinTokenizer()) {}

  // Token ids of the templated prompt, computed independently of the
  // dataset: the ChatML text written out by hand.
  std::vector<int64_t> PromptIds(const std::string& prompt) const {
    const std::vector<int64_t> ids = tok_.Encode(
        "<|im_start|>user\n" + prompt + "<|im_end|>\n<|im_start|>assistant\n");
    return {ids.begin(), ids.end()};
  }
  std::vector<int64_t> ResponseIds(const std::string& response) const {
    std::vector<int64_t> ids = tok_.Encode(response);
    ids.push_back(tok_.eos_token_id());
    return {ids.begin(), ids.end()};
  }

  models::Tokenizer tok_;
};

TEST_F(SftDatasetTest, MaskCoversExactlyResponseAndEos) {
  const std::string prompt = "What is 12 + 7?", response = "12 + 7 = 19";
  const std::vector<int64_t> p = PromptIds(prompt), r = ResponseIds(response);
  const int64_t len = p.size() + r.size();
  struct Case {
    std::string name;
    int64_t max_length;
    SftTruncation truncation;
    int64_t begin;  // first kept token of the full sequence
  };
  const std::vector<Case> cases = {
      {"padded", len + 5, SftTruncation::kError, 0},
      {"exact", len, SftTruncation::kError, 0},
      {"right", len - 3, SftTruncation::kRight, 0},
      {"right_into_prompt", static_cast<int64_t>(p.size()) - 2,
       SftTruncation::kRight, 0},
      {"left", len - 4, SftTruncation::kLeft, 4},
      {"left_into_response", static_cast<int64_t>(r.size()) - 2,
       SftTruncation::kLeft, static_cast<int64_t>(p.size()) + 2},
  };
  std::vector<int64_t> full = p;
  full.insert(full.end(), r.begin(), r.end());
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<SftSample> s =
        MakeSftSample(tok_, prompt, response, c.max_length, c.truncation);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_EQ(s->input_ids.size(), c.max_length);
    const int64_t kept = std::min<int64_t>(len - c.begin, c.max_length);
    int64_t mask_sum = 0;
    for (int64_t i = 0; i < c.max_length; ++i) {
      const bool real = i < kept;
      const int64_t src = c.begin + i;
      EXPECT_EQ(s->attention_mask[i], real ? 1 : 0) << i;
      EXPECT_EQ(s->position_ids[i], real ? i : 0) << i;
      EXPECT_EQ(s->input_ids[i], real ? full[src] : tok_.pad_token_id()) << i;
      const bool response_token = real && src >= (int64_t)p.size() && i > 0;
      EXPECT_EQ(s->loss_mask[i], response_token ? 1 : 0) << i;
      mask_sum += s->loss_mask[i];
    }
    if (c.begin == 0 && kept == len) {
      // Untruncated: every response token incl. EOS is trained, and the EOS
      // is the last masked token.
      EXPECT_EQ(mask_sum, static_cast<int64_t>(r.size()));
      EXPECT_EQ(s->input_ids[len - 1], tok_.eos_token_id());
      EXPECT_EQ(s->loss_mask[len - 1], 1);
      EXPECT_EQ(s->loss_mask[p.size() - 1], 0);  // last prompt token
    }
  }
}

TEST_F(SftDatasetTest, TemplateMatchesTokenizer) {
  models::ChatRequest req;
  req.messages_json = R"([{"role":"user","content":"hi"}])";
  req.add_generation_prompt = true;
  absl::StatusOr<std::string> text = models::ApplyChatTemplate(tok_, req);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
}

TEST_F(SftDatasetTest, TruncationErrorNamesLengths) {
  absl::StatusOr<SftSample> s = MakeSftSample(
      tok_, "a long prompt", "a long response", 8, SftTruncation::kError);
  ASSERT_THAT(
      s, StatusIs(absl::StatusCode::kInvalidArgument,
                  "sequence of 47 tokens (prompt 31, response 16 incl. EOS)"));
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("exceeds max_length 8 (data.truncation=error)"));
  EXPECT_THAT(
      ParseSftTruncation("middle"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "data.truncation: \"middle\" (expected error, left or right)"));
  EXPECT_EQ(*ParseSftTruncation("left"), SftTruncation::kLeft);
}

TEST_F(SftDatasetTest, NestedKeysAndErrors) {
  const json row = {{"extra_info", {{"question", "1 + 1"}, {"answer", 2}}},
                    {"q", {{"inner", "x"}}}};
  EXPECT_EQ(*ExtractSftField(row, "extra_info.question", {}), "1 + 1");
  EXPECT_EQ(*ExtractSftField(row, "extra_info", {"answer"}), "2");
  EXPECT_EQ(*ExtractSftField(row, "q", {"inner"}), "x");
  absl::StatusOr<std::string> bad = ExtractSftField(row, "extra_info.nope", {});
  ASSERT_THAT(bad, StatusIs(absl::StatusCode::kInvalidArgument,
                            "missing key 'extra_info.nope'"));
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("missing key 'extra_info.nope'"));
  bad = ExtractSftField(row, "q", {});
  ASSERT_THAT(bad, StatusIs(absl::StatusCode::kInvalidArgument,
                            "key 'q' is a object, expected a string"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("is a object"));
}

TEST_F(SftDatasetTest, MultiTurnTrainsAssistantTurns) {
  const json messages =
      json::array({{{"role", "user"}, {"content", "1 + 2"}},
                   {{"role", "assistant"}, {"content", "3"}},
                   {{"role", "user"}, {"content", "4 - 1"}},
                   {{"role", "assistant"}, {"content", "3"}}});
  // The ChatML pieces, written out by hand; `true` pieces are trained.
  const std::vector<std::pair<std::string, bool>> pieces = {
      {"<|im_start|>user\n1 + 2<|im_end|>\n<|im_start|>assistant\n", false},
      {"3<|im_end|>\n", true},
      {"<|im_start|>user\n4 - 1<|im_end|>\n<|im_start|>assistant\n", false},
      {"3<|im_end|>\n", true}};
  std::vector<int64_t> ids, mask;
  for (const auto& [text, train] : pieces) {
    for (int64_t id : tok_.Encode(text)) {
      ids.push_back(id);
      mask.push_back(train ? 1 : 0);
    }
  }
  absl::StatusOr<SftSample> s = MakeMultiTurnSftSample(
      tok_, messages, ids.size() + 3, SftTruncation::kError);
  ASSERT_TRUE(s.ok()) << s.status();
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(s->input_ids[i], ids[i]) << i;
    EXPECT_EQ(s->loss_mask[i], mask[i]) << i;
  }
  EXPECT_EQ(s->loss_mask[ids.size()], 0);  // padding
  EXPECT_THAT(
      MakeMultiTurnSftSample(tok_, json::array(), 64, SftTruncation::kError),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "messages must be a non-empty list"));

  SftDatasetOptions opt;
  opt.multiturn = true;
  opt.max_length = 64;
  absl::StatusOr<SftDataset> ds =
      SftDataset::FromRows({{{"messages", messages}}}, tok_, opt);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->size(), 1);
  ds = SftDataset::FromRows({{{"chat", messages}}}, tok_, opt);
  EXPECT_THAT(std::string(ds.status().message()),
              HasSubstr("missing key 'messages'"));
}

TEST_F(SftDatasetTest, LoadsJsonlWithMaxSamplesAndNamesBadFile) {
  const std::string path = ::testing::TempDir() + "/sft_rows.jsonl";
  {
    std::ofstream f(path);
    f << R"({"extra_info": {"question": "1 + 2", "answer": "3"}})"
      << "\n";
    f << R"({"extra_info": {"question": "2 + 2", "answer": "4"}})"
      << "\n";
    f << R"({"extra_info": {"question": "3 + 2"}})"
      << "\n";
  }
  SftDatasetOptions opt;
  opt.prompt_key = "extra_info.question";
  opt.response_key = "extra_info.answer";
  opt.max_length = 64;
  opt.max_samples = 2;
  absl::StatusOr<SftDataset> ds = SftDataset::Load({path}, tok_, opt);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->size(), 2);
  opt.max_samples = -1;
  ds = SftDataset::Load({path}, tok_, opt);
  ASSERT_THAT(ds, StatusIs(absl::StatusCode::kInvalidArgument,
                           "row 2: missing key 'extra_info.answer'"));
  EXPECT_THAT(std::string(ds.status().message()), HasSubstr(path));
  EXPECT_THAT(std::string(ds.status().message()), HasSubstr("row 2"));
  EXPECT_THAT(SftDataset::Load({path + ".missing"}, tok_, opt),
              StatusIs(absl::StatusCode::kNotFound, "no such file"));
}

// verl's SFT parquet (nested extra_info keys, as examples/data_preprocess
// writes them) gives the same samples as the same rows in JSONL.
TEST_F(SftDatasetTest, ParquetAndJsonlGiveTheSameSamples) {
  std::vector<json> rows;
  for (int i = 0; i < 4; ++i) {
    rows.push_back({{"extra_info",
                     {{"question", std::to_string(i) + " + 2"},
                      {"answer", std::to_string(i + 2)}}}});
  }
  const std::string dir = ::testing::TempDir();
  ASSERT_TRUE(parquet::WriteDatasetFile(dir + "/sft.parquet", rows).ok());
  ASSERT_TRUE(parquet::WriteDatasetFile(dir + "/sft.jsonl", rows).ok());
  SftDatasetOptions opt;
  opt.prompt_key = "extra_info.question";
  opt.response_key = "extra_info.answer";
  opt.max_length = 32;
  auto pq =
      SftDataset::Load({dir + "/sft.parquet", dir + "/sft.jsonl"}, tok_, opt);
  ASSERT_TRUE(pq.ok()) << pq.status();
  ASSERT_EQ(pq->size(), 8);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(pq->sample(i).input_ids, pq->sample(i + 4).input_ids) << i;
    EXPECT_EQ(pq->sample(i).loss_mask, pq->sample(i + 4).loss_mask) << i;
  }
  auto bad = SftDataset::Load({dir + "/sft.jsonl.parquet"}, tok_, opt);
  ASSERT_THAT(bad,
              StatusIs(absl::StatusCode::kNotFound, "cannot open for reading"));
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("sft.jsonl.parquet"));
}

}  // namespace
}  // namespace verl::rl
