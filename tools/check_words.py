#!/usr/bin/env python3
"""Checks that no string literal in the library names a command-line flag.

  tools/check_words.py --lib lib

The library's messages reach every front (attn-cli, the Python module, examples/consumer), so they
name files, config keys, engine options and tensors; a front says which of its own flags or
arguments sets an option (attn::InputError::setting, lib/attn/error.hpp). This scans every .hpp
and .cpp under lib/ for a string literal (comments are skipped; raw strings, character literals
and digit separators are read as C++ reads them) holding "--" followed by a letter.
Prints a line per literal found and "N passed, N failed"; exit status 1 on any failure.
"""
import argparse
import pathlib
import re
import sys

ALLOWED = set()

FLAG = re.compile(r"--[A-Za-z]")
RAW_OPEN = re.compile(r'(?:u8|[uUL])?R"([^()\\\s]{0,16})\(')


def literals(text):
    """Yields (line, literal body) for each string literal outside comments."""
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            line += text.count("\n", i, end)
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"' and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            yield line, text[i + 1:j]
            i = j + 1
        elif c == "'":
            if i > 0 and text[i - 1].isalnum():  # a digit separator: 20'000'000
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != "'" and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
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
                    yield line, text[m.end():end]
                    line += text.count("\n", i, end)
                    i = end + len(close)
                    continue
            i = j
        else:
            i += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    args = ap.parse_args()
    lib = pathlib.Path(args.lib).resolve()
    failures, passed = [], 0
    for path in sorted(p for p in lib.rglob("*") if p.suffix in (".hpp", ".cpp")):
        rel = path.relative_to(lib).as_posix()
        if rel in ALLOWED:
            continue
        found = [(line, body) for line, body in literals(path.read_text(errors="replace"))
                 if FLAG.search(body)]
        for line, body in found:
            failures.append(f"lib/{rel}:{line}: a string names a flag: \"{body[:80]}\"")
        if not found:
            passed += 1
    for f in failures:
        print(f)
    print(f"{passed} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
