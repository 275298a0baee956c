#!/usr/bin/env python3
"""Chat templates rendered by attn's renderer against Jinja2 as transformers configures it.

Usage: check_chat_templates.py RENDER_PROGRAM [TEMPLATE_DIR_OR_FILES...]

Every template (default: llama.cpp's models/templates/ in the cache bench/llama_cpp.sh fills,
and tests/golden/chat_templates/, which exercises what those leave out) is
rendered on each conversation below by Debian's python3-jinja2 in transformers' environment
(apply_chat_template: ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loop controls,
the {% generation %} tag, tojson with ensure_ascii=False, raise_exception, strftime_now) and by
RENDER_PROGRAM (tests/text/render_chat_template.cpp). Outputs must be byte-identical; where
Jinja2 raises, ours must raise too. A template ours refuses at load is listed; more than
MAX_REFUSED of them fail the check. Exit 77 (skip) when jinja2 or the templates are absent.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile
from datetime import datetime

try:
    import jinja2
    import jinja2.ext
    from jinja2 import nodes
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    print("SKIP: python3-jinja2 is not installed (tools/deps.sh installs it)")
    sys.exit(77)

NOW = 1721952000  # 2024-07-26: strftime_now's time on both sides
MAX_REFUSED = 5
CACHE = os.path.expanduser("~/.cache/attn-cli/llama.cpp/3.22.1/src/models/templates")
OURS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "chat_templates")


class AssistantTracker(jinja2.ext.Extension):
    """transformers' {% generation %} tag: renders its body."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        call = self.call_method("_render", [])
        return nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.fromtimestamp(NOW).strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


SYSTEM = {"role": "system", "content": "You are a helpful assistant. Answer briefly."}
USER1 = {"role": "user", "content": "Hello! What's 2 + 2?"}
ASSISTANT1 = {"role": "assistant", "content": "2 + 2 = 4."}
USER2 = {"role": "user", "content": "  And in \"words\"?\nSay it in français, «with» 🙂 ", }
ASSISTANT2 = {"role": "assistant", "content": "Four.\n\nQuatre."}
USER3 = {"role": "user", "content": "Thanks <3 & bye"}
CONVERSATIONS = [
    ([USER1], True),
    ([USER1], False),
    ([SYSTEM, USER1], True),
    ([SYSTEM, USER1, ASSISTANT1], False),
    ([USER1, ASSISTANT1, USER2], True),
    ([SYSTEM, USER1, ASSISTANT1, USER2], True),
    ([SYSTEM, USER1, ASSISTANT1, USER2, ASSISTANT2, USER3], False),
    ([USER1, ASSISTANT1, USER2, ASSISTANT2], False),
]


def cases():
    return [{"messages": m, "tools": None, "documents": None, "add_generation_prompt": g,
             "bos_token": "<s>", "eos_token": "</s>"} for m, g in CONVERSATIONS]


def reference(env, source):
    """Jinja2's outputs (str, or None where it raises); None for all when it cannot compile."""
    try:
        template = env.from_string(source)
    except jinja2.exceptions.TemplateError as e:
        return None, str(e)
    out = []
    for c in cases():
        try:
            out.append(template.render(**c))
        except Exception:  # raise_exception, type errors: ours must raise too
            out.append(None)
    return out, None


def main():
    program = sys.argv[1]
    paths = sys.argv[2:] or [CACHE, OURS]
    files = []
    for p in paths:
        if not os.path.exists(p):
            print(f"skipped: {p} is absent (bench/llama_cpp.sh --src fetches llama.cpp's templates)")
        files += sorted(glob.glob(os.path.join(p, "*.jinja"))) if os.path.isdir(p) else [p]
    if not files:
        print(f"SKIP: no templates in {' '.join(paths)} (bench/llama_cpp.sh --src fetches them)")
        sys.exit(77)
    env = environment()
    failed, refused, compared = 0, [], 0
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(cases(), f, ensure_ascii=False)
        cases_path = f.name
    try:
        for path in files:
            name = os.path.basename(path)
            with open(path, encoding="utf-8") as f:
                source = f.read()
            expected, compile_error = reference(env, source)
            run = subprocess.run([program, path, cases_path, str(NOW)], capture_output=True)
            if run.returncode != 0:
                print(f"FAIL {name}: the renderer exited {run.returncode}: {run.stderr.decode()[-500:]}")
                failed += 1
                continue
            ours = json.loads(run.stdout)
            if "refused" in ours:
                if compile_error is None:
                    refused.append(name)
                print(f"refused {name}: {ours['refused']}" +
                      (f" (Jinja2 too: {compile_error})" if compile_error else ""))
                continue
            if compile_error is not None:
                print(f"FAIL {name}: Jinja2 refuses it ({compile_error}), ours renders it")
                failed += 1
                continue
            for k, (want, got) in enumerate(zip(expected, ours["results"])):
                compared += 1
                if want is None and "error" in got:
                    continue
                if want is not None and got.get("text") == want:
                    continue
                failed += 1
                print(f"FAIL {name} conversation {k}:\n  jinja2: {want!r}\n  ours:   {got!r}")
    finally:
        os.unlink(cases_path)
    print(f"{len(files)} templates, {compared} renders compared, {failed} failed, "
          f"{len(refused)} refused by ours only: {', '.join(refused) or '-'}")
    if len(refused) > MAX_REFUSED:
        print(f"FAIL more than {MAX_REFUSED} templates refused")
        failed += 1
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
