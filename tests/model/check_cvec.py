#!/usr/bin/python3
"""Control vectors against llama.cpp (ctest model.cvector), on weights/stories260K.gguf.

- Files written by gguf-py (llama.cpp's own writer), read by llama.cpp's common_control_vector_load
  and applied with llama_set_adapter_cvec (tests/golden/llama_cvec.cpp, built against the cached
  libllama), and by attn (Python's model.steer, and attn-cli generate's --control-vector,
  --control-vector-scaled and --control-vector-layer-range): the logits of every position within
  F32 tolerance (TOL relative to the row's largest), on one file, on a layer range and on two
  files with scales.
- attn-cli cvector's file (mean and PCA methods) read by llama.cpp (the same program) giving the
  logits attn gives with it, and its directions equal to NumPy's mean difference / first principal
  direction of the hidden states llama-cvector-generator takes (every position's residual after
  each block but the last, pairs padded, rows of the difference <= 1e-6 everywhere dropped).
Skips (77) when llama.cpp's sources or build are not cached. Exit 1 when a check fails.
"""
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
LLAMA_CPP = pathlib.Path(os.environ.get(
    "LLAMA_CPP_ROOT", pathlib.Path.home() / ".cache/attn-cli/llama.cpp/3.22.1"))
BUILD = LLAMA_CPP / "build"
CACHE = pathlib.Path.home() / ".cache/attn-cli"
MODEL = ROOT / "weights/stories260K.gguf"
ATTN_CLI = os.environ.get("ATTN_CLI", "")
TOL = 1e-4
TOKENS = [1, 100, 200, 300, 400, 50, 60, 70, 80, 90, 345, 12]

if not (LLAMA_CPP / "src/gguf-py/gguf").is_dir():
    print(f"SKIP: llama.cpp's sources are not cached in {LLAMA_CPP}/src")
    sys.exit(77)
if not (BUILD / "bin/libllama.so").exists() or not (BUILD / "bin/libllama-common.so").exists():
    print(f"SKIP: llama.cpp's build (libllama, libllama-common) is not in {BUILD}/bin")
    sys.exit(77)
sys.path.insert(0, str(LLAMA_CPP / "src/gguf-py"))
import gguf  # noqa: E402
import attn  # noqa: E402

failed = 0


def check(name, ok, detail=""):
    global failed
    print(("ok    " if ok else "FAIL  ") + name + (f": {detail}" if detail else ""))
    failed += 0 if ok else 1


def program():
    source = ROOT / "tests/golden/llama_cvec.cpp"
    exe = CACHE / f"llama_cvec-{hashlib.sha256(source.read_bytes()).hexdigest()[:16]}"
    if not exe.exists():
        src = LLAMA_CPP / "src"
        subprocess.run(["g++", "-O1", "-std=c++17", f"-I{src}/include", f"-I{src}/ggml/include",
                        f"-I{src}/common", str(source), "-o", str(exe) + ".tmp",
                        f"-L{BUILD}/bin", "-lllama-common", "-lllama", "-lggml", "-lggml-base",
                        f"-Wl,-rpath,{BUILD}/bin"], check=True)
        os.rename(str(exe) + ".tmp", exe)
    return exe


def llama_logits(exe, files, start=0, end=0):
    """llama.cpp's logits of every position of TOKENS with files [(path, scale)] applied."""
    with tempfile.TemporaryDirectory() as d:
        out = pathlib.Path(d) / "logits.bin"
        spec = ",".join(f"{p}:{s}" for p, s in files)
        r = subprocess.run([str(exe), str(MODEL), str(out), str(start), str(end), spec,
                            *map(str, TOKENS)], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"llama_cvec exit {r.returncode}: {r.stderr}")
        n_vocab = int(r.stdout.split()[1])
        return np.fromfile(out, dtype=np.float32).reshape(len(TOKENS), n_vocab).astype(np.float64)


