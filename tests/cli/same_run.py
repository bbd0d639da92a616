"""Two run directories trained alike: same_run.py A B [TOL]

Each tensor of A/final/model.safetensors and B/final/model.safetensors within TOL of the
tensor's largest magnitude in A (bf16 tensors compared as their fp32 values), and the loss
of every metrics.jsonl row within TOL relative. TOL is 1e-5 unless given; the test that calls
this justifies its own. Prints the largest differences found. Used by t1800-zero3.sh and
t1810-zero3-families.sh.
"""
import json
import struct
import sys

import numpy as np


def weights(d):
    b = open(d + "/final/model.safetensors", "rb").read()
    k = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8 : 8 + k])
    h.pop("__metadata__")
    out = {}
    for t, e in h.items():
        x = np.frombuffer(b[8 + k + e["data_offsets"][0] : 8 + k + e["data_offsets"][1]], {"F32": "<f4", "BF16": "<u2"}[e["dtype"]])
        out[t] = (x.astype(np.uint32) << 16).view(np.float32) if x.dtype == np.uint16 else x
    return out


def losses(d):
    return [json.loads(line)["loss"] for line in open(d + "/metrics.jsonl")]


a, b = weights(sys.argv[1]), weights(sys.argv[2])
tol = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-5
assert a.keys() == b.keys(), (sorted(a), sorted(b))
worst_w = 0.0
for t in a:
    err = np.abs(a[t] - b[t]).max() / max(np.abs(a[t]).max(), 1e-30)
    assert err <= tol, (t, err)
    worst_w = max(worst_w, err)
la, lb = losses(sys.argv[1]), losses(sys.argv[2])
assert len(la) == len(lb) and all(abs(x - y) <= tol * abs(x) for x, y in zip(la, lb)), (la, lb)
worst_l = max(abs(x - y) / abs(x) for x, y in zip(la, lb))
print(f"weights within {worst_w:.2g} of a tensor's largest, losses within {worst_l:.2g} relative")
