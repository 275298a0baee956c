// Chat templates: the lexer and parser (Jinja as transformers configures it: trim_blocks,
// lstrip_blocks, loop controls, {% generation %}). The nodes are rendered by
// chat_template_render.cpp.
#include "attn/text/chat_template.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "attn/error.hpp"
#include "attn/io/text.hpp"
#include "attn/text/chat_template_ast.hpp"
#include "attn/text/tokenizer.hpp"
#include "attn/text/unicode.hpp"

namespace attn {
namespace {

// A float literal as Python reads it: past the double range it is inf (1e999) or 0 (1e-999),
// where std::stod throws.
double float_literal(const std::string& text) {
  double d = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), d);
  if (r.ec != std::errc::result_out_of_range) return d;
  const std::size_t e = text.find_first_of("eE");
  const bool tiny = e != std::string::npos && e + 1 < text.size() && text[e + 1] == '-';
  return tiny ? 0.0 : HUGE_VAL;
}

using chat::Body;
using chat::Expr;
using chat::ExprPtr;
using chat::Node;
using chat::Value;

// Deeper nesting than this (brackets, statements) is refused: the parser and renderer recurse.
constexpr int max_depth = 100;

struct Token {
  enum class Kind {
    data,
    block_begin,
    var_begin,
    block_end,
    var_end,
    name,
    string,
    number,
    op,
    end
  };
  Kind kind;
  std::string text;
  int line;
  Value number;
};

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

