#!/usr/bin/python3
"""attn-cli chat and generate --chat on an Instruct test model: stories260K's weights with
Qwen2.5-7B-Instruct's chat template, ChatML's special tokens and two named templates, written by
tests/golden/chat_model.py with llama.cpp's gguf-py.

  check_chat_instruct.py ATTN_CLI

- The rendered prompt's ids (generate --chat's prefill, the default template and the named one
  `chatml`) equal python3-jinja2's rendering in transformers' environment tokenized by llama.cpp's
  llama-tokenize (special tokens parsed, no BOS added).
- The named templates: --chat-template NAME chooses one; an unknown name lists them; `tool_use`
  (Hermes 2 Pro's) raises without tools, as in transformers, naming the template.
- A five-turn conversation on a pseudo-terminal (tests/cli/chat_pty.py), on this model and on
  stories260K with tests/golden/chat_templates/turns.jinja: each turn prefills only the ids after
  the cache's common prefix with the turn's rendering (jinja2 + llama-tokenize, the replies as
  the terminal showed them), counted from the timings on stderr; each reply is greedy generation
  from a fresh cache on those ids, the Instruct model's ended at the template's end-of-turn
  token.

Exit 77 (skip) when llama.cpp's sources or llama-tokenize, or python3-jinja2, are absent.
"""
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
GOLDEN = HERE.parent / "golden"
sys.path.insert(0, str(GOLDEN))
sys.path.insert(0, str(HERE))
import chat_model  # noqa: E402
import chat_pty  # noqa: E402

LLAMA_TOKENIZE = pathlib.Path(os.environ.get(
    "LLAMA_CPP_ROOT", pathlib.Path.home() / ".cache/attn-cli/llama.cpp/3.22.1")) / \
    "build/bin/llama-tokenize"
LINES = ["Once upon a time", "The cat sat", "Lily said hi", "They went home", "The end"]
MAX_REPLY = 48
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run(args, status=0):
    r = subprocess.run(args, capture_output=True)
    if status is not None and r.returncode != status:
        raise SystemExit(f"FAIL {args}: status {r.returncode}\n{r.stderr.decode(errors='replace')}")
    return r


def llama_tokenize(model, text, tmp):
    path = os.path.join(tmp, "prompt.txt")
    with open(path, "wb") as f:
        f.write(text.encode())
    out = run([str(LLAMA_TOKENIZE), "-m", model, "-f", path, "--ids", "--no-bos", "--no-escape",
               "--log-disable"]).stdout.decode()
    return json.loads(out.strip().splitlines()[-1])


def events(out, kind):
    return [j for j in map(json.loads, out.decode().splitlines()) if j.get("event") == kind]


def render(env, template, messages):
    # Both models' BOS and EOS texts (Qwen2.5's template writes neither).
    return env.from_string(template).render(messages=messages, tools=None, documents=None,
                                            add_generation_prompt=True, bos_token="<s>",
                                            eos_token="</s>")


def check_prompts(cli, model, env, templates, tmp):
    user = [{"role": "user", "content": "Once upon a time"}]
    for name in ["default", "chatml"]:
        r = run([cli, "generate", "-m", model, "--chat", "--chat-template", name, "-p",
                 user[0]["content"], "-n", "1", "--json"])
        want = llama_tokenize(model, render(env, templates[name], user), tmp)
        check(events(r.stdout, "prefill")[0]["ids"] == want,
              f"generate --chat --chat-template {name}: the ids of jinja2 + llama-tokenize")
    r = run([cli, "generate", "-m", model, "--chat", "--chat-template", "nope", "-p", "hi"],
            status=2)
    check("chat templates ('default', 'tool_use', 'chatml')" in r.stderr.decode(),
          "an unknown name lists the file's templates")
    r = run([cli, "generate", "-m", model, "--chat", "--chat-template", "tool_use", "-p", "hi"],
            status=2)
    check("chat template 'tool_use'" in r.stderr.decode(),
          "tool_use without tools is refused naming the template: " + r.stderr.decode().strip())


