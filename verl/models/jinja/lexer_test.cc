#include "verl/models/jinja/lexer.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verl/models/jinja/error.h"

namespace verl::models::jinja {
namespace {

using ::testing::HasSubstr;

// Chunks as "T:text", "E:expr", "S:stmt".
std::vector<std::string> Chunks(const std::string& source) {
  std::vector<std::string> out;
  for (const Chunk& c : Lex(source)) {
    const char* kind = c.kind == Chunk::Kind::kText   ? "T:"
                       : c.kind == Chunk::Kind::kExpr ? "E:"
                                                      : "S:";
    out.push_back(kind + c.text);
  }
  return out;
}

std::string LexError(const std::string& source) {
  try {
    Lex(source);
  } catch (const TemplateError& e) {
    return "line " + std::to_string(e.line) + ": " + e.message;
  }
  return "";
}

TEST(JinjaLexerTest, SplitsTextExpressionsAndStatements) {
  EXPECT_EQ(Chunks("a {{ x }} b{% if y %}c{% endif %}"),
            (std::vector<std::string>{"T:a ", "E: x ", "T: b", "S: if y ",
                                      "T:c", "S: endif "}));
  // Delimiters inside string literals do not close a tag; comments vanish.
  EXPECT_EQ(Chunks("{{ '}}' }}{# {{ no }} #}z"),
            (std::vector<std::string>{"E: '}}' ", "T:z"}));
}

TEST(JinjaLexerTest, WhitespaceControlLikeTransformers) {
  // `-` strips all whitespace on its side.
  EXPECT_EQ(Chunks("a  {{- x -}}  b"),
            (std::vector<std::string>{"T:a", "E: x ", "T:b"}));
  // trim_blocks: the newline after a block tag goes; lstrip_blocks: the
  // indentation before it. Expression tags keep both.
  EXPECT_EQ(Chunks("  {% if t %}\n  yes\n  {% endif %}\nend"),
            (std::vector<std::string>{"S: if t ", "T:  yes\n", "S: endif ",
                                      "T:end"}));
  EXPECT_EQ(Chunks("  {{ v }}\nend"),
            (std::vector<std::string>{"T:  ", "E: v ", "T:\nend"}));
  // `+` disables lstrip_blocks for that tag.
  EXPECT_EQ(Chunks("  {%+ if t %}x{% endif %}"),
            (std::vector<std::string>{"T:  ", "S: if t ", "T:x", "S: endif "}));
  // One trailing newline is dropped; \r\n becomes \n.
  EXPECT_EQ(Chunks("line\r\n"), (std::vector<std::string>{"T:line"}));
}

TEST(JinjaLexerTest, ChunksKnowTheirLine) {
  std::vector<Chunk> chunks = Lex("a\nb\n{{ x }}\n{% if y %}");
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_EQ(chunks[1].line, 3);
  EXPECT_EQ(chunks[3].line, 4);
  EXPECT_EQ(LexError("a\n{{ x "), "line 2: unclosed '{{'");
  EXPECT_EQ(LexError("{% if"), "line 1: unclosed '{%'");
}

TEST(JinjaLexerTest, TokenizesLiteralsAndOperators) {
  std::vector<Tok> t = Tokenize("x.y // 2 ** 1_000 >= 'a\\n\\u00e9' 1.5e3", 1);
  std::vector<std::string> texts;
  for (const Tok& tok : t) texts.push_back(tok.text);
  EXPECT_EQ(texts,
            (std::vector<std::string>{"x", ".", "y", "//", "2", "**", "1000",
                                      ">=", "a\n\xC3\xA9", "1.5e3", ""}));
  EXPECT_EQ(t[6].kind, Tok::Kind::kInt);
  EXPECT_EQ(t[6].i, 1000);
  EXPECT_EQ(t[8].kind, Tok::Kind::kString);
  EXPECT_EQ(t[9].kind, Tok::Kind::kFloat);
  EXPECT_DOUBLE_EQ(t[9].f, 1500.0);
  EXPECT_EQ(t.back().kind, Tok::Kind::kEnd);
}

TEST(JinjaLexerTest, TokenizerErrors) {
  const auto error = [](const std::string& src) -> std::string {
    try {
      Tokenize(src, 7);
    } catch (const TemplateError& e) {
      EXPECT_EQ(e.line, 7);
      return e.message;
    }
    return "";
  };
  EXPECT_THAT(error("a $ b"), HasSubstr("unexpected character '$'"));
  EXPECT_THAT(error("'abc"), HasSubstr("unterminated string literal"));
  EXPECT_THAT(error("'\\x4"), HasSubstr("truncated escape"));
}

}  // namespace
}  // namespace verl::models::jinja
