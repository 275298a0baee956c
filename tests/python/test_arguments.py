"""Every argument of every public function and method of `attn` goes through one checked
conversion (issue 47, root cause 7): a wrong type is a TypeError, a bad value a ValueError (an
IndexError for an index), each naming the argument, and pybind11's own messages ("incompatible
function arguments", "Unable to cast Python instance") never reach the user.

The table lists, per function, each argument with a value that works, a value of a wrong type
and (where one exists) a value out of range; each case is the working call with one argument
replaced, and the working call itself must succeed. The cases run in a child interpreter that
reports each one as it ends: a case that crashes it fails alone, and the child starts again
after it."""
import json
import re
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

SOURCE = pathlib.Path(os.environ.get("ATTN_SOURCE_DIR", pathlib.Path(__file__).parents[2])).resolve()

SETUP = textwrap.dedent("""
    import json, os, sys, tempfile
    import numpy as np
    import attn
    W = os.path.join(sys.argv[1], "weights")
    GGUF = os.path.join(W, "stories260K.gguf")
    CONFIG = os.path.join(sys.argv[1], "configs", "gqa.json")
    S = os.path.join(tempfile.mkdtemp(), "s.session")
    os.chdir(os.path.dirname(S))  # a path cut at a NUL would land here, not in the tree
    tok = attn.Tokenizer(GGUF)
    m = attn.Model.from_pretrained(GGUF, threads=1)
    sm = attn.Model.from_pretrained(GGUF, threads=1)  # sessions: saved once, loaded again
    sm.generate([1, 2, 3], steps=2, stop=[])
    sm.save_session(S)
    hm = attn.Model(attn.ModelArgs(), threads=1, attention_weights=True)
    x = np.zeros((1, 2, 18), np.float32)
    x1 = np.zeros((1, 1, 18), np.float32)
    hm.prefill(x)
    def hdecode(**k):  # decode after a prefill of two positions: any number of cases fit
        hm.prefill(x)
        return hm.decode(**k)
    print("@@ ready", flush=True)
    for line in sys.stdin:
        case = json.loads(line)
        try:
            eval(case["call"])
            got = {"exc": None, "msg": ""}
        except Exception as e:
            got = {"exc": type(e).__name__, "msg": str(e)}
        print("@@", json.dumps(dict(got, i=case["i"])), flush=True)
""")

SURROGATE = r"'a\ud800b'"  # a str UTF-8 cannot hold
HI = "[{'role': 'user', 'content': 'hi'}]"  # a conversation
CHAT = "'{{ messages[0].content }}'"  # a chat template's text (stories260K has none)
NUL = r"'a\x00b'"