def write_vector(path, rows, hint="llama"):
    """A control vector as llama-cvector-generator writes one, by gguf-py: {layer: [dim]}."""
    w = gguf.GGUFWriter(str(path), "controlvector")
    w.add_string("controlvector.model_hint", hint)
    w.add_int32("controlvector.layer_count", len(rows))
    for layer, v in rows.items():
        w.add_tensor(f"direction.{layer}", np.asarray(v, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def rel(got, want):
    return float(np.max(np.abs(got - want) / np.max(np.abs(want), axis=1, keepdims=True)))


def attn_logits(m, tokens=TOKENS):
    m.reset()
    return m.forward(np.array([tokens]), 0, all_positions=True)[0].astype(np.float64)


def cli_top(flags):
    """attn-cli generate's first step: {id: logit} of its top 10 after the prompt."""
    r = subprocess.run([ATTN_CLI, "generate", "-m", str(MODEL), "--tokens",
                        ",".join(map(str, TOKENS)), "-n", "1", "--json", "-t", "1", *flags],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"attn-cli generate exit {r.returncode}: {r.stderr}")
    for line in r.stdout.splitlines():
        e = json.loads(line)
        if e.get("event") == "token":
            return {int(t["id"]): float(t["logit"]) for t in e["top"]}
    raise RuntimeError("no token event")


def main():
    exe = program()
    m = attn.Model.from_pretrained(str(MODEL), max_seq_len=64, threads=1)
    n_layers, dim = m.args.n_layers, m.args.dim
    rng = np.random.default_rng(7)
    plain = attn_logits(m)
    with tempfile.TemporaryDirectory() as d:
        d = pathlib.Path(d)
        a, b = d / "a.gguf", d / "b.gguf"
        write_vector(a, {l: rng.normal(0, 0.5, dim) for l in range(1, n_layers)})
        # b: a layer twice (llama.cpp adds them), one layer missing
        rows_b = {l: rng.normal(0, 0.5, dim) for l in range(2, n_layers)}
        write_vector(b, rows_b)
        for files, rng_, py_scale in [([(a, 1.0)], (0, 0), 1.0), ([(a, -2.5)], (2, 3), -2.5),
                                      ([(a, 0.7), (b, -1.3)], (1, 3), None)]:
            name = " + ".join(f"{p.name}*{s}" for p, s in files) + f" layers {rng_}"
            want = llama_logits(exe, files, *rng_)
            check(f"{name}: the vector moves llama.cpp's logits", rel(plain, want) > 1e-2,
                  f"{rel(plain, want):.3g}")
            if py_scale is not None:
                m.steer(str(files[0][0]), scale=py_scale,
                        layers=None if rng_ == (0, 0) else rng_)
                got = attn_logits(m)
                check(f"{name}: Python steer == llama.cpp", rel(got, want) < TOL,
                      f"{rel(got, want):.3g}")
            flags = []
            for p, s in files:
                flags += ["--control-vector", str(p)] if s == 1.0 else \
                    ["--control-vector-scaled", f"{p}:{s}"]
            if rng_ != (0, 0):
                flags += ["--control-vector-layer-range", str(rng_[0]), str(rng_[1])]
            if ATTN_CLI:
                top = cli_top(flags)
                err = max(abs(v - want[-1][i]) for i, v in top.items()) / np.max(np.abs(want[-1]))
                check(f"{name}: attn-cli generate's top logits == llama.cpp's", err < TOL,
                      f"{err:.3g}")
        m.steer(None)
        check("steer(None): the plain logits again", rel(attn_logits(m), plain) == 0)
        if ATTN_CLI:
            check_cvector(exe, m, d)
    print(f"{failed} failed")
    return 1 if failed else 0


def cvector_reference(m, pos, neg, method):
    """NumPy's directions from attn's hidden states, as llama-cvector-generator computes them."""
    tok = m.tokenizer
    pad = tok.encode(" ", add_special_tokens=False)[-1]
    diffs = [[] for _ in range(m.args.n_layers - 1)]
    for p, n in zip(pos, neg):
        ids = [tok.encode(t) for t in (p, n)]
        T = max(map(len, ids))
        ids = [i + [pad] * (T - len(i)) for i in ids]
        hs = []
        for i in ids:
            m.reset()
            _, cache = m.run_with_cache(np.array([i]), names=lambda s: s.endswith("hook_resid_post"))
            hs.append([np.asarray(cache[f"blocks.{l}.hook_resid_post"])[0].astype(np.float64)
                       for l in range(m.args.n_layers - 1)])
        for l in range(m.args.n_layers - 1):
            dl = hs[0][l] - hs[1][l]
            diffs[l].append(dl[~np.all(dl <= 1e-6, axis=1)])
    out = []
    for l in range(m.args.n_layers - 1):
        D = np.concatenate(diffs[l])
        if method == "mean":
            v = D.mean(axis=0)
        else:
            w, vecs = np.linalg.eigh(D.T @ D)
            v = vecs[:, -1]
        out.append(v / np.linalg.norm(v))
    return out


def check_cvector(exe, m, d):
    pos = ["Once upon a time there was a happy girl", "She was very kind and good"]
    neg = ["Once upon a time there was a sad boy", "He was very mean and angry"]
    (d / "pos.txt").write_text("\n".join(pos) + "\n\n")
    (d / "neg.txt").write_text("\n".join(neg) + "\n")
    for method in ["mean", "pca"]:
        out = d / f"cvec-{method}.gguf"
        r = subprocess.run([ATTN_CLI, "cvector", "-m", str(MODEL), "--positive-file",
                            str(d / "pos.txt"), "--negative-file", str(d / "neg.txt"), "--method",
                            method, "-o", str(out), "-t", "1"], capture_output=True, text=True)
        check(f"cvector --method {method}: exit 0", r.returncode == 0, r.stderr.strip()[-300:])
        if r.returncode != 0:
            continue
        reader = gguf.GGUFReader(str(out))
        got = {t.name: np.array(t.data, dtype=np.float64) for t in reader.tensors}
        want = cvector_reference(m, pos, neg, method)
        err = 0.0
        for l, v in enumerate(want, start=1):
            g = got[f"direction.{l}"]
            if method == "pca":
                g = g * np.sign(g @ v)  # a principal direction's sign is arbitrary
            err = max(err, float(np.max(np.abs(g - v))))
        check(f"cvector --method {method}: the directions == NumPy's",
              len(got) == m.args.n_layers - 1 and err < 1e-4, f"{err:.3g}")
        want_logits = llama_logits(exe, [(out, 4.0)])
        m.steer(str(out), scale=4.0)
        check(f"cvector --method {method}: llama.cpp reads it and applies what attn applies",
              rel(attn_logits(m), want_logits) < TOL, f"{rel(attn_logits(m), want_logits):.3g}")
        m.steer(None)


if __name__ == "__main__":
    sys.exit(main())
