"""Ctrl-C stays Python's (issue 46): after a model of each kind is opened (a GGUF, a llama2.c
checkpoint, a Hugging Face folder), a SIGINT raises KeyboardInterrupt, during forward, generate
and run_with_cache and after them, instead of ending the process; the library installs no signal
handler (the process's dispositions are as they were). Each case runs in its own python3, so a
SIGINT that kills it fails the case instead of ending pytest."""
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

SOURCE = pathlib.Path(os.environ.get("ATTN_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
WEIGHTS = SOURCE / "weights"
HF = SOURCE / "tests" / "golden" / "model" / "hf_untied_f32"  # config.json + model.safetensors

MODELS = {
    "gguf": (str(WEIGHTS / "stories260K.gguf"), {}),
    "llama2c": (str(WEIGHTS / "stories260K.bin"), {"tokenizer": str(WEIGHTS / "tok512.bin")}),
    "hf": (str(HF), {}),
}

CHILD = textwrap.dedent("""
    import os, signal, sys, threading, time
    import numpy as np
    import attn

    def masks():  # this process's caught and ignored signals, as the kernel has them
        status = open("/proc/self/status").read().splitlines()
        return [l for l in status if l.startswith(("SigCgt:", "SigIgn:"))]

    def kill_now():
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)  # Python's handler runs at once: the sleep is cut short
        except KeyboardInterrupt:
            return True
        return False

    def during(call, seconds=60):
        # The calls run back to back and a thread sends SIGINT while one runs: it comes out as
        # KeyboardInterrupt, from inside the call (a long one stops between blocks) or after it.
        timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
        deadline = time.monotonic() + seconds
        timer.start()
        try:
            while time.monotonic() < deadline:
                call()
        except KeyboardInterrupt:
            return True
        finally:
            timer.join()
        return False

    path, kw, long_call = sys.argv[1], eval(sys.argv[2]), sys.argv[3] == "1"
    before = masks()
    if long_call:
        kw.update(max_batch_size=8, max_seq_len=512)
    m = attn.Model.from_pretrained(path, threads=2, **kw)
    assert masks() == before, (before, masks())
    assert kill_now(), "a SIGINT after loading"
    tokens = [[1, 2, 3, 4, 5, 6, 7, 8]]
    def gen():
        m.reset()
        m.generate([1, 2, 3], steps=40, stop=[])
    calls = {"forward": lambda: m.forward(tokens),
             "generate": gen,
             "run_with_cache": lambda: m.run_with_cache(tokens)}
    if long_call:  # rows enough for the per-call handler (attn_module.cpp's timed)
        big = np.random.default_rng(0).integers(1, m.args.vocab_size, (8, 512)).astype(np.int32)
        calls["forward long"] = lambda: m.forward(big)
    for name, call in calls.items():
        assert during(call), "a SIGINT during " + name
        assert kill_now(), "a SIGINT after " + name
        call()  # the model works on
    assert masks() == before, (before, masks())
    print("interrupted every time")
""")


def run_child(path, kw, long_call=False):
    env = dict(os.environ)
    env.pop("PYTHONFAULTHANDLER", None)
    return subprocess.run([sys.executable, "-c", CHILD, path, repr(kw), "1" if long_call else "0"],
                          capture_output=True, text=True, timeout=600, env=env)


@pytest.mark.parametrize("kind", MODELS)
def test_sigint_raises_keyboard_interrupt_after_opening_each_kind_of_file(kind):
    path, kw = MODELS[kind]
    r = run_child(path, kw)
    assert r.returncode == 0, f"status {r.returncode}\n{r.stderr[-3000:]}"
    assert "interrupted every time" in r.stdout


def test_sigint_stops_a_long_call_on_a_loaded_model_as_keyboard_interrupt():
    path, kw = MODELS["gguf"]
    r = run_child(path, kw, long_call=True)
    assert r.returncode == 0, f"status {r.returncode}\n{r.stderr[-3000:]}"
    assert "interrupted every time" in r.stdout


def test_a_session_saved_then_interrupted_is_whole_and_leaves_no_temporary_file(tmp_path):
    """save_session writes with the GIL released: a SIGINT meanwhile becomes KeyboardInterrupt
    after it returns, the file complete; nothing else is left in the folder."""
    script = textwrap.dedent("""
        import os, signal, sys, threading
        import attn
        m = attn.Model.from_pretrained(sys.argv[1], threads=1)
        m.generate([1, 2, 3], steps=4, stop=[])
        folder = sys.argv[2]
        interrupted = 0
        for i in range(50):
            timer = threading.Timer(0.0005 * i, os.kill, (os.getpid(), signal.SIGINT))
            try:
                timer.start()
                m.save_session(os.path.join(folder, "s.session"))
                timer.join()
            except KeyboardInterrupt:
                interrupted += 1
                timer.join()
        m2 = attn.Model.from_pretrained(sys.argv[1], threads=1)
        m2.load_session(os.path.join(folder, "s.session"))
        assert sorted(os.listdir(folder)) == ["s.session"], os.listdir(folder)
        print("saved", interrupted)
    """)
    r = subprocess.run([sys.executable, "-c", script, MODELS["gguf"][0], str(tmp_path)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"status {r.returncode}\n{r.stderr[-3000:]}"
    assert r.stdout.startswith("saved ")
