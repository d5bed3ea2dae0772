#include "verl/models/chat_template.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "verl/models/tokenizer_utf8.h"

namespace verl::models {
namespace chat_template_internal {
namespace {

using Json = nlohmann::ordered_json;

// Parse and render errors travel as this exception inside the renderer (a
// tree walker is much simpler that way) and leave it as absl::Status.
struct TemplateError {
  int line;
  std::string message;
};

[[noreturn]] void Fail(int line, std::string message) {
  throw TemplateError{line, std::move(message)};
}

// ----------------------------------------------------------------- values

struct Node;
struct Value;
using ValueList = std::vector<Value>;
using ValueDict = std::vector<std::pair<std::string, Value>>;  // Ordered.

struct Value {
  enum class Type {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kFunction
  };
  Type type = Type::kUndefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;  // String, or the name of a built-in function.
  std::shared_ptr<ValueList> list;
  std::shared_ptr<ValueDict> dict;
  const Node* macro = nullptr;  // Function defined by {% macro %}.
  bool is_namespace = false;
  bool is_tuple = false;  // Prints as (a, b) like Python.

  bool undefined() const { return type == Type::kUndefined; }
  bool none() const { return type == Type::kNone; }
  bool is_string() const { return type == Type::kString; }
  bool is_list() const { return type == Type::kList; }
  bool is_dict() const { return type == Type::kDict; }
  bool is_number() const {
    return type == Type::kInt || type == Type::kFloat || type == Type::kBool;
  }
  double AsDouble() const {
    return type == Type::kFloat ? f : type == Type::kBool ? b : i;
  }
  const Value* Find(absl::string_view key) const {
    if (!is_dict()) return nullptr;
    for (const auto& [k, v] : *dict)
      if (k == key) return &v;
    return nullptr;
  }
};

Value None() {
  Value v;
  v.type = Value::Type::kNone;
  return v;
}
Value Bool(bool b) {
  Value v;
  v.type = Value::Type::kBool;
  v.b = b;
  return v;
}
Value Int(int64_t i) {
  Value v;
  v.type = Value::Type::kInt;
  v.i = i;
  return v;
}
Value Float(double f) {
  Value v;
  v.type = Value::Type::kFloat;
  v.f = f;
  return v;
}
Value Str(std::string s) {
  Value v;
  v.type = Value::Type::kString;
  v.s = std::move(s);
  return v;
}
Value List(ValueList items) {
  Value v;
  v.type = Value::Type::kList;
  v.list = std::make_shared<ValueList>(std::move(items));
  return v;
}
Value Tuple(ValueList items) {
  Value v = List(std::move(items));
  v.is_tuple = true;
  return v;
}
Value Dict(ValueDict items) {
  Value v;
  v.type = Value::Type::kDict;
  v.dict = std::make_shared<ValueDict>(std::move(items));
  return v;
}
Value Function(std::string name) {
  Value v;
  v.type = Value::Type::kFunction;
  v.s = std::move(name);
  return v;
}

const char* TypeName(const Value& v) {
  switch (v.type) {
    case Value::Type::kUndefined:
      return "undefined";
    case Value::Type::kNone:
      return "NoneType";
    case Value::Type::kBool:
      return "bool";
    case Value::Type::kInt:
      return "int";
    case Value::Type::kFloat:
      return "float";
    case Value::Type::kString:
      return "str";
    case Value::Type::kList:
      return "list";
    case Value::Type::kDict:
      return "dict";
    case Value::Type::kFunction:
      return "function";
  }
  return "?";
}

Value FromJson(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null:
      return None();
    case Json::value_t::boolean:
      return Bool(j.get<bool>());
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return Int(j.get<int64_t>());
    case Json::value_t::number_float:
      return Float(j.get<double>());
    case Json::value_t::string:
      return Str(j.get<std::string>());
    case Json::value_t::array: {
      ValueList items;
      for (const Json& e : j) items.push_back(FromJson(e));
      return List(std::move(items));
    }
    case Json::value_t::object: {
      ValueDict items;
      for (const auto& [k, e] : j.items()) items.emplace_back(k, FromJson(e));
      return Dict(std::move(items));
    }
    default:
      return Value();
  }
}

bool Truthy(const Value& v) {
  switch (v.type) {
    case Value::Type::kUndefined:
    case Value::Type::kNone:
      return false;
    case Value::Type::kBool:
      return v.b;
    case Value::Type::kInt:
      return v.i != 0;
    case Value::Type::kFloat:
      return v.f != 0;
    case Value::Type::kString:
      return !v.s.empty();
    case Value::Type::kList:
      return !v.list->empty();
    case Value::Type::kDict:
      return !v.dict->empty();
    case Value::Type::kFunction:
      return true;
  }
  return false;
}

bool Equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.type == Value::Type::kFloat || b.type == Value::Type::kFloat)
      return a.AsDouble() == b.AsDouble();
    return (a.type == Value::Type::kBool ? a.b : a.i) ==
           (b.type == Value::Type::kBool ? b.b : b.i);
  }
  if (a.type != b.type) return false;
  switch (a.type) {
    case Value::Type::kString:
      return a.s == b.s;
    case Value::Type::kList:
      if (a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k)
        if (!Equal((*a.list)[k], (*b.list)[k])) return false;
      return true;
    case Value::Type::kDict:
      if (a.dict->size() != b.dict->size()) return false;
      for (const auto& [k, v] : *a.dict) {
        const Value* other = b.Find(k);
        if (other == nullptr || !Equal(v, *other)) return false;
      }
      return true;
    case Value::Type::kFunction:
      return a.s == b.s && a.macro == b.macro;
    default:
      return true;  // Both undefined or both none.
  }
}

// Python's float repr: shortest round-trip digits, scientific notation
// outside [1e-4, 1e16).
std::string FloatRepr(double x, bool json) {
  if (std::isnan(x)) return json ? "NaN" : "nan";
  if (std::isinf(x))
    return x > 0 ? (json ? "Infinity" : "inf") : (json ? "-Infinity" : "-inf");
  char buf[40];
  for (int p = 1; p <= 17; ++p) {
    std::snprintf(buf, sizeof(buf), "%.*e", p - 1, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  std::string s(buf);
  std::string sign;
  if (s[0] == '-') {
    sign = "-";
    s = s.substr(1);
  }
  size_t e = s.find('e');
  int exp = std::atoi(s.c_str() + e + 1);
  std::string digits = s.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      std::string int_part =
          digits.substr(0, std::min<size_t>(exp + 1, digits.size()));
      while (static_cast<int>(int_part.size()) < exp + 1) int_part += '0';
      std::string frac = digits.size() > static_cast<size_t>(exp + 1)
                             ? digits.substr(exp + 1)
                             : "0";
      out = int_part + "." + frac;
    } else {
      out = "0." + std::string(-exp - 1, '0') + digits;
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp_buf[16];
    std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exp < 0 ? '-' : '+',
                  std::abs(exp));
    out += exp_buf;
  }
  return sign + out;
}

// Python's repr() of a str.
std::string StrRepr(const std::string& s) {
  bool has_single = s.find('\'') != s.npos, has_double = s.find('"') != s.npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t cp : DecodeUtf8Lossy(s)) {
    switch (cp) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (cp == static_cast<char32_t>(quote)) {
          out += '\\';
          out += quote;
        } else if (cp < 0x20 || cp == 0x7F) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<int>(cp));
          out += buf;
        } else {
          AppendUtf8(cp, &out);
        }
    }
  }
  out += quote;
  return out;
}

std::string Repr(const Value& v);

// Python's str().
std::string ToString(const Value& v) {
  switch (v.type) {
    case Value::Type::kUndefined:
      return "";
    case Value::Type::kNone:
      return "None";
    case Value::Type::kBool:
      return v.b ? "True" : "False";
    case Value::Type::kInt:
      return std::to_string(v.i);
    case Value::Type::kFloat:
      return FloatRepr(v.f, false);
    case Value::Type::kString:
      return v.s;
    default:
      return Repr(v);
  }
}

