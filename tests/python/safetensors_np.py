"""Reads safetensors files into NumPy arrays (F32, F16, BF16, integer masks): the tests' own
reader, independent of the engine's."""
import json
import struct

import numpy as np

_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
           "U8": np.uint8, "BOOL": np.bool_}


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        begin, end = t["data_offsets"]
        raw = body[begin:end]
        if t["dtype"] == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            a = bits.view(np.float32)
        else:
            a = np.frombuffer(raw, dtype=np.dtype(_DTYPES[t["dtype"]]).newbyteorder("<"))
        out[name] = a.reshape(t["shape"])
    return out
