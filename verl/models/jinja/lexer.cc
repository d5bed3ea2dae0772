#include "verl/models/jinja/lexer.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "verl/models/jinja/error.h"
#include "verl/models/tokenizer/tokenizer_utf8.h"

namespace verl::models::jinja {

bool IsWs(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
         c == '\f';
}

// Splits the source into text, {{ }} and {% %} chunks, applying whitespace
// control (-), trim_blocks and lstrip_blocks like transformers' Jinja env.
std::vector<Chunk> Lex(absl::string_view source) {
  std::string s;
  s.reserve(source.size());
  for (size_t k = 0; k < source.size(); ++k) {  // Normalize newlines.
    if (source[k] == '\r') {
      s += '\n';
      if (k + 1 < source.size() && source[k + 1] == '\n') ++k;
    } else {
      s += source[k];
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();  // keep_trailing_newline

  std::vector<Chunk> out;
  size_t pos = 0;
  int line = 1;
  bool strip_next = false, trim_next = false;
  while (pos <= s.size()) {
    size_t open = pos;
    while (true) {
      open = s.find('{', open);
      if (open == s.npos || open + 1 >= s.size()) {
        open = s.npos;
        break;
      }
      char k = s[open + 1];
      if (k == '{' || k == '%' || k == '#') break;
      ++open;
    }
    std::string text = s.substr(pos, open == s.npos ? s.npos : open - pos);
    const int text_line = line;
    line += std::count(text.begin(), text.end(), '\n');
    size_t removed = 0;  // Consumed by the previous tag's right side.
    if (strip_next) {
      while (removed < text.size() && IsWs(text[removed])) ++removed;
    } else if (trim_next && !text.empty() && text[0] == '\n') {
      removed = 1;
    }
    text.erase(0, removed);
    const bool line_start = pos + removed == 0 || s[pos + removed - 1] == '\n';
    if (open == s.npos) {
      if (!text.empty()) out.push_back({Chunk::Kind::kText, text, text_line});
      break;
    }
    const char kind = s[open + 1];
    const char modifier = open + 2 < s.size() ? s[open + 2] : 0;
    if (modifier == '-') {
      while (!text.empty() && IsWs(text.back())) text.pop_back();
    } else if ((kind == '%' || kind == '#') && modifier != '+') {
      size_t nl = text.rfind('\n');
      size_t from = nl == text.npos ? 0 : nl + 1;
      if ((nl != text.npos || line_start) &&
          std::all_of(text.begin() + from, text.end(),
                      [](char c) { return c == ' ' || c == '\t'; }))
        text.erase(from);
    }
    if (!text.empty()) out.push_back({Chunk::Kind::kText, text, text_line});

    // Find the closing delimiter (string literals may contain it).
    const char close_char = kind == '{' ? '}' : kind;
    size_t k = open + 2;
    char quote = 0;
    size_t close = s.npos;
    for (; k + 1 < s.size(); ++k) {
      char c = s[k];
      if (kind != '#' && quote) {
        if (c == '\\') {
          ++k;
        } else if (c == quote) {
          quote = 0;
        }
      } else if (kind != '#' && (c == '\'' || c == '"')) {
        quote = c;
      } else if (c == close_char && s[k + 1] == '}') {
        close = k;
        break;
      }
    }
    if (close == s.npos)
      Fail(line, absl::StrCat("unclosed '{", std::string(1, kind), "'"));
    size_t inner_begin =
        open + 2 + ((modifier == '-' || modifier == '+') ? 1 : 0);
    const char right_mod = close > inner_begin ? s[close - 1] : 0;
    size_t inner_end = close - ((right_mod == '-' || right_mod == '+') ? 1 : 0);
    std::string inner = s.substr(inner_begin, inner_end - inner_begin);
    if (kind != '#')
      out.push_back(
          {kind == '{' ? Chunk::Kind::kExpr : Chunk::Kind::kStmt, inner, line});
    line += std::count(s.begin() + open, s.begin() + close, '\n');
    strip_next = right_mod == '-';
    trim_next = kind != '{' && right_mod != '+';
    pos = close + 2;
  }
  return out;
}

std::vector<Tok> Tokenize(const std::string& src, int line) {
  std::vector<Tok> toks;
  size_t k = 0;
  while (k < src.size()) {
    char c = src[k];
    if (IsWs(c)) {
      ++k;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t b = k;
      while (
          k < src.size() &&
          (std::isalnum(static_cast<unsigned char>(src[k])) || src[k] == '_'))
        ++k;
      toks.push_back({Tok::Kind::kName, src.substr(b, k - b)});
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t b = k;
      bool is_float = false;
      while (
          k < src.size() &&
          (std::isdigit(static_cast<unsigned char>(src[k])) || src[k] == '_'))
        ++k;
      if (k + 1 < src.size() && src[k] == '.' &&
          std::isdigit(static_cast<unsigned char>(src[k + 1]))) {
        is_float = true;
        ++k;
        while (k < src.size() &&
               std::isdigit(static_cast<unsigned char>(src[k])))
          ++k;
      }
      if (k < src.size() && (src[k] == 'e' || src[k] == 'E')) {
        size_t save = k++;
        if (k < src.size() && (src[k] == '+' || src[k] == '-')) ++k;
        if (k < src.size() &&
            std::isdigit(static_cast<unsigned char>(src[k]))) {
          is_float = true;
          while (k < src.size() &&
                 std::isdigit(static_cast<unsigned char>(src[k])))
            ++k;
        } else {
          k = save;
        }
      }
      std::string num = src.substr(b, k - b);
      num.erase(std::remove(num.begin(), num.end(), '_'), num.end());
      Tok t{is_float ? Tok::Kind::kFloat : Tok::Kind::kInt, num};
      if (is_float) {
        t.f = std::strtod(num.c_str(), nullptr);
      } else {
        t.i = std::strtoll(num.c_str(), nullptr, 10);
      }
      toks.push_back(t);
    } else if (c == '\'' || c == '"') {
      std::string value;
      ++k;
      while (true) {
        if (k >= src.size()) Fail(line, "unterminated string literal");
        char d = src[k++];
        if (d == c) break;
        if (d != '\\') {
          value += d;
          continue;
        }
        if (k >= src.size()) Fail(line, "unterminated string literal");
        char e = src[k++];
        switch (e) {
          case 'n':
            value += '\n';
            break;
          case 't':
            value += '\t';
            break;
          case 'r':
            value += '\r';
            break;
          case 'b':
            value += '\b';
            break;
          case 'f':
            value += '\f';
            break;
          case 'v':
            value += '\v';
            break;
          case '0':
            value += '\0';
            break;
          case '\\':
            value += '\\';
            break;
          case '\'':
            value += '\'';
            break;
          case '"':
            value += '"';
            break;
          case '\n':
            break;
          case 'x':
          case 'u':
          case 'U': {
            int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            if (k + n > src.size()) Fail(line, "truncated escape in string");
            AppendUtf8(static_cast<char32_t>(
                           std::strtoul(src.substr(k, n).c_str(), nullptr, 16)),
                       &value);
            k += n;
            break;
          }
          default:
            value += '\\';
            value += e;
        }
      }
      toks.push_back({Tok::Kind::kString, value});
    } else {
      static const char* kOps[] = {
          "**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "|",
          ".",  ",",  ":",  "(",  ")",  "[",  "]", "{", "}", "<", ">", "="};
      bool matched = false;
      for (const char* op : kOps) {
        size_t n = std::strlen(op);
        if (src.compare(k, n, op) == 0) {
          toks.push_back({Tok::Kind::kOp, op});
          k += n;
          matched = true;
          break;
        }
      }
      if (!matched)
        Fail(line,
             absl::StrCat("unexpected character '", std::string(1, c), "'"));
    }
  }
  toks.push_back({Tok::Kind::kEnd, ""});
  return toks;
}

}  // namespace verl::models::jinja
