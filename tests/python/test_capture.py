"""attn-cli capture (issue 51): shards read with NumPy alone (safetensors_np: 8-byte header length,
JSON, data), their ids the corpus's stream cut into rows (BOS first) and their activations
run_with_cache's on the same rows; a restart after the last whole shard gives the same files;
bad input refused with exit 2."""
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

import attn
import safetensors_np

SOURCE = pathlib.Path(os.environ.get("ATTN_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
CLI = os.environ.get("ATTN_CLI", str(SOURCE / "build" / "apps" / "attn-cli"))
STORIES = SOURCE / "weights" / "stories260K.gguf"
HOOKS = ["blocks.1.hook_resid_post", "blocks.3.hook_mlp_out"]
LINES = ["Once upon a time, there was a little girl named Lily.",
         "She liked to play in the park with her dog.", "",
         "One day, the sun was hot and they went home to drink water.",
         "Tim saw a big red ball and wanted to kick it very far."] * 3
CTX = 16


def capture(out, corpus, *flags, ctx=CTX):
    return subprocess.run([CLI, "capture", "-m", str(STORIES), "--hooks", ",".join(HOOKS),
                           "--corpus", str(corpus), "--out", str(out), "--row-tokens", str(ctx),
                           "-b", "2", "-t", "1", *flags], capture_output=True, text=True)


def shards(out):
    m = json.loads((out / "manifest.json").read_text())
    return m, [safetensors_np.load(out / s["file"]) for s in m["shards"]]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("corpus")
    (d / "c.txt").write_text("\n".join(LINES) + "\n")
    (d / "c.jsonl").write_text("\n".join(json.dumps({"text": t + "\n"}) for t in LINES) + "\n")
    return d


def test_shards_hold_the_rows_and_run_with_caches_activations(corpus, tmp_path):
    # 2 rows per shard: 16 positions x (2 hooks x 64 + 1) x 4 bytes = 8256 bytes a row
    r = capture(tmp_path / "out", corpus / "c.txt", "--shard-size", "17K")
    assert r.returncode == 0, r.stderr
    assert "tokens/s" in r.stderr and "ETA" in r.stderr
    m, parts = shards(tmp_path / "out")
    assert m["done"] and len(parts) > 1
    assert all(s["rows"] == 2 for s in m["shards"][:-1])
    ids = np.concatenate([p["tokens"] for p in parts]).astype(np.int64).reshape(-1, CTX)
    model = attn.Model.from_pretrained(str(STORIES), max_seq_len=CTX, threads=1)
    tok = model.tokenizer
    stream = [i for t in LINES for i in tok.encode(t + "\n", add_special_tokens=False)]
    rows = len(stream) // (CTX - 1)
    want = np.array([[1] + stream[r * (CTX - 1):(r + 1) * (CTX - 1)] for r in range(rows)])
    assert np.array_equal(ids, want)
    for h in HOOKS:
        got = np.concatenate([p[h] for p in parts]).reshape(rows, CTX, -1)
        for r in range(rows):
            model.reset()
            _, cache = model.run_with_cache(want[r:r + 1], names=h)
            np.testing.assert_allclose(got[r], np.asarray(cache[h])[0], rtol=1e-5, atol=1e-5)
    # JSON Lines of the same texts: the same files
    r = capture(tmp_path / "jl", corpus / "c.jsonl", "--shard-size", "17K")
    assert r.returncode == 0, r.stderr
    for a, b in zip(shards(tmp_path / "out")[1], shards(tmp_path / "jl")[1]):
        assert all(np.array_equal(a[k], b[k]) for k in a)


def test_a_restart_continues_after_the_last_whole_shard(corpus, tmp_path):
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    assert capture(whole, corpus / "c.txt", "--shard-size", "17K").returncode == 0
    assert capture(cut, corpus / "c.txt", "--shard-size", "17K").returncode == 0
    m = json.loads((cut / "manifest.json").read_text())
    for s in m["shards"][1:]:  # as if stopped after the first shard
        (cut / s["file"]).unlink()
    m["rows"], m["shards"], m["done"] = m["shards"][0]["rows"], m["shards"][:1], False
    (cut / "manifest.json").write_text(json.dumps(m))
    r = capture(cut, corpus / "c.txt", "--shard-size", "17K")
    assert r.returncode == 0, r.stderr
    assert (cut / "manifest.json").read_bytes() == (whole / "manifest.json").read_bytes()
    for s in m["shards"] + json.loads((whole / "manifest.json").read_text())["shards"]:
        assert (cut / s["file"]).read_bytes() == (whole / s["file"]).read_bytes()
    # a finished capture run again does nothing; other settings are refused naming the key
    assert capture(cut, corpus / "c.txt", "--shard-size", "17K").returncode == 0
    r = capture(cut, corpus / "c.txt", "--shard-size", "17K", ctx=8)
    assert r.returncode == 2 and "manifest.json" in r.stderr and "'ctx'" in r.stderr


def test_bad_input_is_refused(corpus, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"txt": "no"}\n')
    r = capture(tmp_path / "o1", bad)
    assert r.returncode == 2 and "bad.jsonl" in r.stderr and "line 2" in r.stderr
    r = subprocess.run([CLI, "capture", "-m", str(STORIES), "--hooks",
                        "blocks.0.attn.hook_pattern", "--corpus", str(corpus / "c.txt"),
                        "--out", str(tmp_path / "o2")], capture_output=True, text=True)
    assert r.returncode == 2 and "hook_pattern" in r.stderr
    r = subprocess.run([CLI, "capture", "-m", str(STORIES), "--hooks", "blocks.9.hook_resid_post",
                        "--corpus", str(corpus / "c.txt"), "--out", str(tmp_path / "o3")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "blocks.9" in r.stderr
    r = capture(tmp_path / "o4", corpus / "c.txt", "--shard-size", "lots")
    assert r.returncode == 2 and "--shard-size" in r.stderr
