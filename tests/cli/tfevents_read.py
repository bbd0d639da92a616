"""Reads a TensorBoard events file on its own terms (TFRecord framing with masked
CRC-32C, Event / Summary protocol buffers) and prints one JSON line per scalar:
{"step": N, "tag": "...", "value": X}. Exits 1 on any framing or CRC error.
With --tensorboard it reads the file with the tensorboard package instead."""
import json
import struct
import sys


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(b, i):
    v = shift = 0
    while True:
        v |= (b[i] & 0x7F) << shift
        shift += 7
        i += 1
        if not b[i - 1] & 0x80:
            return v, i


def fields(b):
    i, out = 0, []
    while i < len(b):
        key, i = varint(b, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(b, i)
        elif wire == 1:
            v, i = b[i : i + 8], i + 8
        elif wire == 5:
            v, i = b[i : i + 4], i + 4
        elif wire == 2:
            n, i = varint(b, i)
            v, i = b[i : i + n], i + n
        else:
            raise ValueError("wire type %d" % wire)
        out.append((num, v))
    return out


def main():
    path = sys.argv[1]
    if "--tensorboard" in sys.argv:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
        acc = EventAccumulator(path)
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            for e in acc.Scalars(tag):
                print(json.dumps({"step": e.step, "tag": tag, "value": e.value}))
        return
    data = open(path, "rb").read()
    i, first = 0, True
    while i < len(data):
        (n,) = struct.unpack("<Q", data[i : i + 8])
        (lcrc,) = struct.unpack("<I", data[i + 8 : i + 12])
        if lcrc != masked(data[i : i + 8]):
            sys.exit("length CRC mismatch at byte %d" % i)
        body = data[i + 12 : i + 12 + n]
        (dcrc,) = struct.unpack("<I", data[i + 12 + n : i + 16 + n])
        if dcrc != masked(body):
            sys.exit("data CRC mismatch at byte %d" % i)
        i += 16 + n
        ev = dict(fields(body))
        if first:
            if ev.get(3) != b"brain.Event:2":
                sys.exit("first event has no file_version")
            first = False
            continue
        step = ev.get(2, 0)
        for num, value in fields(ev[5]):
            v = dict(fields(value))
            print(json.dumps({"step": step, "tag": v[1].decode(), "value": struct.unpack("<f", v[2])[0]}))


main()
