#include "template/jinja_parser.h"

#include <initializer_list>

#include "template/jinja_builtins.h"
#include "template/jinja_lexer.h"

namespace kiln::jinja {

namespace {

// Parser recursion (nested expressions and blocks) stops here, so hostile input cannot
// exhaust the stack.
constexpr int kMaxNesting = 96;
constexpr int kMaxChain = 1000;

bool one_of(const std::string& s, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (s == n) return true;
  return false;
}

// Jinja2's binary operators from the loosest to the tightest; `not` (prefix) sits between
// `and` and the comparisons, and unary +/-, filters and tests bind tighter than all of these.
enum class Shape : uint8_t {
  kLeft,     // a op b op c: nested left to right
  kCompare,  // a < b == c: one kCompare node
  kConcat,   // a ~ b ~ c: one kConcat node
};
struct BinaryOp {
  const char* text;
  bool word;  // a name token (or, and, in, not) rather than an operator
  int prec;
  Shape shape;
  ExprKind kind = ExprKind::kBinary;  // kLeft
  BinOp op = BinOp::kAdd;             // kLeft with kind kBinary
  CmpOp cmp = CmpOp::kEq;             // kCompare
  const char* then = nullptr;         // the next token must be this name ("not" "in")
};
constexpr int kNotPrec = 3;
constexpr int kTightestPrec = 8;
constexpr BinaryOp kBinaryOps[] = {
    {.text = "or", .word = true, .prec = 1, .shape = Shape::kLeft, .kind = ExprKind::kOr},
    {.text = "and", .word = true, .prec = 2, .shape = Shape::kLeft, .kind = ExprKind::kAnd},
    {.text = "==", .word = false, .prec = 4, .shape = Shape::kCompare, .cmp = CmpOp::kEq},
    {.text = "!=", .word = false, .prec = 4, .shape = Shape::kCompare, .cmp = CmpOp::kNe},
    {.text = "<", .word = false, .prec = 4, .shape = Shape::kCompare, .cmp = CmpOp::kLt},
    {.text = "<=", .word = false, .prec = 4, .shape = Shape::kCompare, .cmp = CmpOp::kLe},
    {.text = ">", .word = false, .prec = 4, .shape = Shape::kCompare, .cmp = CmpOp::kGt},
    {.text = ">=", .word = false, .prec = 4, .shape = Shape::kCompare, .cmp = CmpOp::kGe},
    {.text = "in", .word = true, .prec = 4, .shape = Shape::kCompare, .cmp = CmpOp::kIn},
    {.text = "not", .word = true, .prec = 4, .shape = Shape::kCompare, .cmp = CmpOp::kNotIn, .then = "in"},
    {.text = "+", .word = false, .prec = 5, .shape = Shape::kLeft, .op = BinOp::kAdd},
    {.text = "-", .word = false, .prec = 5, .shape = Shape::kLeft, .op = BinOp::kSub},
    {.text = "~", .word = false, .prec = 6, .shape = Shape::kConcat, .kind = ExprKind::kConcat},
    {.text = "*", .word = false, .prec = 7, .shape = Shape::kLeft, .op = BinOp::kMul},
    {.text = "/", .word = false, .prec = 7, .shape = Shape::kLeft, .op = BinOp::kDiv},
    {.text = "//", .word = false, .prec = 7, .shape = Shape::kLeft, .op = BinOp::kFloorDiv},
    {.text = "%", .word = false, .prec = 7, .shape = Shape::kLeft, .op = BinOp::kMod},
    {.text = "**", .word = false, .prec = kTightestPrec, .shape = Shape::kLeft, .op = BinOp::kPow},
};

std::string describe(const Token& t) {
  switch (t.type) {
    case Tok::kData:
      return "template text";
    case Tok::kVarBegin:
      return "'{{'";
    case Tok::kVarEnd:
      return "'}}'";
    case Tok::kBlockBegin:
      return "'{%'";
    case Tok::kBlockEnd:
      return "'%}'";
    case Tok::kName:
      return "'" + t.text + "'";
    case Tok::kString:
      return "a string";
    case Tok::kInt:
    case Tok::kFloat:
      return "'" + t.text + "'";
    case Tok::kOp:
      return "'" + t.text + "'";
    case Tok::kEof:
      return "the end of the template";
  }
  return "a token";
}

std::string list_names(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out += i + 1 == names.size() ? " or " : ", ";
    out += "'" + names[i] + "'";
  }
  return out;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  Result<std::unique_ptr<Template>> run() {
    auto tpl = std::make_unique<Template>();
    KILN_ASSIGN_OR_RETURN(tpl->body, parse_body({}, "", 0));
    return tpl;
  }

