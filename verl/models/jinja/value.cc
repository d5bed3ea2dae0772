#include "verl/models/jinja/value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "verl/models/jinja/error.h"
#include "verl/models/tokenizer/tokenizer_utf8.h"

namespace verl::models::jinja {

using Json = nlohmann::ordered_json;

const Value* Value::Find(absl::string_view key) const {
  if (!is_dict()) return nullptr;
  for (const auto& [k, v] : *dict)
    if (k == key) return &v;
  return nullptr;
}

std::vector<char32_t> CodePoints(const std::string& s) {
  return DecodeUtf8Lossy(s);
}

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

// Shortest round-trip digits; scientific notation outside [1e-4, 1e16).
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

namespace {

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

}  // namespace

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

namespace {

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

}  // namespace

std::string ToJson(const Value& v, int indent, int line) {
  std::string out;
  ToJson(v, indent, 0, &out, line);
  return out;
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
      for (char32_t cp : CodePoints(v.s))
        chars.push_back(Str(EncodeUtf8({cp})));
      return chars;
    }
    default:
      Fail(line, absl::StrCat("'", TypeName(v), "' object is not iterable"));
  }
}

Value GetItem(const Value& obj, const Value& key, int line) {
  if (obj.is_list() || obj.is_string()) {
    if (key.type != Value::Type::kInt) {
      if (obj.is_string() && key.is_string()) return Value();
      Fail(line, absl::StrCat("indices must be integers, not ", TypeName(key)));
    }
    if (obj.is_list()) {
      int64_t n = obj.list->size(), k = key.i < 0 ? key.i + n : key.i;
      return k >= 0 && k < n ? (*obj.list)[k] : Value();
    }
    std::vector<char32_t> cps = CodePoints(obj.s);
    int64_t n = cps.size(), k = key.i < 0 ? key.i + n : key.i;
    return k >= 0 && k < n ? Str(EncodeUtf8({cps[k]})) : Value();
  }
  if (obj.is_dict()) {
    const Value* v = obj.Find(ToString(key));
    return v ? *v : Value();
  }
  return Value();  // Undefined propagates.
}

Value Slice(const Value& obj, const Value& start, const Value& stop,
            const Value& step, int line) {
  for (const Value* part : {&start, &stop, &step}) {
    if (!part->undefined() && !part->none() && part->type != Value::Type::kInt)
      Fail(line, "slice indices must be integers");
  }
  if (obj.is_list()) {
    ValueList out;
    for (int64_t k : SliceIndices(obj.list->size(), start, stop, step, line))
      out.push_back((*obj.list)[k]);
    return List(std::move(out));
  }
  if (obj.is_string()) {
    std::vector<char32_t> cps = CodePoints(obj.s), out;
    for (int64_t k : SliceIndices(cps.size(), start, stop, step, line))
      out.push_back(cps[k]);
    return Str(EncodeUtf8(out));
  }
  Fail(line, absl::StrCat("'", TypeName(obj), "' cannot be sliced"));
}

int Compare(const Value& a, const Value& b, int line, absl::string_view op) {
  if (a.is_number() && b.is_number()) {
    double x = a.AsDouble(), y = b.AsDouble();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) return a.s.compare(b.s);
  Fail(line, absl::StrCat("'", op, "' not supported between '", TypeName(a),
                          "' and '", TypeName(b), "'"));
}

bool Contains(const Value& container, const Value& item, int line) {
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

Value BinaryOp(absl::string_view op, const Value& a, const Value& b, int line) {
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

}  // namespace verl::models::jinja
