#include "verl/core/regex.h"

#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verl/core/test_util.h"

namespace verl::core {
namespace {

using ::verl::core::testing::StatusIs;

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Whole-match texts of FindAll.
std::vector<std::string> Matches(const Regex& re, const std::string& text) {
  std::vector<std::string> out;
  for (const Regex::Match& m : re.FindAll(text)) out.push_back(*m.str(text));
  return out;
}

TEST(RegexTest, CompileErrorsAreStatuses) {
  auto bad = Regex::Compile("a(b");
  ASSERT_THAT(
      bad,
      StatusIs(absl::StatusCode::kInvalidArgument,
               "bad regex /a(b/ at offset 3: missing closing parenthesis"));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("bad regex /a(b/ at offset 3: missing closing"));
  EXPECT_DEATH(Regex("(?<"), "bad regex");
}

TEST(RegexTest, UnicodePropertiesAndClassesAreUnicodeAware) {
  // The GPT-2 pre-tokenizer pattern, as HF's ByteLevel uses it.
  Regex gpt2(
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)");
  EXPECT_THAT(
      Matches(gpt2, "Héllo wörld's 42!!  日本\n"),
      ElementsAre("Héllo", " wörld", "'s", " 42", "!!", " ", " 日本", "\n"));
  // \w, \d and \b know non-ASCII letters and digits (Python 3 semantics).
  EXPECT_THAT(Matches(Regex(R"(\w+)"), "naïve café"),
              ElementsAre("naïve", "café"));
  EXPECT_THAT(Matches(Regex(R"(\d)"), "٣3"), ElementsAre("٣", "3"));
  EXPECT_THAT(Matches(Regex(R"(\bthe\b)"), "éthe the"), ElementsAre("the"));
  EXPECT_THAT(Matches(Regex("(?i:straße)"), "STRASSE Straße"),
              ElementsAre("Straße"));
}

TEST(RegexTest, FindAllFollowsPythonFinditer) {
  // Empty matches are reported and the search moves on one code point.
  EXPECT_THAT(Matches(Regex("a*"), "baaé"), ElementsAre("", "aa", "", ""));
  Regex groups("(x)|(y)");
  std::vector<Regex::Match> m = groups.FindAll("xy");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].groups.size(), 3u);
  EXPECT_EQ(m[0].str("xy", 1), "x");
  EXPECT_EQ(m[0].str("xy", 2), std::nullopt);
  EXPECT_EQ(m[1].str("xy", 2), "y");
  EXPECT_EQ(m[1].begin(), 1u);
  EXPECT_EQ(m[1].end(), 2u);
  EXPECT_EQ(groups.capture_count(), 2);
  EXPECT_THAT(Regex("a*").FindAllSpans("baa"),
              ElementsAre(std::pair<size_t, size_t>(0, 0),
                          std::pair<size_t, size_t>(1, 3),
                          std::pair<size_t, size_t>(3, 3)));
  EXPECT_EQ(groups.pattern(), "(x)|(y)");
}

TEST(RegexTest, FindAllStringsIsPythonFindall) {
  EXPECT_THAT(Regex("#### (-?[0-9.,]+)").FindAllStrings("#### 1,000 #### -2."),
              ElementsAre("1,000", "-2."));
  EXPECT_THAT(Regex(R"(\d+)").FindAllStrings("a1b22"), ElementsAre("1", "22"));
  EXPECT_THAT(Regex("<a>(.*?)</a>", Regex::kDotAll)
                  .FindAllStrings("<a>x\ny</a><a></a>"),
              ElementsAre("x\ny", ""));
  EXPECT_THAT(
      Regex("answer: (.*)", Regex::kIgnoreCase).FindAllStrings("ANSWER: 5"),
      ElementsAre("5"));
}

TEST(RegexTest, FullMatchAndSub) {
  Regex think("<think>.*</think>.*", Regex::kDotAll);
  EXPECT_TRUE(think.FullMatch("<think>a\nb</think> ok"));
  EXPECT_FALSE(think.FullMatch("x<think></think>"));
  EXPECT_EQ(Regex(R"(\b(a|an|the)\b)").Sub(" ", "the cat and a hat"),
            "  cat and   hat");
  EXPECT_EQ(Regex(R"((\w+)@(\w+))").Sub(R"(\2 at \1, \3\\)", "me@host!"),
            R"(host at me, \!)");
  // Empty matches insert between code points, like Python's re.sub.
  EXPECT_EQ(Regex("x*").Sub("-", "aé"), "-a-é-");
}

TEST(RegexTest, InvalidUtf8NeverMatchesAndNeverFails) {
  const std::string text =
      "ab\xFF\xFE"
      "cd\xC3";
  EXPECT_THAT(Matches(Regex(R"(\p{L}+)"), text), ElementsAre("ab", "cd"));
  EXPECT_EQ(Regex("[a-d]").Sub("_", text), "__\xFF\xFE__\xC3");
  // Overlong forms, surrogates and truncated sequences are invalid too; valid
  // 4-byte sequences are not.
  for (const std::string bad :
       {"x\xC0\x80", "x\xED\xA0\x80", "x\xF0\x9F\x98", "x\xF4\x90\x80\x80"}) {
    EXPECT_THAT(Matches(Regex("."), bad), ElementsAre("x")) << bad;
  }
  EXPECT_THAT(Matches(Regex("."), "x\xF0\x9F\x98\x80"),
              ElementsAre("x", "\xF0\x9F\x98\x80"));
  EXPECT_TRUE(Regex(".*").FullMatch("\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF"));
}

TEST(RegexTest, CopiesShareTheCompiledPattern) {
  Regex a(R"(\d+)");
  Regex b = a;
  EXPECT_THAT(b.FindAllStrings("x12y3"), ElementsAre("12", "3"));
  EXPECT_EQ(&a.pattern(), &b.pattern());
}

}  // namespace
}  // namespace verl::core
