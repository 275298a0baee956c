#pragma once
// The chat template's parsed form and its values (internal to chat_template*.cpp): the parser
// (chat_template.cpp) builds these nodes, the renderer (chat_template_render.cpp) walks them.
// Values follow Python's: undefined (Jinja's Undefined), None, bool, int, float, str, list,
// dict (insertion-ordered), and callables (macros and the globals).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attn/text/chat_template.hpp"

namespace attn::chat {

struct Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;
struct Args;
struct Renderer;
using Function = std::function<Value(Renderer&, Args&)>;

struct Value {
  enum class Kind { undefined, none, boolean, integer, floating, string, list, dict, function };
  Kind kind = Kind::undefined;
  bool b = false;
  std::int64_t i = 0;
  double f = 0;
  std::string s;  // also a function's name
  std::shared_ptr<List> list;
  std::shared_ptr<Dict> dict;  // namespace() objects are dicts that `set ns.x` may change
  std::shared_ptr<Function> fn;
  bool is_namespace = false;
  bool tuple = false;  // a list made as a tuple: Python prints it in parentheses

  static Value none() { return with(Kind::none); }
  static Value boolean(bool v) {
    Value x = with(Kind::boolean);
    x.b = v;
    return x;
  }
  static Value integer(std::int64_t v) {
    Value x = with(Kind::integer);
    x.i = v;
    return x;
  }
  static Value floating(double v) {
    Value x = with(Kind::floating);
    x.f = v;
    return x;
  }
  static Value string(std::string v) {
    Value x = with(Kind::string);
    x.s = std::move(v);
    return x;
  }
  static Value of_list(List v) {
    Value x = with(Kind::list);
    x.list = std::make_shared<List>(std::move(v));
    return x;
  }
  static Value of_dict(Dict v) {
    Value x = with(Kind::dict);
    x.dict = std::make_shared<Dict>(std::move(v));
    return x;
  }
  static Value function(std::string name, Function f) {
    Value x = with(Kind::function);
    x.s = std::move(name);
    x.fn = std::make_shared<Function>(std::move(f));
    return x;
  }
  static Value with(Kind k) {
    Value x;
    x.kind = k;
    return x;
  }
  bool is(Kind k) const { return kind == k; }
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;
struct Node;
using Body = std::vector<std::unique_ptr<Node>>;

struct Expr {
  enum class Kind {
    literal,
    name,
    attr,
    item,
    slice,
    call,
    filter,
    test,
    unary,
    binary,
    cond,
    list,
    dict
  };
  Kind kind;
  int line = 0;
  Value value;                // literal
  std::string name;           // name, attr, filter, test; unary/binary operator
  std::vector<ExprPtr> args;  // operands, then call/filter/test positional arguments
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;  // `is not`
  bool tuple = false;    // a list written as a tuple
};

struct Node {
  enum class Kind { text, output, if_, for_, set, set_block, macro, break_, continue_, filter };
  Kind kind;
  int line = 0;
  std::string text;                  // text; set_block's and macro's name
  std::vector<std::string> targets;  // for's and set's names; set ns.attr: {ns, attr}
  bool attribute_target = false;     // set ns.attr = ...
  std::vector<ExprPtr> exprs;        // output, for's iterable and condition, set's value
  std::vector<std::pair<ExprPtr, Body>> branches;  // if/elif; for: {condition-or-null, body}
  Body else_body;
  Body body;                                            // for, set_block, macro, filter
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro parameters and defaults
  ExprPtr filter_call;                                  // filter block, set block's filter
};

// The filters and tests the renderer knows (their table is in chat_template_render.cpp): the
// parser refuses any other name.
bool is_filter(std::string_view name);
bool is_test(std::string_view name);

}  // namespace attn::chat

struct attn::ChatTemplate::Program {
  chat::Body body;
};
