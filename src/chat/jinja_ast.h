// snapkv chat templates: the syntax tree of a parsed Jinja template.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_lexer.h"
#include "chat/jinja_value.h"

namespace snapkv::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind {
  Literal,  ///< value
  Name,     ///< name
  List,     ///< args: elements
  Tuple,    ///< args: elements
  Dict,     ///< args: key0, value0, key1, value1, ...
  Attr,     ///< args[0].name
  Item,     ///< args[0][args[1]]
  Slice,    ///< args[0][args[1]:args[2]:args[3]] (null parts absent)
  Call,     ///< args[0](args[1..], kwargs)
  Filter,   ///< args[0] | name(args[1..], kwargs)
  Test,     ///< args[0] is [not: negate] name(args[1..])
  Unary,    ///< op args[0]: "not", "-", "+"
  Binary,   ///< args[0] op args[1]: arithmetic, comparison, "in", "not in", "and", "or", "~"
  Cond,     ///< args[0] if args[1] else args[2] (args[2] null: undefined)
};

struct Expr {
  ExprKind kind;
  Pos pos;
  Value value;       // Literal
  std::string name;  // Name, Attr, Filter, Test; op for Unary/Binary
  bool negate = false;
  int depth = 1;  ///< height of this subtree (bounded by the parser: evaluation recurses on it)
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

enum class NodeKind {
  Text,      ///< text
  Output,    ///< {{ expr }}
  If,        ///< conds[k] -> bodies[k]; else_body
  For,       ///< for targets in expr [if cond]: body; else_body
  Set,       ///< set targets = expr, or set ns.attr = expr (attr non-empty)
  SetBlock,  ///< {% set target %}body{% endset %} with optional filters
  Macro,     ///< macro name(params) body
  Break,
  Continue,
  Scope,  ///< a body rendered in place ({% generation %})
};

struct Param {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct Node {
  NodeKind kind;
  Pos pos;
  std::string text;                  // Text; Set/SetBlock/Macro: the name; Set with attr: the namespace's name
  std::string attr;                  // Set: namespace attribute
  ExprPtr expr;                      // Output, For (iterable), Set (value)
  ExprPtr cond;                      // For: loop filter
  std::vector<std::string> targets;  // For, Set (unpacking)
  std::vector<ExprPtr> conds;        // If
  std::vector<Body> bodies;          // If
  Body body;                         // For, SetBlock, Macro, Scope
  Body else_body;                    // If, For
  std::vector<Param> params;         // Macro
  std::vector<ExprPtr> filters;      // SetBlock: Filter exprs applied to the body (args[0] null)
};

/// A parsed template: its top-level nodes.
struct Program {
  Body body;
};

/// Parses `source` (lex + parse). Throws TemplateError at the position of the problem: a
/// syntax error, an unknown filter or test, a statement outside the supported subset
/// (extends/include/import/block/call/filter/with/do, recursive loops), an unclosed block.
Program parse_template(std::string_view source);

/// True if a filter / test of that name exists (jinja_builtins.cpp).
bool has_filter(const std::string& name);
bool has_test(const std::string& name);

}  // namespace snapkv::jinja
