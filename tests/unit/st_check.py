"""Independent check of a safetensors save written by zt (run by test_safetensors).

    /usr/bin/python3 tests/unit/st_check.py DIR [--any-values]

Parses DIR/model.safetensors, or DIR/model.safetensors.index.json and its shards, with
struct + json only (no zt code): header length and padding, __metadata__, dtypes, offsets
contiguous from 0 to the end of the file, the index's total_size and weight_map. Every
tensor must hold ((i % 17) - 8) / 4 for element i (the test writes that), unless
--any-values is given (a trained model: then values must be finite). Exit 77: no numpy.
"""
import json
import os
import struct
import sys

try:
    import numpy as np
except ImportError:
    print("st_check: no numpy")
    sys.exit(77)

ANY_VALUES = "--any-values" in sys.argv[2:]
SIZES = {"F32": 4, "F64": 8, "BF16": 2, "F16": 2}


def fail(msg):
    print("st_check: " + msg)
    sys.exit(1)


def no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        fail("duplicate key in %r" % keys)
    return dict(pairs)


def decode(dtype, raw):
    if dtype == "BF16":
        return (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
    return np.frombuffer(raw, {"F32": "<f4", "F64": "<f8", "F16": "<f2"}[dtype])


def check_file(path):
    """Returns {name: nbytes} of the tensors in path."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        fail("%s: too short" % path)
    (n,) = struct.unpack("<Q", blob[:8])
    if n % 8 or 8 + n > len(blob):
        fail("%s: header length %d" % (path, n))
    text = blob[8 : 8 + n].decode("utf-8")
    body = text.rstrip(" ")
    if not (body.startswith("{") and body.endswith("}") and len(text) - len(body) < 8):
        fail("%s: header is not a JSON object padded with fewer than 8 spaces" % path)
    header = json.loads(text, object_pairs_hook=no_duplicates)
    if header.pop("__metadata__", None) != {"format": "pt"}:
        fail("%s: __metadata__ is not {'format': 'pt'}" % path)
    data = blob[8 + n :]
    pos = 0
    sizes = {}
    for name, e in header.items():
        if set(e) != {"dtype", "shape", "data_offsets"}:
            fail("%s: %s: keys %r" % (path, name, sorted(e)))
        dtype, shape, (begin, end) = e["dtype"], e["shape"], e["data_offsets"]
        if dtype not in SIZES:
            fail("%s: %s: dtype %r" % (path, name, dtype))
        if not all(type(d) is int and d >= 0 for d in shape) or type(begin) is not int or type(end) is not int:
            fail("%s: %s: shape %r offsets %r" % (path, name, shape, e["data_offsets"]))
        count = int(np.prod(shape, dtype=np.int64))
        if begin != pos or end - begin != count * SIZES[dtype]:
            fail("%s: %s: offsets [%d, %d) after %d for %d elements" % (path, name, begin, end, pos, count))
        pos = end
        values = decode(dtype, data[begin:end])
        if ANY_VALUES:
            if not np.all(np.isfinite(values)):
                fail("%s: %s: values not finite" % (path, name))
        elif not np.array_equal(values.astype(np.float64), ((np.arange(count) % 17) - 8) / 4.0):
            fail("%s: %s: values differ" % (path, name))
        sizes[name] = end - begin
    if pos != len(data):
        fail("%s: data is %d bytes, tensors cover %d" % (path, len(data), pos))
    return sizes


def main():
    d = sys.argv[1]
    index_path = os.path.join(d, "model.safetensors.index.json")
    if not os.path.exists(index_path):
        sizes = check_file(os.path.join(d, "model.safetensors"))
        print("st_check: ok, %d tensors in model.safetensors" % len(sizes))
        return
    with open(index_path) as f:
        index = json.load(f, object_pairs_hook=no_duplicates)
    wm = index["weight_map"]
    files = sorted(set(wm.values()))
    k = len(files)
    if files != ["model-%05d-of-%05d.safetensors" % (i + 1, k) for i in range(k)]:
        fail("shard names %r" % files)
    total = 0
    for name in files:
        sizes = check_file(os.path.join(d, name))
        for t, nbytes in sizes.items():
            if wm.get(t) != name:
                fail("%s is in %s but weight_map says %r" % (t, name, wm.get(t)))
            total += nbytes
        if sum(1 for v in wm.values() if v == name) != len(sizes):
            fail("weight_map lists tensors %s lacks" % name)
    if index["metadata"]["total_size"] != total:
        fail("total_size %r, tensors hold %d" % (index["metadata"]["total_size"], total))
    if os.path.exists(os.path.join(d, "model.safetensors")):
        fail("a stale model.safetensors next to the index")
    print("st_check: ok, %d tensors in %d shards" % (len(wm), k))


main()
