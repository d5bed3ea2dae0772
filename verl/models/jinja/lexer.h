// File: verl/models/jinja/lexer.h
//
// The two lexing stages of a Jinja template:
//   1. `Lex` splits the source into text, {{ expression }} and {% statement %}
//      chunks (comments dropped), applying whitespace control the way
//      transformers' Jinja environment does: `-` strips, `+` keeps,
//      trim_blocks removes the newline after a block tag, lstrip_blocks the
//      indentation before it, and one trailing newline of the template is
//      dropped (keep_trailing_newline=False).
//   2. `Tokenize` splits the inside of one tag into names, string/int/float
//      literals (Python escapes, `_` digit separators) and operators.
// Both throw TemplateError (error.h) for unclosed tags, bad literals and
// unknown characters.
#ifndef VERL_MODELS_JINJA_LEXER_H_
#define VERL_MODELS_JINJA_LEXER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace verl::models::jinja {

struct Chunk {
  enum class Kind { kText, kExpr, kStmt };
  Kind kind;
  std::string text;  // Text, or the inside of the tag without delimiters.
  int line;          // Line where the chunk starts.
};

std::vector<Chunk> Lex(absl::string_view source);

struct Tok {
  enum class Kind { kName, kString, kInt, kFloat, kOp, kEnd };
  Kind kind;
  std::string text;  // Name, operator, decoded string value, or the number.
  int64_t i = 0;
  double f = 0;
};

// Tokens of one tag's inside, ending with a kEnd token; `line` is for errors.
std::vector<Tok> Tokenize(const std::string& src, int line);

// Jinja's whitespace: space, \t, \n, \r, \v, \f.
bool IsWs(char c);

}  // namespace verl::models::jinja

#endif  // VERL_MODELS_JINJA_LEXER_H_
