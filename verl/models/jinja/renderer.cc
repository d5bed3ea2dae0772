#include "verl/models/jinja/renderer.h"

#include <algorithm>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "verl/models/jinja/error.h"

namespace verl::models::jinja {
namespace {

class Renderer {
 public:
  Renderer(const ValueDict& context, const Registry& registry,
           std::optional<int64_t> now)
      : registry_(registry), now_(now) {
    scopes_.emplace_back();
    for (const auto& [k, v] : context) scopes_[0][k] = v;
  }

  std::string Run(const Body& body) {
    RenderBody(body);
    return std::move(out_);
  }

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using Scope = std::unordered_map<std::string, Value>;

  CallContext Context(int line) const {
    CallContext c;
    c.registry = &registry_;
    c.line = line;
    c.now_unix_seconds = now_;
    return c;
  }

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
    if (registry_.HasFunction(name)) return Function(name);
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
        return Slice(obj, parts[0], parts[1], parts[2], e.line);
      }
      case Expr::Kind::kCall:
        return EvalCall(e);
      case Expr::Kind::kFilter: {
        Value v = Eval(*e.args[0]);
        Args a = EvalArgs(e, 1);
        return registry_.ApplyFilter(e.name, v, a, Context(e.line));
      }
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
        return BinaryOp(e.name, Eval(*e.args[0]), Eval(*e.args[1]), e.line);
    }
    return Value();
  }

  Args EvalArgs(const Expr& e, size_t first) {
    Args a;
    for (size_t k = first; k < e.args.size(); ++k)
      a.pos.push_back(Eval(*e.args[k]));
    for (const auto& [name, x] : e.kwargs) a.kw.emplace_back(name, Eval(*x));
    return a;
  }

  Value EvalCall(const Expr& e) {
    const Expr& callee = *e.args[0];
    if (callee.kind == Expr::Kind::kAttr) {  // Method call.
      Value obj = Eval(*callee.args[0]);
      Args a = EvalArgs(e, 1);
      if (obj.is_string())
        return registry_.CallStringMethod(obj, callee.name, a, Context(e.line));
      if (obj.is_dict() && !obj.is_namespace) {
        if (const MethodFn* method = registry_.FindDictMethod(callee.name))
          return (*method)(obj, a, Context(e.line));
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
    if (fn.macro != nullptr) return CallMacro(*fn.macro, a);
    return registry_.CallFunction(fn.s, a, Context(line));
  }

  // A macro renders its body with a fresh scope stack: the globals, then
  // its parameters (keyword, positional, default, else undefined).
  Value CallMacro(const Node& macro, const Args& a) {
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

  bool EvalTest(const Expr& e) {
    if (e.name == "defined" || e.name == "undefined") {
      bool defined = !Eval(*e.args[0]).undefined();
      return e.name == "defined" ? defined : !defined;
    }
    Value v = Eval(*e.args[0]);
    return registry_.RunTest(e.name, v, EvalArgs(e, 1), Context(e.line));
  }

  const Registry& registry_;
  std::vector<Scope> scopes_;
  std::string out_;
  std::optional<int64_t> now_;
};

}  // namespace

std::string Render(const Body& body, const ValueDict& context,
                   const Registry& registry,
                   std::optional<int64_t> now_unix_seconds) {
  Renderer renderer(context, registry, now_unix_seconds);
  return renderer.Run(body);
}

}  // namespace verl::models::jinja