# function: {argument: (working value, wrong type, bad value or None[, exception of the bad value])}
TABLE = {
    "attn.Tokenizer": {"path": ("GGUF", "1.5", SURROGATE)},
    "tok.encode": {"text": ("'Hello'", "b'Hello'", SURROGATE),
                   "add_special_tokens": ("True", "1", None),
                   "bos": ("None", "'yes'", None)},
    "tok": {"text": ("'Hello'", "5", SURROGATE), "add_special_tokens": ("False", "None", None)},
    "tok.decode": {"ids": ("[1, 2]", "'ab'", "[1, 2**31]"),
                   "skip_special_tokens": ("True", "'yes'", None),
                   "clean_up_tokenization_spaces": ("None", "2", None)},
    "tok.convert_ids_to_tokens": {"ids": ("[1, 2]", "1.5", "[-1]")},
    "tok.token_bytes": {"id": ("1", "'1'", "512", "IndexError")},
    "tok.apply_chat_template": {"messages": (HI, "5", None),
                                "add_generation_prompt": ("True", "1", None),
                                "tokenize": ("False", "'no'", None),
                                "chat_template": (CHAT, "3", SURROGATE)},
    "attn.ModelArgs": {"dim": ("18", "'x'", "-1"), "norm_eps": ("1e-5", "'x'", "float('nan')"),
                       "mask": ("'causal'", "1", SURROGATE), "norm_first": ("False", "1", None)},
    "attn.ModelArgs.from_file": {"path": ("CONFIG", "[]", SURROGATE),
                                 "max_seq_len": ("0", "0.5", "2**63"),
                                 "max_batch_size": ("0", "'1'", "2**64")},
    "attn.Model": {"args": ("attn.ModelArgs()", "{}", None), "weights": ("None", "7", NUL),
                   "seed": ("42", "'42'", "-1"), "threads": ("1", "1.5", "-1"),
                   "attention_weights": ("False", "0", None), "compute": ("'f32'", "32", "'f64'")},
    "attn.Model.from_pretrained": {
        "path": ("GGUF", "None", SURROGATE), "config": ("None", "3", NUL),
        "tokenizer": ("None", "3.0", SURROGATE), "max_seq_len": ("64", "'64'", "2**70"),
        "max_batch_size": ("1", "1.0", "2**64"), "threads": ("1", "1.5", "2000"),
        "compute": ("'f32'", "b'f32'", "'f64'"), "attention_weights": ("False", "'no'", None)},
    "sm.save_session": {"path": ("S", "5", NUL)},
    "sm.load_session": {"path": ("S", "5.0", SURROGATE)},
    "m.generate": {"prompt": ("[1, 2]", "3.5", "[1, 2**31]"), "steps": ("2", "'2'", "-1"),
                   "temp": ("0.0", "'hot'", "float('nan')"), "top_k": ("40", "1.5", "-1"),
                   "top_p": ("0.9", "None", "2.0"), "min_p": ("0.05", "'x'", "-0.5"),
                   "seed": ("1", "1.5", "-1"), "stop": ("None", "1.5", "[2**40]"),
                   "repeat_penalty": ("1.1", "'x'", "0.0"), "repeat_last_n": ("64", "6.4", "-2"),
                   "presence_penalty": ("0.5", "None", "101.0"),
                   "frequency_penalty": ("0.5", "'f'", "float('nan')")},
    # transformers' names for the same settings
    "m.generate ": {"prompt": ("'Hello'", "b'Hello'", SURROGATE),
                    "max_new_tokens": ("2", "2.0", "-1"),
                    "temperature": ("0.7", "'warm'", "101.0"), "do_sample": ("True", "'no'", None),
                    "top_k": ("5", "'5'", "2**25"), "top_p": ("0.9", "[0.9]", "-1.0"),
                    "repetition_penalty": ("1.2", "'x'", "-1.0")},
    "m.chat": {"messages": (HI, "'hi'", None), "chat_template": (CHAT, "b'x'", SURROGATE),
               "max_new_tokens": ("2", "2.0", "-1"), "temperature": ("0.7", "'warm'", "101.0"),
               "do_sample": ("True", "'no'", None), "top_k": ("5", "'5'", "2**25"),
               "top_p": ("0.9", "[0.9]", "-1.0"), "min_p": ("0.05", "'x'", "-0.5"),
               "seed": ("1", "1.5", "-1"), "repetition_penalty": ("1.2", "'x'", "-1.0"),
               "repeat_last_n": ("64", "6.4", "-2"), "presence_penalty": ("0.5", "None", "101.0"),
               "frequency_penalty": ("0.5", "'f'", "float('nan')"),
               "stream": ("False", "'yes'", None)},
    "m.forward": {"tokens": ("[[1, 2]]", "'ab'", "[[1, 2**31]]"), "start_pos": ("0", "0.0", "-1"),
                  "all_positions": ("False", "'no'", None),
                  "patch": ("None", "[1]", "{'blocks.0.hook_nope': 0}")},
    "m.run_with_cache": {"tokens": ("[1, 2]", "1.5", "[[1, 2], [3]]"),
                         "names": ("'blocks.0.hook_resid_pre'", "5", "'nope'"),
                         "start_pos": ("0", "'0'", "10**6"), "all_positions": ("True", "1", None),
                         "patch": ("None", "'x'", "{'blocks.0.hook_resid_pre': np.zeros(3)}"),
                         "max_bytes": ("None", "1.5", "-1")},
    "m.to_tokens": {"input": ("'Hello'", "5", SURROGATE), "prepend_bos": ("True", "1", None)},
    "m.to_string": {"tokens": ("[1, 2]", "'ab'", "[600]")},
    "m.to_str_tokens": {"input": ("'Hello'", "5.0", "[1, 2**31]"),
                        "prepend_bos": ("False", "'y'", None)},
    "hm.prefill": {"x": ("x", "'x'", "np.zeros((1, 2, 5), np.float32)"),
                   "start_pos": ("0", "0.5", "-1"), "mask": ("None", "1", "'sideways'"),
                   "attention_mask": ("None", "'ones'", "np.ones((3, 3))")},
    "hdecode": {"x": ("x1", "[['a']]", "x"), "attention_mask": ("None", "{}", "np.ones(3)")},
    "hm.cache_k": {"layer": ("0", "'0'", "5", "IndexError")},
    "hm.cache_v": {"layer": ("0", "None", "-1", "IndexError")},
    "hm.attention_weights": {"layer": ("0", "0.0", "1", "IndexError")},
}


