// Tests: `value is [not] name(args)` (Jinja's tests, not unit tests).
#include <cctype>
#include <string>

#include "absl/strings/str_cat.h"
#include "verl/models/jinja/builtins.h"
#include "verl/models/jinja/error.h"

namespace verl::models::jinja {
namespace {

// A test of the value alone.
TestFn Is(bool (*predicate)(const Value&)) {
  return [predicate](const Value& v, const Args&, const CallContext&) {
    return predicate(v);
  };
}

// A test comparing the value with the test's one argument.
TestFn With(std::string name,
            bool (*predicate)(const Value& v, const Value& arg,
                              const CallContext& c)) {
  return
      [name, predicate](const Value& v, const Args& a, const CallContext& c) {
        if (a.pos.empty())
          Fail(c.line, absl::StrCat("test '", name, "' needs an argument"));
        return predicate(v, a.pos[0], c);
      };
}

TestFn Parity(std::string name, bool odd) {
  return [name, odd](const Value& v, const Args&, const CallContext& c) {
    if (v.type != Value::Type::kInt) Fail(c.line, name + " test needs an int");
    return (v.i % 2 != 0) == odd;
  };
}

TestFn Case(bool lower) {
  return [lower](const Value& v, const Args&, const CallContext&) {
    if (!v.is_string()) return false;
    for (char c : v.s)
      if (lower ? std::isupper(static_cast<unsigned char>(c))
                : std::islower(static_cast<unsigned char>(c)))
        return false;
    return true;
  };
}

bool Eq(const Value& v, const Value& x, const CallContext&) {
  return Equal(v, x);
}
bool Ne(const Value& v, const Value& x, const CallContext&) {
  return !Equal(v, x);
}
bool Lt(const Value& v, const Value& x, const CallContext& c) {
  return Compare(v, x, c.line, "<") < 0;
}
bool Le(const Value& v, const Value& x, const CallContext& c) {
  return Compare(v, x, c.line, "<=") <= 0;
}
bool Gt(const Value& v, const Value& x, const CallContext& c) {
  return Compare(v, x, c.line, ">") > 0;
}
bool Ge(const Value& v, const Value& x, const CallContext& c) {
  return Compare(v, x, c.line, ">=") >= 0;
}

}  // namespace

void AddTests(Registry* r) {
  r->AddTest("defined", Is([](const Value& v) { return !v.undefined(); }));
  r->AddTest("undefined", Is([](const Value& v) { return v.undefined(); }));
  r->AddTest("none", Is([](const Value& v) { return v.none(); }));
  r->AddTest("boolean",
             Is([](const Value& v) { return v.type == Value::Type::kBool; }));
  r->AddTest("true", Is([](const Value& v) {
               return v.type == Value::Type::kBool && v.b;
             }));
  r->AddTest("false", Is([](const Value& v) {
               return v.type == Value::Type::kBool && !v.b;
             }));
  r->AddTest("integer",
             Is([](const Value& v) { return v.type == Value::Type::kInt; }));
  r->AddTest("float",
             Is([](const Value& v) { return v.type == Value::Type::kFloat; }));
  r->AddTest("number", Is([](const Value& v) { return v.is_number(); }));
  r->AddTest("string", Is([](const Value& v) { return v.is_string(); }));
  r->AddTest("mapping", Is([](const Value& v) { return v.is_dict(); }));
  for (const char* name : {"iterable", "sequence"}) {
    r->AddTest(name, Is([](const Value& v) {
                 return v.is_list() || v.is_dict() || v.is_string();
               }));
  }
  r->AddTest("callable", Is([](const Value& v) {
               return v.type == Value::Type::kFunction;
             }));
  r->AddTest("odd", Parity("odd", true));
  r->AddTest("even", Parity("even", false));
  r->AddTest("divisibleby",
             With("divisibleby",
                  [](const Value& v, const Value& x, const CallContext&) {
                    return x.i != 0 && v.i % x.i == 0;
                  }));
  for (const char* name : {"eq", "equalto", "==", "sameas"})
    r->AddTest(name, With(name, Eq));
  for (const char* name : {"ne", "!="}) r->AddTest(name, With(name, Ne));
  for (const char* name : {"lt", "lessthan", "<"})
    r->AddTest(name, With(name, Lt));
  for (const char* name : {"le", "<="}) r->AddTest(name, With(name, Le));
  for (const char* name : {"gt", "greaterthan", ">"})
    r->AddTest(name, With(name, Gt));
  for (const char* name : {"ge", ">="}) r->AddTest(name, With(name, Ge));
  r->AddTest("in", With("in", [](const Value& v, const Value& x,
                                 const CallContext& c) {
               return Contains(x, v, c.line);
             }));
  r->AddTest("lower", Case(true));
  r->AddTest("upper", Case(false));
}

}  // namespace verl::models::jinja
