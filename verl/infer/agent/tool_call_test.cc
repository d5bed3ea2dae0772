// File: verl/infer/agent/tool_call_test.cc
//
// Hermes parsing and truncation as verl's agent loop does them; expected
// strings are what verl's Python code returns for the same inputs.
#include "verl/infer/agent/tool_call.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "verl/core/test_util.h"

namespace verl::infer::agent {
namespace {

using core::testing::StatusIs;

TEST(HermesTest, SeveralCallsAndTheRemainingContent) {
  const ParsedTurn t = ParseHermesToolCalls(
      "Let me compute.\n<tool_call>\n{\"name\": \"calc\", \"arguments\": "
      "{\"expression\": \"2+3\", \"precision\": 2}}\n</tool_call>\n"
      "<tool_call>{\"name\": \"search\", \"arguments\": {\"query\": "
      "\"日本\", \"top_k\": 3.0, \"flags\": [true, null]}}</tool_call>done");
  ASSERT_EQ(t.calls.size(), 2u);
  EXPECT_TRUE(t.errors.empty());
  EXPECT_EQ(t.calls[0].name, "calc");
  // json.dumps(arguments, ensure_ascii=False): Python separators, key order.
  EXPECT_EQ(t.calls[0].arguments, R"({"expression": "2+3", "precision": 2})");
  EXPECT_EQ(t.calls[1].arguments,
            R"({"query": "日本", "top_k": 3.0, "flags": [true, null]})");
  EXPECT_EQ(t.content, "Let me compute.\n\ndone");
}

TEST(HermesTest, MalformedBlocksAreErrorsNotCrashes) {
  const ParsedTurn t = ParseHermesToolCalls(
      "<tool_call>{not json}</tool_call><tool_call>[1, 2]</tool_call>"
      "<tool_call>{\"name\": \"ok\", \"arguments\": {}}</tool_call>"
      "<tool_call>{\"arguments\": {}}</tool_call>tail<tool_call>unclosed");
  ASSERT_EQ(t.calls.size(), 1u);
  EXPECT_EQ(t.calls[0].name, "ok");
  EXPECT_EQ(t.calls[0].arguments, "{}");
  ASSERT_EQ(t.errors.size(), 3u);
  EXPECT_THAT(t.errors[0], ::testing::HasSubstr("is not valid JSON"));
  EXPECT_THAT(t.errors[1], ::testing::HasSubstr("needs a string \"name\""));
  EXPECT_THAT(t.errors[2], ::testing::HasSubstr("needs a string \"name\""));
  // An unterminated block stays in the content (the regex needs both tags).
  EXPECT_EQ(t.content, "tail<tool_call>unclosed");
}

TEST(HermesTest, TextWithoutBothTagsIsContentOnly) {
  for (const char* text :
       {"plain", "<tool_call>{\"name\": \"x\"}", "</tool_call> only"}) {
    const ParsedTurn t = ParseHermesToolCalls(text);
    EXPECT_EQ(t.content, text);
    EXPECT_TRUE(t.calls.empty());
    EXPECT_TRUE(t.errors.empty());
  }
}

TEST(PythonJsonDumpsTest, FloatsAsPythonRepr) {
  nlohmann::ordered_json v = nlohmann::ordered_json::parse(
      R"([1.0, 0.1, 1e10, 1e16, 1.5e-05, 0.0001, 123456.789, -2.5, 0.0, 7,
          "a\"b\\c\nd\u0001"])");
  EXPECT_EQ(PythonJsonDumps(v),
            "[1.0, 0.1, 10000000000.0, 1e+16, 1.5e-05, 0.0001, 123456.789, "
            "-2.5, 0.0, 7, \"a\\\"b\\\\c\\nd\\u0001\"]");
}

TEST(TruncateTest, VerlSidesInCharacters) {
  const std::string text = "abcdefghij";  // 10 characters
  EXPECT_EQ(TruncateToolResponse(text, 10, TruncateSide::kLeft), text);
  EXPECT_EQ(TruncateToolResponse(text, 4, TruncateSide::kLeft),
            "abcd...(truncated)");
  EXPECT_EQ(TruncateToolResponse(text, 4, TruncateSide::kRight),
            "(truncated)...ghij");
  EXPECT_EQ(TruncateToolResponse(text, 5, TruncateSide::kMiddle),
            "ab...(truncated)...ij");
  // Python's s[-0:] is the whole string.
  EXPECT_EQ(TruncateToolResponse(text, 1, TruncateSide::kMiddle),
            "...(truncated)...abcdefghij");
  // Multi-byte characters count once.
  EXPECT_EQ(TruncateToolResponse("αβγδε", 2, TruncateSide::kLeft),
            "αβ...(truncated)");
  EXPECT_EQ(TruncateToolResponse("αβγδε", 2, TruncateSide::kRight),
            "(truncated)...δε");
  EXPECT_EQ(ParseTruncateSide("middle").value(), TruncateSide::kMiddle);
  EXPECT_THAT(ParseTruncateSide("center"),
              StatusIs(absl::StatusCode::kInvalidArgument, "'center'"));
}

}  // namespace
}  // namespace verl::infer::agent
