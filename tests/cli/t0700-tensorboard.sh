#!/usr/bin/env bash
# output.tensorboard writes events.out.tfevents.* whose records (framing, masked
# CRC-32C, Event protocol buffers) carry the same scalars as metrics.jsonl; token counts are named
# for what they count (target_tokens, input_tokens_per_s), as in summary.json.
# kernel levels: own only (what it checks does not depend on the CPU kernels)
. "$(dirname "$0")/lib.sh"

make_tiny model
$PY -c "
import json
with open('data.jsonl', 'w') as f:
    for i in range(8): f.write(json.dumps({'input_ids': [(i * 3 + j) % 64 for j in range(20)]}) + '\n')
"
printf '[model]\npath = "model"\n[data]\ntrain = "data.jsonl"\nvalid_split = 0.25\nformat = "tokens"\nmax_length = 32\n[train]\nmax_steps = 4\nmicro_batch_size = 2\nlogging_steps = 2\neval_steps = 2\n' > recipe.toml
expect_ok "train" "$ZT" pretrain recipe.toml output.dir=run
ls run/events.out.tfevents.* >/dev/null 2>&1 && say "ok - events file written" || fail "no events file"
$PY "$ROOT/tests/cli/tfevents_read.py" run/events.out.tfevents.* > scalars.jsonl || fail "events file does not parse"
$PY - <<'PY' && say "ok - scalars match metrics.jsonl" || fail "scalars differ from metrics.jsonl"
import json, struct
rows = [json.loads(l) for l in open("run/metrics.jsonl")]
got = {(s["step"], s["tag"]): s["value"] for s in map(json.loads, open("scalars.jsonl"))}
want = {}
for r in rows:
    prefix = "valid" if r.get("split") == "valid" else "train"
    for k in ("loss", "lr", "grad_norm", "target_tokens", "input_tokens_per_s"):
        if k in r:
            want[(r["step"], prefix + "/" + k)] = r[k]
assert want and all(k in got for k in want), (sorted(want), sorted(got))
# an event holds the float32 nearest to the double in metrics.jsonl (which round-trips)
f32 = lambda v: struct.unpack("<f", struct.pack("<f", v))[0]
for k, v in want.items():
    assert got[k] == f32(v), (k, got[k], v)
PY
# each count named for what it counts, the same in metrics.jsonl, summary.json and the events:
# target tokens (the loss's), input tokens (every position computed, padding included)
$PY - <<'PY' && say "ok - target_tokens and input_tokens_per_s, as summary.json counts them" || fail "token counts' names"
import json
rows = [json.loads(l) for l in open("run/metrics.jsonl")]
train = [r for r in rows if r.get("split") != "valid"]
valid = [r for r in rows if r.get("split") == "valid"]
s = json.load(open("run/summary.json"))
tags = {json.loads(l)["tag"] for l in open("scalars.jsonl")}
assert not any("tokens" in r or "tokens_per_s" in r for r in rows), rows[0]
assert {"train/target_tokens", "train/input_tokens_per_s", "valid/target_tokens"} <= tags, sorted(tags)
assert sum(r["target_tokens"] for r in train) == s["target_tokens"], (train, s)
assert s["input_tokens"] == 4 * 2 * 32, s  # 4 steps of 2 rows of max_length 32
assert all(r["target_tokens"] > 0 and r["input_tokens_per_s"] > 0 for r in train), train
assert all(r["target_tokens"] > 0 for r in valid), valid
PY
expect_ok "no events file without output.tensorboard" "$ZT" pretrain recipe.toml output.dir=run2 output.tensorboard=false
ls run2/events.out.tfevents.* >/dev/null 2>&1 && fail "events file written although tensorboard = false" || say "ok - none"
done_testing