class Lexer {
 public:
  Lexer(std::string_view src, const std::string& name) : src_(src), name_(name) {}

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      const std::size_t tag = next_tag();
      std::string text(src_.substr(pos_, tag - pos_));
      if (tag == src_.size()) {
        push_data(std::move(text));
        pos_ = tag;
        break;
      }
      const char kind = src_[tag + 1];
      const char sign = tag + 2 < src_.size() ? src_[tag + 2] : 0;
      if (sign == '-') {
        std::size_t n = text.size();
        while (n > 0 && is_space(text[n - 1])) --n;
        text.resize(n);
      } else if (sign != '+' && kind != '{') {  // lstrip_blocks
        const std::size_t l = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        bool blank = l < text.size();
        for (std::size_t k = l; k < text.size(); ++k) blank = blank && is_space(text[k]);
        if ((l > 0 || line_starting) && blank) text.resize(l);
      }
      advance_lines(tag);
      push_data(std::move(text));
      pos_ = tag + 2 + (sign == '-' || sign == '+' ? 1 : 0);
      if (kind == '#')
        skip_comment();
      else
        tag_tokens(kind == '%');
      line_starting = pos_ > 0 && src_[pos_ - 1] == '\n';
    }
    tokens_.push_back({Token::Kind::end, "", line_, {}});
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(name_ + ": line " + std::to_string(line_) + ": " + what);
  }

  std::size_t next_tag() const {
    for (std::size_t k = src_.find('{', pos_); k != std::string_view::npos;
         k = src_.find('{', k + 1))
      if (k + 1 < src_.size() && (src_[k + 1] == '{' || src_[k + 1] == '%' || src_[k + 1] == '#'))
        return k;
    return src_.size();
  }

  void advance_lines(std::size_t to) {
    for (std::size_t k = line_pos_; k < to; ++k) line_ += src_[k] == '\n';
    line_pos_ = to;
  }

  void push_data(std::string text) {
    if (!text.empty()) tokens_.push_back({Token::Kind::data, std::move(text), line_, {}});
  }

  void skip_comment() {
    const std::size_t end = src_.find("#}", pos_);
    if (end == std::string_view::npos) fail("the comment is not closed");
    const char sign = end > pos_ ? src_[end - 1] : 0;  // -#} strips, +#} keeps the newline
    pos_ = end + 2;
    after_tag(sign == '-', sign != '+');
  }

  void after_tag(bool strip, bool trim_newline) {
    if (strip)
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
    else if (trim_newline && pos_ < src_.size() && src_[pos_] == '\n')
      ++pos_;
    advance_lines(pos_);
  }

  void tag_tokens(bool block) {
    tokens_.push_back({block ? Token::Kind::block_begin : Token::Kind::var_begin, "", line_, {}});
    int balance = 0;
    for (;;) {
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
      advance_lines(pos_);
      if (pos_ >= src_.size()) fail(block ? "'{%' is not closed" : "'{{' is not closed");
      const std::string_view rest = src_.substr(pos_);
      const std::string_view close = block ? "%}" : "}}";
      const bool minus = rest.size() > 2 && rest[0] == '-' && rest.substr(1, 2) == close;
      const bool plus = block && rest.size() > 2 && rest[0] == '+' && rest.substr(1, 2) == close;
      if ((block || balance == 0) && (minus || plus || rest.substr(0, 2) == close)) {
        pos_ += minus || plus ? 3 : 2;
        tokens_.push_back({block ? Token::Kind::block_end : Token::Kind::var_end, "", line_, {}});
        after_tag(minus, block && !plus);  // trim_blocks, unless +%}
        return;
      }
      Token t = one_token(rest);
      if (t.kind == Token::Kind::op && (t.text == "{" || t.text == "(" || t.text == "[")) ++balance;
      if (t.kind == Token::Kind::op && (t.text == "}" || t.text == ")" || t.text == "]")) --balance;
      tokens_.push_back(std::move(t));
    }
  }

  Token one_token(std::string_view rest) {
    const char c = rest[0];
    if (is_name_start(c)) {
      std::size_t n = 1;
      while (n < rest.size() && (is_name_start(rest[n]) || is_digit(rest[n]))) ++n;
      pos_ += n;
      return {Token::Kind::name, std::string(rest.substr(0, n)), line_, {}};
    }
    if (is_digit(c)) return number(rest);
    if (c == '\'' || c == '"') return string(rest);
    static const char* const two[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : two)
      if (rest.substr(0, 2) == op) {
        pos_ += 2;
        return {Token::Kind::op, op, line_, {}};
      }
    if (std::string_view("+-/*%~()[]{},.:|=<>").find(c) == std::string_view::npos)
      fail("unexpected character " + attn::quoted(rest.substr(0, 1)));
    ++pos_;
    return {Token::Kind::op, std::string(1, c), line_, {}};
  }

  Token number(std::string_view rest) {
    std::size_t n = 0;
    while (n < rest.size() && is_digit(rest[n])) ++n;
    bool fraction = false;
    if (n + 1 < rest.size() && rest[n] == '.' && is_digit(rest[n + 1])) {
      fraction = true;
      for (++n; n < rest.size() && is_digit(rest[n]);) ++n;
    }
    if (n + 1 < rest.size() && (rest[n] == 'e' || rest[n] == 'E')) {  // 1e20, 2.5e-7
      std::size_t m = n + 1;
      if (m < rest.size() && (rest[m] == '+' || rest[m] == '-')) ++m;
      if (m < rest.size() && is_digit(rest[m])) {
        fraction = true;
        for (n = m; n < rest.size() && is_digit(rest[n]);) ++n;
      }
    }
    const std::string text(rest.substr(0, n));
    pos_ += n;
    Token t{Token::Kind::number, text, line_, {}};
    if (fraction) {
      t.number = Value::floating(float_literal(text));
    } else {
      if (text.size() > 18) fail("the integer " + text.substr(0, 20) + " is too large");
      t.number = Value::integer(std::stoll(text));
    }
    return t;
  }

  Token string(std::string_view rest) {
    const char quote = rest[0];
    std::string out;
    std::size_t k = 1;
    for (; k < rest.size() && rest[k] != quote; ++k) {
      if (rest[k] != '\\' || k + 1 >= rest.size()) {
        out += rest[k];
        continue;
      }
      const char e = rest[++k];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case '\\':
          out += '\\';
          break;
        case '\'':
          out += '\'';
          break;
        case '"':
          out += '"';
          break;
        case '\n':
          break;
        case 'x':
        case 'u':
        case 'U':
          k = escape_code(rest, k, e, out);
          break;
        default:
          out += '\\';
          out += e;
      }
    }
    if (k >= rest.size()) fail("a string is not closed");
    for (std::size_t j = 0; j <= k; ++j) line_ += rest[j] == '\n';
    pos_ += k + 1;
    line_pos_ = pos_;
    return {Token::Kind::string, std::move(out), line_, {}};
  }

  // \xNN, \uNNNN, \UNNNNNNNN at rest[k] (the letter): the code point in UTF-8; returns the
  // index of the escape's last character.
  std::size_t escape_code(std::string_view rest, std::size_t k, char e, std::string& out) {
    const std::size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
    if (k + digits >= rest.size())
      fail("a string has a truncated \\" + std::string(1, e) + " escape");
    std::uint32_t cp = 0;
    for (std::size_t j = 1; j <= digits; ++j) {
      const char h = rest[k + j];
      const int v = is_digit(h)              ? h - '0'
                    : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                    : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                             : -1;
      if (v < 0) fail("a string has a malformed \\" + std::string(1, e) + " escape");
      cp = cp * 16 + std::uint32_t(v);
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000))
      fail("a string escapes an invalid code point");
    append_utf8(out, char32_t(cp));
    return k + digits;
  }

  std::string_view src_;
  const std::string& name_;
  std::size_t pos_ = 0, line_pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

