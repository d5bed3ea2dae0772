// File: verl/models/jinja/value.h
//
// The values a Jinja template computes with, and their Python semantics:
// truthiness, equality and ordering, `in`, arithmetic (`//` and `%` floor like
// Python), subscripts and slices over code points, iteration, and the three
// ways a value prints: str() (`{{ x }}`), repr() (inside containers) and
// json.dumps(ensure_ascii=False) (the `tojson` filter). Dicts keep insertion
// order, like Python 3.7+ dicts and the JSON the context comes from.
//
// Runtime type errors throw TemplateError (error.h) naming `line`.
#ifndef VERL_MODELS_JINJA_VALUE_H_
#define VERL_MODELS_JINJA_VALUE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "nlohmann/json_fwd.hpp"

namespace verl::models::jinja {

struct Node;  // A {% macro %} definition (ast.h).
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
  // Shared: `{% set ns.x = 1 %}` and list mutation are visible through copies.
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
  // The entry `key` of a dict; nullptr when absent or not a dict.
  const Value* Find(absl::string_view key) const;
};

// Constructors.
Value None();
Value Bool(bool b);
Value Int(int64_t i);
Value Float(double f);
Value Str(std::string s);
Value List(ValueList items);
Value Tuple(ValueList items);
Value Dict(ValueDict items);
Value Function(std::string name);  // A built-in global, called by name.

// Python's type name ("int", "str", "NoneType", ...; "undefined").
const char* TypeName(const Value& v);

// JSON null/bool/number/string/array/object as None/bool/int|float/str/
// list/dict (object key order kept).
Value FromJson(const nlohmann::ordered_json& j);

// Python's bool(); undefined is false.
bool Truthy(const Value& v);
// Python's ==: numbers compare by value across bool/int/float.
bool Equal(const Value& a, const Value& b);
// <0, 0, >0 for numbers or for strings (byte order = code point order);
// other pairs fail with "'<op>' not supported between ...".
int Compare(const Value& a, const Value& b, int line, absl::string_view op);
// Python's `item in container` (substring, list element, dict key);
// undefined contains nothing.
bool Contains(const Value& container, const Value& item, int line);
// Binary operators: == != < <= > >= in, not in, ~ (concatenation as str),
// + - * / // % ** with Python's int/float rules, str + str, list + list,
// str * int.
Value BinaryOp(absl::string_view op, const Value& a, const Value& b, int line);

// The elements a for loop visits: list items, dict keys, string characters
// (code points); undefined iterates as empty.
ValueList Iterate(const Value& v, int line);
// obj[key]: list/string by int (negative from the end), dict by str(key);
// out of range or missing gives undefined.
Value GetItem(const Value& obj, const Value& key, int line);
// obj[start:stop:step] of a list or string (Python slice rules; each part
// may be undefined/None = omitted).
Value Slice(const Value& obj, const Value& start, const Value& stop,
            const Value& step, int line);

// Python's str() (undefined prints as "").
std::string ToString(const Value& v);
// Python's repr() (lists, dicts and tuples print their items this way).
std::string Repr(const Value& v);
// Python's repr() of a float (shortest round trip; "1e+20", "1e-05");
// `json` spells the non-finite values as json.dumps does (NaN, Infinity).
std::string FloatRepr(double x, bool json);
// Python's json.dumps(v, ensure_ascii=False, indent=indent); indent < 0 is
// indent=None (one line, ", " and ": " separators).
std::string ToJson(const Value& v, int indent, int line);

// Code points of a string (lossy for invalid UTF-8).
std::vector<char32_t> CodePoints(const std::string& s);

}  // namespace verl::models::jinja

#endif  // VERL_MODELS_JINJA_VALUE_H_
