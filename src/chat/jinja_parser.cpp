// snapkv chat templates: the Jinja parser, tokens -> syntax tree. Precedence as jinja2's parser
// (jinja2/parser.py), loosest first: `x if c else y`, or, and, not, comparisons and `in`,
// + -, ~, * / // %, **, unary - +, then filters `|`, tests `is` and calls, then `.`, `[]`.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "chat/jinja_ast.h"

namespace snapkv::jinja {

namespace {

constexpr int kMaxDepth = 200;  // nesting of expressions and blocks

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  Program run() {
    Program p;
    std::string end;
    p.body = body({}, end, t_.front().pos, "");
    return p;
  }

 private:
  // ---- token helpers ----
  const Token& cur() const { return t_[k_]; }
  const Token& peek(size_t n = 1) const { return t_[std::min(k_ + n, t_.size() - 1)]; }
  bool is_op(std::string_view op) const { return cur().type == Tok::Op && cur().value == op; }
  bool is_name(std::string_view n) const { return cur().type == Tok::Name && cur().value == n; }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    ++k_;
    return true;
  }
  bool skip_name(std::string_view n) {
    if (!is_name(n)) return false;
    ++k_;
    return true;
  }
  [[noreturn]] void fail(const std::string& msg) const { throw TemplateError{msg, cur().pos}; }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::Text:
        return "template text";
      case Tok::VarBegin:
        return "'{{'";
      case Tok::VarEnd:
        return "'}}'";
      case Tok::BlockBegin:
        return "'{%'";
      case Tok::BlockEnd:
        return "'%}'";
      case Tok::Name:
        return "'" + t.value + "'";
      case Tok::String:
        return "a string";
      case Tok::Int:
      case Tok::Float:
        return "a number";
      case Tok::Op:
        return "'" + t.value + "'";
      case Tok::End:
        return "the end of the template";
    }
    return "?";
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail(fmt::format("expected '{}', found {}", op, describe(cur())));
  }
  std::string expect_name(const char* what) {
    if (cur().type != Tok::Name) fail(fmt::format("expected {}, found {}", what, describe(cur())));
    return t_[k_++].value;
  }
  void expect_block_end(const char* stmt) {
    if (cur().type != Tok::BlockEnd) {
      fail(fmt::format("expected '%}}' to end the '{}' tag, found {}", stmt, describe(cur())));
    }
    ++k_;
  }

  struct DepthGuard {
    explicit DepthGuard(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxDepth) p_.fail(fmt::format("template nests deeper than {} levels", kMaxDepth));
    }
    ~DepthGuard() { --p_.depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;
    Parser& p_;
  };

  // Sets e's height from its children; a chain such as 1 + 1 + ... or x|trim|trim|... deeper
  // than kMaxDepth is an error here instead of a deep recursion when evaluated or freed.
  ExprPtr sized(ExprPtr e) const {
    int h = 0;
    for (const ExprPtr& a : e->args) {
      if (a) h = std::max(h, a->depth);
    }
    for (const auto& kv : e->kwargs) h = std::max(h, kv.second->depth);
    e->depth = h + 1;
    if (e->depth > kMaxDepth) {
      throw TemplateError{fmt::format("expression nests deeper than {} levels", kMaxDepth), e->pos};
    }
    return e;
  }

  static ExprPtr make(ExprKind k, Pos p) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->pos = p;
    return e;
  }

  // ---- statements ----

  // Nodes until a block tag whose name is in `ends` (consumed up to the name; `found` = that
  // name) or the end of the source (only allowed at top level: `ends` empty).
  Body body(const std::vector<std::string_view>& ends, std::string& found, Pos open_pos, const char* open_name) {
    DepthGuard g(*this);
    Body out;
    while (true) {
      const Token& tk = cur();
      if (tk.type == Tok::End) {
        if (ends.empty()) return out;
        throw TemplateError{fmt::format("unclosed '{}' block (opened at {}:{}): expected '{{% {} %}}' before the end "
                                        "of the template",
                                        open_name, open_pos.line, open_pos.col, ends.back()),
                            tk.pos};
      }
      if (tk.type == Tok::Text) {
        auto n = node(NodeKind::Text, tk.pos);
        n->text = tk.value;
        out.push_back(std::move(n));
        ++k_;
        continue;
      }
      if (tk.type == Tok::VarBegin) {
        ++k_;
        auto n = node(NodeKind::Output, tk.pos);
        n->expr = expression();
        if (cur().type != Tok::VarEnd) fail(fmt::format("expected '}}}}', found {}", describe(cur())));
        ++k_;
        out.push_back(std::move(n));
        continue;
      }
      if (tk.type != Tok::BlockBegin) fail(fmt::format("unexpected {}", describe(tk)));
      const Token& nm = peek();
      if (nm.type == Tok::Name) {
        for (std::string_view e : ends) {
          if (nm.value == e) {
            k_ += 2;
            found = nm.value;
            return out;
          }
        }
      }
      ++k_;
      out.push_back(statement(tk.pos));
    }
  }

  static NodePtr node(NodeKind k, Pos p) {
    auto n = std::make_unique<Node>();
    n->kind = k;
    n->pos = p;
    return n;
  }

  NodePtr statement(Pos pos) {
    if (cur().type != Tok::Name) fail(fmt::format("expected a statement name after '{{%', found {}", describe(cur())));
    const std::string name = cur().value;
    if (name == "if") return if_stmt(pos);
    if (name == "for") return for_stmt(pos);
    if (name == "set") return set_stmt(pos);
    if (name == "macro") return macro_stmt(pos);
    if (name == "break" || name == "continue") {
      if (loops_ == 0) fail(fmt::format("'{}' outside a for loop", name));
      ++k_;
      expect_block_end(name.c_str());
      return node(name == "break" ? NodeKind::Break : NodeKind::Continue, pos);
    }
    if (name == "generation") {
      ++k_;
      expect_block_end("generation");
      auto n = node(NodeKind::Scope, pos);
      std::string found;
      n->body = body({"endgeneration"}, found, pos, "generation");
      expect_block_end("endgeneration");
      return n;
    }
    for (std::string_view no :
         {"extends", "include", "import", "from", "block", "call", "filter", "with", "do", "autoescape", "trans"}) {
      if (name == no) fail(fmt::format("the '{}' statement is not supported in chat templates", name));
    }
    if (name.starts_with("end") || name == "elif" || name == "else") {
      fail(fmt::format("unexpected '{{% {} %}}' (no open block it could close)", name));
    }
    fail(fmt::format("unknown statement '{}'", name));
  }

  NodePtr if_stmt(Pos pos) {
    auto n = node(NodeKind::If, pos);
    ++k_;  // if
    while (true) {
      n->conds.push_back(expression());
      expect_block_end("if");
      std::string found;
      n->bodies.push_back(body({"elif", "else", "endif"}, found, pos, "if"));
      if (found == "elif") continue;
      if (found == "else") {
        expect_block_end("else");
        n->else_body = body({"endif"}, found, pos, "if");
      }
      expect_block_end("endif");
      return n;
    }
  }

  NodePtr for_stmt(Pos pos) {
    auto n = node(NodeKind::For, pos);
    ++k_;  // for
    n->targets.push_back(expect_name("a loop variable"));
    while (skip_op(",")) n->targets.push_back(expect_name("a loop variable"));
    if (!skip_name("in")) fail(fmt::format("expected 'in' in the for statement, found {}", describe(cur())));
    n->expr = or_expr();  // no `x if c else y` here: `if` filters the loop
    if (skip_name("if")) n->cond = or_expr();
    if (is_name("recursive")) fail("recursive for loops are not supported");
    expect_block_end("for");
    std::string found;
    ++loops_;
    n->body = body({"else", "endfor"}, found, pos, "for");
    --loops_;
    if (found == "else") {
      expect_block_end("else");
      n->else_body = body({"endfor"}, found, pos, "for");
    }
    expect_block_end("endfor");
    return n;
  }

  NodePtr set_stmt(Pos pos) {
    ++k_;  // set
    const std::string first = expect_name("a variable name");
    if (skip_op(".")) {
      auto n = node(NodeKind::Set, pos);
      n->text = first;
      n->attr = expect_name("an attribute name");
      expect_op("=");
      n->expr = tuple_expr();
      expect_block_end("set");
      return n;
    }
    if (is_op("=") || is_op(",")) {
      auto n = node(NodeKind::Set, pos);
      n->targets.push_back(first);
      while (skip_op(",")) n->targets.push_back(expect_name("a variable name"));
      expect_op("=");
      n->expr = tuple_expr();
      expect_block_end("set");
      return n;
    }
    // Block set: {% set name [| filter ...] %}...{% endset %}
    auto n = node(NodeKind::SetBlock, pos);
    n->text = first;
    while (skip_op("|")) n->filters.push_back(filter(nullptr));
    expect_block_end("set");
    std::string found;
    n->body = body({"endset"}, found, pos, "set");
    expect_block_end("endset");
    return n;
  }

  NodePtr macro_stmt(Pos pos) {
    ++k_;  // macro
    auto n = node(NodeKind::Macro, pos);
    n->text = expect_name("a macro name");
    expect_op("(");
    while (!skip_op(")")) {
      if (!n->params.empty()) expect_op(",");
      if (skip_op(")")) break;  // trailing comma
      Param prm;
      prm.name = expect_name("a parameter name");
      if (skip_op("=")) prm.default_value = expression();
      n->params.push_back(std::move(prm));
    }
    expect_block_end("macro");
    std::string found;
    const int saved = loops_;
    loops_ = 0;
    n->body = body({"endmacro"}, found, pos, "macro");
    loops_ = saved;
    expect_block_end("endmacro");
    return n;
  }

  // ---- expressions ----

  // An expression, or a tuple of them without parentheses (`set a, b = 1, 2`).
  ExprPtr tuple_expr() {
    const Pos p = cur().pos;
    ExprPtr first = expression();
    if (!is_op(",")) return first;
    auto t = make(ExprKind::Tuple, p);
    t->args.push_back(std::move(first));
    while (skip_op(",")) {
      if (cur().type == Tok::BlockEnd) break;
      t->args.push_back(expression());
    }
    return t;
  }

  ExprPtr expression() {
    DepthGuard g(*this);
    ExprPtr e = or_expr();
    while (is_name("if")) {
      const Pos p = cur().pos;
      ++k_;
      auto c = make(ExprKind::Cond, p);
      ExprPtr cond = or_expr();
      ExprPtr other = skip_name("else") ? expression() : nullptr;
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(cond));
      c->args.push_back(std::move(other));
      e = sized(std::move(c));
    }
    return e;
  }

  ExprPtr binary(ExprPtr l, std::string op, ExprPtr r, Pos p) {
    auto b = make(ExprKind::Binary, p);
    b->name = std::move(op);
    b->args.push_back(std::move(l));
    b->args.push_back(std::move(r));
    return sized(std::move(b));
  }

  ExprPtr or_expr() {
    ExprPtr l = and_expr();
    while (is_name("or")) {
      const Pos p = cur().pos;
      ++k_;
      l = binary(std::move(l), "or", and_expr(), p);
    }
    return l;
  }

  ExprPtr and_expr() {
    ExprPtr l = not_expr();
    while (is_name("and")) {
      const Pos p = cur().pos;
      ++k_;
      l = binary(std::move(l), "and", not_expr(), p);
    }
    return l;
  }

  ExprPtr not_expr() {
    if (is_name("not")) {
      DepthGuard g(*this);
      auto u = make(ExprKind::Unary, cur().pos);
      ++k_;
      u->name = "not";
      u->args.push_back(not_expr());
      return u;
    }
    return compare();
  }

  ExprPtr compare() {
    ExprPtr l = math1();
    bool compared = false;
    while (true) {
      const Pos p = cur().pos;
      std::string op;
      if (is_op("==") || is_op("!=") || is_op("<") || is_op(">") || is_op("<=") || is_op(">=")) {
        op = t_[k_++].value;
      } else if (is_name("in")) {
        op = "in";
        ++k_;
      } else if (is_name("not") && peek().type == Tok::Name && peek().value == "in") {
        op = "not in";
        k_ += 2;
      } else {
        return l;
      }
      if (compared) throw TemplateError{"chained comparisons are not supported; use 'and'", p};
      l = binary(std::move(l), op, math1(), p);
      compared = true;
    }
  }

  ExprPtr math1() {
    ExprPtr l = concat();
    while (is_op("+") || is_op("-")) {
      const Pos p = cur().pos;
      std::string op = t_[k_++].value;
      l = binary(std::move(l), op, concat(), p);
    }
    return l;
  }

  ExprPtr concat() {
    ExprPtr l = math2();
    while (is_op("~")) {
      const Pos p = cur().pos;
      ++k_;
      l = binary(std::move(l), "~", math2(), p);
    }
    return l;
  }

  ExprPtr math2() {
    ExprPtr l = power();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Pos p = cur().pos;
      std::string op = t_[k_++].value;
      l = binary(std::move(l), op, power(), p);
    }
    return l;
  }

  ExprPtr power() {
    ExprPtr l = unary(true);
    while (is_op("**")) {
      const Pos p = cur().pos;
      ++k_;
      l = binary(std::move(l), "**", unary(true), p);
    }
    return l;
  }

  ExprPtr unary(bool with_filter) {
    DepthGuard g(*this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      auto u = make(ExprKind::Unary, cur().pos);
      u->name = t_[k_++].value;
      u->args.push_back(unary(false));
      e = std::move(u);
    } else {
      e = primary();
    }
    e = postfix(std::move(e));
    if (with_filter) e = filter_expr(std::move(e));
    return e;
  }

  ExprPtr primary() {
    const Token& tk = cur();
    const Pos p = tk.pos;
    switch (tk.type) {
      case Tok::Name: {
        ++k_;
        auto e = make(ExprKind::Literal, p);
        if (tk.value == "true" || tk.value == "True") {
          e->value = Value::boolean(true);
        } else if (tk.value == "false" || tk.value == "False") {
          e->value = Value::boolean(false);
        } else if (tk.value == "none" || tk.value == "None") {
          e->value = Value::none();
        } else {
          e->kind = ExprKind::Name;
          e->name = tk.value;
        }
        return e;
      }
      case Tok::String: {
        std::string s;
        while (cur().type == Tok::String) s += t_[k_++].value;  // adjacent literals concatenate
        auto e = make(ExprKind::Literal, p);
        e->value = Value::text(std::move(s));
        return e;
      }
      case Tok::Int: {
        ++k_;
        auto e = make(ExprKind::Literal, p);
        errno = 0;
        const long long v = std::strtoll(tk.value.c_str(), nullptr, 10);
        if (errno == ERANGE) throw TemplateError{"integer literal out of range", p};
        e->value = Value::integer(v);
        return e;
      }
      case Tok::Float: {
        ++k_;
        auto e = make(ExprKind::Literal, p);
        e->value = Value::real(std::strtod(tk.value.c_str(), nullptr));
        return e;
      }
      case Tok::Op:
        if (tk.value == "(") {
          ++k_;
          if (skip_op(")")) return make(ExprKind::Tuple, p);
          ExprPtr first = expression();
          if (skip_op(")")) return first;
          auto t = make(ExprKind::Tuple, p);
          t->args.push_back(std::move(first));
          while (skip_op(",")) {
            if (is_op(")")) break;
            t->args.push_back(expression());
          }
          expect_op(")");
          return t;
        }
        if (tk.value == "[") {
          ++k_;
          auto l = make(ExprKind::List, p);
          while (!skip_op("]")) {
            if (!l->args.empty()) expect_op(",");
            if (skip_op("]")) break;
            l->args.push_back(expression());
          }
          return l;
        }
        if (tk.value == "{") {
          ++k_;
          auto d = make(ExprKind::Dict, p);
          while (!skip_op("}")) {
            if (!d->args.empty()) expect_op(",");
            if (skip_op("}")) break;
            d->args.push_back(expression());
            expect_op(":");
            d->args.push_back(expression());
          }
          return d;
        }
        break;
      default:
        break;
    }
    fail(fmt::format("expected an expression, found {}", describe(tk)));
  }

  ExprPtr postfix(ExprPtr e) {
    while (true) {
      const Pos p = cur().pos;
      if (skip_op(".")) {
        auto a = make(ExprKind::Attr, p);
        if (cur().type == Tok::Int) {  // x.0 is x[0]
          a->kind = ExprKind::Item;
          a->args.push_back(std::move(e));
          auto idx = make(ExprKind::Literal, cur().pos);
          idx->value = Value::integer(std::strtoll(t_[k_++].value.c_str(), nullptr, 10));
          a->args.push_back(std::move(idx));
        } else {
          a->name = expect_name("an attribute name after '.'");
          a->args.push_back(std::move(e));
        }
        e = std::move(a);
      } else if (skip_op("[")) {
        e = subscript(std::move(e), p);
      } else if (is_op("(")) {
        e = call(std::move(e));
      } else {
        return e;
      }
      e = sized(std::move(e));
    }
  }

  ExprPtr subscript(ExprPtr target, Pos p) {
    ExprPtr parts[3];
    int n = 0;
    bool slice = false;
    while (true) {
      if (is_op(":")) {
        slice = true;
        ++k_;
        if (++n > 2) fail("a slice has at most three parts");
        continue;
      }
      if (is_op("]")) break;
      if (parts[n]) fail(fmt::format("expected ':' or ']', found {}", describe(cur())));
      parts[n] = expression();
    }
    ++k_;  // ]
    if (!slice) {
      if (!parts[0]) fail("empty subscript '[]'");
      auto it = make(ExprKind::Item, p);
      it->args.push_back(std::move(target));
      it->args.push_back(std::move(parts[0]));
      return it;
    }
    auto s = make(ExprKind::Slice, p);
    s->args.push_back(std::move(target));
    for (auto& part : parts) s->args.push_back(std::move(part));
    return s;
  }

  void call_args(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!skip_op(")")) {
      if (!first) {
        expect_op(",");
        if (skip_op(")")) break;
      }
      first = false;
      if (is_op("*") || is_op("**")) fail("*args and **kwargs in calls are not supported");
      if (cur().type == Tok::Name && peek().type == Tok::Op && peek().value == "=") {
        std::string key = t_[k_].value;
        k_ += 2;
        e.kwargs.emplace_back(std::move(key), expression());
      } else {
        if (!e.kwargs.empty()) fail("a positional argument after a keyword argument");
        e.args.push_back(expression());
      }
    }
  }

  ExprPtr call(ExprPtr callee) {
    auto c = make(ExprKind::Call, cur().pos);
    c->args.push_back(std::move(callee));
    call_args(*c);
    return c;
  }

  // `| name(args)` after the '|' (target null: a block-set filter).
  ExprPtr filter(ExprPtr target) {
    const Pos p = cur().pos;
    std::string name = expect_name("a filter name after '|'");
    if (!has_filter(name)) throw TemplateError{fmt::format("unknown filter '{}'", name), p};
    auto f = make(ExprKind::Filter, p);
    f->name = std::move(name);
    f->args.push_back(std::move(target));
    if (is_op("(")) call_args(*f);
    return f;
  }

  ExprPtr filter_expr(ExprPtr e) {
    while (true) {
      if (skip_op("|")) {
        e = filter(std::move(e));
      } else if (is_name("is")) {
        const Pos p = cur().pos;
        ++k_;
        auto t = make(ExprKind::Test, p);
        t->negate = skip_name("not");
        const Pos np = cur().pos;
        t->name = expect_name("a test name after 'is'");
        if (!has_test(t->name)) throw TemplateError{fmt::format("unknown test '{}'", t->name), np};
        t->args.push_back(std::move(e));
        if (is_op("(")) {
          call_args(*t);
        } else if ((cur().type == Tok::Name || cur().type == Tok::String || cur().type == Tok::Int ||
                    cur().type == Tok::Float || is_op("[") || is_op("{")) &&
                   !(is_name("else") || is_name("or") || is_name("and") || is_name("if") || is_name("not") ||
                     is_name("in") || is_name("is"))) {
          t->args.push_back(postfix(primary()));
        }
        e = std::move(t);
      } else if (is_op("(")) {
        e = call(std::move(e));
      } else {
        return e;
      }
      e = sized(std::move(e));
    }
  }

  std::vector<Token> t_;
  size_t k_ = 0;
  int depth_ = 0;
  int loops_ = 0;
};

}  // namespace

Program parse_template(std::string_view source) { return Parser(lex(source)).run(); }

}  // namespace snapkv::jinja
