#include "verl/models/jinja/parser.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "verl/models/jinja/error.h"
#include "verl/models/jinja/lexer.h"

namespace verl::models::jinja {
namespace {

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

}  // namespace

Body ParseTemplate(absl::string_view source) {
  TemplateParser parser(Lex(source));
  return parser.ParseAll();
}

ExprPtr ParseExpression(const std::string& source, int line) {
  ExprParser parser(Tokenize(source, line), line);
  ExprPtr e = parser.ParseTuple();
  parser.ExpectEnd();
  return e;
}

}  // namespace verl::models::jinja