def greedy(cli, model, ids, stops):
    """Greedy ids after `ids` from a fresh cache, up to and with the first end-of-turn id, and
    their text as generate prints it."""
    base = [cli, "generate", "-m", model, "--no-bos", "--temp", "0", "--ignore-eos", "--tokens",
            ",".join(map(str, ids))]
    out = [j["id"] for j in events(run(base + ["-n", str(MAX_REPLY), "--json"]).stdout, "token")]
    for k, i in enumerate(out):
        if i in stops:
            out = out[:k + 1]
            break
    text = run(base + ["-n", str(len(out))]).stdout.decode()
    prompt = run(base + ["-n", "0"]).stdout.decode()
    return out, text[len(prompt) - 1:-1]


def check_conversation(cli, model, env, template, flags, tmp):
    """Five turns of `attn-cli chat -m model flags` on a pseudo-terminal, each against its
    rendering by jinja2 (`template`'s source) tokenized by llama-tokenize. Returns how many
    replies ended at <|im_end|>."""
    name = os.path.basename(model)
    err = os.path.join(tmp, "stderr")
    argv = [cli, "chat", "-m", model, "--temp", "0", "-n", str(MAX_REPLY)] + flags
    pid, fd = chat_pty.spawn(argv, err)
    shown = chat_pty.read_until(fd, b"> ")
    for line in LINES:
        os.write(fd, line.encode() + b"\n")
        shown += chat_pty.read_until(fd, b"\n> ")
    os.write(fd, b"/exit\n")
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    check(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"{name}: chat ends by /exit")
    replies = shown.decode().split("\n> ")
    check(replies[0].startswith("> ") and replies[-1] == "", f"{name}: a prompt before each turn")
    replies = [replies[0][2:]] + replies[1:-1]
    counts = [int(m) for m in re.findall(r"prompt eval time .*?/\s*(\d+) tokens",
                                         open(err).read())]
    check(len(replies) == len(LINES) and len(counts) == len(LINES),
          f"{name}: {len(LINES)} replies and timings: {len(replies)}, {len(counts)}")
    stops = {1, 2, 513}  # EOS (<s> in stories260K's metadata), </s>, <|im_end|> (its EOT)
    messages, cache, ended = [], [], 0
    for k, line in enumerate(LINES[:min(len(replies), len(counts))]):
        messages.append({"role": "user", "content": line})
        ids = llama_tokenize(model, render(env, template, messages), tmp)
        common = 0
        while common < min(len(cache), len(ids) - 1) and cache[common] == ids[common]:
            common += 1
        check(counts[k] == len(ids) - common,
              f"{name} turn {k + 1}: prefilled {counts[k]} of {len(ids)} ids, "
              f"{len(ids) - common} new")
        out, text = greedy(cli, model, ids, stops)
        ended += out[-1] == 513
        check(replies[k] == text, f"{name} turn {k + 1}: the reply is greedy generation: {text!r}")
        messages.append({"role": "assistant", "content": replies[k]})
        cache = ids + out
    return ended


def main():
    cli = sys.argv[1]
    try:
        import check_chat_templates
    except SystemExit:
        raise SystemExit(77)
    if not (chat_model.SRC / "gguf-py").is_dir() or not chat_model.TEMPLATES.is_dir() or \
            not LLAMA_TOKENIZE.is_file():
        print(f"SKIP: llama.cpp's sources or llama-tokenize are not in {LLAMA_TOKENIZE.parents[2]}"
              " (bench/llama_cpp.sh)")
        raise SystemExit(77)
    env = check_chat_templates.environment()
    templates = {t["name"]: t["template"] for t in chat_model.templates()}
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "instruct.gguf")
        chat_model.write(pathlib.Path(model))
        check_prompts(cli, model, env, templates, tmp)
        ended = check_conversation(cli, model, env, templates["default"], [], tmp)
        check(ended >= 3, f"replies ended at <|im_end|>: {ended} of {len(LINES)}")
        turns = GOLDEN / "chat_templates" / "turns.jinja"
        check_conversation(cli, str(chat_model.STORIES), env, turns.read_text(),
                           ["--chat-template", str(turns)], tmp)
    print(f"{len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
