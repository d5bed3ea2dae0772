// Global functions (range, namespace, dict, raise_exception, strftime_now)
// and the methods of str and dict values.
#include <algorithm>
#include <cctype>
#include <ctime>
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

std::string StrArg(const Args& a, size_t index, const char* name, int line,
                   absl::string_view fn) {
  const Value* v = a.Get(index, name);
  if (v == nullptr || !v->is_string())
    Fail(line, absl::StrCat(fn, "() needs a string argument '", name, "'"));
  return v->s;
}

// ---- globals

Value RaiseException(const Args& a, const CallContext& c) {
  const Value* msg = a.Get(0, "message");
  Fail(c.line,
       absl::StrCat("raise_exception: ", msg ? ToString(*msg) : std::string()));
}

// namespace(...) and dict(...): the dicts given positionally, then kwargs.
FunctionFn MakeDict(bool is_namespace) {
  return [is_namespace](const Args& a, const CallContext&) {
    ValueDict items;
    for (const Value& p : a.pos)
      if (p.is_dict())
        items.insert(items.end(), p.dict->begin(), p.dict->end());
    for (const auto& [k, v] : a.kw) items.emplace_back(k, v);
    Value d = Dict(std::move(items));
    d.is_namespace = is_namespace;
    return d;
  };
}

Value Range(const Args& a, const CallContext& c) {
  std::vector<int64_t> n;
  for (const Value& p : a.pos) {
    if (p.type != Value::Type::kInt) Fail(c.line, "range() needs integers");
    n.push_back(p.i);
  }
  if (n.empty() || n.size() > 3) Fail(c.line, "range() takes 1 to 3 arguments");
  int64_t start = n.size() > 1 ? n[0] : 0, stop = n.size() > 1 ? n[1] : n[0];
  int64_t step = n.size() > 2 ? n[2] : 1;
  if (step == 0) Fail(c.line, "range() step must not be zero");
  ValueList items;
  for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step)
    items.push_back(Int(k));
  return List(std::move(items));
}

// Local time of the context's clock (default: now), formatted by strftime.
Value StrftimeNow(const Args& a, const CallContext& c) {
  std::string fmt = StrArg(a, 0, "format", c.line, "strftime_now");
  std::time_t t = c.now_unix_seconds
                      ? static_cast<std::time_t>(*c.now_unix_seconds)
                      : std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[256];
  size_t n = std::strftime(buf, sizeof(buf), fmt.c_str(), &tm);
  return Str(std::string(buf, n));
}

// ---- str methods

