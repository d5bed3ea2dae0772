#include "verl/models/jinja/parser.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verl/models/jinja/ast.h"
#include "verl/models/jinja/error.h"

namespace verl::models::jinja {
namespace {

using ::testing::HasSubstr;

// An expression tree as an S-expression, e.g. "(+ 1 (* 2 3))".
std::string Dump(const Expr* e) {
  if (e == nullptr) return "_";
  std::string args;
  for (const auto& a : e->args) args += " " + Dump(a.get());
  for (const auto& [k, v] : e->kwargs) args += " " + k + "=" + Dump(v.get());
  switch (e->kind) {
    case Expr::Kind::kLiteral:
      return Repr(e->literal);
    case Expr::Kind::kName:
      return e->name;
    case Expr::Kind::kAttr:
      return "(." + args + " " + e->name + ")";
    case Expr::Kind::kItem:
      return "([]" + args + ")";
    case Expr::Kind::kSlice:
      return "([:]" + args + ")";
    case Expr::Kind::kCall:
      return "(call" + args + ")";
    case Expr::Kind::kFilter:
      return "(|" + e->name + args + ")";
    case Expr::Kind::kTest:
      return std::string("(is ") + (e->negated ? "not " : "") + e->name + args +
             ")";
    case Expr::Kind::kNeg:
      return "(neg" + args + ")";
    case Expr::Kind::kNot:
      return "(not" + args + ")";
    case Expr::Kind::kCond:
      return "(if" + args + ")";
    case Expr::Kind::kList:
      return "(" + (e->name.empty() ? std::string("list") : e->name) + args +
             ")";
    case Expr::Kind::kDict:
      return "(dict" + args + ")";
    default:
      return "(" + e->name + args + ")";
  }
}

std::string Parsed(const std::string& source) {
  return Dump(ParseExpression(source).get());
}

std::string SyntaxError(const std::string& source) {
  try {
    ParseTemplate(source);
  } catch (const TemplateError& e) {
    return "line " + std::to_string(e.line) + ": " + e.message;
  }
  return "";
}

TEST(JinjaParserTest, OperatorPrecedence) {
  EXPECT_EQ(Parsed("1 + 2 * 3"), "(+ 1 (* 2 3))");
  // As in Jinja2 (not Python): unary minus binds tighter than ** ({{ -2 ** 2
  // }} is 4), and ~ tighter than + and -.
  EXPECT_EQ(Parsed("-2 ** 2"), "(** (neg 2) 2)");
  EXPECT_EQ(Parsed("a ~ b + c"), "(+ (~ a b) c)");
  EXPECT_EQ(Parsed("not a == b and c or d"), "(or (and (not (== a b)) c) d)");
  EXPECT_EQ(Parsed("x not in y"), "(not in x y)");
  EXPECT_EQ(Parsed("a if b else c if d"), "(if b a (if d c _))");
  EXPECT_EQ(Parsed("1, 2"), "(tuple 1 2)");
}

TEST(JinjaParserTest, PostfixFiltersAndTests) {
  EXPECT_EQ(Parsed("m['content'][1:][::-1]"),
            "([:] ([:] ([] m 'content') 1 _ _) _ _ (neg 1))");
  EXPECT_EQ(Parsed("x.0.y"), "(. ([] x 0) y)");
  EXPECT_EQ(Parsed("s.split(',', maxsplit=1)"),
            "(call (. s split) ',' maxsplit=1)");
  EXPECT_EQ(Parsed("t | tojson(indent=2) | trim"),
            "(|trim (|tojson t indent=2))");
  // A filter binds tighter than `+`.
  EXPECT_EQ(Parsed("a + b | length"), "(+ a (|length b))");
  EXPECT_EQ(Parsed("x is not none"), "(is not none x)");
  EXPECT_EQ(Parsed("x is divisibleby 3"), "(is divisibleby x 3)");
  EXPECT_EQ(Parsed("x is sameas(false)"), "(is sameas x False)");
  EXPECT_EQ(Parsed("{'a': [1, 2], 'b': ()}"),
            "(dict 'a' (list 1 2) 'b' (tuple))");
  EXPECT_EQ(Parsed("'a' 'b'"), "'ab'");  // Adjacent strings concatenate.
}

TEST(JinjaParserTest, Statements) {
  Body body = ParseTemplate(
      "{% for k, v in d.items() if v %}{{ k }}{% else %}-{% endfor %}"
      "{% set ns.x = 1 %}{% set a, b = 1, 2 %}{% set blk %}t{% endset %}"
      "{% macro m(p, q=2) %}{{ p }}{% endmacro %}"
      "{% if a %}1{% elif b %}2{% else %}3{% endif %}"
      "{% generation %}g{% endgeneration %}");
  ASSERT_EQ(body.size(), 7u);
  const Node& loop = *body[0];
  EXPECT_EQ(loop.kind, Node::Kind::kFor);
  EXPECT_EQ(loop.names, (std::vector<std::string>{"k", "v"}));
  EXPECT_EQ(Dump(loop.expr.get()), "(call (. d items))");
  EXPECT_EQ(Dump(loop.filter.get()), "v");
  EXPECT_EQ(loop.else_body.size(), 1u);
  EXPECT_EQ(body[1]->kind, Node::Kind::kSet);
  EXPECT_EQ(body[1]->text, "ns");
  EXPECT_EQ(body[1]->attr, "x");
  EXPECT_EQ(body[2]->names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(body[3]->kind, Node::Kind::kSetBlock);
  EXPECT_EQ(body[4]->kind, Node::Kind::kMacro);
  ASSERT_EQ(body[4]->params.size(), 2u);
  EXPECT_EQ(body[4]->params[1].first, "q");
  EXPECT_EQ(Dump(body[4]->params[1].second.get()), "2");
  EXPECT_EQ(body[5]->branches.size(), 3u);
  EXPECT_EQ(body[5]->branches[2].first, nullptr);  // else
  EXPECT_EQ(body[6]->kind, Node::Kind::kScope);
}

TEST(JinjaParserTest, SyntaxErrorsNameTheLine) {
  EXPECT_EQ(SyntaxError("{% if x %}no end"), "line 1: missing '{% endif %}'");
  EXPECT_EQ(SyntaxError("{% for x in %}{% endfor %}"),
            "line 1: unexpected end of tag");
  EXPECT_EQ(SyntaxError("{% endfor %}"),
            "line 1: unknown or unexpected statement 'endfor'");
  EXPECT_EQ(SyntaxError("{{ x y }}"), "line 1: unexpected 'y'");
  EXPECT_EQ(SyntaxError("{{ (1 }}"), "line 1: expected ')', got end of tag");
  EXPECT_EQ(SyntaxError("{{ x | }}"),
            "line 1: expected a name, got end of tag");
  EXPECT_EQ(SyntaxError("{% for x y %}{% endfor %}"),
            "line 1: expected 'in' in for statement");
  EXPECT_EQ(SyntaxError("a\nb\n{% if %}{% endif %}"),
            "line 3: unexpected end of tag");
  EXPECT_EQ(SyntaxError("{{ x[] }}"), "line 1: empty subscript");
  EXPECT_EQ(SyntaxError("{% for x in y recursive %}{% endfor %}"),
            "line 1: recursive loops are not supported");
  EXPECT_EQ(SyntaxError("{% set a, b %}x{% endset %}"),
            "line 1: block set needs a single name");
}

}  // namespace
}  // namespace verl::models::jinja