std::string Repr(const Value& v) {
  switch (v.type) {
    case Value::Type::kString:
      return StrRepr(v.s);
    case Value::Type::kList: {
      std::vector<std::string> parts;
      for (const Value& e : *v.list) parts.push_back(Repr(e));
      if (v.is_tuple)
        return "(" + absl::StrJoin(parts, ", ") +
               (parts.size() == 1 ? ",)" : ")");
      return "[" + absl::StrJoin(parts, ", ") + "]";
    }
    case Value::Type::kDict: {
      std::vector<std::string> parts;
      for (const auto& [k, e] : *v.dict)
        parts.push_back(StrRepr(k) + ": " + Repr(e));
      return (v.is_namespace ? "<Namespace {" : "{") +
             absl::StrJoin(parts, ", ") + (v.is_namespace ? "}>" : "}");
    }
    case Value::Type::kFunction:
      return "<function " + v.s + ">";
    default:
      return ToString(v);
  }
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char32_t cp : DecodeUtf8Lossy(s)) {
    switch (cp) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (cp < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<int>(cp));
          out += buf;
        } else {
          AppendUtf8(cp, &out);
        }
    }
  }
  return out + "\"";
}

// Python's json.dumps(v, ensure_ascii=False, indent=indent) (indent < 0:
// None, i.e. one line with ", " and ": " separators).
void ToJson(const Value& v, int indent, int depth, std::string* out, int line) {
  const auto newline = [&](int d) {
    if (indent >= 0) *out += "\n" + std::string(indent * d, ' ');
  };
  const char* item_sep = indent >= 0 ? "," : ", ";
  switch (v.type) {
    case Value::Type::kNone:
      *out += "null";
      break;
    case Value::Type::kBool:
      *out += v.b ? "true" : "false";
      break;
    case Value::Type::kInt:
      *out += std::to_string(v.i);
      break;
    case Value::Type::kFloat:
      *out += FloatRepr(v.f, true);
      break;
    case Value::Type::kString:
      *out += JsonString(v.s);
      break;
    case Value::Type::kList:
      if (v.list->empty()) {
        *out += "[]";
        break;
      }
      *out += "[";
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k > 0) *out += item_sep;
        newline(depth + 1);
        ToJson((*v.list)[k], indent, depth + 1, out, line);
      }
      newline(depth);
      *out += "]";
      break;
    case Value::Type::kDict: {
      if (v.dict->empty()) {
        *out += "{}";
        break;
      }
      *out += "{";
      bool first = true;
      for (const auto& [k, e] : *v.dict) {
        if (!first) *out += item_sep;
        first = false;
        newline(depth + 1);
        *out += JsonString(k) + ": ";
        ToJson(e, indent, depth + 1, out, line);
      }
      newline(depth);
      *out += "}";
      break;
    }
    default:
      Fail(line, absl::StrCat("tojson: object of type ", TypeName(v),
                              " is not JSON serializable"));
  }
}

// ------------------------------------------------------------------ lexer

struct Chunk {
  enum class Kind { kText, kExpr, kStmt };
  Kind kind;
  std::string text;
  int line;
};

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

// -------------------------------------------------------- expression lexer

struct Tok {
  enum class Kind { kName, kString, kInt, kFloat, kOp, kEnd };
  Kind kind;
  std::string text;
  int64_t i = 0;
  double f = 0;
};

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

// -------------------------------------------------------------------- AST

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,
    kName,
    kAttr,
    kItem,
    kSlice,
    kCall,
    kFilter,
    kTest,
    kNeg,
    kNot,
    kBinary,
    kAnd,
    kOr,
    kCond,
    kList,
    kDict
  };
  Kind kind;
  int line = 0;
  Value literal;
  std::string name;  // Name, attribute, operator, filter or test name.
  bool negated = false;
  std::vector<ExprPtr> args;  // Operands; null entries are omitted parts.
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Node;
using Body = std::vector<std::unique_ptr<Node>>;

struct Node {
  enum class Kind {
    kText,
    kOutput,
    kIf,
    kFor,
    kSet,
    kSetBlock,
    kMacro,
    kBreak,
    kContinue,
    kScope
  };
  Kind kind;
  int line = 0;
  std::string text;                // Text; Set/SetBlock/Macro name.
  std::string attr;                // Set: ns.attr target.
  std::vector<std::string> names;  // For targets; Set tuple targets.
  ExprPtr expr;                    // Output, Set value, For iterable.
  ExprPtr filter;                  // For ... if filter.
  std::vector<std::pair<ExprPtr, Body>> branches;  // If (null cond = else).
  Body body, else_body;
  std::vector<std::pair<std::string, ExprPtr>> params;  // Macro.
};

// ----------------------------------------------------------------- parser

class ExprParser {
 public:
  ExprParser(std::vector<Tok> toks, int line)
      : toks_(std::move(toks)), line_(line) {}

  const Tok& Peek(int ahead = 0) const {
    return toks_[std::min(pos_ + ahead, toks_.size() - 1)];
  }
  bool AtEnd() const { return Peek().kind == Tok::Kind::kEnd; }
  bool IsOp(const char* op, int ahead = 0) const {
    return Peek(ahead).kind == Tok::Kind::kOp && Peek(ahead).text == op;
  }
  bool IsName(const char* name, int ahead = 0) const {
    return Peek(ahead).kind == Tok::Kind::kName && Peek(ahead).text == name;
  }
  void Expect(const char* op) {
    if (!IsOp(op))
      Fail(line_, absl::StrCat("expected '", op, "', got ", Describe(Peek())));
    ++pos_;
  }
  std::string ExpectName() {
    if (Peek().kind != Tok::Kind::kName)
      Fail(line_, absl::StrCat("expected a name, got ", Describe(Peek())));
    return toks_[pos_++].text;
  }
  void ExpectEnd() {
    if (!AtEnd()) Fail(line_, absl::StrCat("unexpected ", Describe(Peek())));
  }
  static std::string Describe(const Tok& t) {
    return t.kind == Tok::Kind::kEnd ? "end of tag"
                                     : absl::StrCat("'", t.text, "'");
  }