// Python's str.strip/lstrip/rstrip: `chars` None/undefined strips
// whitespace (str.isspace), else any of its code points.
std::string PyStrip(const std::string& s, const Value* chars, bool left,
                    bool right) {
  std::vector<char32_t> cps = CodePoints(s);
  std::vector<char32_t> set;
  bool ws = chars == nullptr || chars->none() || chars->undefined();
  if (!ws) set = CodePoints(chars->s);
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

// Python's str.split(sep=None, maxsplit=-1).
ValueList PySplit(const std::string& s, const Value* sep, int64_t maxsplit) {
  ValueList out;
  if (sep == nullptr || sep->none()) {  // Whitespace runs.
    std::vector<char32_t> cps = CodePoints(s);
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

// Python's str.replace(old, new, count).
std::string Replace(const std::string& s, const std::string& from,
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

// str.title() / str.capitalize() for ASCII letters.
std::string TitleCase(const std::string& s, bool capitalize) {
  std::string out = s;
  bool start = true;
  for (size_t k = 0; k < out.size(); ++k) {
    unsigned char c = out[k];
    if (capitalize) {
      out[k] = k == 0 ? std::toupper(c) : std::tolower(c);
      continue;
    }
    out[k] = start ? std::toupper(c) : std::tolower(c);
    start = !std::isalnum(c) && c < 0x80;
  }
  return out;
}

// startswith/endswith(prefix or tuple of prefixes).
MethodFn AffixTest(std::string name, bool prefix) {
  return [name, prefix](const Value& self, const Args& a,
                        const CallContext& c) {
    const std::string& s = self.s;
    const Value* arg = a.Get(0, "prefix");
    if (arg == nullptr) Fail(c.line, name + "() takes an argument");
    ValueList options = arg->is_list() ? *arg->list : ValueList{*arg};
    for (const Value& o : options) {
      if (!o.is_string()) Fail(c.line, name + "() needs strings");
      bool hit =
          prefix ? s.compare(0, o.s.size(), o.s) == 0
                 : s.size() >= o.s.size() &&
                       s.compare(s.size() - o.s.size(), o.s.size(), o.s) == 0;
      if (hit) return Bool(true);
    }
    return Bool(false);
  };
}

MethodFn Strip(bool left, bool right) {
  return [left, right](const Value& self, const Args& a, const CallContext&) {
    return Str(PyStrip(self.s, a.Get(0, "chars"), left, right));
  };
}

MethodFn AsciiCase(bool upper) {
  return [upper](const Value& self, const Args&, const CallContext&) {
    std::string out = self.s;
    for (char& c : out)
      c = upper ? std::toupper(static_cast<unsigned char>(c))
                : std::tolower(static_cast<unsigned char>(c));
    return Str(out);
  };
}

Value Find(const Value& self, const Args& a, const CallContext& c) {
  const std::string& s = self.s;
  std::string sub = StrArg(a, 0, "sub", c.line, "find");
  size_t hit = s.find(sub);
  return Int(hit == s.npos
                 ? -1
                 : static_cast<int64_t>(CodePoints(s.substr(0, hit)).size()));
}

Value Count(const Value& self, const Args& a, const CallContext& c) {
  const std::string& s = self.s;
  std::string sub = StrArg(a, 0, "sub", c.line, "count");
  int64_t n = 0;
  for (size_t p = s.find(sub); p != s.npos && !sub.empty();
       p = s.find(sub, p + sub.size()))
    ++n;
  return Int(n);
}

void AddStringMethods(Registry* r) {
  r->AddStringMethod("startswith", AffixTest("startswith", true));
  r->AddStringMethod("endswith", AffixTest("endswith", false));
  r->AddStringMethod("strip", Strip(true, true));
  r->AddStringMethod("lstrip", Strip(true, false));
  r->AddStringMethod("rstrip", Strip(false, true));
  r->AddStringMethod("split", [](const Value& self, const Args& a,
                                 const CallContext&) {
    const Value* maxsplit = a.Get(1, "maxsplit");
    return List(PySplit(self.s, a.Get(0, "sep"), maxsplit ? maxsplit->i : -1));
  });
  r->AddStringMethod("upper", AsciiCase(true));
  r->AddStringMethod("lower", AsciiCase(false));
  r->AddStringMethod("title",
                     [](const Value& self, const Args&, const CallContext&) {
                       return Str(TitleCase(self.s, /*capitalize=*/false));
                     });
  r->AddStringMethod("capitalize",
                     [](const Value& self, const Args&, const CallContext&) {
                       return Str(TitleCase(self.s, /*capitalize=*/true));
                     });
  r->AddStringMethod(
      "replace", [](const Value& self, const Args& a, const CallContext& c) {
        std::string from = StrArg(a, 0, "old", c.line, "replace");
        std::string to = StrArg(a, 1, "new", c.line, "replace");
        const Value* count = a.Get(2, "count");
        return Str(Replace(self.s, from, to, count ? count->i : -1));
      });
  r->AddStringMethod("find", Find);
  r->AddStringMethod("count", Count);
  r->AddStringMethod(
      "join", [](const Value& self, const Args& a, const CallContext& c) {
        const Value* items = a.Get(0, "iterable");
        if (items == nullptr) Fail(c.line, "join() takes an argument");
        std::vector<std::string> parts;
        for (const Value& v : Iterate(*items, c.line))
          parts.push_back(ToString(v));
        return Str(absl::StrJoin(parts, self.s));
      });
}

// ---- dict methods

void AddDictMethods(Registry* r) {
  r->AddDictMethod("items",
                   [](const Value& self, const Args&, const CallContext&) {
                     ValueList items;
                     for (const auto& [k, v] : *self.dict)
                       items.push_back(Tuple({Str(k), v}));
                     return List(std::move(items));
                   });
  r->AddDictMethod("keys",
                   [](const Value& self, const Args&, const CallContext&) {
                     ValueList items;
                     for (const auto& [k, v] : *self.dict)
                       items.push_back(Str(k));
                     return List(std::move(items));
                   });
  r->AddDictMethod("values",
                   [](const Value& self, const Args&, const CallContext&) {
                     ValueList items;
                     for (const auto& [k, v] : *self.dict) items.push_back(v);
                     return List(std::move(items));
                   });
  r->AddDictMethod(
      "get", [](const Value& self, const Args& a, const CallContext&) {
        const Value* key = a.Get(0, "key");
        const Value* found = key ? self.Find(ToString(*key)) : nullptr;
        if (found) return *found;
        const Value* dflt = a.Get(1, "default");
        return dflt ? *dflt : None();
      });
}

}  // namespace

void AddFunctions(Registry* r) {
  r->AddFunction("raise_exception", RaiseException);
  r->AddFunction("namespace", MakeDict(/*is_namespace=*/true));
  r->AddFunction("dict", MakeDict(/*is_namespace=*/false));
  r->AddFunction("range", Range);
  r->AddFunction("strftime_now", StrftimeNow);
  AddStringMethods(r);
  AddDictMethods(r);
}

const Registry& DefaultRegistry() {
  static const Registry* registry = [] {
    auto* r = new Registry;
    AddFilters(r);
    AddTests(r);
    AddFunctions(r);
    return r;
  }();
  return *registry;
}

}  // namespace verl::models::jinja
