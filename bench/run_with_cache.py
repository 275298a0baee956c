"""What run_with_cache costs against a plain forward: time and peak memory of one prefill.

    PYTHONPATH=build/python /usr/bin/python3 bench/run_with_cache.py [positions] [threads]

Each measurement runs in a fresh process (peak RSS is a process's high-water mark): the model
is opened, one warm-up call runs, then the call measured; the script prints the median of 5
calls' engine time (Model.last_seconds), the peak RSS over the process after opening, and
tracemalloc's peak of the Python-side arrays (logits and the kept activations). Models:
stories260K (weights/stories260K.gguf) and a seeded 8-layer GQA token model (dim 512, 8 heads,
2 KV heads, vocab 32000).
"""
import json
import os
import resource
import subprocess
import sys
import time
import tracemalloc

HERE = os.path.dirname(os.path.abspath(__file__))
STORIES = os.path.join(HERE, "..", "weights", "stories260K.gguf")
BIGGER = dict(dim=512, n_layers=8, n_heads=8, n_kv_heads=2, vocab_size=32000, block="llama",
              rope="half", max_seq_len=1024, max_batch_size=1)


def measure(model, mode, positions, threads):
    import numpy as np
    import attn
    if model == "stories260K":
        m = attn.Model.from_pretrained(STORIES, max_seq_len=max(positions, 256), threads=threads)
    else:
        m = attn.Model(attn.ModelArgs(**BIGGER), threads=threads)
    tokens = np.random.default_rng(0).integers(3, m.args.vocab_size, positions)

    def call():
        m.reset()
        if mode == "forward":
            return m.forward(tokens, all_positions=True)
        if mode == "forward_last":
            return m.forward(tokens)
        return m.run_with_cache(tokens)

    call()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    times = []
    for _ in range(5):
        out = call()
        times.append(m.last_seconds)
        del out
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kept = 0
    if mode == "run_with_cache":
        _, cache = call()
        kept = sum(a.nbytes for a in cache.values())
    return dict(model=model, mode=mode, positions=positions, seconds=sorted(times)[2],
                python_peak_mib=peak / 2**20, rss_growth_mib=(rss - rss0) / 1024,
                rss_mib=rss / 1024, kept_mib=kept / 2**20)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        print(json.dumps(measure(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))))
        return
    positions = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    print(f"{'model':12} {'call':15} {'pos':>5} {'ms':>9} {'kept MiB':>9} "
          f"{'py peak MiB':>12} {'RSS MiB':>8}")
    for model in ("stories260K", "gqa-8x512"):
        for mode in ("forward_last", "forward", "run_with_cache"):
            out = subprocess.run([sys.executable, __file__, "--one", model, mode, str(positions),
                                  str(threads)], check=True, capture_output=True, text=True)
            r = json.loads(out.stdout)
            print(f"{model:12} {mode:15} {positions:5d} {r['seconds'] * 1e3:9.2f} "
                  f"{r['kept_mib']:9.1f} {r['python_peak_mib']:12.1f} {r['rss_mib']:8.1f}")


if __name__ == "__main__":
    main()