  ExprPtr Make(Expr::Kind kind) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line_;
    return e;
  }

  // Full expression: `a if cond else b` (conditional optional).
  ExprPtr ParseExpression(bool with_condexpr = true) {
    ExprPtr e = ParseOr();
    while (with_condexpr && IsName("if")) {
      ++pos_;
      auto cond = Make(Expr::Kind::kCond);
      cond->args.push_back(ParseOr());
      cond->args.push_back(std::move(e));
      if (IsName("else")) {
        ++pos_;
        cond->args.push_back(ParseExpression());
      } else {
        cond->args.push_back(nullptr);
      }
      e = std::move(cond);
    }
    return e;
  }

  // Comma-separated expressions become a list (Python tuple).
  ExprPtr ParseTuple(bool with_condexpr = true) {
    ExprPtr first = ParseExpression(with_condexpr);
    if (!IsOp(",")) return first;
    auto list = Make(Expr::Kind::kList);
    list->name = "tuple";
    list->args.push_back(std::move(first));
    while (IsOp(",")) {
      ++pos_;
      if (AtEnd() || IsOp(")") || IsOp("]") || IsOp("}")) break;
      list->args.push_back(ParseExpression(with_condexpr));
    }
    return list;
  }

 private:
  ExprPtr Binary(Expr::Kind kind, std::string op, ExprPtr l, ExprPtr r) {
    auto e = Make(kind);
    e->name = std::move(op);
    e->args.push_back(std::move(l));
    e->args.push_back(std::move(r));
    return e;
  }

  ExprPtr ParseOr() {
    ExprPtr e = ParseAnd();
    while (IsName("or")) {
      ++pos_;
      e = Binary(Expr::Kind::kOr, "or", std::move(e), ParseAnd());
    }
    return e;
  }
  ExprPtr ParseAnd() {
    ExprPtr e = ParseNot();
    while (IsName("and")) {
      ++pos_;
      e = Binary(Expr::Kind::kAnd, "and", std::move(e), ParseNot());
    }
    return e;
  }
  ExprPtr ParseNot() {
    if (IsName("not")) {
      ++pos_;
      auto e = Make(Expr::Kind::kNot);
      e->args.push_back(ParseNot());
      return e;
    }
    return ParseCompare();
  }
  ExprPtr ParseCompare() {
    ExprPtr e = ParseMath1();
    while (true) {
      std::string op;
      if (Peek().kind == Tok::Kind::kOp &&
          (Peek().text == "==" || Peek().text == "!=" || Peek().text == "<" ||
           Peek().text == "<=" || Peek().text == ">" || Peek().text == ">=")) {
        op = Peek().text;
        ++pos_;
      } else if (IsName("in")) {
        op = "in";
        ++pos_;
      } else if (IsName("not") && IsName("in", 1)) {
        op = "not in";
        pos_ += 2;
      } else {
        return e;
      }
      e = Binary(Expr::Kind::kBinary, op, std::move(e), ParseMath1());
    }
  }
  ExprPtr ParseMath1() {
    ExprPtr e = ParseConcat();
    while (IsOp("+") || IsOp("-")) {
      std::string op = toks_[pos_++].text;
      e = Binary(Expr::Kind::kBinary, op, std::move(e), ParseConcat());
    }
    return e;
  }
  ExprPtr ParseConcat() {
    ExprPtr e = ParseMath2();
    while (IsOp("~")) {
      ++pos_;
      e = Binary(Expr::Kind::kBinary, "~", std::move(e), ParseMath2());
    }
    return e;
  }
  ExprPtr ParseMath2() {
    ExprPtr e = ParsePow();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      std::string op = toks_[pos_++].text;
      e = Binary(Expr::Kind::kBinary, op, std::move(e), ParsePow());
    }
    return e;
  }
  ExprPtr ParsePow() {
    ExprPtr e = ParseUnary(true);
    while (IsOp("**")) {
      ++pos_;
      e = Binary(Expr::Kind::kBinary, "**", std::move(e), ParseUnary(true));
    }
    return e;
  }
  ExprPtr ParseUnary(bool with_filter) {
    ExprPtr e;
    if (IsOp("-")) {
      ++pos_;
      e = Make(Expr::Kind::kNeg);
      e->args.push_back(ParseUnary(false));
    } else if (IsOp("+")) {
      ++pos_;
      e = ParseUnary(false);
    } else {
      e = ParsePrimary();
    }
    e = ParsePostfix(std::move(e));
    if (with_filter) e = ParseFilterExpr(std::move(e));
    return e;
  }

  ExprPtr ParsePrimary() {
    const Tok t = Peek();
    switch (t.kind) {
      case Tok::Kind::kName: {
        ++pos_;
        auto e = Make(Expr::Kind::kLiteral);
        if (t.text == "true" || t.text == "True") {
          e->literal = Bool(true);
        } else if (t.text == "false" || t.text == "False") {
          e->literal = Bool(false);
        } else if (t.text == "none" || t.text == "None") {
          e->literal = None();
        } else {
          e->kind = Expr::Kind::kName;
          e->name = t.text;
        }
        return e;
      }
      case Tok::Kind::kString: {
        std::string s;
        while (Peek().kind == Tok::Kind::kString) s += toks_[pos_++].text;
        auto e = Make(Expr::Kind::kLiteral);
        e->literal = Str(std::move(s));
        return e;
      }
      case Tok::Kind::kInt:
      case Tok::Kind::kFloat: {
        ++pos_;
        auto e = Make(Expr::Kind::kLiteral);
        e->literal = t.kind == Tok::Kind::kInt ? Int(t.i) : Float(t.f);
        return e;
      }
      case Tok::Kind::kOp:
        if (t.text == "(") {
          ++pos_;
          if (IsOp(")")) {
            ++pos_;
            auto empty = Make(Expr::Kind::kList);
            empty->name = "tuple";
            return empty;
          }
          ExprPtr e = ParseTuple();
          Expect(")");
          return e;
        }
        if (t.text == "[") {
          ++pos_;
          auto e = Make(Expr::Kind::kList);
          while (!IsOp("]")) {
            e->args.push_back(ParseExpression());
            if (!IsOp(",")) break;
            ++pos_;
          }
          Expect("]");
          return e;
        }
        if (t.text == "{") {
          ++pos_;
          auto e = Make(Expr::Kind::kDict);
          while (!IsOp("}")) {
            e->args.push_back(ParseExpression());
            Expect(":");
            e->args.push_back(ParseExpression());
            if (!IsOp(",")) break;
            ++pos_;
          }
          Expect("}");
          return e;
        }
        break;
      default:
        break;
    }
    Fail(line_, absl::StrCat("unexpected ", Describe(t)));
  }

  void ParseCallArgs(Expr* call) {
    Expect("(");
    while (!IsOp(")")) {
      if (Peek().kind == Tok::Kind::kName && IsOp("=", 1)) {
        std::string name = toks_[pos_].text;
        pos_ += 2;
        call->kwargs.emplace_back(name, ParseExpression());
      } else {
        call->args.push_back(ParseExpression());
      }
      if (!IsOp(",")) break;
      ++pos_;
    }
    Expect(")");
  }

  ExprPtr ParsePostfix(ExprPtr e) {
    while (true) {
      if (IsOp(".")) {
        ++pos_;
        auto attr = Make(Expr::Kind::kAttr);
        if (Peek().kind == Tok::Kind::kInt) {  // foo.0 == foo[0]
          attr->kind = Expr::Kind::kItem;
          auto idx = Make(Expr::Kind::kLiteral);
          idx->literal = Int(toks_[pos_++].i);
          attr->args.push_back(std::move(e));
          attr->args.push_back(std::move(idx));
        } else {
          attr->name = ExpectName();
          attr->args.push_back(std::move(e));
        }
        e = std::move(attr);
      } else if (IsOp("[")) {
        ++pos_;
        ExprPtr parts[3];
        bool is_slice = false;
        for (int part = 0; part < 3; ++part) {
          if (!IsOp(":") && !IsOp("]")) parts[part] = ParseExpression();
          if (part < 2 && IsOp(":")) {
            is_slice = true;
            ++pos_;
          } else {
            break;
          }
        }
        Expect("]");
        auto item = Make(is_slice ? Expr::Kind::kSlice : Expr::Kind::kItem);
        item->args.push_back(std::move(e));
        if (!is_slice && parts[0] == nullptr) Fail(line_, "empty subscript");
        for (int part = 0; part < (is_slice ? 3 : 1); ++part)
          item->args.push_back(std::move(parts[part]));
        e = std::move(item);
      } else if (IsOp("(")) {
        auto call = Make(Expr::Kind::kCall);
        call->args.push_back(std::move(e));
        ParseCallArgs(call.get());
        e = std::move(call);
      } else {
        return e;
      }
    }
  }

  ExprPtr ParseFilterExpr(ExprPtr e) {
    while (true) {
      if (IsOp("|")) {
        ++pos_;
        auto f = Make(Expr::Kind::kFilter);
        f->name = ExpectName();
        f->args.push_back(std::move(e));
        if (IsOp("(")) ParseCallArgs(f.get());
        e = std::move(f);
      } else if (IsName("is")) {
        ++pos_;
        auto t = Make(Expr::Kind::kTest);
        if (IsName("not")) {
          ++pos_;
          t->negated = true;
        }
        if (Peek().kind == Tok::Kind::kOp &&
            (Peek().text == "==" || Peek().text == "!=" || Peek().text == "<" ||
             Peek().text == ">" || Peek().text == "<=" ||
             Peek().text == ">=")) {
          t->name = toks_[pos_++].text;
        } else {
          t->name = ExpectName();
        }
        t->args.push_back(std::move(e));
        if (IsOp("(")) {
          ParseCallArgs(t.get());
        } else if ((Peek().kind == Tok::Kind::kName && !IsName("else") &&
                    !IsName("or") && !IsName("and") && !IsName("if") &&
                    !IsName("is") && !IsName("in") && !IsName("not")) ||
                   Peek().kind == Tok::Kind::kString ||
                   Peek().kind == Tok::Kind::kInt ||
                   Peek().kind == Tok::Kind::kFloat || IsOp("[") || IsOp("{")) {
          t->args.push_back(ParsePostfix(ParsePrimary()));
        }
        e = std::move(t);
      } else if (IsOp("(")) {
        auto call = Make(Expr::Kind::kCall);
        call->args.push_back(std::move(e));
        ParseCallArgs(call.get());
        e = std::move(call);
      } else {
        return e;
      }
    }
  }

  std::vector<Tok> toks_;
  size_t pos_ = 0;
  int line_;
};

class TemplateParser {
 public:
  explicit TemplateParser(std::vector<Chunk> chunks)
      : chunks_(std::move(chunks)) {}

  Body ParseAll() {
    std::string end;
    Body body = ParseBody({}, &end);
    return body;
  }

