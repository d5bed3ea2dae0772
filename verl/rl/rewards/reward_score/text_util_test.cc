// Tests of the scorers' string helpers against what Python's s[-n:],
// str.replace and str.strip() return for the same input.
#include "verl/rl/rewards/reward_score/text_util.h"

#include <string>

#include "gtest/gtest.h"

namespace verl::rl::reward {
namespace {

TEST(LastCharsTest, AsciiTail) {
  EXPECT_EQ(LastChars("hello world", 5), "world");
  EXPECT_EQ(LastChars("hello", 1), "o");
}

TEST(LastCharsTest, ShorterThanNReturnsAll) {
  EXPECT_EQ(LastChars("abc", 3), "abc");
  EXPECT_EQ(LastChars("abc", 300), "abc");
}

TEST(LastCharsTest, EmptyInputAndZero) {
  EXPECT_EQ(LastChars("", 0), "");
  EXPECT_EQ(LastChars("", 5), "");
  // n == 0: no characters (Python's s[-0:] would be the whole string; the
  // scorers never ask for 0).
  EXPECT_EQ(LastChars("abc", 0), "");
}

TEST(LastCharsTest, CountsCodePointsNotBytes) {
  // "é" is 2 bytes, "中" 3, "😀" 4: Python counts each as one character.
  const std::string s = "ab\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80";  // abé中😀
  EXPECT_EQ(LastChars(s, 1), "\xF0\x9F\x98\x80");
  EXPECT_EQ(LastChars(s, 2), "\xE4\xB8\xAD\xF0\x9F\x98\x80");
  EXPECT_EQ(LastChars(s, 3), "\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80");
  EXPECT_EQ(LastChars(s, 4), "b\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80");
  EXPECT_EQ(LastChars(s, 5), s);
  EXPECT_EQ(LastChars(s, 6), s);
}

TEST(LastCharsTest, NeverSplitsACodePoint) {
  // Whatever n, the result starts on a lead byte (valid UTF-8 stays valid).
  const std::string s = "x\xE4\xB8\xAD\xE6\x96\x87y";  // x中文y
  for (size_t n = 0; n <= 5; ++n) {
    const std::string tail = LastChars(s, n);
    ASSERT_EQ(s.compare(s.size() - tail.size(), tail.size(), tail), 0) << n;
    if (!tail.empty()) {
      EXPECT_NE(static_cast<unsigned char>(tail[0]) & 0xC0, 0x80) << n;
    }
  }
  EXPECT_EQ(LastChars(s, 2), "\xE6\x96\x87y");
}

TEST(LastCharsTest, StrayContinuationBytesAtTheStart) {
  // Invalid UTF-8 (a lone continuation byte first) is kept, not read past.
  const std::string s = "\x80\x80z";
  EXPECT_EQ(LastChars(s, 1), "z");
  EXPECT_EQ(LastChars(s, 2), s);
}

TEST(ReplaceAllTest, EveryOccurrence) {
  EXPECT_EQ(ReplaceAll("a-b-c", "-", "+"), "a+b+c");
  EXPECT_EQ(ReplaceAll("\\dfrac{1}{2}\\dfrac", "dfrac", "frac"),
            "\\frac{1}{2}\\frac");
}

TEST(ReplaceAllTest, DeleteAndGrow) {
  EXPECT_EQ(ReplaceAll("\\left(x\\right)", "\\left", ""), "(x\\right)");
  EXPECT_EQ(ReplaceAll("aaa", "a", "aa"), "aaaaaa");  // no re-scan of `to`
  EXPECT_EQ(ReplaceAll("aaaa", "aa", "a"), "aa");     // non-overlapping
}

TEST(ReplaceAllTest, ReplacementContainingPatternTerminates) {
  EXPECT_EQ(ReplaceAll("xyx", "x", "xx"), "xxyxx");
  EXPECT_EQ(ReplaceAll("\\\\\\\\", "\\\\", "\\"), "\\\\");  // math_reward's
}

TEST(ReplaceAllTest, NoMatchEmptyInputAndEmptyPattern) {
  EXPECT_EQ(ReplaceAll("abc", "z", "y"), "abc");
  EXPECT_EQ(ReplaceAll("", "a", "b"), "");
  // An empty `from` leaves the string alone (Python would insert `to`
  // between every character).
  EXPECT_EQ(ReplaceAll("abc", "", "-"), "abc");
}

TEST(ReplaceAllTest, Utf8Patterns) {
  const std::string times = "\xC3\x97";  // ×
  EXPECT_EQ(ReplaceAll("1" + times + "2", times, "*"), "1*2");
}

TEST(StripWhitespaceTest, BothEnds) {
  EXPECT_EQ(StripWhitespace("  x y \t"), "x y");
  EXPECT_EQ(StripWhitespace("\n\r\f\vabc\v\f\r\n"), "abc");
  EXPECT_EQ(StripWhitespace("abc"), "abc");
}

TEST(StripWhitespaceTest, EmptyAndAllWhitespace) {
  EXPECT_EQ(StripWhitespace(""), "");
  EXPECT_EQ(StripWhitespace(" \t\n\r\f\v"), "");
}

TEST(StripWhitespaceTest, KeepsInnerWhitespaceAndNonAscii) {
  EXPECT_EQ(StripWhitespace(" a \n b "), "a \n b");
  // ASCII whitespace only: a no-break space (U+00A0) is kept.
  const std::string nbsp = "\xC2\xA0";
  EXPECT_EQ(StripWhitespace(nbsp + "1 "), nbsp + "1");
  EXPECT_EQ(StripWhitespace(" \xE4\xB8\xAD "), "\xE4\xB8\xAD");
}

}  // namespace
}  // namespace verl::rl::reward
