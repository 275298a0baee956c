#!/usr/bin/python3
"""GGUF metadata files (no tensors) written by llama.cpp's own gguf-py, for gguf_config's test
(tests/engine/test_stories.cpp) and as the seeds of fuzz/fuzz_gguf_config.cpp.

Run:  /usr/bin/python3 tests/golden/make_gguf_configs.py
(gguf-py from the llama.cpp sources bench/llama_cpp.sh unpacks; deterministic.)

  llama.gguf  stories260K's keys as ggml-org's file has them (llama.*, 64 of its tokens)
  qwen2.gguf  qwen2.* with rope.freq_base 1e6, rope.scaling.type linear factor 1, key/value
              length 8 and vocab_size 64
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
src = subprocess.run(["bash", os.path.join(ROOT, "bench", "llama_cpp.sh"), "--src"],
                     capture_output=True, text=True, check=True).stdout.strip()
sys.path.insert(0, os.path.join(src, "gguf-py"))
import gguf  # noqa: E402

reader = gguf.GGUFReader(os.path.join(ROOT, "weights", "stories260K.gguf"))
tokens = reader.fields["tokenizer.ggml.tokens"]
TOKENS = [bytes(tokens.parts[i]).decode() for i in tokens.data[:64]]


def write(name, arch, extra):
    w = gguf.GGUFWriter(os.path.join(HERE, "gguf_config", name), arch)
    w.add_context_length(2048)
    w.add_embedding_length(64)
    w.add_block_count(5)
    w.add_feed_forward_length(172)
    w.add_head_count(8)
    w.add_head_count_kv(4)
    w.add_rope_dimension_count(8)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_token_list(TOKENS)
    extra(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def qwen2(w):
    w.add_rope_freq_base(1e6)
    w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
    w.add_rope_scaling_factor(1.0)
    w.add_key_length(8)
    w.add_value_length(8)
    w.add_vocab_size(64)


os.makedirs(os.path.join(HERE, "gguf_config"), exist_ok=True)
write("llama.gguf", "llama", lambda w: None)
write("qwen2.gguf", "qwen2", qwen2)
