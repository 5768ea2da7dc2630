// The parsed form of a chat template: expressions and statements, each with its line and column.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/jinja_value.h"

namespace kiln::jinja {

enum class ExprKind : uint8_t {
  kLiteral,  // literal
  kName,     // name
  kList,     // args
  kTuple,    // args
  kDict,     // args: key, value, key, value, ...
  kGetAttr,  // args[0].name
  kGetItem,  // args[0][args[1]]
  kSlice,    // args[0][args[1]:args[2]:args[3]] (each bound may be null)
  kCall,     // args[0](args[1..], kwargs)
  kFilter,   // args[0] | name(args[1..], kwargs); args[0] null in filter blocks
  kTest,     // args[0] is name(args[1..], kwargs)
  kNot,      // not args[0]
  kNeg,      // -args[0]
  kPos,      // +args[0]
  kBinary,   // args[0] op args[1]
  kAnd,      // args[0] and args[1]
  kOr,       // args[0] or args[1]
  kConcat,   // args[0] ~ args[1] ~ ...
  kCompare,  // args[0] cmp[0] args[1] cmp[1] args[2] ...
  kCond,     // args[0] if args[1] else args[2] (args[2] may be null)
};

enum class BinOp : uint8_t { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };
enum class CmpOp : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind = ExprKind::kLiteral;
  int line = 0;
  int col = 0;
  Value literal;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  BinOp op = BinOp::kAdd;
  std::vector<CmpOp> cmp;
  // A filter or test the engine does not have, inside an `if` or a conditional expression:
  // Jinja2 then fails only when it is reached, so the error waits for evaluation.
  std::string deferred_error;
};

enum class StmtKind : uint8_t {
  kText,
  kOutput,
  kIf,
  kFor,
  kSet,
  kSetBlock,
  kMacro,
  kCallBlock,
  kFilterBlock,
  kWith,
  kBreak,
  kContinue,
  kScope,
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct MacroStmt {
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // one per param, null when it has none
  Body body;
  bool uses_caller = false;
  bool uses_varargs = false;
  bool uses_kwargs = false;
  int line = 0;
};

struct Stmt {
  StmtKind kind = StmtKind::kText;
  int line = 0;
  int col = 0;
  std::string text;                                // kText
  ExprPtr expr;                                    // kOutput, kSet, kFor (iterable), kCallBlock (the call)
  std::vector<std::pair<ExprPtr, Body>> branches;  // kIf: condition and body, in order
  Body body;                                       // kFor, kSetBlock, kFilterBlock, kWith, kScope
  Body else_body;                                  // kIf, kFor
  std::vector<std::string> targets;                // kFor, kSet, kSetBlock, kWith: the names bound
  bool unpack = false;                             // the target was a tuple
  std::string ns_attr;                             // kSet / kSetBlock to targets[0].ns_attr
  ExprPtr cond;                                    // kFor: the `if` filter
  std::vector<ExprPtr> values;                     // kWith: one per target
  std::vector<ExprPtr> filters;                    // kFilterBlock, kSetBlock: kFilter nodes with null input
  std::unique_ptr<MacroStmt> macro;                // kMacro; kCallBlock: the caller
};

struct Template {
  Body body;
};

}  // namespace kiln::jinja