 private:
  // Parses until one of `enders` (statement keywords); returns its keyword in
  // *end and leaves the ender's parser positioned after the keyword.
  Body ParseBody(const std::vector<std::string>& enders, std::string* end) {
    Body body;
    while (pos_ < chunks_.size()) {
      const Chunk& c = chunks_[pos_++];
      if (c.kind == Chunk::Kind::kText) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::kText;
        n->text = c.text;
        body.push_back(std::move(n));
        continue;
      }
      parser_ = std::make_unique<ExprParser>(Tokenize(c.text, c.line), c.line);
      line_ = c.line;
      if (c.kind == Chunk::Kind::kExpr) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::kOutput;
        n->line = c.line;
        n->expr = parser_->ParseTuple();
        parser_->ExpectEnd();
        body.push_back(std::move(n));
        continue;
      }
      std::string keyword = parser_->ExpectName();
      if (std::find(enders.begin(), enders.end(), keyword) != enders.end()) {
        *end = keyword;
        return body;
      }
      body.push_back(ParseStatement(keyword));
    }
    if (!enders.empty())
      Fail(line_, absl::StrCat("missing '{% ", enders.back(), " %}'"));
    return body;
  }

  std::unique_ptr<Node> ParseStatement(const std::string& keyword) {
    auto n = std::make_unique<Node>();
    n->line = line_;
    const int line = line_;
    std::string end;
    if (keyword == "if") {
      n->kind = Node::Kind::kIf;
      ExprPtr cond = parser_->ParseTuple();
      parser_->ExpectEnd();
      while (true) {
        Body body = ParseBody({"elif", "else", "endif"}, &end);
        n->branches.emplace_back(std::move(cond), std::move(body));
        if (end == "endif") break;
        if (end == "elif") {
          cond = parser_->ParseTuple();
        } else {
          parser_->ExpectEnd();
          Body else_body = ParseBody({"endif"}, &end);
          n->branches.emplace_back(nullptr, std::move(else_body));
          parser_->ExpectEnd();
          break;
        }
        parser_->ExpectEnd();
      }
      parser_->ExpectEnd();
    } else if (keyword == "for") {
      n->kind = Node::Kind::kFor;
      n->names.push_back(parser_->ExpectName());
      while (parser_->IsOp(",")) {
        parser_->Expect(",");
        n->names.push_back(parser_->ExpectName());
      }
      if (!parser_->IsName("in")) Fail(line, "expected 'in' in for statement");
      parser_->ExpectName();
      n->expr = parser_->ParseTuple(/*with_condexpr=*/false);
      if (parser_->IsName("if")) {
        parser_->ExpectName();
        n->filter = parser_->ParseExpression(false);
      }
      if (parser_->IsName("recursive"))
        Fail(line, "recursive loops are not supported");
      parser_->ExpectEnd();
      n->body = ParseBody({"else", "endfor"}, &end);
      if (end == "else") {
        parser_->ExpectEnd();
        n->else_body = ParseBody({"endfor"}, &end);
      }
      parser_->ExpectEnd();
    } else if (keyword == "set") {
      n->text = parser_->ExpectName();
      if (parser_->IsOp(".")) {
        parser_->Expect(".");
        n->attr = parser_->ExpectName();
      }
      n->names.push_back(n->text);
      while (parser_->IsOp(",")) {
        parser_->Expect(",");
        n->names.push_back(parser_->ExpectName());
      }
      if (parser_->IsOp("=")) {
        parser_->Expect("=");
        n->kind = Node::Kind::kSet;
        n->expr = parser_->ParseTuple();
        parser_->ExpectEnd();
      } else {
        parser_->ExpectEnd();
        if (!n->attr.empty() || n->names.size() != 1)
          Fail(line, "block set needs a single name");
        n->kind = Node::Kind::kSetBlock;
        n->body = ParseBody({"endset"}, &end);
        parser_->ExpectEnd();
      }
    } else if (keyword == "macro") {
      n->kind = Node::Kind::kMacro;
      n->text = parser_->ExpectName();
      parser_->Expect("(");
      while (!parser_->IsOp(")")) {
        std::string param = parser_->ExpectName();
        ExprPtr dflt;
        if (parser_->IsOp("=")) {
          parser_->Expect("=");
          dflt = parser_->ParseExpression();
        }
        n->params.emplace_back(param, std::move(dflt));
        if (!parser_->IsOp(",")) break;
        parser_->Expect(",");
      }
      parser_->Expect(")");
      parser_->ExpectEnd();
      n->body = ParseBody({"endmacro"}, &end);
      parser_->ExpectEnd();
    } else if (keyword == "break" || keyword == "continue") {
      n->kind = keyword == "break" ? Node::Kind::kBreak : Node::Kind::kContinue;
      parser_->ExpectEnd();
    } else if (keyword == "generation") {  // transformers' assistant mask tag.
      n->kind = Node::Kind::kScope;
      parser_->ExpectEnd();
      n->body = ParseBody({"endgeneration"}, &end);
      parser_->ExpectEnd();
    } else {
      Fail(line,
           absl::StrCat("unknown or unexpected statement '", keyword, "'"));
    }
    return n;
  }

  std::vector<Chunk> chunks_;
  size_t pos_ = 0;
  int line_ = 1;
  std::unique_ptr<ExprParser> parser_;
};

// --------------------------------------------------------------- renderer

// Code points helpers for Python string semantics.
std::vector<char32_t> Cps(const std::string& s) { return DecodeUtf8Lossy(s); }

std::string PyStrip(const std::string& s, const Value* chars, bool left,
                    bool right) {
  std::vector<char32_t> cps = Cps(s);
  std::vector<char32_t> set;
  bool ws = chars == nullptr || chars->none() || chars->undefined();
  if (!ws) set = Cps(chars->s);
  const auto strip = [&](char32_t c) {
    return ws ? IsUnicodeSpace(c)
              : std::find(set.begin(), set.end(), c) != set.end();
  };
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip(cps[b])) ++b;
  if (right)
    while (e > b && strip(cps[e - 1])) --e;
  return EncodeUtf8(std::vector<char32_t>(cps.begin() + b, cps.begin() + e));
}

ValueList PySplit(const std::string& s, const Value* sep, int64_t maxsplit) {
  ValueList out;
  if (sep == nullptr || sep->none()) {  // Whitespace runs.
    std::vector<char32_t> cps = Cps(s);
    size_t k = 0;
    while (k < cps.size()) {
      while (k < cps.size() && IsUnicodeSpace(cps[k])) ++k;
      if (k >= cps.size()) break;
      size_t b = k;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        size_t e = cps.size();
        while (e > b && IsUnicodeSpace(cps[e - 1])) --e;
        out.push_back(Str(EncodeUtf8({cps.begin() + b, cps.begin() + e})));
        break;
      }
      while (k < cps.size() && !IsUnicodeSpace(cps[k])) ++k;
      out.push_back(Str(EncodeUtf8({cps.begin() + b, cps.begin() + k})));
    }
    return out;
  }
  size_t pos = 0;
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    size_t hit = s.find(sep->s, pos);
    if (hit == s.npos) break;
    out.push_back(Str(s.substr(pos, hit - pos)));
    pos = hit + sep->s.size();
  }
  out.push_back(Str(s.substr(pos)));
  return out;
}

