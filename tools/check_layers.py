#!/usr/bin/env python3
"""Checks the library's layers as the tree states them (docs/design.md).

  tools/check_layers.py --lib lib --generated BUILD/lib/generated --cxx c++

- every public header (under lib/attn, outside detail/) compiles on its own;
- no public header includes a third-party header or a detail/ header;
- the layer rule: lib/attn/*.hpp (the vocabulary) include no layer; io includes the vocabulary
  and io; kernels the vocabulary and kernels; text (the tokenizers) the vocabulary, io and text;
  model anything in lib but text and engine; engine anything in lib; nothing in lib includes
  apps;
- no include cycle among the library's files.
Prints a line per failure and "N passed, N failed"; exit status 1 on any failure.
"""
import argparse
import concurrent.futures
import pathlib
import re
import subprocess
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
LAYERS = ("io", "kernels", "model", "text", "engine")
ALLOWED = {"vocabulary": set(), "io": {"io"}, "kernels": {"kernels"}, "text": {"io", "text"},
           "model": {"io", "kernels", "model"},
           "engine": {"io", "kernels", "model", "text", "engine"}}


def layer_of(rel):  # rel: path below lib/, e.g. attn/kernels/ops.hpp
    parts = pathlib.PurePosixPath(rel).parts
    return parts[1] if len(parts) > 2 and parts[1] in LAYERS else "vocabulary"


def includes(path):
    return INCLUDE.findall(path.read_text(errors="replace"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--generated", required=True, help="folder holding attn/version.hpp")
    ap.add_argument("--cxx", required=True)
    args = ap.parse_args()
    lib = pathlib.Path(args.lib).resolve()
    files = sorted(p for p in lib.rglob("attn/**/*") if p.suffix in (".hpp", ".cpp"))
    rel = {p: p.relative_to(lib).as_posix() for p in files}
    by_rel = {r: p for p, r in rel.items()}
    failures, passed = [], 0

    def check(ok, message):
        nonlocal passed
        if ok:
            passed += 1
        else:
            failures.append(message)

    public = [p for p in files if p.suffix == ".hpp" and "detail" not in p.relative_to(lib).parts]
    graph = {}
    for p in files:
        r = rel[p]
        graph[r] = []
        for kind, name in includes(p):
            if kind == '"' and name.startswith("attn/"):
                graph[r].append(name)
                if name != "attn/version.hpp":
                    check(name in by_rel, f"{r}: includes {name}, which is not in lib/")
                if p in public:
                    check("/detail/" not in name, f"{r}: a public header includes {name} (detail)")
                to = layer_of(name)
                check(to == "vocabulary" or to in ALLOWED[layer_of(r)],
                      f"{r}: the {layer_of(r)} layer includes {name} ({to})")
            elif kind == '"':
                check(False, f"{r}: includes \"{name}\", outside the library (apps?)")
            elif p in public:
                std = "/" not in name and "." not in name
                check(std, f"{r}: a public header includes <{name}>, not a standard header")

    # Include cycles: depth-first search over the library's own includes.
    state, stack = {}, []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in graph.get(node, []):
            if nxt not in graph:
                continue
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                failures.append("include cycle: " + " -> ".join(cycle))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    passed += 1 if not any(f.startswith("include cycle") for f in failures) else 0

    def compiles(p):
        cmd = [args.cxx, "-std=c++20", "-fsyntax-only", "-Wall", "-Wextra", "-I", str(lib), "-I",
               args.generated, "-x", "c++", str(p)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        return p, r.returncode == 0, r.stderr.strip().splitlines()[:3]

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for p, ok, err in pool.map(compiles, public):
            check(ok, f"{rel[p]}: does not compile on its own: " + " | ".join(err))

    for f in failures:
        print("FAIL " + f)
    print(f"{passed} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