DEEP = "__import__('functools').reduce(lambda a, _: [a], range(100000), [1])"  # a list 1e5 deep


def cases():
    out = []
    for fn, params in TABLE.items():
        valid = {k: v[0] for k, v in params.items()}
        call = lambda args: f"{fn.strip()}({', '.join(f'{k}={v}' for k, v in args.items())})"
        out.append((f"{fn.strip()}-works", call(valid), None, None, params))
        for name, (ok, wrong, bad, *exc) in params.items():
            out.append((f"{fn.strip()}-{name}-type", call(dict(valid, **{name: wrong})),
                        "TypeError", name, params))
            if bad is not None:
                out.append((f"{fn.strip()}-{name}-value", call(dict(valid, **{name: bad})),
                            exc[0] if exc else "ValueError", name, params))
    # One id is an index; the same setting under two names is a TypeError naming both; a model
    # without token embeddings is said to be one before its ids are read; a setting a message
    # points at is an argument of the function called.
    G = "generate"
    extra = [
        ("convert_ids_to_tokens-one-id", "tok.convert_ids_to_tokens(512)", "IndexError", "ids", ""),
        ("generate-steps-twice", "m.generate([1], steps=2, max_new_tokens=2)", "TypeError",
         "max_new_tokens", G),
        ("generate-temp-twice", "m.generate([1], temp=0.5, temperature=0.5)", "TypeError",
         "temperature", G),
        ("generate-penalty-twice", "m.generate([1], repeat_penalty=1.1, repetition_penalty=1.1)",
         "TypeError", "repetition_penalty", G),
        ("generate-sample-at-zero", "m.generate([1], do_sample=True, temperature=0)", "ValueError",
         "temperature", G),
        ("generate-top_k-array", "m.generate([1], top_k=np.array([1, 2]))", "TypeError", "top_k",
         G),
        ("generate-top_p-array", "m.generate([1], top_p=np.array([0.5, 0.6]))", "TypeError",
         "top_p", G),
        ("generate-prompt-2d", "m.generate(np.ones((2, 2), np.int64))", "ValueError", "prompt", G),
        ("stop-array", "m.generate([1], stop=np.array([1, -2]))", "ValueError", "stop", G),
        ("generate-hidden-state-model", "hm.generate([1])", "ValueError", "token model", G),
        ("decode-a-set", "tok.decode({1, 2})", "TypeError", "ids", ""),
        ("to_string-nested-deep",  # one level of batch, never a recursion as deep as the input
         f"m.to_string({DEEP})", "TypeError", "tokens", ""),
        ("forward-nested-deep", f"m.forward({DEEP})", "ValueError", "tokens", ""),
        ("ModelArgs-nested-deep", f"attn.ModelArgs(ffn_dim_multiplier={DEEP})", "ValueError",
         "ffn_dim_multiplier", ""),
        ("steps-past-python-digit-limit", "m.generate([1], steps=10**5000)", "ValueError", "steps",
         G),
        ("decode-a-dict", "tok.decode({1: 2})", "TypeError", "ids", ""),
        ("ids-to-tokens-array", "tok.convert_ids_to_tokens(np.array([1, 600]))", "ValueError",
         "ids", ""),
        ("ModelArgs-positional", "attn.ModelArgs(18)", "TypeError", "ModelArgs", ""),
        ("save-before-generate", "attn.Model.from_pretrained(GGUF, threads=1).save_session(S)",
         "ValueError", "nothing to save", "sm.save_session"),
        ("from-pretrained-missing", "attn.Model.from_pretrained('no/such/model.gguf')",
         "ValueError", "path", "attn.Model.from_pretrained"),
        ("ModelArgs-from-file-missing", "attn.ModelArgs.from_file('no/such/config.json')",
         "ValueError", "no/such/config.json", "attn.ModelArgs.from_file"),
    ]
    names = lambda fn: (TABLE["m.generate"].keys() | TABLE["m.generate "].keys() if fn == G
                        else TABLE.get(fn, {}).keys())
    return out + [(i, call, exc, arg, names(fn)) for i, call, exc, arg, fn in extra]


