// File: verl/infer/serve/text_stream_test.cc
#include "verl/infer/serve/text_stream.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "verl/models/tokenizer/tokenizer_builtin.h"

namespace verl::infer::serve {
namespace {

const models::Tokenizer& Tok() {
  static const models::Tokenizer* tok =
      new models::Tokenizer(models::MakeBuiltinTokenizer());
  return *tok;
}

bool ValidUtf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
    if (i + n > s.size()) return false;
    for (int k = 1; k < n; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

// Feeds `ids` one by one; returns the deltas taken after each token and at
// the finish.
std::vector<std::string> Feed(TextStream& s, const std::vector<int64_t>& ids) {
  std::vector<std::string> deltas;
  for (int64_t id : ids) {
    s.Add(id, -1.0f);
    deltas.push_back(s.TakeDelta(false));
  }
  deltas.push_back(s.TakeDelta(true));
  return deltas;
}

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += p;
  return out;
}

TEST(TextStreamTest, MultiByteCharactersAreEmittedWhole) {
  const std::string text = "caf\xC3\xA9 \xE2\x86\x92 \xF0\x9F\x98\x80 ok";
  const std::vector<int64_t> ids = Tok().Encode(text);
  ASSERT_GT(ids.size(), 10u);  // bytes, so characters span several tokens
  TextStream s(&Tok(), {});
  const std::vector<std::string> deltas = Feed(s, ids);
  for (const std::string& d : deltas) EXPECT_TRUE(ValidUtf8(d)) << d;
  EXPECT_EQ(Join(deltas), text);
  EXPECT_EQ(s.text(), text);
  EXPECT_EQ(s.num_tokens(), static_cast<int64_t>(ids.size()));
  EXPECT_EQ(s.logprobs().size(), ids.size());
  EXPECT_EQ(s.token_texts().size(), ids.size());
}

TEST(TextStreamTest, SpecialTokensAreSkipped) {
  std::vector<int64_t> ids = Tok().Encode("done");
  ids.push_back(Tok().eos_token_id());
  TextStream s(&Tok(), {});
  EXPECT_EQ(Join(Feed(s, ids)), "done");
  EXPECT_EQ(s.num_tokens(), static_cast<int64_t>(ids.size()));
}

TEST(TextStreamTest, StopStringCutsTextAndTokens) {
  const std::string text = "the answer is 42. Done and more";
  const std::vector<int64_t> ids = Tok().Encode(text);
  TextStream s(&Tok(), {"zzz", ". D"});
  std::vector<std::string> deltas;
  int64_t stopped_after = -1;
  for (size_t i = 0; i < ids.size(); ++i) {
    s.Add(ids[i], -1.0f);
    deltas.push_back(s.TakeDelta(false));
    // Nothing after the stop string's start is ever handed out.
    EXPECT_EQ(Join(deltas).find('.'), std::string::npos);
    if (s.stopped() && stopped_after < 0) stopped_after = i;
  }
  deltas.push_back(s.TakeDelta(true));
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.text(), "the answer is 42");
  EXPECT_EQ(Join(deltas), "the answer is 42");
  // Tokens up to the one completing ". D" are kept, later ones dropped.
  EXPECT_EQ(s.num_tokens(), stopped_after + 1);
  EXPECT_EQ(Tok()
                .Decode(std::vector<int64_t>(ids.begin(),
                                             ids.begin() + s.num_tokens()))
                .substr(0, 19),
            "the answer is 42. D");
}

TEST(TextStreamTest, HeldBackTailIsReleasedWhenItIsNoStop) {
  // "ab" could start the stop "abc" until "d" arrives.
  const std::vector<int64_t> ids = Tok().Encode("xxabd");
  TextStream s(&Tok(), {"abc"});
  std::string seen;
  for (int64_t id : ids) {
    s.Add(id, 0.0f);
    seen += s.TakeDelta(false);
  }
  EXPECT_EQ(seen, "xxa");  // the last 2 bytes are held back
  EXPECT_EQ(seen + s.TakeDelta(true), "xxabd");
  EXPECT_FALSE(s.stopped());
}

TEST(TextStreamTest, StopStringSpanningTokensAtTheStart) {
  TextStream s(&Tok(), {"Hel"});
  EXPECT_EQ(Join(Feed(s, Tok().Encode("Hello"))), "");
  EXPECT_TRUE(s.stopped());
}

TEST(TextStreamTest, TrailingPartialCharacterIsFlushedAtTheEnd) {
  // A lone lead byte at the end: held while running, then decoded (as
  // U+FFFD) when the sample ends.
  std::vector<int64_t> ids = Tok().Encode("ab");
  ids.push_back(0xE2);  // byte tokens are ids 0-255 in byte order
  TextStream s(&Tok(), {});
  std::vector<std::string> deltas = Feed(s, ids);
  EXPECT_EQ(deltas[ids.size() - 1], "");
  EXPECT_EQ(Join(deltas), "ab\xEF\xBF\xBD");
}

}  // namespace
}  // namespace verl::infer::serve
