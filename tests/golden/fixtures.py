"""What the whole-model fixture scripts (make_observer, make_patch, make_lens) share: the tolerance
a float32 rerun uses, a case's file written and read back, and the loop over make_model's cases
that writes the folder's cases.json and prints the table.
"""

import json
import os

import torch

from make_golden import DT, read_safetensors, write_safetensors
from make_model import CASES


def tol_use(got, exp, rtol, atol):
    """Worst |got - exp| / (atol + rtol |exp|), in float64: <= 1 passes the tolerance."""
    return ((got.to(DT) - exp).abs() / (atol + rtol * exp.abs())).max().item()


def as_f32(tensors: dict) -> dict:
    return {k: v.to(torch.float32).contiguous() for k, v in tensors.items()}


def write_checked(out_dir: str, name: str, tensors: dict) -> int:
    """Writes out_dir/<name>.safetensors, reads it back with make_golden's strict reader and
    asserts the same names, order and bits; returns the file's size."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, name + ".safetensors")
    write_safetensors(path, tensors)
    back = read_safetensors(path)
    assert list(back) == list(tensors) and all(torch.equal(back[k], tensors[k]) for k in tensors)
    return os.path.getsize(path)


# make_cases' header and row for a case checked against make_model's logits and a float32 run
# (make_case's result: tensors, size, logits_err, tol_use).
CHECKED_HEADER = ("case", "tensors", "bytes", "logits", "f32/tol")


def checked_row(c, r):
    return (c.name, r["tensors"], r["size"], f"{r['logits_err']:.1e}", f"{r['tol_use']:.4f}")


def make_cases(out_dir: str, names, make_case, entry, row, header, notes) -> None:
    """make_case(c) for make_model's cases in `names`; writes out_dir/cases.json of entry(c, r)
    and prints header, row(c, r) of each case and the notes."""
    rows, manifest = [], []
    for c in CASES:
        if c.name not in names:
            continue
        r = make_case(c)
        manifest.append(entry(c, r))
        rows.append(row(c, r))
    with open(os.path.join(out_dir, "cases.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    for r in [header] + rows:
        print("  ".join(str(v).ljust(14) for v in r))
    for note in notes:
        print(note)
