// Chat templates' refusals and bounds: constructs outside the subset refused at load naming the
// construct and its line, raise_exception naming the template, and hostile templates stopped
// by the renderer's bounds (the outputs themselves are compared with jinja2 by
// tests/golden/check_chat_templates.py).
#include <doctest/doctest.h>

#include <string>

#include "attn/error.hpp"
#include "attn/text/chat_template.hpp"

namespace {

std::string refusal(const std::string& source) {
  try {
    attn::ChatTemplate t(source, "t.jinja");
    t.render({{"user", "hi"}}, {});
  } catch (const attn::InputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("chat template: constructs outside the subset are refused at load, named") {
  CHECK(refusal("a\n{% include 'x.jinja' %}") == "t.jinja: line 2: 'include' is not supported");
  CHECK(refusal("{{ x | from_json }}") == "t.jinja: line 1: 'filter from_json' is not supported");
  CHECK(refusal("{% if x is prime %}{% endif %}") ==
        "t.jinja: line 1: 'test prime' is not supported");
  CHECK(refusal("{% for x in y recursive %}{% endfor %}") ==
        "t.jinja: line 1: 'for ... recursive' is not supported");
  CHECK(refusal("{{ {1: 2} }}") ==
        "t.jinja: line 1: 'a dict key that is not a string' is not supported");
  CHECK(refusal("{% if x %}") == "t.jinja: line 1: '{% endif %}' is missing");
  CHECK(refusal("{{ x ") == "t.jinja: line 1: '{{' is not closed");
  CHECK(refusal("{% break %}") == "t.jinja: line 1: 'break' outside a loop");
  CHECK(refusal("{{ " + std::string(500, '(') + "1" + std::string(500, ')') + " }}")
            .find("nesting deeper") != std::string::npos);
}

TEST_CASE("chat template: raise_exception and type errors name the template and the line") {
  CHECK(refusal("x\n{{ raise_exception('Roles must alternate\\x1b') }}") ==
        "t.jinja: line 2: Roles must alternate\\x1b");
  CHECK(refusal("{{ 1 + 'a' }}") ==
        "t.jinja: line 1: unsupported operand types for +: int and str");
  CHECK(refusal("{{ messages.x.y }}") ==
        "t.jinja: line 1: an undefined value has no attribute 'y'");
}

TEST_CASE("chat template: hostile templates end at the bounds") {
  CHECK(refusal("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}")
            .find("steps") != std::string::npos);
  CHECK(refusal("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}")
            .find("output is longer") != std::string::npos);
  CHECK(refusal("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}")
            .find("macro calls nested") != std::string::npos);
  CHECK(refusal("{{ range(1000000) }}").find("range is longer") != std::string::npos);
  CHECK(refusal("{{ 'x' * 100000000 }}").find("repetition longer") != std::string::npos);
  CHECK(refusal("{{ 2 ** 64 }}") == "t.jinja: line 1: integer overflow");
}

TEST_CASE("chat template: messages, add_generation_prompt and the special tokens") {
  const attn::ChatTemplate t(
      "{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{{ eos_token }}"
      "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}{{ tools }}",
      "t.jinja");
  attn::ChatOptions o;
  o.bos_token = "<s>";
  o.eos_token = "</s>";
  o.add_generation_prompt = true;
  CHECK(t.render({{"system", "S"}, {"user", "U"}}, o) ==
        "<s><|system|>S</s><|user|>U</s><|assistant|>None");
  o.now = 0;
  const attn::ChatTemplate date("{{ strftime_now('%Y') }}", "d.jinja");
  CHECK(date.render({}, o).size() == 4);
}