 private:
  struct Guard {
    explicit Guard(int& d) : d_(d) { ++d_; }
    ~Guard() { --d_; }
    int& d_;
  };
  struct Soft {
    Soft(bool& flag, bool value) : flag_(flag), saved_(flag) { flag_ = value; }
    ~Soft() { flag_ = saved_; }
    bool& flag_;
    bool saved_;
  };

  const Token& cur() const { return t_[i_]; }
  const Token& look(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  void advance() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  bool at_op(const char* op) const { return cur().type == Tok::kOp && cur().text == op; }
  bool at_name(const char* n) const { return cur().type == Tok::kName && cur().text == n; }

  Status fail_at(const Token& t, const std::string& msg) const { return corrupt(where(t.line, t.col) + ": " + msg); }
  Status fail(const std::string& msg) const { return fail_at(cur(), msg); }
  Status unexpected(const std::string& wanted) const { return fail("expected " + wanted + ", got " + describe(cur())); }

  Status expect_op(const char* op) {
    if (!at_op(op)) return unexpected(std::string("'") + op + "'");
    advance();
    return Status::ok();
  }
  Status expect_block_end() {
    if (cur().type != Tok::kBlockEnd) return unexpected("'%}'");
    advance();
    return Status::ok();
  }
  Result<std::string> expect_name() {
    if (cur().type != Tok::kName) return unexpected("a name");
    std::string n = cur().text;
    advance();
    return n;
  }
  // Left-associative chains (a + b + c ..., x.a.b ..., x|f|g ...) nest the tree without
  // recursing here; bound them too, since evaluating and freeing the tree recurse.
  Status chain(int& n) const {
    if (++n > kMaxChain) return fail("an expression chains more than " + std::to_string(kMaxChain) + " operations");
    return Status::ok();
  }
  Status nest() const {
    if (depth_ > kMaxNesting)
      return fail("the template nests too deeply (more than " + std::to_string(kMaxNesting) + " levels)");
    return Status::ok();
  }

  ExprPtr node(ExprKind k, const Token& at) const {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = at.line;
    e->col = at.col;
    return e;
  }

  // ---- statements ----

  // Parses until `{% name %}` with name in `ends` (left at that name), or the end of the template.
  Result<Body> parse_body(const std::vector<std::string>& ends, const std::string& opener, int opener_line) {
    Guard g(depth_);
    KILN_RETURN_IF_ERROR(nest());
    Body body;
    while (true) {
      const Token& t = cur();
      switch (t.type) {
        case Tok::kData: {
          auto s = std::make_unique<Stmt>();
          s->kind = StmtKind::kText;
          s->line = t.line;
          s->col = t.col;
          s->text = t.text;
          body.push_back(std::move(s));
          advance();
          break;
        }
        case Tok::kVarBegin: {
          auto s = std::make_unique<Stmt>();
          s->kind = StmtKind::kOutput;
          s->line = t.line;
          s->col = t.col;
          advance();
          KILN_ASSIGN_OR_RETURN(s->expr, parse_tuple(true, {}, false));
          if (cur().type != Tok::kVarEnd) return unexpected("'}}'");
          advance();
          body.push_back(std::move(s));
          break;
        }
        case Tok::kBlockBegin: {
          advance();
          if (cur().type != Tok::kName) return unexpected("a tag name");
          for (const std::string& e : ends)
            if (cur().text == e) return body;
          KILN_ASSIGN_OR_RETURN(StmtPtr s, parse_statement(ends, opener, opener_line));
          if (s) body.push_back(std::move(s));
          break;
        }
        case Tok::kEof:
          if (!ends.empty())
            return fail("unexpected end of template: the '" + opener + "' on line " + std::to_string(opener_line) +
                        " is not closed (expected " + list_names(ends) + ")");
          return body;
        default:
          return fail("unexpected " + describe(t));
      }
    }
  }

  Result<StmtPtr> parse_statement(const std::vector<std::string>& ends, const std::string& opener, int opener_line) {
    const Token tag = cur();
    const std::string& n = tag.text;
    if (n == "if") return parse_if();
    if (n == "for") return parse_for();
    if (n == "set") return parse_set();
    if (n == "macro") return parse_macro();
    if (n == "call") return parse_call_block();
    if (n == "filter") return parse_filter_block();
    if (n == "with") return parse_with();
    if (n == "generation") return parse_scope("generation", "endgeneration");
    if (n == "break" || n == "continue") {
      if (loop_depth_ == 0) return fail("'" + n + "' outside of a for loop");
      advance();
      KILN_RETURN_IF_ERROR(expect_block_end());
      auto s = std::make_unique<Stmt>();
      s->kind = n == "break" ? StmtKind::kBreak : StmtKind::kContinue;
      s->line = tag.line;
      s->col = tag.col;
      return s;
    }
    if (one_of(n, {"block", "extends", "include", "import", "from", "autoescape", "trans", "pluralize"}))
      return fail("the '" + n + "' tag is not supported by kiln's template engine");
    if (n.rfind("end", 0) == 0 || n == "elif" || n == "else") {
      if (ends.empty()) return fail("unexpected '" + n + "' (no open block to close)");
      return fail("unexpected '" + n + "'; expected " + list_names(ends) + " to close the '" + opener + "' on line " +
                  std::to_string(opener_line));
    }
    return fail("unknown tag '" + n + "'");
  }

  Result<StmtPtr> parse_if() {
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::kIf;
    s->line = cur().line;
    s->col = cur().col;
    int opener_line = cur().line;
    advance();
    Soft soft(soft_, true);
    while (true) {
      KILN_ASSIGN_OR_RETURN(ExprPtr cond, parse_tuple(false, {}, false));
      KILN_RETURN_IF_ERROR(expect_block_end());
      KILN_ASSIGN_OR_RETURN(Body body, parse_body({"elif", "else", "endif"}, "if", opener_line));
      s->branches.emplace_back(std::move(cond), std::move(body));
      if (at_name("elif")) {
        advance();
        continue;
      }
      if (at_name("else")) {
        advance();
        KILN_RETURN_IF_ERROR(expect_block_end());
        KILN_ASSIGN_OR_RETURN(s->else_body, parse_body({"endif"}, "if", opener_line));
      }
      advance();  // endif
      KILN_RETURN_IF_ERROR(expect_block_end());
      return s;
    }
  }

  // Assignment targets: a name, names separated by commas, or a parenthesized tuple of names.
  Status parse_targets(Stmt& s, bool allow_tuple) {
    bool paren = allow_tuple && at_op("(");
    if (paren) advance();
    while (true) {
      KILN_ASSIGN_OR_RETURN(std::string name, expect_name());
      if (one_of(name, {"true", "false", "none", "True", "False", "None"}))
        return fail("cannot assign to '" + name + "'");
      s.targets.push_back(std::move(name));
      if (allow_tuple && at_op(",")) {
        s.unpack = true;
        advance();
        if (paren && at_op(")")) break;
        if (!paren && (at_name("in") || at_op("="))) break;
        continue;
      }
      break;
    }
    if (paren) {
      s.unpack = true;
      KILN_RETURN_IF_ERROR(expect_op(")"));
    }
    return Status::ok();
  }

  Result<StmtPtr> parse_for() {
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::kFor;
    s->line = cur().line;
    s->col = cur().col;
    int opener_line = cur().line;
    advance();
    KILN_RETURN_IF_ERROR(parse_targets(*s, true));
    if (!at_name("in")) return unexpected("'in'");
    advance();
    KILN_ASSIGN_OR_RETURN(s->expr, parse_tuple(false, {"recursive"}, false));
    Soft hard(soft_, false);
    if (at_name("if")) {
      advance();
      KILN_ASSIGN_OR_RETURN(s->cond, parse_expression(true));
    }
    if (at_name("recursive")) return fail("recursive for loops are not supported by kiln's template engine");
    KILN_RETURN_IF_ERROR(expect_block_end());
    ++loop_depth_;
    auto body = parse_body({"else", "endfor"}, "for", opener_line);
    --loop_depth_;
    if (!body.is_ok()) return body.status();
    s->body = std::move(body).value();
    if (at_name("else")) {
      advance();
      KILN_RETURN_IF_ERROR(expect_block_end());
      KILN_ASSIGN_OR_RETURN(s->else_body, parse_body({"endfor"}, "for", opener_line));
    }
    advance();  // endfor
    KILN_RETURN_IF_ERROR(expect_block_end());
    return s;
  }

  Result<StmtPtr> parse_set() {
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::kSet;
    s->line = cur().line;
    s->col = cur().col;
    int opener_line = cur().line;
    advance();
    if (cur().type == Tok::kName && look().type == Tok::kOp && look().text == ".") {
      s->targets.push_back(cur().text);
      advance();
      advance();
      KILN_ASSIGN_OR_RETURN(s->ns_attr, expect_name());
    } else {
      KILN_RETURN_IF_ERROR(parse_targets(*s, true));
    }
    if (at_op("=")) {
      advance();
      KILN_ASSIGN_OR_RETURN(s->expr, parse_tuple(true, {}, false));
      KILN_RETURN_IF_ERROR(expect_block_end());
      return s;
    }
    if (s->unpack) return unexpected("'='");
    s->kind = StmtKind::kSetBlock;
    Soft hard(soft_, false);
    if (at_op("|")) {
      KILN_ASSIGN_OR_RETURN(ExprPtr chain, parse_filter(nullptr, false));
      unchain(std::move(chain), s->filters);
    }
    KILN_RETURN_IF_ERROR(expect_block_end());
    KILN_ASSIGN_OR_RETURN(s->body, parse_body({"endset"}, "set", opener_line));
    advance();
    KILN_RETURN_IF_ERROR(expect_block_end());
    return s;
  }

  // A filter chain parsed onto a null input, flattened innermost first.
  static void unchain(ExprPtr chain, std::vector<ExprPtr>& out) {
    std::vector<ExprPtr> rev;
    while (chain) {
      ExprPtr inner = std::move(chain->args[0]);
      rev.push_back(std::move(chain));
      chain = std::move(inner);
    }
    for (auto it = rev.rbegin(); it != rev.rend(); ++it) out.push_back(std::move(*it));
  }

  Status parse_signature(MacroStmt& m) {
    Soft hard(soft_, false);
    KILN_RETURN_IF_ERROR(expect_op("("));
    while (!at_op(")")) {
      if (!m.params.empty()) KILN_RETURN_IF_ERROR(expect_op(","));
      if (at_op(")")) break;
      KILN_ASSIGN_OR_RETURN(std::string name, expect_name());
      ExprPtr def;
      if (at_op("=")) {
        advance();
        KILN_ASSIGN_OR_RETURN(def, parse_expression(true));
      } else if (!m.defaults.empty() && m.defaults.back()) {
        return fail("non-default argument '" + name + "' follows default argument");
      }
      m.params.push_back(std::move(name));
      m.defaults.push_back(std::move(def));
    }
    advance();
    return Status::ok();
  }

  Result<StmtPtr> parse_macro() {
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::kMacro;
    s->line = cur().line;
    s->col = cur().col;
    int opener_line = cur().line;
    advance();
    s->macro = std::make_unique<MacroStmt>();
    s->macro->line = opener_line;
    KILN_ASSIGN_OR_RETURN(s->macro->name, expect_name());
    KILN_RETURN_IF_ERROR(parse_signature(*s->macro));
    KILN_RETURN_IF_ERROR(expect_block_end());
    KILN_RETURN_IF_ERROR(parse_macro_body(*s->macro, "endmacro", "macro", opener_line));
    return s;
  }

  Status parse_macro_body(MacroStmt& m, const char* end, const char* opener, int opener_line) {
    Soft hard(soft_, false);
    macros_.push_back(&m);
    int saved_loops = loop_depth_;
    loop_depth_ = 0;
    auto body = parse_body({end}, opener, opener_line);
    loop_depth_ = saved_loops;
    macros_.pop_back();
    if (!body.is_ok()) return body.status();
    m.body = std::move(body).value();
    advance();
    if (cur().type == Tok::kName && cur().text == m.name) advance();  // {% endmacro name %}
    return expect_block_end();
  }

  Result<StmtPtr> parse_call_block() {
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::kCallBlock;
    s->line = cur().line;
    s->col = cur().col;
    int opener_line = cur().line;
    advance();
    s->macro = std::make_unique<MacroStmt>();
    s->macro->name = "caller";
    s->macro->line = opener_line;
    if (at_op("(")) KILN_RETURN_IF_ERROR(parse_signature(*s->macro));
    const Token at = cur();
    KILN_ASSIGN_OR_RETURN(s->expr, parse_expression(true));
    if (s->expr->kind != ExprKind::kCall) return fail_at(at, "expected a call after 'call'");
    KILN_RETURN_IF_ERROR(expect_block_end());
    KILN_RETURN_IF_ERROR(parse_macro_body(*s->macro, "endcall", "call", opener_line));
    return s;
  }

  Result<StmtPtr> parse_filter_block() {
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::kFilterBlock;
    s->line = cur().line;
    s->col = cur().col;
    int opener_line = cur().line;
    advance();
    Soft hard(soft_, false);
    KILN_ASSIGN_OR_RETURN(ExprPtr chain, parse_filter(nullptr, true));
    unchain(std::move(chain), s->filters);
    KILN_RETURN_IF_ERROR(expect_block_end());
    KILN_ASSIGN_OR_RETURN(s->body, parse_body({"endfilter"}, "filter", opener_line));
    advance();
    KILN_RETURN_IF_ERROR(expect_block_end());
    return s;
  }

  Result<StmtPtr> parse_with() {
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::kWith;
    s->line = cur().line;
    s->col = cur().col;
    int opener_line = cur().line;
    advance();
    while (cur().type != Tok::kBlockEnd) {
      if (!s->targets.empty()) KILN_RETURN_IF_ERROR(expect_op(","));
      KILN_ASSIGN_OR_RETURN(std::string name, expect_name());
      KILN_RETURN_IF_ERROR(expect_op("="));
      KILN_ASSIGN_OR_RETURN(ExprPtr v, parse_expression(true));
      s->targets.push_back(std::move(name));
      s->values.push_back(std::move(v));
    }
    advance();
    Soft hard(soft_, false);
    KILN_ASSIGN_OR_RETURN(s->body, parse_body({"endwith"}, "with", opener_line));
    advance();
    KILN_RETURN_IF_ERROR(expect_block_end());
    return s;
  }

  Result<StmtPtr> parse_scope(const char* opener, const char* end) {
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::kScope;
    s->line = cur().line;
    s->col = cur().col;
    int opener_line = cur().line;
    advance();
    KILN_RETURN_IF_ERROR(expect_block_end());
    Soft hard(soft_, false);
    KILN_ASSIGN_OR_RETURN(s->body, parse_body({end}, opener, opener_line));
    advance();
    KILN_RETURN_IF_ERROR(expect_block_end());
    return s;
  }

  // ---- expressions ----

  bool at_tuple_end(const std::vector<std::string>& extra_end) const {
    const Token& t = cur();
    if (t.type == Tok::kVarEnd || t.type == Tok::kBlockEnd || t.type == Tok::kEof) return true;
    if (t.type == Tok::kOp && t.text == ")") return true;
    if (t.type == Tok::kName)
      for (const std::string& e : extra_end)
        if (t.text == e) return true;
    return false;
  }

  Result<ExprPtr> parse_tuple(bool with_condexpr, const std::vector<std::string>& extra_end, bool explicit_parens) {
    const Token start = cur();
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) KILN_RETURN_IF_ERROR(expect_op(","));
      if (at_tuple_end(extra_end)) break;
      KILN_ASSIGN_OR_RETURN(ExprPtr e, parse_expression(with_condexpr));
      items.push_back(std::move(e));
      if (at_op(","))
        is_tuple = true;
      else
        break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) return fail_at(start, "expected an expression, got " + describe(start));
    }
    ExprPtr t = node(ExprKind::kTuple, start);
    t->args = std::move(items);
    return t;
  }

  Result<ExprPtr> parse_expression(bool with_condexpr) {
    Guard g(depth_);
    KILN_RETURN_IF_ERROR(nest());
    if (!with_condexpr) return parse_binary(0);
    const size_t start = i_;
    KILN_ASSIGN_OR_RETURN(ExprPtr e, parse_binary(0));
    if (at_name("if") && !soft_) {
      // The body of a conditional expression is soft too: parse it again in that mode.
      i_ = start;
      Soft soft(soft_, true);
      return parse_expression(true);
    }
    int n = 0;
    while (at_name("if")) {
      KILN_RETURN_IF_ERROR(chain(n));
      const Token at = cur();
      advance();
      KILN_ASSIGN_OR_RETURN(ExprPtr test, parse_binary(0));
      ExprPtr otherwise;
      if (at_name("else")) {
        advance();
        KILN_ASSIGN_OR_RETURN(otherwise, parse_expression(true));
      }
      ExprPtr c = node(ExprKind::kCond, at);
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(test));
      c->args.push_back(std::move(otherwise));
      e = std::move(c);
    }
    return e;
  }

  // The binary operators, by precedence climbing over kBinaryOps: an operand, then every
  // operator that binds at least as tightly as `min_prec`, each right side parsed one level
  // tighter (so all are left-associative, ** too, as in Jinja2).
  Result<ExprPtr> parse_binary(int min_prec) {
    const Token start = cur();
    ExprPtr left;
    if (min_prec <= kNotPrec && at_name("not")) {
      KILN_ASSIGN_OR_RETURN(left, parse_not());
    } else {
      KILN_ASSIGN_OR_RETURN(left, parse_unary(true));
    }
    int chained[kTightestPrec + 1] = {};
    while (const BinaryOp* op = binary_op_at()) {
      if (op->prec < min_prec) break;
      if (op->shape == Shape::kCompare) {
        KILN_ASSIGN_OR_RETURN(left, parse_compare_chain(std::move(left), start));
      } else if (op->shape == Shape::kConcat) {
        KILN_ASSIGN_OR_RETURN(left, parse_concat_chain(std::move(left), start));
      } else {
        KILN_RETURN_IF_ERROR(chain(chained[op->prec]));
        const Token at = cur();
        advance();
        KILN_ASSIGN_OR_RETURN(ExprPtr right, parse_binary(op->prec + 1));
        ExprPtr e = node(op->kind, at);
        e->op = op->op;
        e->args.push_back(std::move(left));
        e->args.push_back(std::move(right));
        left = std::move(e);
      }
    }
    return left;
  }

  // `not` binds looser than the comparisons and tighter than `and`.
  Result<ExprPtr> parse_not() {
    Guard g(depth_);
    KILN_RETURN_IF_ERROR(nest());
    const Token at = cur();
    advance();
    KILN_ASSIGN_OR_RETURN(ExprPtr inner, parse_binary(kNotPrec));
    ExprPtr e = node(ExprKind::kNot, at);
    e->args.push_back(std::move(inner));
    return e;
  }

  // a < b == c ...: one node holding every operand, as Python chains comparisons.
  Result<ExprPtr> parse_compare_chain(ExprPtr first, const Token& start) {
    ExprPtr cmp = node(ExprKind::kCompare, start);
    cmp->args.push_back(std::move(first));
    while (const BinaryOp* op = binary_op_at()) {
      if (op->shape != Shape::kCompare) break;
      advance();
      if (op->then) advance();
      KILN_ASSIGN_OR_RETURN(ExprPtr rhs, parse_binary(op->prec + 1));
      cmp->cmp.push_back(op->cmp);
      cmp->args.push_back(std::move(rhs));
    }
    return cmp;
  }

  // a ~ b ~ c: one node that joins the operands' text.
  Result<ExprPtr> parse_concat_chain(ExprPtr first, const Token& start) {
    ExprPtr e = node(ExprKind::kConcat, start);
    e->args.push_back(std::move(first));
    while (const BinaryOp* op = binary_op_at()) {
      if (op->shape != Shape::kConcat) break;
      advance();
      KILN_ASSIGN_OR_RETURN(ExprPtr next, parse_binary(op->prec + 1));
      e->args.push_back(std::move(next));
    }
    return e;
  }

  const BinaryOp* binary_op_at() const {
    for (const BinaryOp& op : kBinaryOps) {
      if (cur().type != (op.word ? Tok::kName : Tok::kOp) || cur().text != op.text) continue;
      if (op.then && !(look().type == Tok::kName && look().text == op.then)) continue;
      return &op;
    }
    return nullptr;
  }

  Result<ExprPtr> parse_unary(bool with_filter) {
    Guard g(depth_);
    KILN_RETURN_IF_ERROR(nest());
    ExprPtr e;
    if (at_op("-") || at_op("+")) {
      const Token at = cur();
      advance();
      KILN_ASSIGN_OR_RETURN(ExprPtr inner, parse_unary(false));
      e = node(at.text == "-" ? ExprKind::kNeg : ExprKind::kPos, at);
      e->args.push_back(std::move(inner));
    } else {
      KILN_ASSIGN_OR_RETURN(e, parse_primary());
    }
    KILN_ASSIGN_OR_RETURN(e, parse_postfix(std::move(e)));
    if (with_filter) {
      KILN_ASSIGN_OR_RETURN(e, parse_filter_expr(std::move(e)));
    }
    return e;
  }

  Result<ExprPtr> parse_primary() {
    const Token t = cur();
    switch (t.type) {
      case Tok::kName: {
        advance();
        ExprPtr e = node(ExprKind::kLiteral, t);
        if (t.text == "true" || t.text == "True")
          e->literal = Value::boolean(true);
        else if (t.text == "false" || t.text == "False")
          e->literal = Value::boolean(false);
        else if (t.text == "none" || t.text == "None")
          e->literal = Value::none();
        else {
          e->kind = ExprKind::kName;
          e->name = t.text;
          if (!macros_.empty()) {
            if (t.text == "caller") macros_.back()->uses_caller = true;
            if (t.text == "varargs") macros_.back()->uses_varargs = true;
            if (t.text == "kwargs") macros_.back()->uses_kwargs = true;
          }
        }
        return e;
      }
      case Tok::kString: {
        std::string s;
        while (cur().type == Tok::kString) {
          s += cur().text;
          advance();
        }
        ExprPtr e = node(ExprKind::kLiteral, t);
        e->literal = Value::string(std::move(s));
        return e;
      }
      case Tok::kInt: {
        advance();
        ExprPtr e = node(ExprKind::kLiteral, t);
        e->literal = Value::integer(t.ival);
        return e;
      }
      case Tok::kFloat: {
        advance();
        ExprPtr e = node(ExprKind::kLiteral, t);
        e->literal = Value::number(t.fval);
        return e;
      }
      case Tok::kOp:
        if (t.text == "(") {
          advance();
          KILN_ASSIGN_OR_RETURN(ExprPtr e, parse_tuple(true, {}, true));
          KILN_RETURN_IF_ERROR(expect_op(")"));
          return e;
        }
        if (t.text == "[") {
          advance();
          ExprPtr e = node(ExprKind::kList, t);
          while (!at_op("]")) {
            if (!e->args.empty()) KILN_RETURN_IF_ERROR(expect_op(","));
            if (at_op("]")) break;
            KILN_ASSIGN_OR_RETURN(ExprPtr item, parse_expression(true));
            e->args.push_back(std::move(item));
          }
          advance();
          return e;
        }
        if (t.text == "{") {
          advance();
          ExprPtr e = node(ExprKind::kDict, t);
          while (!at_op("}")) {
            if (!e->args.empty()) KILN_RETURN_IF_ERROR(expect_op(","));
            if (at_op("}")) break;
            KILN_ASSIGN_OR_RETURN(ExprPtr key, parse_expression(true));
            KILN_RETURN_IF_ERROR(expect_op(":"));
            KILN_ASSIGN_OR_RETURN(ExprPtr value, parse_expression(true));
            e->args.push_back(std::move(key));
            e->args.push_back(std::move(value));
          }
          advance();
          return e;
        }
        break;
      default:
        break;
    }
    return fail("unexpected " + describe(t));
  }

  Result<ExprPtr> parse_postfix(ExprPtr e) {
    int n = 0;
    while (true) {
      KILN_RETURN_IF_ERROR(chain(n));
      if (at_op(".") || at_op("[")) {
        KILN_ASSIGN_OR_RETURN(e, parse_subscript(std::move(e)));
      } else if (at_op("(")) {
        KILN_ASSIGN_OR_RETURN(e, parse_call(std::move(e)));
      } else {
        return e;
      }
    }
  }

  Result<ExprPtr> parse_filter_expr(ExprPtr e) {
    int n = 0;
    while (true) {
      KILN_RETURN_IF_ERROR(chain(n));
      if (at_op("|")) {
        KILN_ASSIGN_OR_RETURN(e, parse_filter(std::move(e), false));
      } else if (at_name("is")) {
        KILN_ASSIGN_OR_RETURN(e, parse_test(std::move(e)));
      } else if (at_op("(")) {
        KILN_ASSIGN_OR_RETURN(e, parse_call(std::move(e)));
      } else {
        return e;
      }
    }
  }

  Result<ExprPtr> parse_subscript(ExprPtr e) {
    const Token at = cur();
    advance();
    if (at.text == ".") {
      const Token attr = cur();
      if (attr.type == Tok::kName) {
        advance();
        ExprPtr g = node(ExprKind::kGetAttr, at);
        g->name = attr.text;
        g->args.push_back(std::move(e));
        return g;
      }
      if (attr.type == Tok::kInt) {
        advance();
        ExprPtr g = node(ExprKind::kGetItem, at);
        ExprPtr key = node(ExprKind::kLiteral, attr);
        key->literal = Value::integer(attr.ival);
        g->args.push_back(std::move(e));
        g->args.push_back(std::move(key));
        return g;
      }
      return unexpected("a name or number after '.'");
    }
    std::vector<ExprPtr> subs;
    while (!at_op("]")) {
      if (!subs.empty()) KILN_RETURN_IF_ERROR(expect_op(","));
      KILN_ASSIGN_OR_RETURN(ExprPtr s, parse_subscribed());
      subs.push_back(std::move(s));
    }
    advance();
    if (subs.size() == 1 && subs[0]->kind == ExprKind::kSlice) {
      subs[0]->args[0] = std::move(e);
      return std::move(subs[0]);
    }
    if (subs.empty()) return fail_at(at, "expected a subscript inside '[]'");
    for (const ExprPtr& s : subs)
      if (s->kind == ExprKind::kSlice) return fail_at(at, "a slice inside a tuple subscript is not supported");
    ExprPtr g = node(ExprKind::kGetItem, at);
    g->args.push_back(std::move(e));
    if (subs.size() == 1) {
      g->args.push_back(std::move(subs[0]));
    } else {
      ExprPtr t = node(ExprKind::kTuple, at);
      t->args = std::move(subs);
      g->args.push_back(std::move(t));
    }
    return g;
  }

  Result<ExprPtr> parse_subscribed() {
    const Token at = cur();
    ExprPtr slice = node(ExprKind::kSlice, at);
    slice->args.resize(4);  // object (filled by the caller), start, stop, step
    if (at_op(":")) {
      advance();
    } else {
      KILN_ASSIGN_OR_RETURN(ExprPtr e, parse_expression(true));
      if (!at_op(":")) return e;
      advance();
      slice->args[1] = std::move(e);
    }
    if (!at_op(":") && !at_op("]") && !at_op(",")) {
      KILN_ASSIGN_OR_RETURN(slice->args[2], parse_expression(true));
    }
    if (at_op(":")) {
      advance();
      if (!at_op("]") && !at_op(",")) {
        KILN_ASSIGN_OR_RETURN(slice->args[3], parse_expression(true));
      }
    }
    return slice;
  }

  Status parse_call_args(Expr& call) {
    KILN_RETURN_IF_ERROR(expect_op("("));
    bool need_comma = false;
    while (!at_op(")")) {
      if (need_comma) {
        KILN_RETURN_IF_ERROR(expect_op(","));
        if (at_op(")")) break;
      }
      if (at_op("*") || at_op("**"))
        return fail("*args and **kwargs in calls are not supported by kiln's template engine");
      if (cur().type == Tok::kName && look().type == Tok::kOp && look().text == "=") {
        std::string key = cur().text;
        advance();
        advance();
        KILN_ASSIGN_OR_RETURN(ExprPtr v, parse_expression(true));
        call.kwargs.emplace_back(std::move(key), std::move(v));
      } else {
        if (!call.kwargs.empty()) return fail("a positional argument follows a keyword argument");
        KILN_ASSIGN_OR_RETURN(ExprPtr v, parse_expression(true));
        call.args.push_back(std::move(v));
      }
      need_comma = true;
    }
    advance();
    return Status::ok();
  }

  Result<ExprPtr> parse_call(ExprPtr callee) {
    ExprPtr c = node(ExprKind::kCall, cur());
    c->args.push_back(std::move(callee));
    KILN_RETURN_IF_ERROR(parse_call_args(*c));
    return c;
  }

  // A filter's or test's (dotted) name, checked against the tables, as a node applied to `input`.
  // Where Jinja2 defers an unknown name to run time (soft_), the node carries the error instead.
  Result<ExprPtr> parse_builtin_name(ExprKind kind, ExprPtr input) {
    const bool filter = kind == ExprKind::kFilter;
    const Token at = cur();
    KILN_ASSIGN_OR_RETURN(std::string name, expect_name());
    while (at_op(".")) {
      advance();
      KILN_ASSIGN_OR_RETURN(std::string part, expect_name());
      name += "." + part;
    }
    const char* what = filter ? "filter" : "test";
    std::string problem;
    if (!(filter ? is_supported_filter(name) : is_supported_test(name)))
      problem = (filter ? is_jinja_only_filter(name) : is_jinja_only_test(name))
                    ? "the '" + name + "' " + what + " is not supported by kiln's template engine"
                    : "unknown " + std::string(what) + " '" + name + "'";
    if (!problem.empty() && !soft_) return fail_at(at, problem);
    ExprPtr e = node(kind, at);
    e->name = std::move(name);
    e->deferred_error = std::move(problem);
    e->args.push_back(std::move(input));
    return e;
  }

  Result<ExprPtr> parse_filter(ExprPtr input, bool start_inline) {
    int n = 0;
    while (at_op("|") || start_inline) {
      KILN_RETURN_IF_ERROR(chain(n));
      if (!start_inline) advance();
      start_inline = false;
      KILN_ASSIGN_OR_RETURN(ExprPtr f, parse_builtin_name(ExprKind::kFilter, std::move(input)));
      if (at_op("(")) KILN_RETURN_IF_ERROR(parse_call_args(*f));
      input = std::move(f);
    }
    return input;
  }

  Result<ExprPtr> parse_test(ExprPtr input) {
    advance();  // is
    bool negated = false;
    if (at_name("not")) {
      negated = true;
      advance();
    }
    const Token at = cur();
    KILN_ASSIGN_OR_RETURN(ExprPtr t, parse_builtin_name(ExprKind::kTest, std::move(input)));
    if (at_op("(")) {
      KILN_RETURN_IF_ERROR(parse_call_args(*t));
    } else {
      const Token& c = cur();
      bool arg_start = c.type == Tok::kString || c.type == Tok::kInt || c.type == Tok::kFloat ||
                       (c.type == Tok::kName && c.text != "else" && c.text != "or" && c.text != "and") ||
                       (c.type == Tok::kOp && (c.text == "(" || c.text == "[" || c.text == "{"));
      if (arg_start) {
        if (at_name("is")) return fail("tests cannot be chained ('is' after 'is')");
        KILN_ASSIGN_OR_RETURN(ExprPtr arg, parse_primary());
        KILN_ASSIGN_OR_RETURN(arg, parse_postfix(std::move(arg)));
        t->args.push_back(std::move(arg));
      }
    }
    if (!negated) return t;
    ExprPtr n = node(ExprKind::kNot, at);
    n->args.push_back(std::move(t));
    return n;
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  // Inside an `if` (test or body) or a conditional expression, and not in a scope opened
  // within it: Jinja2 defers unknown filters and tests to run time there.
  bool soft_ = false;
  std::vector<MacroStmt*> macros_;
};

}  // namespace

Result<std::unique_ptr<Template>> parse_template(std::string_view source) {
  KILN_ASSIGN_OR_RETURN(std::vector<Token> toks, lex_template(source));
  return Parser(std::move(toks)).run();
}

}  // namespace kiln::jinja
