// Filters: `value | name(args)`.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "verl/models/jinja/builtins.h"
#include "verl/models/jinja/error.h"
#include "verl/models/tokenizer/tokenizer_utf8.h"

namespace verl::models::jinja {
namespace {

Value Length(const Value& v, const Args&, const CallContext& c) {
  switch (v.type) {
    case Value::Type::kString:
      return Int(CodePoints(v.s).size());
    case Value::Type::kList:
      return Int(v.list->size());
    case Value::Type::kDict:
      return Int(v.dict->size());
    case Value::Type::kUndefined:
      return Int(0);
    default:
      Fail(c.line,
           absl::StrCat("object of type '", TypeName(v), "' has no len()"));
  }
}

Value ToJsonFilter(const Value& v, const Args& a, const CallContext& c) {
  const Value* indent = a.Get(0, "indent");
  return Str(ToJson(
      v, indent && indent->type == Value::Type::kInt ? indent->i : -1, c.line));
}

Value Default(const Value& v, const Args& a, const CallContext&) {
  const Value* boolean = a.Get(1, "boolean");
  bool use_default =
      v.undefined() || (boolean && Truthy(*boolean) && !Truthy(v));
  const Value* dflt = a.Get(0, "default_value");
  return use_default ? (dflt ? *dflt : Str("")) : v;
}

Value Join(const Value& v, const Args& a, const CallContext& c) {
  const Value* sep = a.Get(0, "d");
  const Value* attribute = a.Get(1, "attribute");
  std::vector<std::string> parts;
  for (const Value& item : Iterate(v, c.line))
    parts.push_back(
        ToString(attribute ? GetItem(item, *attribute, c.line) : item));
  return Str(absl::StrJoin(parts, sep ? ToString(*sep) : ""));
}

Value Reverse(const Value& v, const Args&, const CallContext& c) {
  if (v.is_string()) {
    std::vector<char32_t> cps = CodePoints(v.s);
    std::reverse(cps.begin(), cps.end());
    return Str(EncodeUtf8(cps));
  }
  ValueList items = Iterate(v, c.line);
  std::reverse(items.begin(), items.end());
  return List(std::move(items));
}

Value Items(const Value& v, const Args&, const CallContext& c) {
  if (v.undefined()) return List({});
  if (!v.is_dict()) Fail(c.line, "items filter needs a dict");
  ValueList items;
  for (const auto& [k, e] : *v.dict) items.push_back(Tuple({Str(k), e}));
  return List(std::move(items));
}

Value ToInt(const Value& v, const Args& a, const CallContext&) {
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

Value ToFloat(const Value& v, const Args&, const CallContext&) {
  if (v.is_number()) return Float(v.AsDouble());
  if (v.is_string()) {
    char* end = nullptr;
    double x = std::strtod(v.s.c_str(), &end);
    if (end && *end == '\0' && !v.s.empty()) return Float(x);
  }
  return Float(0);
}

Value Abs(const Value& v, const Args&, const CallContext& c) {
  if (v.type == Value::Type::kInt) return Int(std::llabs(v.i));
  if (v.type == Value::Type::kFloat) return Float(std::fabs(v.f));
  Fail(c.line, "abs filter needs a number");
}

// select/reject(test, args...) and selectattr/rejectattr(attr, test, ...):
// keep the items whose (attribute) passes the test (or is truthy) when
// `keep_if`, the others otherwise.
FilterFn Select(std::string name, bool by_attr, bool keep_if) {
  return [name, by_attr, keep_if](const Value& v, const Args& a,
                                  const CallContext& c) {
    ValueList out;
    for (const Value& item : Iterate(v, c.line)) {
      size_t first = 0;
      Value subject = item;
      if (by_attr) {
        if (a.pos.empty()) Fail(c.line, name + " needs an attribute name");
        subject = GetItem(item, a.pos[0], c.line);
        first = 1;
      }
      bool result;
      if (a.pos.size() <= first) {
        result = Truthy(subject);
      } else {
        Args test_args;
        test_args.pos.assign(a.pos.begin() + first + 1, a.pos.end());
        result =
            c.registry->RunTest(ToString(a.pos[first]), subject, test_args, c);
      }
      if (result == keep_if) out.push_back(item);
    }
    return List(std::move(out));
  };
}

Value Map(const Value& v, const Args& a, const CallContext& c) {
  const Value* attribute = a.Get(99, "attribute");
  ValueList out;
  for (const Value& item : Iterate(v, c.line)) {
    if (attribute) {
      out.push_back(GetItem(item, *attribute, c.line));
    } else {
      if (a.pos.empty()) Fail(c.line, "map needs a filter or attribute");
      Args rest;
      rest.pos.assign(a.pos.begin() + 1, a.pos.end());
      out.push_back(c.registry->ApplyFilter(ToString(a.pos[0]), item, rest, c));
    }
  }
  return List(std::move(out));
}

Value Unique(const Value& v, const Args&, const CallContext& c) {
  ValueList out;
  for (const Value& item : Iterate(v, c.line))
    if (std::none_of(out.begin(), out.end(),
                     [&](const Value& o) { return Equal(o, item); }))
      out.push_back(item);
  return List(std::move(out));
}

Value Sort(const Value& v, const Args& a, const CallContext& c) {
  ValueList items = Iterate(v, c.line);
  const Value* reverse = a.Get(0, "reverse");
  const Value* attribute = a.Get(2, "attribute");
  std::stable_sort(items.begin(), items.end(),
                   [&](const Value& x, const Value& y) {
                     Value kx = attribute ? GetItem(x, *attribute, c.line) : x;
                     Value ky = attribute ? GetItem(y, *attribute, c.line) : y;
                     return Compare(kx, ky, c.line, "<") < 0;
                   });
  if (reverse && Truthy(*reverse)) std::reverse(items.begin(), items.end());
  return List(std::move(items));
}

Value Indent(const Value& v, const Args& a, const CallContext&) {
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
    bool indent_it = first_line
                         ? (first_v && Truthy(*first_v))
                         : (!piece.empty() || (blank_v && Truthy(*blank_v)));
    out += (indent_it ? pad : "") + piece;
    if (nl == s.npos) break;
    out += '\n';
    start = nl + 1;
    first_line = false;
  }
  return Str(out);
}

// A filter that is the str method `method` of str(value); `with_args`
// passes the filter's arguments on.
FilterFn StringMethodFilter(std::string method, bool with_args) {
  return
      [method, with_args](const Value& v, const Args& a, const CallContext& c) {
        return c.registry->CallStringMethod(Str(ToString(v)), method,
                                            with_args ? a : Args{}, c);
      };
}

}  // namespace

void AddFilters(Registry* r) {
  r->AddFilter("length", Length);
  r->AddFilter("count", Length);
  r->AddFilter("tojson", ToJsonFilter);
  r->AddFilter("trim", StringMethodFilter("strip", /*with_args=*/true));
  r->AddFilter("string", [](const Value& v, const Args&, const CallContext&) {
    return Str(ToString(v));
  });
  r->AddFilter("safe", [](const Value& v, const Args&, const CallContext&) {
    return v;
  });
  for (const char* m : {"upper", "lower", "title", "capitalize"})
    r->AddFilter(m, StringMethodFilter(m, /*with_args=*/false));
  r->AddFilter("replace", StringMethodFilter("replace", /*with_args=*/true));
  r->AddFilter("default", Default);
  r->AddFilter("d", Default);
  r->AddFilter("join", Join);
  r->AddFilter("first", [](const Value& v, const Args&, const CallContext& c) {
    ValueList items = Iterate(v, c.line);
    return items.empty() ? Value() : items.front();
  });
  r->AddFilter("last", [](const Value& v, const Args&, const CallContext& c) {
    ValueList items = Iterate(v, c.line);
    return items.empty() ? Value() : items.back();
  });
  r->AddFilter("list", [](const Value& v, const Args&, const CallContext& c) {
    return List(Iterate(v, c.line));
  });
  r->AddFilter("reverse", Reverse);
  r->AddFilter("items", Items);
  r->AddFilter("int", ToInt);
  r->AddFilter("float", ToFloat);
  r->AddFilter("abs", Abs);
  r->AddFilter("select", Select("select", false, true));
  r->AddFilter("reject", Select("reject", false, false));
  r->AddFilter("selectattr", Select("selectattr", true, true));
  r->AddFilter("rejectattr", Select("rejectattr", true, false));
  r->AddFilter("map", Map);
  r->AddFilter("unique", Unique);
  r->AddFilter("sort", Sort);
  r->AddFilter("indent", Indent);
}

}  // namespace verl::models::jinja
