#!/usr/bin/env python3
"""Checks that the library speaks for no front and takes nothing of the process from it.

  tools/check_words.py --lib lib

The library's messages reach every front (attn-cli, the Python module, examples/consumer), so they
name files, config keys, engine options and tensors; a front says which of its own flags or
arguments sets an option (attn::InputError::setting, lib/attn/error.hpp) and puts its own name
before the message. And the process is the front's: a Python interpreter turns SIGINT into
KeyboardInterrupt, so a library that installed signal handlers or ended the process would end its
host (issue 46; the front's handlers call lib/attn/io/signals.hpp's registry). This scans every
.hpp and .cpp under lib/ (comments are skipped; raw strings, character literals and digit
separators are read as C++ reads them) for
- a string literal holding "--" followed by a letter (a flag);
- a string literal naming the program as a message prefix or a command line ("attn-cli:",
  "attn-cli run", "attn-cli ..."); the name of a file format ("attn-cli session 1") is fine;
- outside comments and literals, a call that installs a signal handler, changes the signal mask,
  raises a signal or ends the process (sigaction, signal, sigprocmask, raise, exit, _exit, ...).
ALLOWED lists a file and the kinds it may hold, each with its reason.
Prints a line per finding and "N passed, N failed"; exit status 1 on any failure.
"""
import argparse
import pathlib
import re
import sys

ALLOWED = {}  # "attn/...cpp": {"flag", "program", "process"}; none needed today

FLAG = re.compile(r"--[A-Za-z]")
COMMANDS = "run|decode|heatmap|bench|generate|tokenize|view|diff"
PROGRAM = re.compile(r"attn-cli(:|\s+(" + COMMANDS + r")\b|\s+(\.\.\.|\u2026))")
PROCESS = re.compile(r"(?<![\w.>])(?:std\s*::\s*|::\s*)?"
                     r"(sigaction|signal|bsd_signal|sysv_signal|sigset|"
                     r"sigprocmask|pthread_sigmask|raise|kill|exit|_exit|_Exit|quick_exit)\s*\(")
RAW_OPEN = re.compile(r'(?:u8|[uUL])?R"([^()\\\s]{0,16})\(')


def scan(text):
    """Returns ([(line, literal body)] for each string literal outside comments, the code): the
    code is the text with comments and literals blanked, its newlines kept."""
    found, code = [], []
    i, n, line = 0, len(text), 1

    def blank(a, b):
        code.append(re.sub(r"[^\n]", " ", text[a:b]))

    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            code.append(c)
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            blank(i, end)
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            line += text.count("\n", i, end)
            blank(i, end)
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"' and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            found.append((line, text[i + 1:j]))
            blank(i, min(j + 1, n))
            i = j + 1
        elif c == "'":
            if i > 0 and text[i - 1].isalnum():  # a digit separator: 20'000'000
                code.append(c)
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != "'" and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            blank(i, min(j + 1, n))
            i = j + 1
        elif c.isalnum() or c == "_":  # an identifier or number whole, so u8R" starts a raw string
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            if j < n and text[j] == '"' and text[i:j] in ("u8R", "uR", "UR", "LR", "R"):
                m = RAW_OPEN.match(text, i)
                if m:
                    close = ")" + m.group(1) + '"'
                    end = text.find(close, m.end())
                    end = n if end < 0 else end
                    found.append((line, text[m.end():end]))
                    line += text.count("\n", i, end)
                    blank(i, min(end + len(close), n))
                    i = end + len(close)
                    continue
            code.append(text[i:j])
            i = j
        else:
            code.append(c)
            i += 1
    return found, "".join(code)


def findings(text):
    """Yields (kind, line, what) for each finding in one file's text."""
    found, code = scan(text)
    for line, body in found:
        if FLAG.search(body):
            yield "flag", line, f"a string names a flag: \"{body[:80]}\""
        if PROGRAM.search(body):
            yield "program", line, f"a string names the program: \"{body[:80]}\""
    for m in PROCESS.finditer(code):
        line = code.count("\n", 0, m.start()) + 1
        yield "process", line, f"{m.group(1)}(): the process's signals and exit are the front's"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    args = ap.parse_args()
    lib = pathlib.Path(args.lib).resolve()
    failures, passed = [], 0
    for path in sorted(p for p in lib.rglob("*") if p.suffix in (".hpp", ".cpp")):
        rel = path.relative_to(lib).as_posix()
        allowed = ALLOWED.get(rel, set())
        found = [(line, what) for kind, line, what in findings(path.read_text(errors="replace"))
                 if kind not in allowed]
        for line, what in found:
            failures.append(f"lib/{rel}:{line}: {what}")
        if not found:
            passed += 1
    for f in failures:
        print(f)
    print(f"{passed} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
