#!/usr/bin/python3
"""attn-cli capture's rate against a plain forward over the same rows (docs/perf/capture.md).

    PYTHONPATH=build/python /usr/bin/python3 bench/capture_rate.py [MODEL] [THREADS]

Writes a corpus (stories-like lines, CAPTURE_LINES of them, 2000 by default), runs `attn-cli capture` of one site into a
temporary folder (its time as it reports it, from the open model to the last shard: tokenizing,
forward calls, copies and the files, in the page cache), reads back the ids it ran
from the shards, and times attn.Model.forward over the same rows in the same batches and
threads. Each side runs REPEAT times, interleaved; the best of each is reported.
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

import attn

ROOT = pathlib.Path(__file__).resolve().parents[1]
CLI = os.environ.get("ATTN_CLI", str(ROOT / "build/apps/attn-cli"))
MODEL = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "weights/stories260K.gguf")
THREADS = sys.argv[2] if len(sys.argv) > 2 else "2"
CTX, BATCH, REPEAT = 256, 8, 2
LINES_N = int(os.environ.get("CAPTURE_LINES", "2000"))
HOOK = "blocks.2.hook_resid_post"
LINES = ["Once upon a time, there was a little girl named Lily.",
         "She liked to play in the park with her dog Max every day.",
         "One day, the sun was hot and they went home to drink cold water.",
         "Tim saw a big red ball near the tree and wanted to kick it very far."]


def main():
    with tempfile.TemporaryDirectory() as d:
        d = pathlib.Path(d)
        corpus = d / "corpus.txt"
        corpus.write_text("\n".join(LINES[i % 4] + f" Day {i}." for i in range(LINES_N)) + "\n")
        cap, fwd = [], []
        for r in range(REPEAT):
            out = d / f"out{r}"
            r = subprocess.run([CLI, "capture", "-m", MODEL, "--hooks", HOOK, "--corpus",
                                str(corpus), "--out", str(out), "--row-tokens", str(CTX), "-b",
                                str(BATCH), "-t", THREADS, "--shard-size", "64MB"], check=True,
                               capture_output=True, text=True)
            # its own time after the model is open: tokenizing, forward calls, copies, shards
            cap.append(float(r.stderr.split(" in ")[-2].split(" s,")[0]))
            m = json.loads((out / "manifest.json").read_text())
            ids = []
            for s in m["shards"]:
                raw = (out / s["file"]).read_bytes()
                n = int.from_bytes(raw[:8], "little")
                h = json.loads(raw[8:8 + n])["tokens"]
                a, b = h["data_offsets"]
                ids.append(np.frombuffer(raw[8 + n + a:8 + n + b], np.float32))
            rows = np.concatenate(ids).astype(np.int64).reshape(-1, CTX)
            model = attn.Model.from_pretrained(MODEL, max_seq_len=CTX, max_batch_size=BATCH,
                                               threads=int(THREADS))
            t0 = time.perf_counter()
            for b in range(0, len(rows), BATCH):
                model.reset()
                model.forward(rows[b:b + BATCH], 0)
            fwd.append(time.perf_counter() - t0)
            del model
        tokens = rows.size
        print(json.dumps({"tokens": int(tokens), "capture_s": min(cap), "forward_s": min(fwd),
                          "capture_tok_s": tokens / min(cap), "forward_tok_s": tokens / min(fwd),
                          "ratio": min(cap) / min(fwd), "all_capture_s": cap,
                          "all_forward_s": fwd}))


if __name__ == "__main__":
    main()