CASES = cases()
PYBIND = ("incompatible function arguments", "Unable to cast", "incompatible constructor")


@pytest.fixture(scope="module")
def results():
    """Runs every case in child interpreters: one at first, another after any case that ended
    its process, so that case alone fails."""
    got, start = {}, 0
    env = dict(os.environ)
    while start < len(CASES):
        lines = "".join(json.dumps({"i": i, "call": c[1]}) + "\n"
                        for i, c in enumerate(CASES) if i >= start)
        r = subprocess.run([sys.executable, "-c", SETUP, str(SOURCE)], input=lines,
                           capture_output=True, text=True, timeout=300, env=env)
        if "@@ ready" not in r.stdout:
            pytest.fail(f"the child's setup failed (status {r.returncode}):\n{r.stderr[-3000:]}")
        for line in r.stdout.splitlines():
            if line.startswith("@@ {"):  # not the model's own output
                row = json.loads(line[3:])
                got[row["i"]] = row
        start = max([start - 1] + [i for i in got if i >= start]) + 1
        if start < len(CASES):  # this case ended the process
            got[start] = {"exc": f"crash (status {r.returncode})", "msg": r.stderr[-2000:]}
            start += 1
    return got


@pytest.mark.parametrize("case", range(len(CASES)), ids=[c[0] for c in CASES])
def test_argument(results, case):
    name, call, exc, arg, params = CASES[case]
    got = results[case]
    # A setting the message points at is an argument of this function, in Python's words.
    for setting in re.findall(r"\(set with (\w+)=\)", got["msg"]):
        assert setting in params, f"{call}: '(set with {setting}=)' is no argument: {got['msg']}"
    if exc is None:
        assert got["exc"] is None, f"{call} raised {got['exc']}: {got['msg']}"
        return
    assert got["exc"] == exc, f"{call}: expected {exc}, got {got['exc']}: {got['msg']}"
    assert arg in got["msg"], f"{call}: the message does not name {arg}: {got['msg']}"
    assert not any(p in got["msg"] for p in PYBIND), f"{call}: pybind11's message: {got['msg']}"


def test_help_shows_each_argument_as_python_types():
    """The signatures help() shows name Python's types (pybind11 would show 'handle' for an
    argument the module converts itself)."""
    import attn
    for cls in (attn.ModelArgs, attn.Tokenizer, attn.Model):
        for name in dir(cls):
            doc = getattr(getattr(cls, name), "__doc__", None) or ""
            if "(self" in doc or name in ("from_pretrained", "from_file"):
                assert ": handle" not in doc, f"{cls.__name__}.{name}: {doc.splitlines()[0]}"