bool known(const std::vector<std::string_view>& table, std::string_view name) {
  for (std::string_view n : table)
    if (n == name) return true;
  return false;
}

class Parser {
 public:
  Parser(std::vector<Token> tokens, const std::string& name) : t_(std::move(tokens)), name_(name) {}

  Body parse() {
    std::string end;
    Body body = statements({}, end);
    return body;
  }

 private:
  using K = Token::Kind;

  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(name_ + ": line " + std::to_string(t_[p_].line) + ": " + what);
  }
  [[noreturn]] void unsupported(const std::string& what) const {
    fail(attn::quoted(what) + " is not supported");
  }
  const Token& peek(std::size_t ahead = 0) const { return t_[std::min(p_ + ahead, t_.size() - 1)]; }
  bool at_op(std::string_view op) const { return peek().kind == K::op && peek().text == op; }
  bool at_name(std::string_view n) const { return peek().kind == K::name && peek().text == n; }
  bool skip_op(std::string_view op) {
    if (!at_op(op)) return false;
    ++p_;
    return true;
  }
  bool skip_name(std::string_view n) {
    if (!at_name(n)) return false;
    ++p_;
    return true;
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail("expected " + attn::quoted(op) + ", found " + describe(peek()));
  }
  std::string expect_name() {
    if (peek().kind != K::name) fail("expected a name, found " + describe(peek()));
    return t_[p_++].text;
  }
  void expect_block_end() {
    if (peek().kind != K::block_end) fail("expected '%}', found " + describe(peek()));
    ++p_;
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case K::block_end:
        return "'%}'";
      case K::var_end:
        return "'}}'";
      case K::end:
        return "the end of the template";
      case K::string:
        return "a string";
      default:
        return attn::quoted(t.text, 40);
    }
  }

  struct Depth {
    explicit Depth(Parser& p) : p(p) {
      if (++p.depth_ > max_depth) p.fail("nesting deeper than " + std::to_string(max_depth));
    }
    ~Depth() { --p.depth_; }
    Parser& p;
  };

  // Statements up to one of `ends` ({% endfor %}, {% else %}, ...); its name in `end`.
  Body statements(const std::vector<std::string_view>& ends, std::string& end) {
    Depth depth(*this);
    Body body;
    for (;;) {
      const Token& t = peek();
      if (t.kind == K::end) {
        if (!ends.empty()) fail("'{% " + std::string(ends.back()) + " %}' is missing");
        end.clear();
        return body;
      }
      if (t.kind == K::data) {
        auto n = node(Node::Kind::text);
        n->text = t.text;
        body.push_back(std::move(n));
        ++p_;
      } else if (t.kind == K::var_begin) {
        ++p_;
        auto n = node(Node::Kind::output);
        n->exprs.push_back(tuple_or_expression());
        if (peek().kind != K::var_end) fail("expected '}}', found " + describe(peek()));
        ++p_;
        body.push_back(std::move(n));
      } else {
        ++p_;
        const std::string word = expect_name();
        if (known(ends, word)) {
          end = word;
          return body;
        }
        body.push_back(statement(word));
      }
    }
  }

  std::unique_ptr<Node> node(Node::Kind k) {
    auto n = std::make_unique<Node>();
    n->kind = k;
    n->line = peek().line;
    return n;
  }

  std::unique_ptr<Node> statement(const std::string& word) {
    if (word == "if") return if_statement();
    if (word == "for") return for_statement();
    if (word == "set") return set_statement();
    if (word == "macro") return macro_statement();
    if (word == "filter") return filter_statement();
    if (word == "generation") return generation_statement();
    if (word == "break" || word == "continue") {
      if (loops_ == 0) fail(attn::quoted(word) + " outside a loop");
      auto n = node(word == "break" ? Node::Kind::break_ : Node::Kind::continue_);
      expect_block_end();
      return n;
    }
    unsupported(word);
  }

  std::unique_ptr<Node> if_statement() {
    auto n = node(Node::Kind::if_);
    std::string end = "elif";
    while (end == "elif") {
      ExprPtr cond = tuple_or_expression();
      expect_block_end();
      Body body = statements({"elif", "else", "endif"}, end);
      n->branches.emplace_back(std::move(cond), std::move(body));
    }
    if (end == "else") {
      expect_block_end();
      n->else_body = statements({"endif"}, end);
    }
    expect_block_end();
    return n;
  }

  std::unique_ptr<Node> for_statement() {
    auto n = node(Node::Kind::for_);
    do n->targets.push_back(expect_name());
    while (skip_op(","));
    if (!skip_name("in")) fail("expected 'in', found " + describe(peek()));
    n->exprs.push_back(tuple_without_condition());
    if (skip_name("if")) n->exprs.push_back(expression());
    if (at_name("recursive")) unsupported("for ... recursive");
    expect_block_end();
    ++loops_;
    std::string end;
    n->body = statements({"else", "endfor"}, end);
    --loops_;
    if (end == "else") {
      expect_block_end();
      n->else_body = statements({"endfor"}, end);
    }
    expect_block_end();
    return n;
  }

  std::unique_ptr<Node> set_statement() {
    auto n = node(Node::Kind::set);
    n->targets.push_back(expect_name());
    if (skip_op(".")) {
      n->targets.push_back(expect_name());
      n->attribute_target = true;
    } else {
      while (skip_op(",")) n->targets.push_back(expect_name());
    }
    if (skip_op("=")) {
      n->exprs.push_back(tuple_or_expression());
      expect_block_end();
      return n;
    }
    if (n->attribute_target || n->targets.size() != 1)
      fail("expected '=', found " + describe(peek()));
    n->kind = Node::Kind::set_block;
    n->text = n->targets[0];
    if (at_op("|")) n->filter_call = filters(literal_of(Value::string("")));
    expect_block_end();
    std::string end;
    n->body = statements({"endset"}, end);
    expect_block_end();
    return n;
  }

  std::unique_ptr<Node> macro_statement() {
    auto n = node(Node::Kind::macro);
    n->text = expect_name();
    expect_op("(");
    while (!skip_op(")")) {
      std::string param = expect_name();
      ExprPtr def;
      if (skip_op("=")) def = expression();
      n->params.emplace_back(std::move(param), std::move(def));
      if (!at_op(")")) expect_op(",");
    }
    expect_block_end();
    const int loops = loops_;
    loops_ = 0;
    std::string end;
    n->body = statements({"endmacro"}, end);
    loops_ = loops;
    expect_block_end();
    return n;
  }

  std::unique_ptr<Node> filter_statement() {
    auto n = node(Node::Kind::filter);
    n->filter_call = filters(literal_of(Value::string("")), true);
    expect_block_end();
    std::string end;
    n->body = statements({"endfilter"}, end);
    expect_block_end();
    return n;
  }

  // transformers' AssistantTracker marks the assistant's text; rendered, it is its body.
  std::unique_ptr<Node> generation_statement() {
    auto n = node(Node::Kind::if_);
    expect_block_end();
    std::string end;
    Body body = statements({"endgeneration"}, end);
    expect_block_end();
    n->branches.emplace_back(literal_of(Value::boolean(true)), std::move(body));
    return n;
  }

  ExprPtr make(Expr::Kind k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }
  ExprPtr literal_of(Value v) {
    ExprPtr e = make(Expr::Kind::literal, peek().line);
    e->value = std::move(v);
    return e;
  }

  // `a, b` at the top of an output or a set makes a tuple.
  ExprPtr tuple_or_expression() {
    ExprPtr first = expression();
    if (!at_op(",")) return first;
    ExprPtr t = make(Expr::Kind::list, first->line);
    t->tuple = true;
    t->args.push_back(std::move(first));
    while (skip_op(",")) {
      if (peek().kind == K::block_end || peek().kind == K::var_end) break;
      t->args.push_back(expression());
    }
    return t;
  }

  // A for loop's iterable: `x if c` there is the loop's filter, not a conditional expression.
  ExprPtr tuple_without_condition() {
    const bool saved = no_condition_;
    no_condition_ = true;
    ExprPtr e = or_expression();
    no_condition_ = saved;
    return e;
  }

  ExprPtr expression() {
    Depth depth(*this);
    ExprPtr e = or_expression();
    while (!no_condition_ && at_name("if")) {
      ++p_;
      ExprPtr c = make(Expr::Kind::cond, e->line);
      ExprPtr cond = or_expression();
      ExprPtr other = skip_name("else") ? expression() : literal_of(Value());
      c->args.push_back(std::move(cond));
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(other));
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(std::string op, ExprPtr l, ExprPtr r) {
    ExprPtr e = make(Expr::Kind::binary, l->line);
    e->name = std::move(op);
    e->args.push_back(std::move(l));
    e->args.push_back(std::move(r));
    return e;
  }
  ExprPtr unary(std::string op, ExprPtr x) {
    ExprPtr e = make(Expr::Kind::unary, x->line);
    e->name = std::move(op);
    e->args.push_back(std::move(x));
    return e;
  }

  ExprPtr or_expression() {
    ExprPtr e = and_expression();
    while (skip_name("or")) e = binary("or", std::move(e), and_expression());
    return e;
  }
  ExprPtr and_expression() {
    ExprPtr e = not_expression();
    while (skip_name("and")) e = binary("and", std::move(e), not_expression());
    return e;
  }
  ExprPtr not_expression() {
    if (skip_name("not")) {
      Depth depth(*this);
      return unary("not", not_expression());
    }
    return comparison();
  }
  ExprPtr comparison() {
    ExprPtr e = sum();
    for (;;) {
      static const char* const ops[] = {"==", "!=", ">=", "<=", "<", ">"};
      bool found = false;
      for (const char* op : ops)
        if (skip_op(op)) {
          e = binary(op, std::move(e), sum());
          found = true;
          break;
        }
      if (found) continue;
      if (skip_name("in")) {
        e = binary("in", std::move(e), sum());
      } else if (at_name("not") && peek(1).kind == K::name && peek(1).text == "in") {
        p_ += 2;
        e = unary("not", binary("in", std::move(e), sum()));
      } else {
        return e;
      }
    }
  }
  ExprPtr sum() {
    ExprPtr e = concat();
    while (at_op("+") || at_op("-")) {
      const std::string op = t_[p_++].text;
      e = binary(op, std::move(e), concat());
    }
    return e;
  }
  ExprPtr concat() {
    ExprPtr e = product();
    while (skip_op("~")) e = binary("~", std::move(e), product());
    return e;
  }
  ExprPtr product() {
    ExprPtr e = power();
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      const std::string op = t_[p_++].text;
      e = binary(op, std::move(e), power());
    }
    return e;
  }
  ExprPtr power() {
    ExprPtr e = unary_expression(true);
    while (skip_op("**")) e = binary("**", std::move(e), unary_expression(true));
    return e;
  }
  ExprPtr unary_expression(bool with_filter) {
    Depth depth(*this);
    ExprPtr e;
    if (skip_op("-"))
      e = unary("-", unary_expression(false));
    else if (skip_op("+"))
      e = unary("+", unary_expression(false));
    else
      e = postfix(primary());
    if (with_filter) return filters(std::move(e));
    return e;
  }

  ExprPtr primary() {
    const Token& t = peek();
    if (t.kind == K::name) {
      ++p_;
      if (t.text == "true" || t.text == "True") return literal_of(Value::boolean(true));
      if (t.text == "false" || t.text == "False") return literal_of(Value::boolean(false));
      if (t.text == "none" || t.text == "None") return literal_of(Value::none());
      ExprPtr e = make(Expr::Kind::name, t.line);
      e->name = t.text;
      return e;
    }
    if (t.kind == K::string) {
      std::string s;
      while (peek().kind == K::string) s += t_[p_++].text;  // adjacent strings join
      return literal_of(Value::string(std::move(s)));
    }
    if (t.kind == K::number) {
      ++p_;
      return literal_of(t.number);
    }
    if (skip_op("(")) {
      ExprPtr e = expression();
      if (at_op(",")) {
        ExprPtr tuple = make(Expr::Kind::list, e->line);
        tuple->tuple = true;
        tuple->args.push_back(std::move(e));
        while (skip_op(",") && !at_op(")")) tuple->args.push_back(expression());
        e = std::move(tuple);
      }
      expect_op(")");
      return e;
    }
    if (skip_op("[")) {
      ExprPtr list = make(Expr::Kind::list, t.line);
      while (!skip_op("]")) {
        list->args.push_back(expression());
        if (!at_op("]")) expect_op(",");
      }
      return list;
    }
    if (skip_op("{")) {
      ExprPtr dict = make(Expr::Kind::dict, t.line);
      while (!skip_op("}")) {
        if (peek().kind == K::number || at_name("true") || at_name("false") || at_name("none"))
          unsupported("a dict key that is not a string");
        dict->args.push_back(expression());
        expect_op(":");
        dict->args.push_back(expression());
        if (!at_op("}")) expect_op(",");
      }
      return dict;
    }
    fail("unexpected " + describe(t));
  }

  ExprPtr postfix(ExprPtr e) {
    for (;;) {
      if (skip_op(".")) {
        ExprPtr a = make(Expr::Kind::attr, e->line);
        if (peek().kind == K::number && peek().number.is(Value::Kind::integer)) {
          a->kind = Expr::Kind::item;
          a->args.push_back(std::move(e));
          a->args.push_back(literal_of(t_[p_++].number));
          e = std::move(a);
          continue;
        }
        a->name = expect_name();
        a->args.push_back(std::move(e));
        e = std::move(a);
      } else if (skip_op("[")) {
        e = subscript(std::move(e));
      } else if (at_op("(")) {
        ExprPtr c = make(Expr::Kind::call, e->line);
        c->args.push_back(std::move(e));
        call_arguments(*c);
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  ExprPtr subscript(ExprPtr e) {
    ExprPtr parts[3];
    int colons = 0;
    for (;;) {
      if (at_op("]")) break;
      if (skip_op(":")) {
        if (++colons > 2) fail("unexpected ':'");
        continue;
      }
      if (parts[colons]) fail("expected ']', found " + describe(peek()));
      parts[colons] = expression();
    }
    expect_op("]");
    ExprPtr s = make(colons ? Expr::Kind::slice : Expr::Kind::item, e->line);
    s->args.push_back(std::move(e));
    if (!colons) {
      if (!parts[0]) fail("an empty subscript");
      s->args.push_back(std::move(parts[0]));
      return s;
    }
    for (ExprPtr& p : parts) s->args.push_back(p ? std::move(p) : literal_of(Value::none()));
    return s;
  }

  // (a, b, key=c) into call's args (after its first) and kwargs.
  void call_arguments(Expr& call) {
    expect_op("(");
    while (!skip_op(")")) {
      if (at_op("*") || at_op("**")) unsupported("*arguments");
      if (peek().kind == K::name && peek(1).kind == K::op && peek(1).text == "=") {
        std::string key = t_[p_].text;
        p_ += 2;
        call.kwargs.emplace_back(std::move(key), expression());
      } else {
        if (!call.kwargs.empty()) fail("a positional argument after a keyword argument");
        call.args.push_back(expression());
      }
      if (!at_op(")")) expect_op(",");
    }
  }

  // `| name(args)` and `is [not] name(args)` after an operand.
  ExprPtr filters(ExprPtr e, bool first_without_pipe = false) {
    for (;;) {
      if (first_without_pipe || skip_op("|")) {
        first_without_pipe = false;
        ExprPtr f = make(Expr::Kind::filter, e->line);
        f->name = expect_name();
        if (!chat::is_filter(f->name)) unsupported("filter " + f->name);
        f->args.push_back(std::move(e));
        if (at_op("(")) call_arguments(*f);
        e = std::move(f);
      } else if (skip_name("is")) {
        ExprPtr t = make(Expr::Kind::test, e->line);
        t->negated = skip_name("not");
        t->name = expect_name();
        if (!chat::is_test(t->name)) unsupported("test " + t->name);
        t->args.push_back(std::move(e));
        if (at_op("("))
          call_arguments(*t);
        else if (test_takes_bare_argument())
          t->args.push_back(primary());
        e = std::move(t);
      } else {
        return e;
      }
    }
  }

  // `x is divisibleby 3`, `x is sameas none`: an argument without parentheses.
  bool test_takes_bare_argument() const {
    const Token& t = peek();
    if (t.kind == K::string || t.kind == K::number) return true;
    if (t.kind != K::name) return false;
    for (std::string_view w : {"and", "or", "else", "if", "in", "not", "is"})
      if (t.text == w) return false;
    return true;
  }

 private:
  std::vector<Token> t_;
  const std::string& name_;
  std::size_t p_ = 0;
  int depth_ = 0, loops_ = 0;
  bool no_condition_ = false;
};

}  // namespace

ChatTemplate::ChatTemplate(std::string_view source, std::string name) : name_(std::move(name)) {
  auto program = std::make_shared<Program>();
  const std::string shown = escape(name_);
  program->body = Parser(Lexer(source, shown).run(), shown).parse();
  program_ = std::move(program);
}

ChatTemplate chat_template_for(const Tokenizer& t, const std::string& choice) {
  constexpr std::uintmax_t max_file = std::uintmax_t{1} << 20;  // templates are kilobytes
  std::error_code ec;
  if (!choice.empty() && std::filesystem::is_regular_file(choice, ec)) {
    const std::uintmax_t size = std::filesystem::file_size(choice, ec);
    if (ec || size > max_file)
      throw InputError(escape(choice) + ": a chat template larger than 1 MiB", "chat_template");
    std::ifstream in(choice, std::ios::binary);
    std::string source((std::istreambuf_iterator<char>(in)), {});
    if (!in && !in.eof()) throw InputError(escape(choice) + ": cannot be read", "chat_template");
    return ChatTemplate(source, choice);
  }
  const std::string name = choice.empty() ? "default" : choice;
  std::string names;
  for (const auto& [n, source] : t.chat_templates) {
    if (n == name) return ChatTemplate(source, t.source + ": chat template " + attn::quoted(n, 60));
    names += (names.empty() ? "" : ", ") + attn::quoted(n, 60);
  }
  if (choice.empty())
    throw InputError(t.source + ": the tokenizer has no chat template", "chat_template");
  throw InputError(attn::quoted(choice) +
                       " is neither a file nor one of the tokenizer's chat templates (" +
                       (names.empty() ? "it has none" : names) + ")",
                   "chat_template");
}

ChatOptions chat_options(const Tokenizer& t, bool add_generation_prompt) {
  ChatOptions o;
  o.add_generation_prompt = add_generation_prompt;
  if (t.bos >= 0 && t.bos < t.vocab_size()) o.bos_token = token_bytes(t, t.bos);
  if (!t.eos.empty() && t.eos[0] >= 0 && t.eos[0] < t.vocab_size())
    o.eos_token = token_bytes(t, t.eos[0]);
  return o;
}

std::vector<std::int32_t> chat_stop_ids(const Tokenizer& t) {
  std::vector<std::int32_t> ids = t.eos;
  static const char* const ends[] = {"<|eot_id|>",      "<|eom_id|>", "<|im_end|>",
                                     "<end_of_turn>",   "<|end|>",    "<|endoftext|>",
                                     "<|end_of_text|>", "</s>"};
  for (std::size_t id = 0; id < t.pieces.size(); ++id)
    for (const char* e : ends)
      if (t.pieces[id] == e && std::find(ids.begin(), ids.end(), std::int32_t(id)) == ids.end())
        ids.push_back(std::int32_t(id));
  return ids;
}

}  // namespace attn