// Python slice semantics over a sequence of `n` elements.
std::vector<int64_t> SliceIndices(int64_t n, const Value& start,
                                  const Value& stop, const Value& step_v,
                                  int line) {
  int64_t step = step_v.undefined() || step_v.none() ? 1 : step_v.i;
  if (step == 0) Fail(line, "slice step cannot be zero");
  const auto clamp = [&](const Value& v, int64_t dflt) -> int64_t {
    if (v.undefined() || v.none()) return dflt;
    int64_t x = v.i;
    if (x < 0) x += n;
    if (step > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  int64_t b = clamp(start, step > 0 ? 0 : n - 1);
  int64_t e = clamp(stop, step > 0 ? n : -1);
  std::vector<int64_t> idx;
  for (int64_t k = b; step > 0 ? k < e : k > e; k += step) idx.push_back(k);
  return idx;
}

class Renderer {
 public:
  Renderer(const Json& context, std::optional<int64_t> now) : now_(now) {
    scopes_.emplace_back();
    for (const auto& [k, v] : context.items()) scopes_[0][k] = FromJson(v);
  }

  std::string Run(const Body& body) {
    RenderBody(body);
    return std::move(out_);
  }

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using Scope = std::unordered_map<std::string, Value>;

  Flow RenderBody(const Body& body) {
    for (const auto& node : body) {
      Flow f = RenderNode(*node);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  Value Lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto found = it->find(name);
      if (found != it->end()) return found->second;
    }
    static const char* kGlobals[] = {"range", "namespace", "raise_exception",
                                     "strftime_now", "dict"};
    for (const char* g : kGlobals)
      if (name == g) return Function(name);
    return Value();
  }

  void Assign(const std::vector<std::string>& names, const Value& v, int line) {
    if (names.size() == 1) {
      scopes_.back()[names[0]] = v;
      return;
    }
    if (!v.is_list() || v.list->size() != names.size())
      Fail(line, absl::StrCat("cannot unpack ", TypeName(v), " into ",
                              names.size(), " names"));
    for (size_t k = 0; k < names.size(); ++k)
      scopes_.back()[names[k]] = (*v.list)[k];
  }

  Flow RenderNode(const Node& n) {
    switch (n.kind) {
      case Node::Kind::kText:
        out_ += n.text;
        return Flow::kNormal;
      case Node::Kind::kOutput:
        out_ += ToString(Eval(*n.expr));
        return Flow::kNormal;
      case Node::Kind::kIf:
        for (const auto& [cond, body] : n.branches)
          if (cond == nullptr || Truthy(Eval(*cond))) return RenderBody(body);
        return Flow::kNormal;
      case Node::Kind::kFor:
        return RenderFor(n);
      case Node::Kind::kSet: {
        Value v = Eval(*n.expr);
        if (n.attr.empty()) {
          Assign(n.names, v, n.line);
          return Flow::kNormal;
        }
        Value ns = Lookup(n.text);
        if (!ns.is_dict() || !ns.is_namespace)
          Fail(n.line, absl::StrCat("cannot assign attribute on non-namespace "
                                    "object '",
                                    n.text, "'"));
        for (auto& [k, e] : *ns.dict) {
          if (k == n.attr) {
            e = v;
            return Flow::kNormal;
          }
        }
        ns.dict->emplace_back(n.attr, v);
        return Flow::kNormal;
      }
      case Node::Kind::kSetBlock: {
        std::string saved = std::move(out_);
        out_.clear();
        RenderBody(n.body);
        scopes_.back()[n.text] = Str(std::move(out_));
        out_ = std::move(saved);
        return Flow::kNormal;
      }
      case Node::Kind::kMacro: {
        Value m = Function(n.text);
        m.macro = &n;
        scopes_.back()[n.text] = m;
        return Flow::kNormal;
      }
      case Node::Kind::kBreak:
        return Flow::kBreak;
      case Node::Kind::kContinue:
        return Flow::kContinue;
      case Node::Kind::kScope:
        return RenderBody(n.body);
    }
    return Flow::kNormal;
  }

  ValueList Iterate(const Value& v, int line) {
    switch (v.type) {
      case Value::Type::kUndefined:
        return {};
      case Value::Type::kList:
        return *v.list;
      case Value::Type::kDict: {
        ValueList keys;
        for (const auto& [k, e] : *v.dict) keys.push_back(Str(k));
        return keys;
      }
      case Value::Type::kString: {
        ValueList chars;
        for (char32_t cp : Cps(v.s)) chars.push_back(Str(EncodeUtf8({cp})));
        return chars;
      }
      default:
        Fail(line, absl::StrCat("'", TypeName(v), "' object is not iterable"));
    }
  }

  Flow RenderFor(const Node& n) {
    ValueList items = Iterate(Eval(*n.expr), n.line);
    if (n.filter != nullptr) {
      ValueList kept;
      for (const Value& item : items) {
        scopes_.emplace_back();
        Assign(n.names, item, n.line);
        bool keep = Truthy(Eval(*n.filter));
        scopes_.pop_back();
        if (keep) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) return RenderBody(n.else_body);
    const int64_t len = static_cast<int64_t>(items.size());
    for (int64_t k = 0; k < len; ++k) {
      scopes_.emplace_back();
      Assign(n.names, items[k], n.line);
      ValueDict loop = {
          {"index", Int(k + 1)},      {"index0", Int(k)},
          {"revindex", Int(len - k)}, {"revindex0", Int(len - k - 1)},
          {"first", Bool(k == 0)},    {"last", Bool(k == len - 1)},
          {"length", Int(len)}};
      if (k > 0) loop.emplace_back("previtem", items[k - 1]);
      if (k + 1 < len) loop.emplace_back("nextitem", items[k + 1]);
      scopes_.back()["loop"] = Dict(std::move(loop));
      Flow f = RenderBody(n.body);
      scopes_.pop_back();
      if (f == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  // ---- expressions

  Value Eval(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return e.literal;
      case Expr::Kind::kName:
        return Lookup(e.name);
      case Expr::Kind::kAttr: {
        Value obj = Eval(*e.args[0]);
        const Value* v = obj.Find(e.name);
        return v ? *v : Value();
      }
      case Expr::Kind::kItem:
        return GetItem(Eval(*e.args[0]), Eval(*e.args[1]), e.line);
      case Expr::Kind::kSlice: {
        Value obj = Eval(*e.args[0]);
        Value parts[3];
        for (int k = 0; k < 3; ++k) {
          if (e.args[k + 1]) parts[k] = Eval(*e.args[k + 1]);
          if (!parts[k].undefined() && !parts[k].none() &&
              parts[k].type != Value::Type::kInt)
            Fail(e.line, "slice indices must be integers");
        }
        if (obj.is_list()) {
          ValueList out;
          for (int64_t k : SliceIndices(obj.list->size(), parts[0], parts[1],
                                        parts[2], e.line))
            out.push_back((*obj.list)[k]);
          return List(std::move(out));
        }
        if (obj.is_string()) {
          std::vector<char32_t> cps = Cps(obj.s), out;
          for (int64_t k :
               SliceIndices(cps.size(), parts[0], parts[1], parts[2], e.line))
            out.push_back(cps[k]);
          return Str(EncodeUtf8(out));
        }
        Fail(e.line, absl::StrCat("'", TypeName(obj), "' cannot be sliced"));
      }
      case Expr::Kind::kCall:
        return EvalCall(e);
      case Expr::Kind::kFilter:
        return EvalFilter(e);
      case Expr::Kind::kTest: {
        bool r = EvalTest(e);
        return Bool(e.negated ? !r : r);
      }
      case Expr::Kind::kNeg: {
        Value v = Eval(*e.args[0]);
        if (v.type == Value::Type::kInt) return Int(-v.i);
        if (v.type == Value::Type::kFloat) return Float(-v.f);
        Fail(e.line,
             absl::StrCat("bad operand type for unary -: '", TypeName(v), "'"));
      }
      case Expr::Kind::kNot:
        return Bool(!Truthy(Eval(*e.args[0])));
      case Expr::Kind::kAnd: {
        Value l = Eval(*e.args[0]);
        return Truthy(l) ? Eval(*e.args[1]) : l;
      }
      case Expr::Kind::kOr: {
        Value l = Eval(*e.args[0]);
        return Truthy(l) ? l : Eval(*e.args[1]);
      }
      case Expr::Kind::kCond:
        if (Truthy(Eval(*e.args[0]))) return Eval(*e.args[1]);
        return e.args[2] ? Eval(*e.args[2]) : Value();
      case Expr::Kind::kList: {
        ValueList items;
        for (const auto& a : e.args) items.push_back(Eval(*a));
        return e.name == "tuple" ? Tuple(std::move(items))
                                 : List(std::move(items));
      }
      case Expr::Kind::kDict: {
        ValueDict items;
        for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
          Value key = Eval(*e.args[k]);
          std::string ks = ToString(key);
          Value v = Eval(*e.args[k + 1]);
          auto it = std::find_if(items.begin(), items.end(),
                                 [&](const auto& p) { return p.first == ks; });
          if (it != items.end()) {
            it->second = v;
          } else {
            items.emplace_back(ks, v);
          }
        }
        return Dict(std::move(items));
      }
      case Expr::Kind::kBinary:
        return EvalBinary(e.name, Eval(*e.args[0]), Eval(*e.args[1]), e.line);
    }
    return Value();
  }

  Value GetItem(const Value& obj, const Value& key, int line) {
    if (obj.is_list() || obj.is_string()) {
      if (key.type != Value::Type::kInt) {
        if (obj.is_string() && key.is_string()) return Value();
        Fail(line,
             absl::StrCat("indices must be integers, not ", TypeName(key)));
      }
      if (obj.is_list()) {
        int64_t n = obj.list->size(), k = key.i < 0 ? key.i + n : key.i;
        return k >= 0 && k < n ? (*obj.list)[k] : Value();
      }
      std::vector<char32_t> cps = Cps(obj.s);
      int64_t n = cps.size(), k = key.i < 0 ? key.i + n : key.i;
      return k >= 0 && k < n ? Str(EncodeUtf8({cps[k]})) : Value();
    }
    if (obj.is_dict()) {
      const Value* v = obj.Find(ToString(key));
      return v ? *v : Value();
    }
    return Value();  // Undefined propagates.
  }

  static int Compare(const Value& a, const Value& b, int line,
                     const std::string& op) {
    if (a.is_number() && b.is_number()) {
      double x = a.AsDouble(), y = b.AsDouble();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.is_string() && b.is_string()) return a.s.compare(b.s);
    Fail(line, absl::StrCat("'", op, "' not supported between '", TypeName(a),
                            "' and '", TypeName(b), "'"));
  }

  static bool Contains(const Value& container, const Value& item, int line) {
    switch (container.type) {
      case Value::Type::kString:
        if (!item.is_string())
          Fail(line, "'in <string>' requires string as left operand");
        return container.s.find(item.s) != std::string::npos;
      case Value::Type::kList:
        for (const Value& v : *container.list)
          if (Equal(v, item)) return true;
        return false;
      case Value::Type::kDict:
        return container.Find(ToString(item)) != nullptr;
      case Value::Type::kUndefined:
        return false;
      default:
        Fail(line, absl::StrCat("argument of type '", TypeName(container),
                                "' is not iterable"));
    }
  }

  static Value EvalBinary(const std::string& op, const Value& a, const Value& b,
                          int line) {
    if (op == "==") return Bool(Equal(a, b));
    if (op == "!=") return Bool(!Equal(a, b));
    if (op == "<") return Bool(Compare(a, b, line, op) < 0);
    if (op == "<=") return Bool(Compare(a, b, line, op) <= 0);
    if (op == ">") return Bool(Compare(a, b, line, op) > 0);
    if (op == ">=") return Bool(Compare(a, b, line, op) >= 0);
    if (op == "in") return Bool(Contains(b, a, line));
    if (op == "not in") return Bool(!Contains(b, a, line));
    if (op == "~") return Str(ToString(a) + ToString(b));
    const auto bad = [&]() {
      Fail(line, absl::StrCat("unsupported operand type(s) for ", op, ": '",
                              TypeName(a), "' and '", TypeName(b), "'"));
    };
    if (op == "+") {
      if (a.is_string() && b.is_string()) return Str(a.s + b.s);
      if (a.is_list() && b.is_list()) {
        ValueList items = *a.list;
        items.insert(items.end(), b.list->begin(), b.list->end());
        return List(std::move(items));
      }
    }
    if (op == "*" && a.is_string() && b.type == Value::Type::kInt) {
      std::string out;
      for (int64_t k = 0; k < b.i; ++k) out += a.s;
      return Str(out);
    }
    if (!a.is_number() || !b.is_number()) bad();
    const bool ints =
        a.type != Value::Type::kFloat && b.type != Value::Type::kFloat;
    const int64_t x = a.type == Value::Type::kBool ? a.b : a.i;
    const int64_t y = b.type == Value::Type::kBool ? b.b : b.i;
    const double fx = a.AsDouble(), fy = b.AsDouble();
    if (op == "+") return ints ? Int(x + y) : Float(fx + fy);
    if (op == "-") return ints ? Int(x - y) : Float(fx - fy);
    if (op == "*") return ints ? Int(x * y) : Float(fx * fy);
    if (op == "**")
      return ints && y >= 0 ? Int(static_cast<int64_t>(std::pow(x, y)))
                            : Float(std::pow(fx, fy));
    if (fy == 0) Fail(line, "division by zero");
    if (op == "/") return Float(fx / fy);
    if (op == "//") {
      if (ints) {
        int64_t q = x / y;
        if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
        return Int(q);
      }
      return Float(std::floor(fx / fy));
    }
    if (op == "%") {
      if (ints) {
        int64_t r = x % y;
        if (r != 0 && ((r < 0) != (y < 0))) r += y;
        return Int(r);
      }
      double r = std::fmod(fx, fy);
      if (r != 0 && ((r < 0) != (fy < 0))) r += fy;
      return Float(r);
    }
    bad();
    return Value();
  }

  // Positional/keyword argument access for built-ins.
  struct Args {
    std::vector<Value> pos;
    std::vector<std::pair<std::string, Value>> kw;
    const Value* Get(size_t index, const char* name) const {
      for (const auto& [k, v] : kw)
        if (k == name) return &v;
      return index < pos.size() ? &pos[index] : nullptr;
    }
  };

  Args EvalArgs(const Expr& e, size_t first) {
    Args a;
    for (size_t k = first; k < e.args.size(); ++k)
      a.pos.push_back(Eval(*e.args[k]));
    for (const auto& [name, x] : e.kwargs) a.kw.emplace_back(name, Eval(*x));
    return a;
  }

  static std::string StrArg(const Args& a, size_t index, const char* name,
                            int line, const char* fn) {
    const Value* v = a.Get(index, name);
    if (v == nullptr || !v->is_string())
      Fail(line, absl::StrCat(fn, "() needs a string argument '", name, "'"));
    return v->s;
  }

  Value EvalCall(const Expr& e) {
    const Expr& callee = *e.args[0];
    if (callee.kind == Expr::Kind::kAttr) {  // Method call.
      Value obj = Eval(*callee.args[0]);
      Args a = EvalArgs(e, 1);
      if (obj.is_string()) return StringMethod(obj.s, callee.name, a, e.line);
      if (obj.is_dict() && !obj.is_namespace) {
        if (callee.name == "items") {
          ValueList items;
          for (const auto& [k, v] : *obj.dict)
            items.push_back(Tuple({Str(k), v}));
          return List(std::move(items));
        }
        if (callee.name == "keys" || callee.name == "values") {
          ValueList items;
          for (const auto& [k, v] : *obj.dict)
            items.push_back(callee.name == "keys" ? Str(k) : v);
          return List(std::move(items));
        }
        if (callee.name == "get") {
          const Value* key = a.Get(0, "key");
          const Value* found = key ? obj.Find(ToString(*key)) : nullptr;
          if (found) return *found;
          const Value* dflt = a.Get(1, "default");
          return dflt ? *dflt : None();
        }
      }
      Value fn = obj.Find(callee.name) ? *obj.Find(callee.name) : Value();
      if (fn.type == Value::Type::kFunction) return CallFunction(fn, a, e.line);
      Fail(e.line, absl::StrCat("'", TypeName(obj), "' object has no method '",
                                callee.name, "'"));
    }
    Value fn = Eval(callee);
    if (fn.type != Value::Type::kFunction)
      Fail(e.line, absl::StrCat("'", TypeName(fn), "' object is not callable",
                                callee.kind == Expr::Kind::kName
                                    ? absl::StrCat(" ('", callee.name, "')")
                                    : ""));
    return CallFunction(fn, EvalArgs(e, 1), e.line);
  }

  Value CallFunction(const Value& fn, const Args& a, int line) {
    if (fn.macro != nullptr) return CallMacro(*fn.macro, a, line);
    const std::string& name = fn.s;
    if (name == "raise_exception") {
      const Value* msg = a.Get(0, "message");
      Fail(line, absl::StrCat("raise_exception: ",
                              msg ? ToString(*msg) : std::string()));
    }
    if (name == "namespace" || name == "dict") {
      ValueDict items;
      for (const Value& p : a.pos)
        if (p.is_dict())
          items.insert(items.end(), p.dict->begin(), p.dict->end());
      for (const auto& [k, v] : a.kw) items.emplace_back(k, v);
      Value d = Dict(std::move(items));
      d.is_namespace = name == "namespace";
      return d;
    }
    if (name == "range") {
      std::vector<int64_t> n;
      for (const Value& p : a.pos) {
        if (p.type != Value::Type::kInt) Fail(line, "range() needs integers");
        n.push_back(p.i);
      }
      if (n.empty() || n.size() > 3)
        Fail(line, "range() takes 1 to 3 arguments");
      int64_t start = n.size() > 1 ? n[0] : 0,
              stop = n.size() > 1 ? n[1] : n[0];
      int64_t step = n.size() > 2 ? n[2] : 1;
      if (step == 0) Fail(line, "range() step must not be zero");
      ValueList items;
      for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step)
        items.push_back(Int(k));
      return List(std::move(items));
    }
    if (name == "strftime_now") {
      std::string fmt = StrArg(a, 0, "format", line, "strftime_now");
      std::time_t t =
          now_ ? static_cast<std::time_t>(*now_) : std::time(nullptr);
      std::tm tm{};
      localtime_r(&t, &tm);
      char buf[256];
      size_t n = std::strftime(buf, sizeof(buf), fmt.c_str(), &tm);
      return Str(std::string(buf, n));
    }
    Fail(line, absl::StrCat("unknown function '", name, "'"));
  }

  Value CallMacro(const Node& macro, const Args& a, int line) {
    Scope scope;
    for (size_t k = 0; k < macro.params.size(); ++k) {
      const auto& [param, dflt] = macro.params[k];
      const Value* v = a.Get(k, param.c_str());
      scope[param] = v ? *v : dflt ? Eval(*dflt) : Value();
    }
    std::vector<Scope> saved_scopes = {scopes_[0], std::move(scope)};
    std::swap(saved_scopes, scopes_);
    std::string saved_out = std::move(out_);
    out_.clear();
    RenderBody(macro.body);
    std::string result = std::move(out_);
    out_ = std::move(saved_out);
    std::swap(saved_scopes, scopes_);
    return Str(std::move(result));
  }

  Value StringMethod(const std::string& s, const std::string& name,
                     const Args& a, int line) {
    if (name == "startswith" || name == "endswith") {
      const Value* arg = a.Get(0, "prefix");
      if (arg == nullptr) Fail(line, name + "() takes an argument");
      ValueList options = arg->is_list() ? *arg->list : ValueList{*arg};
      for (const Value& o : options) {
        if (!o.is_string()) Fail(line, name + "() needs strings");
        bool hit = name == "startswith" ? s.compare(0, o.s.size(), o.s) == 0
                                        : s.size() >= o.s.size() &&
                                              s.compare(s.size() - o.s.size(),
                                                        o.s.size(), o.s) == 0;
        if (hit) return Bool(true);
      }
      return Bool(false);
    }
    if (name == "strip" || name == "lstrip" || name == "rstrip")
      return Str(
          PyStrip(s, a.Get(0, "chars"), name != "rstrip", name != "lstrip"));
    if (name == "split") {
      const Value* maxsplit = a.Get(1, "maxsplit");
      return List(PySplit(s, a.Get(0, "sep"), maxsplit ? maxsplit->i : -1));
    }
    if (name == "upper" || name == "lower") {
      std::string out = s;
      for (char& c : out)
        c = name == "upper" ? std::toupper(static_cast<unsigned char>(c))
                            : std::tolower(static_cast<unsigned char>(c));
      return Str(out);
    }
    if (name == "title" || name == "capitalize") return Str(TitleCase(s, name));
    if (name == "replace") {
      std::string from = StrArg(a, 0, "old", line, "replace");
      std::string to = StrArg(a, 1, "new", line, "replace");
      const Value* count = a.Get(2, "count");
      return Str(Replace(s, from, to, count ? count->i : -1));
    }
    if (name == "find" || name == "count") {
      std::string sub = StrArg(a, 0, "sub", line, name.c_str());
      if (name == "find") {
        size_t hit = s.find(sub);
        return Int(hit == s.npos
                       ? -1
                       : static_cast<int64_t>(Cps(s.substr(0, hit)).size()));
      }
      int64_t n = 0;
      for (size_t p = s.find(sub); p != s.npos && !sub.empty();
           p = s.find(sub, p + sub.size()))
        ++n;
      return Int(n);
    }
    if (name == "join") {
      const Value* items = a.Get(0, "iterable");
      if (items == nullptr) Fail(line, "join() takes an argument");
      std::vector<std::string> parts;
      for (const Value& v : Iterate(*items, line)) parts.push_back(ToString(v));
      return Str(absl::StrJoin(parts, s));
    }
    Fail(line, absl::StrCat("'str' object has no method '", name, "'"));
  }

  static std::string Replace(const std::string& s, const std::string& from,
                             const std::string& to, int64_t count) {
    if (from.empty()) return s;
    std::string out;
    size_t pos = 0;
    int64_t done = 0;
    while (count < 0 || done < count) {
      size_t hit = s.find(from, pos);
      if (hit == s.npos) break;
      out += s.substr(pos, hit - pos) + to;
      pos = hit + from.size();
      ++done;
    }
    return out + s.substr(pos);
  }

  static std::string TitleCase(const std::string& s, const std::string& mode) {
    std::string out = s;
    bool start = true;
    for (size_t k = 0; k < out.size(); ++k) {
      unsigned char c = out[k];
      if (mode == "capitalize") {
        out[k] = k == 0 ? std::toupper(c) : std::tolower(c);
        continue;
      }
      out[k] = start ? std::toupper(c) : std::tolower(c);
      start = !std::isalnum(c) && c < 0x80;
    }
    return out;
  }

  Value EvalFilter(const Expr& e) {
    Value v = Eval(*e.args[0]);
    Args a = EvalArgs(e, 1);
    return ApplyFilter(e.name, v, a, e.line);
  }

  Value ApplyFilter(const std::string& name, const Value& v, const Args& a,
                    int line) {
    if (name == "length" || name == "count") {
      switch (v.type) {
        case Value::Type::kString:
          return Int(Cps(v.s).size());
        case Value::Type::kList:
          return Int(v.list->size());
        case Value::Type::kDict:
          return Int(v.dict->size());
        case Value::Type::kUndefined:
          return Int(0);
        default:
          Fail(line,
               absl::StrCat("object of type '", TypeName(v), "' has no len()"));
      }
    }
    if (name == "tojson") {
      const Value* indent = a.Get(0, "indent");
      std::string out;
      ToJson(v, indent && indent->type == Value::Type::kInt ? indent->i : -1, 0,
             &out, line);
      return Str(out);
    }
    if (name == "trim")
      return Str(PyStrip(ToString(v), a.Get(0, "chars"), true, true));
    if (name == "string") return Str(ToString(v));
    if (name == "safe") return v;
    if (name == "upper" || name == "lower" || name == "title" ||
        name == "capitalize")
      return StringMethod(ToString(v), name, Args{}, line);
    if (name == "replace") return StringMethod(ToString(v), name, a, line);
    if (name == "default" || name == "d") {
      const Value* boolean = a.Get(1, "boolean");
      bool use_default =
          v.undefined() || (boolean && Truthy(*boolean) && !Truthy(v));
      const Value* dflt = a.Get(0, "default_value");
      return use_default ? (dflt ? *dflt : Str("")) : v;
    }
    if (name == "join") {
      const Value* sep = a.Get(0, "d");
      const Value* attribute = a.Get(1, "attribute");
      std::vector<std::string> parts;
      for (const Value& item : Iterate(v, line))
        parts.push_back(
            ToString(attribute ? GetItem(item, *attribute, line) : item));
      return Str(absl::StrJoin(parts, sep ? ToString(*sep) : ""));
    }
    if (name == "first" || name == "last") {
      ValueList items = Iterate(v, line);
      if (items.empty()) return Value();
      return name == "first" ? items.front() : items.back();
    }
    if (name == "list") return List(Iterate(v, line));
    if (name == "reverse") {
      if (v.is_string()) {
        std::vector<char32_t> cps = Cps(v.s);
        std::reverse(cps.begin(), cps.end());
        return Str(EncodeUtf8(cps));
      }
      ValueList items = Iterate(v, line);
      std::reverse(items.begin(), items.end());
      return List(std::move(items));
    }
    if (name == "items") {
      if (v.undefined()) return List({});
      if (!v.is_dict()) Fail(line, "items filter needs a dict");
      ValueList items;
      for (const auto& [k, e] : *v.dict) items.push_back(Tuple({Str(k), e}));
      return List(std::move(items));
    }
    if (name == "int") {
      if (v.type == Value::Type::kFloat) return Int(static_cast<int64_t>(v.f));
      if (v.is_number()) return Int(v.type == Value::Type::kBool ? v.b : v.i);
      if (v.is_string()) {
        char* end = nullptr;
        long long x = std::strtoll(v.s.c_str(), &end, 10);
        if (end && *end == '\0' && !v.s.empty()) return Int(x);
      }
      const Value* dflt = a.Get(0, "default");
      return dflt ? *dflt : Int(0);
    }
    if (name == "float") {
      if (v.is_number()) return Float(v.AsDouble());
      if (v.is_string()) {
        char* end = nullptr;
        double x = std::strtod(v.s.c_str(), &end);
        if (end && *end == '\0' && !v.s.empty()) return Float(x);
      }
      return Float(0);
    }
    if (name == "abs") {
      if (v.type == Value::Type::kInt) return Int(std::llabs(v.i));
      if (v.type == Value::Type::kFloat) return Float(std::fabs(v.f));
      Fail(line, "abs filter needs a number");
    }
    if (name == "select" || name == "reject" || name == "selectattr" ||
        name == "rejectattr") {
      const bool by_attr = name == "selectattr" || name == "rejectattr";
      const bool keep_if = name == "select" || name == "selectattr";
      ValueList out;
      for (const Value& item : Iterate(v, line)) {
        size_t first = 0;
        Value subject = item;
        if (by_attr) {
          if (a.pos.empty()) Fail(line, name + " needs an attribute name");
          subject = GetItem(item, a.pos[0], line);
          first = 1;
        }
        bool result;
        if (a.pos.size() <= first) {
          result = Truthy(subject);
        } else {
          Args test_args;
          test_args.pos.assign(a.pos.begin() + first + 1, a.pos.end());
          result = RunTest(ToString(a.pos[first]), subject, test_args, line);
        }
        if (result == keep_if) out.push_back(item);
      }
      return List(std::move(out));
    }
    if (name == "map") {
      const Value* attribute = a.Get(99, "attribute");
      ValueList out;
      for (const Value& item : Iterate(v, line)) {
        if (attribute) {
          out.push_back(GetItem(item, *attribute, line));
        } else {
          if (a.pos.empty()) Fail(line, "map needs a filter or attribute");
          Args rest;
          rest.pos.assign(a.pos.begin() + 1, a.pos.end());
          out.push_back(ApplyFilter(ToString(a.pos[0]), item, rest, line));
        }
      }
      return List(std::move(out));
    }
    if (name == "unique") {
      ValueList out;
      for (const Value& item : Iterate(v, line))
        if (std::none_of(out.begin(), out.end(),
                         [&](const Value& o) { return Equal(o, item); }))
          out.push_back(item);
      return List(std::move(out));
    }
    if (name == "sort") {
      ValueList items = Iterate(v, line);
      const Value* reverse = a.Get(0, "reverse");
      const Value* attribute = a.Get(2, "attribute");
      std::stable_sort(
          items.begin(), items.end(), [&](const Value& x, const Value& y) {
            Value kx = attribute ? GetItem(x, *attribute, line) : x;
            Value ky = attribute ? GetItem(y, *attribute, line) : y;
            return Compare(kx, ky, line, "<") < 0;
          });
      if (reverse && Truthy(*reverse)) std::reverse(items.begin(), items.end());
      return List(std::move(items));
    }
    if (name == "indent") {
      const Value* width_v = a.Get(0, "width");
      const Value* first_v = a.Get(1, "first");
      const Value* blank_v = a.Get(2, "blank");
      std::string pad = width_v && width_v->is_string()
                            ? width_v->s
                            : std::string(width_v ? width_v->i : 4, ' ');
      std::string s = ToString(v), out;
      size_t start = 0;
      bool first_line = true;
      while (true) {
        size_t nl = s.find('\n', start);
        std::string piece = s.substr(start, nl == s.npos ? s.npos : nl - start);
        bool indent_it =
            first_line ? (first_v && Truthy(*first_v))
                       : (!piece.empty() || (blank_v && Truthy(*blank_v)));
        out += (indent_it ? pad : "") + piece;
        if (nl == s.npos) break;
        out += '\n';
        start = nl + 1;
        first_line = false;
      }
      return Str(out);
    }
    Fail(line, absl::StrCat("unknown filter '", name, "'"));
  }

  bool EvalTest(const Expr& e) {
    if (e.name == "defined" || e.name == "undefined") {
      bool defined = !Eval(*e.args[0]).undefined();
      return e.name == "defined" ? defined : !defined;
    }
    Value v = Eval(*e.args[0]);
    return RunTest(e.name, v, EvalArgs(e, 1), e.line);
  }

  bool RunTest(const std::string& name, const Value& v, const Args& a,
               int line) {
    const auto arg = [&]() -> const Value& {
      if (a.pos.empty())
        Fail(line, absl::StrCat("test '", name, "' needs an argument"));
      return a.pos[0];
    };
    if (name == "defined") return !v.undefined();
    if (name == "undefined") return v.undefined();
    if (name == "none") return v.none();
    if (name == "boolean") return v.type == Value::Type::kBool;
    if (name == "true") return v.type == Value::Type::kBool && v.b;
    if (name == "false") return v.type == Value::Type::kBool && !v.b;
    if (name == "integer") return v.type == Value::Type::kInt;
    if (name == "float") return v.type == Value::Type::kFloat;
    if (name == "number") return v.is_number();
    if (name == "string") return v.is_string();
    if (name == "mapping") return v.is_dict();
    if (name == "iterable") return v.is_list() || v.is_dict() || v.is_string();
    if (name == "sequence") return v.is_list() || v.is_dict() || v.is_string();
    if (name == "callable") return v.type == Value::Type::kFunction;
    if (name == "odd" || name == "even") {
      if (v.type != Value::Type::kInt) Fail(line, name + " test needs an int");
      return (v.i % 2 != 0) == (name == "odd");
    }
    if (name == "divisibleby") return arg().i != 0 && v.i % arg().i == 0;
    if (name == "eq" || name == "equalto" || name == "==")
      return Equal(v, arg());
    if (name == "ne" || name == "!=") return !Equal(v, arg());
    if (name == "lt" || name == "lessthan" || name == "<")
      return Compare(v, arg(), line, "<") < 0;
    if (name == "le" || name == "<=") return Compare(v, arg(), line, "<=") <= 0;
    if (name == "gt" || name == "greaterthan" || name == ">")
      return Compare(v, arg(), line, ">") > 0;
    if (name == "ge" || name == ">=") return Compare(v, arg(), line, ">=") >= 0;
    if (name == "in") return Contains(arg(), v, line);
    if (name == "sameas") return Equal(v, arg());
    if (name == "lower" || name == "upper") {
      if (!v.is_string()) return false;
      for (char c : v.s)
        if (name == "lower" ? std::isupper(static_cast<unsigned char>(c))
                            : std::islower(static_cast<unsigned char>(c)))
          return false;
      return true;
    }
    Fail(line, absl::StrCat("unknown test '", name, "'"));
  }

  std::vector<Scope> scopes_;
  std::string out_;
  std::optional<int64_t> now_;
};

absl::Status ToStatus(const TemplateError& e) {
  return absl::InvalidArgumentError(
      absl::StrCat("chat template line ", e.line, ": ", e.message));
}

}  // namespace

struct Program {
  Body body;
};

absl::StatusOr<std::string> RenderJson(const Program& program,
                                       const Json& context,
                                       std::optional<int64_t> now) {
  if (!context.is_object())
    return absl::InvalidArgumentError(
        "chat template context must be a JSON object");
  try {
    Renderer renderer(context, now);
    return renderer.Run(program.body);
  } catch (const TemplateError& e) {
    return ToStatus(e);
  }
}

}  // namespace chat_template_internal

using chat_template_internal::Json;

absl::StatusOr<ChatTemplate> ChatTemplate::Parse(absl::string_view source) {
  auto program = std::make_shared<chat_template_internal::Program>();
  try {
    chat_template_internal::TemplateParser parser(
        chat_template_internal::Lex(source));
    program->body = parser.ParseAll();
  } catch (const chat_template_internal::TemplateError& e) {
    return chat_template_internal::ToStatus(e);
  }
  ChatTemplate t;
  t.program_ = std::move(program);
  return t;
}

absl::StatusOr<std::string> ChatTemplate::Render(
    absl::string_view context_json,
    std::optional<int64_t> now_unix_seconds) const {
  if (program_ == nullptr)
    return absl::FailedPreconditionError("ChatTemplate was not parsed");
  Json context = Json::parse(context_json, nullptr, /*allow_exceptions=*/false);
  if (context.is_discarded())
    return absl::InvalidArgumentError(
        "chat template context is not valid JSON");
  return chat_template_internal::RenderJson(*program_, context,
                                            now_unix_seconds);
}

absl::StatusOr<std::string> ApplyChatTemplate(
    const ChatTemplate& tmpl, const ChatRequest& request,
    const std::map<std::string, std::string>& special_tokens) {
  const auto parse = [](const std::string& text, const char* what,
                        Json::value_t expected) -> absl::StatusOr<Json> {
    Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || j.type() != expected)
      return absl::InvalidArgumentError(
          absl::StrCat("apply_chat_template: ", what, " must be a JSON ",
                       expected == Json::value_t::array ? "array" : "object"));
    return j;
  };
  Json context = Json::object();
  {
    auto messages =
        parse(request.messages_json, "messages", Json::value_t::array);
    if (!messages.ok()) return messages.status();
    context["messages"] = *std::move(messages);
  }
  if (request.tools_json.empty()) {
    context["tools"] = nullptr;
  } else {
    auto tools = parse(request.tools_json, "tools", Json::value_t::array);
    if (!tools.ok()) return tools.status();
    context["tools"] = *std::move(tools);
  }
  context["documents"] = nullptr;
  context["add_generation_prompt"] = request.add_generation_prompt;
  for (const auto& [k, v] : special_tokens) context[k] = v;
  if (!request.kwargs_json.empty()) {
    auto kwargs = parse(request.kwargs_json, "kwargs", Json::value_t::object);
    if (!kwargs.ok()) return kwargs.status();
    for (const auto& [k, v] : kwargs->items()) context[k] = v;
  }
  return tmpl.Render(context.dump(), request.now_unix_seconds);
}

}  // namespace verl::models
