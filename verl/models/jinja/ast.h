// File: verl/models/jinja/ast.h
//
// The syntax tree the parser builds and the renderer walks: expressions
// (`Expr`) and statements (`Node`). Plain structs; a compiled template owns
// its tree and never changes it, so renders may share it across threads.
#ifndef VERL_MODELS_JINJA_AST_H_
#define VERL_MODELS_JINJA_AST_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "verl/models/jinja/value.h"

namespace verl::models::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// Operands by kind: kLiteral `literal`; kName `name`; kAttr args[0].name;
// kItem args[0][args[1]]; kSlice args[0][args[1]:args[2]:args[3]] (null =
// omitted); kCall args[0](args[1..], kwargs); kFilter args[0] | name(args[1..],
// kwargs); kTest args[0] is [not] name(args[1..]); kNeg, kNot args[0];
// kBinary, kAnd, kOr args[0] <name> args[1]; kCond `args[1] if args[0] else
// args[2]` (null else = undefined); kList args (name "tuple" for a tuple);
// kDict key/value pairs flattened into args.
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

// A statement. kScope is a body rendered in place ({% generation %}).
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

}  // namespace verl::models::jinja

#endif  // VERL_MODELS_JINJA_AST_H_
