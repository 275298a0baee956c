"""bench/compare_report.py, the table at the end of a bench/compare.sh run, on a folder of made-up
raw outputs in the layout a run leaves (cli.T.R.json from `attn-cli bench --json`, llama-bench's
-o json, llama-batched-bench's JSON lines): every row is there, each ratio is attn-cli's figure
over llama.cpp's, and --compute q8's rows sit beside the same file's llama.cpp rows. A report
that fails only at the end of a real run loses the run (it did once, on the q8 rows)."""
import json
import pathlib
import subprocess
import sys

import pytest

REPORT = pathlib.Path(__file__).resolve().parents[2] / "bench" / "compare_report.py"
TYPES = ("f32", "q8_0")
BATCHES = {"f32": (1, 2, 4, 8, 16), "q8_0": (1, 4, 16)}


def cli_json(prefill, decode, per_token, batches):
    """attn-cli bench --json's keys the report reads; B tokens/s = per_token * B."""
    rows = [{"batch": b, "tokens_per_s": per_token * b, "step_vs_batch1": 1.0 + b / 8}
            for b in batches]
    w = {"prefill_positions_per_s": prefill, "decode_steps_per_s": decode,
         "batched_decode": rows, "prefill_fraction_of_fma_peak": 0.5,
         "decode_fraction_of_stream": 0.75}
    return {"prefill_positions": 512, "threads": 2, "version": "0.0.0", "kernels": "avx512",
            "openblas_core": "Zen", "fma_isa": "avx512", "decode_steps": 48, "weight_types": [w]}


def llama_bench(ts):
    return [{"samples_ts": [ts - 1, ts + 1], "avg_ts": ts, "backends": "CPU", "cpu_info": "x",
             "flash_attn": -1, "type_k": "f16", "type_v": "f16", "n_batch": 2048,
             "n_ubatch": 512}]


def batched_bench(per_token, batches):
    return "".join(json.dumps({"n_kv_max": 8192, "pl": b, "speed_tg": per_token * b}) + "\n"
                   for b in batches)


def write_run(d, rounds):
    (d / "failed").write_text("")
    for r in range(1, rounds + 1):
        for t in TYPES:
            bs = BATCHES[t]
            # attn-cli: prefill 300 + r, decode 60 + r, batched 50 tokens/s a sequence;
            # llama.cpp: 200 (best sample 201), 40, 25.
            (d / f"cli.{t}.{r}.json").write_text(json.dumps(cli_json(300 + r, 60 + r, 50, bs)))
            (d / f"cli.{t}c.{r}.json").write_text(json.dumps(cli_json(400, 80, 100, bs)))
            (d / f"llama.{t}.{r}.pp.json").write_text(json.dumps(llama_bench(200)))
            (d / f"llama.{t}.{r}.tg.json").write_text(json.dumps(llama_bench(40)))
            (d / f"llama.{t}.{r}.bb.jsonl").write_text(batched_bench(25, bs))


def report(d, rounds, compute_q8="1"):
    args = [str(d), str(rounds), "0", "unset", str(d), "8192", "today", "1", "0.1", "0.2",
            " ".join(TYPES), "", "0", "0", "2", "/llama/bin", "32", "", compute_q8]
    out = subprocess.run([sys.executable, str(REPORT), *args], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


def row(text, label):
    """The cells of the table row whose label is `label`."""
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == label:
            return cells[1:]
    raise AssertionError(f"no row {label!r} in:\n{text}")


@pytest.mark.parametrize("rounds", [1, 3])
def test_every_row_with_its_ratio(tmp_path, rounds):
    write_run(tmp_path, rounds)
    out = report(tmp_path, rounds)
    median = 300 + (rounds + 1) / 2  # of 301..300+rounds
    # prefill: llama-bench's best sample (201) against attn-cli's best and median
    assert row(out, "prefill 512, F32 weights (positions/s)") == [
        f"{300 + rounds:.2f}", f"{median:.2f}", "201.00", "201.00",
        f"{(300 + rounds) / 201:.2f}x", f"{median / 201:.2f}x"]
    # decode: llama-bench's mean
    decode = 60 + (rounds + 1) / 2
    assert row(out, "decode at depth 512, Q8_0 (steps/s)")[-1] == f"{decode / 40:.2f}x"
    for t, name in (("f32", "F32"), ("q8_0", "Q8_0")):
        for b in BATCHES[t]:
            assert row(out, f"batched decode B={b}, {name} (tokens/s)")[-1] == "2.00x"
    # --compute q8: the q8_0 file's own llama.cpp rows beside it
    assert row(out, "--compute q8: prefill 512, Q8_0 (positions/s)")[-1] == f"{400 / 201:.2f}x"
    assert row(out, "--compute q8: decode at depth 512, Q8_0 (steps/s)")[-1] == "2.00x"
    for b in (1, 4, 16):
        assert row(out, f"--compute q8: batched decode B={b}, Q8_0 (tokens/s)")[-1] == "4.00x"
    # the B=16 / B=1 table: llama.cpp's step ratio is 16 x S_TG(1) / S_TG(16) = 1.00x
    assert row(out, "Q8_0, --compute q8")[2:] == [f"{1 + 16 / 8:.2f}x", "1.00x"]


def test_without_q8_rows_says_so(tmp_path):
    write_run(tmp_path, 1)
    out = report(tmp_path, 1, compute_q8="0")
    assert "--compute q8 rows left out" in out
    assert "--compute q8: decode" not in out


def test_a_failed_llama_run_is_a_failed_cell(tmp_path):
    write_run(tmp_path, 1)
    (tmp_path / "llama.q8_0.1.tg.json").unlink()
    (tmp_path / "failed").write_text("llama-bench tg q8_0\n")
    out = report(tmp_path, 1)
    assert row(out, "decode at depth 512, Q8_0 (steps/s)")[2:] == ["failed", "failed", "", ""]
    assert "llama.cpp runs that failed (1" in out
