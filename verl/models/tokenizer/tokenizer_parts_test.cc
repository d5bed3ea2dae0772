// Focused tests of the tokenizer's parts; tokenizer_test covers the whole
// pipeline through the Tokenizer facade.
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verl/core/regex.h"
#include "verl/models/tokenizer/tokenizer_bpe.h"
#include "verl/models/tokenizer/tokenizer_pretokenize.h"
#include "verl/models/tokenizer/tokenizer_vocab.h"

namespace verl::models::tokenizer_internal {
namespace {

using ::testing::ElementsAre;

std::vector<std::string> Split(const std::string& pattern,
                               SplitBehavior behavior, const std::string& text,
                               bool invert = false) {
  PreTokenizerStep step;
  step.regex = core::Regex(pattern);
  step.behavior = behavior;
  step.invert = invert;
  return PreTokenize({step}, text);
}

TEST(TokenizerPartsTest, SplitBehavioursMatchTokenizers) {
  // The examples of tokenizers' SplitDelimiterBehavior docs ("-" on
  // "the-final--countdown").
  const std::string text = "the-final--countdown";
  EXPECT_THAT(Split("-", SplitBehavior::kRemoved, text),
              ElementsAre("the", "final", "countdown"));
  EXPECT_THAT(Split("-", SplitBehavior::kIsolated, text),
              ElementsAre("the", "-", "final", "-", "-", "countdown"));
  EXPECT_THAT(Split("-", SplitBehavior::kMergedWithPrevious, text),
              ElementsAre("the-", "final-", "-", "countdown"));
  EXPECT_THAT(Split("-", SplitBehavior::kMergedWithNext, text),
              ElementsAre("the", "-final", "-", "-countdown"));
  EXPECT_THAT(Split("-", SplitBehavior::kContiguous, text),
              ElementsAre("the", "-", "final", "--", "countdown"));
  // invert: the matches are the pieces, the rest the delimiters.
  EXPECT_THAT(Split("\\p{L}+", SplitBehavior::kRemoved, "ab, cd!", true),
              ElementsAre("ab", "cd"));
  // Empty matches do not split.
  EXPECT_THAT(Split("x*", SplitBehavior::kIsolated, "abc"), ElementsAre("abc"));
}

TEST(TokenizerPartsTest, ByteLevelStepAddsPrefixSpaceAndSplitsLikeGpt2) {
  PreTokenizerStep byte_level;
  byte_level.byte_level = true;
  byte_level.add_prefix_space = true;
  byte_level.regex = Gpt2Regex();
  EXPECT_THAT(PreTokenize({byte_level}, "Hi there's  42\n"),
              ElementsAre(" Hi", " there", "'s", " ", " 42", "\n"));
}

TEST(TokenizerPartsTest, Normalizers) {
  EXPECT_EQ(Normalize(NormalizerKind::kNfc, "cafe\xCC\x81"), "caf\xC3\xA9");
  EXPECT_EQ(Normalize(NormalizerKind::kNfd, "caf\xC3\xA9"), "cafe\xCC\x81");
  EXPECT_EQ(Normalize(NormalizerKind::kNfkc, "\xEF\xAC\x81"), "fi");  // ﬁ
  EXPECT_EQ(Normalize(NormalizerKind::kLowercase, "ÀB"), "àb");
  EXPECT_EQ(Normalize(NormalizerKind::kNfc, "plain"), "plain");
}

using Merges = std::vector<std::pair<std::string, std::string>>;

// A vocab over the byte tokens of "abc" (GPT-2 alphabet = the bytes for
// printable ASCII) and the merges given.
struct SmallBpe {
  Vocab vocab;
  Bpe bpe;
  explicit SmallBpe(
      const std::vector<std::pair<std::string, std::string>>& merges) {
    int id = 0;
    for (const char* t : {"a", "b", "c"}) {
      vocab.SetToken(id, t);
      vocab.token_to_id[t] = id++;
    }
    int rank = 0;
    for (const auto& [l, r] : merges) {
      if (!vocab.token_to_id.count(l + r)) {
        vocab.SetToken(id, l + r);
        vocab.token_to_id[l + r] = id++;
      }
      bpe.AddMerge(vocab.token_to_id[l], vocab.token_to_id[r], rank++,
                   vocab.token_to_id[l + r]);
    }
    bpe.SetByteIds(vocab, /*unk_id=*/-1);
  }
  std::vector<std::string> Encode(const std::string& piece) const {
    std::vector<std::string> out;
    for (int id : bpe.Encode(piece, vocab))
      out.push_back(vocab.id_to_token[id]);
    return out;
  }
};

TEST(TokenizerPartsTest, BpeMergesByRankThenLeftmost) {
  // "bc" ranks before "ab": "abc" -> a + bc, not ab + c.
  EXPECT_THAT(SmallBpe({{"b", "c"}, {"a", "b"}}).Encode("abc"),
              ElementsAre("a", "bc"));
  EXPECT_THAT(SmallBpe({{"a", "b"}, {"b", "c"}}).Encode("abc"),
              ElementsAre("ab", "c"));
  // Equal pairs: the leftmost merges first ("aaa" -> aa + a).
  EXPECT_THAT(SmallBpe(Merges{{"a", "a"}}).Encode("aaa"),
              ElementsAre("aa", "a"));
  // Merges chain; bytes missing from the vocab (no unk) are dropped.
  EXPECT_THAT(SmallBpe({{"a", "b"}, {"ab", "c"}}).Encode("abcz"),
              ElementsAre("abc"));
  // ignore_merges: a piece in the vocab is one token even without a path.
  SmallBpe direct({{"b", "c"}, {"a", "bc"}});
  direct.vocab.SetToken(9, "ab");
  direct.vocab.token_to_id["ab"] = 9;
  EXPECT_THAT(direct.Encode("ab"), ElementsAre("a", "b"));
  SmallBpe ignoring(Merges{{"b", "c"}});
  ignoring.vocab.SetToken(9, "ab");
  ignoring.vocab.token_to_id["ab"] = 9;
  ignoring.bpe.set_ignore_merges(true);
  EXPECT_THAT(ignoring.Encode("ab"), ElementsAre("ab"));
}

TEST(TokenizerPartsTest, AddedTokensLeftmostLongestWithStripFlags) {
  Vocab vocab;
  vocab.AddAddedToken({10, "<s>", true});
  vocab.AddAddedToken({11, "<s>x", true});
  AddedToken word{12, "ok"};
  word.single_word = true;
  vocab.AddAddedToken(word);
  AddedToken strip{13, "<e>"};
  strip.lstrip = strip.rstrip = true;
  vocab.AddAddedToken(strip);
  vocab.AddAddedToken({10, "<dup>"});  // Same id again: ignored.
  const auto split = [&](const std::string& text) {
    std::vector<std::string> out;
    for (auto [piece, id] : vocab.SplitAdded(text))
      out.push_back(std::string(piece) + "#" + std::to_string(id));
    return out;
  };
  EXPECT_THAT(split("a<s>xb<s>"),
              ElementsAre("a#-1", "<s>x#11", "b#-1", "<s>#10"));
  EXPECT_THAT(split("ok okay ok"), ElementsAre("ok#12", " okay #-1", "ok#12"));
  EXPECT_THAT(split("a  <e>\n b"), ElementsAre("a#-1", "  <e>\n #13", "b#-1"));
  EXPECT_EQ(vocab.added.size(), 4u);
  EXPECT_TRUE(vocab.special[10]);
  EXPECT_FALSE(vocab.special[12]);
}

}  // namespace
}  // namespace verl::models::tokenizer_internal
