#!/usr/bin/env bash
# QLoRA with the quantized base sharded and streamed: at ZeRO stage 3 on 1 and 2 ranks, with
# offload.param = "cpu" and "nvme" (the base quantized as it is read, unit by unit, into its
# slices or its swap file), LoRA on an NF4 (double_quant) or int8 base trains bitwise as the
# quantized base held whole; a job killed with kill -9 resumes bitwise; zt init --quantize nf4
# writes a random model in the bitsandbytes 4-bit format, which trains as held whole when streamed,
# and which zt eval, zt export (--merge), a full fine-tune (whole, or streamed from NVMe) and LoRA
# without quantize_base read decoded; what cannot work exits 2 naming the key or the file.
. "$(dirname "$0")/lib.sh"
need_mpi
export ROOT # same.py reads safetensors with llama_ref.py's reader

make_tiny m num_hidden_layers=3 hidden_size=64 intermediate_size=320 || { fail "setup"; exit 1; }
random_tokens data.jsonl 3 60
mkdir swap
# micro-batches of one row: 1 rank × 4, 2 × 2 (t2420-lora-zero3.sh); no cache, so that every run quantizes
printf '[model]\npath = "m"\ndtype = "fp32"\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 32\npacking = false\ncache_dir = ""\n[train]\nmax_steps = 4\nmicro_batch_size = 1\ngradient_accumulation_steps = 4\nlearning_rate = 1e-2\nadam_epsilon = 1\nlogging_steps = 1\n[lora]\nr = 4\nalpha = 16\ntarget_modules = "all-linear"\nquantize_base = "nf4"\ndouble_quant = true\n' > q.toml
one() { "$ZT" pretrain q.toml "$@"; }
two() { $MPI -np 2 "$ZT" pretrain q.toml train.gradient_accumulation_steps=2 "$@"; }
NVME="zero.stage=3 offload.param=nvme offload.nvme_path=swap"

# same.py A B: the adapters of A/final and B/final and the losses bit for bit
cat > same.py <<'PY'
import json, os, sys
exec(open(os.environ["ROOT"] + "/tests/cli/llama_ref.py").read().split("def inv_freq")[0])
a, b = sys.argv[1], sys.argv[2]
A, B = read_st(a + "/final/adapter_model.safetensors"), read_st(b + "/final/adapter_model.safetensors")
assert A.keys() == B.keys() and all(A[t].tobytes() == B[t].tobytes() for t in A), "adapters differ"
losses = lambda d: [json.loads(l)["loss"] for l in open(d + "/metrics.jsonl") if '"split"' not in l]
assert losses(a) == losses(b) and len(losses(a)) == 4, (losses(a), losses(b))
PY
same() { # same WHAT A B
  $PY same.py "$2" "$3" && say "ok - $1" || fail "$1"
}

# --- 1 rank: the base whole, in slices in memory, streamed from its swap file -----------------------
export ZT_LOG=info
expect_ok "NF4 base held whole" one output.dir=one
expect_ok "NF4 base, offload.param = cpu" one output.dir=cpu zero.stage=3 offload.param=cpu
expect_ok "NF4 base, offload.param = nvme" one output.dir=nvme $NVME
grep -q "base: linear weights quantized to nf4 with double_quant as they are read, a unit at a time" "$TMP/err" \
  && say "ok - the streamed base is quantized as it is read" || fail "no streamed quantization logged: $(cat "$TMP/err")"
export ZT_LOG=warn
expect_ok "NF4 base streamed, the adapters' AdamW state too" one output.dir=both $NVME offload.optimizer=nvme
for d in cpu nvme both; do same "$d: bitwise the base held whole" one $d; done
$PY - <<'PY' && say "ok - the streamed base's file is only read" || fail "nvme I/O"
import json
rows = [json.loads(l) for l in open("nvme/metrics.jsonl")]
assert all(r["io_read_bytes"] > 0 and r["io_write_bytes"] == 0 for r in rows), rows
assert len({r["io_read_bytes"] for r in rows}) == 1, rows  # the same units every step
PY
expect_ok "int8 base held whole" one output.dir=i8 lora.quantize_base=int8 lora.double_quant=false
expect_ok "int8 base streamed" one output.dir=i8-nvme lora.quantize_base=int8 lora.double_quant=false $NVME
same "int8: bitwise the base held whole" i8 i8-nvme

# --- 2 ranks: the base whole on each (stage 2), sharded (stage 3), streamed -------------------------
expect_ok "2 ranks, stage 2" two output.dir=n2-s2 zero.stage=2
expect_ok "2 ranks, stage 3" two output.dir=n2-s3 zero.stage=3
expect_ok "2 ranks, stage 3, streamed" two output.dir=n2-nvme $NVME
expect_ok "2 ranks, stage 3, hpZ" two output.dir=n2-hpz zero.stage=3 zero.hpz_partition_size=2
same "2 ranks: the base sharded at stage 3 trains bitwise as held whole" n2-s2 n2-s3
same "2 ranks: the base streamed trains bitwise as held whole" n2-s2 n2-nvme
same "2 ranks: hpZ's secondary slices hold the encodings as gathered" n2-s2 n2-hpz
[ -z "$(ls swap)" ] && say "ok - the swap files are gone" || fail "swap files left: $(ls swap)"

# --- kill -9 of the whole job, then resume = auto, bitwise -------------------------------------------
K="train.max_steps=400 train.save_steps=20 $NVME"
kill_resume two adapter_model.safetensors $K
expect_exit 2 "resuming on another quantization of the base" "trained on another base model" \
  two output.dir=killed $K train.max_steps=500 lora.double_quant=false

# --- zt init --quantize nf4: a random model written in the bitsandbytes 4-bit format ---------------
make_tiny b num_hidden_layers=3 hidden_size=64 intermediate_size=320 --quantize nf4 --double-quant
# bnb.py: b/'s tensors (t), each linear weight's quant_state and its decoding as bitsandbytes
# decodes it (decode), and which tensors are the encodings' companions (companion)
cat > bnb.py <<'PY'
import json
import numpy as np
raw = open("b/model.safetensors", "rb").read()
n = int.from_bytes(raw[:8], "little")
head = json.loads(raw[8:8 + n])
head.pop("__metadata__", None)
def t(k):
    o = head[k]["data_offsets"]
    return np.frombuffer(raw[8 + n + o[0]:8 + n + o[1]], {"U8": "u1", "F32": "<f4"}[head[k]["dtype"]]).reshape(head[k]["shape"])
def state(w):
    return json.loads(bytes(t(w + ".quant_state.bitsandbytes__nf4")))
def decode(w):
    codes = t(w).reshape(-1)
    idx = np.stack([codes >> 4, codes & 15], 1).reshape(-1)
    a = t(w + ".nested_quant_map")[t(w + ".absmax")] * np.repeat(t(w + ".nested_absmax"), 256)[: idx.size // 64]
    x = t(w + ".quant_map")[idx] * np.repeat((a + np.float32(state(w)["nested_offset"])).astype(np.float32), 64)
    return x.reshape(state(w)["shape"])
def companion(k):
    return k.rsplit(".", 1)[-1] in ("absmax", "quant_map", "nested_absmax", "nested_quant_map") or ".quant_state." in k
PY
# the files as bitsandbytes writes them (tests/fixtures/bnb; bitsandbytes' own dequantization of such
# files is this decoding bit for bit: tests/fixtures/bnb/check_zt_init.py, by hand), and the weights
# N(0, 0.02): over 2048 to 20480 draws a weight's deviation is 0.02 within 8% (5 standard errors,
# 1/sqrt(2·2048) = 1.6%) and NF4's rounding (measured within 2%), its mean 0 within 0.12·0.02
# (5/sqrt(2048) = 0.11)
$PY - <<'PY' && say "ok - zt init --quantize nf4 writes the bitsandbytes 4-bit serialization of N(0, 0.02) weights" \
  || fail "bnb files"
import json
exec(open("bnb.py").read())
qc = json.load(open("b/config.json"))["quantization_config"]
assert qc["quant_method"] == "bitsandbytes" and qc["load_in_4bit"] and qc["bnb_4bit_quant_type"] == "nf4", qc
assert qc["bnb_4bit_use_double_quant"] is True, qc
w = "model.layers.2.mlp.down_proj.weight"
assert head[w]["dtype"] == "U8" and head[w]["shape"] == [64 * 320 // 2, 1], head[w]
assert head[w + ".absmax"]["dtype"] == "U8" and head[w + ".absmax"]["shape"] == [320], head[w + ".absmax"]
assert head[w + ".nested_absmax"]["shape"] == [2] and head[w + ".quant_map"]["shape"] == [16]
assert head["model.norm.weight"]["dtype"] == "F32" and "lm_head.weight" in head
weights = [k for k in head if k.endswith("proj.weight")]
assert len(weights) == 21, weights
for w in weights:
    s = state(w)
    assert s["blocksize"] == 64 and s["nested_blocksize"] == 256 and s["quant_type"] == "nf4", s
    x = decode(w)
    assert abs(x.std() / 0.02 - 1) < 0.1 and abs(x.mean()) < 0.12 * 0.02, (w, x.std(), x.mean())
PY
expect_ok "LoRA on zt init's NF4 model" one output.dir=from-b model.path=b data.valid=data.jsonl train.eval_steps=4
expect_ok "LoRA on zt init's NF4 model, streamed" one output.dir=from-b-nvme model.path=b $NVME
same "the NF4 checkpoint, streamed, trains bitwise as held whole" from-b from-b-nvme

# --- the NF4 checkpoint evaluated: its weights decoded whole, in memory ------------------------------
# The reference (llama_ref.py) runs in float64 on the weights as the bnb files decode them in NumPy
# (above, bitsandbytes' decoding); zt's fp32 dot products have at most 320 terms, each within
# 320·2^-24 ≈ 2e-5 of the sum of its terms' magnitudes if every rounding went one way, about
# sqrt(320)·2^-24 ≈ 1e-6 for roundings of random sign (t0500's argument): 1e-5 relative.
printf '[model]\npath = "b"\ndtype = "fp32"\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 64\npacking = false\n' > e.toml
if "$ZT" eval e.toml > b.eval 2> b.err; then
  $PY - <<'PY' && say "ok - zt eval of the NF4 checkpoint: the loss of its decoded weights" || fail "zt eval of the NF4 checkpoint"
import json, os
import numpy as np
exec(open(os.environ["ROOT"] + "/tests/cli/llama_ref.py").read().split("\nmain()")[0])
exec(open("bnb.py").read())
W = {k: (decode(k) if head[k]["dtype"] == "U8" else t(k)).astype(np.float64) for k in head if not companion(k)}
cfg = json.load(open("b/config.json"))
total, count = 0.0, 0
for line in open("data.jsonl"):
    s, c = loss(cfg, W, np.array(json.loads(line)["input_ids"]))
    total, count = total + s, count + c
ref, got = total / count, json.load(open("b.eval"))["loss"]
print("NF4 checkpoint: zt eval %.10f, reference %.10f" % (got, ref))
assert abs(got - ref) <= 1e-5 * ref, (got, ref)
PY
else fail "zt eval of the NF4 checkpoint (exit $?)"; cat b.err >&2; fi

# its adapters evaluated on the checkpoint decoded (not quantized again): the run's own held-out loss
# at its last step, there through the quantized base's tiles, within the same 1e-5
if "$ZT" eval e.toml --checkpoint from-b/final > from-b.eval 2> from-b.err; then
  $PY - <<'PY' && say "ok - zt eval of an adapter trained on the NF4 checkpoint: the run's own held-out loss" ||
import json
run = [json.loads(l) for l in open("from-b/metrics.jsonl") if '"split"' in l][-1]["loss"]
got = json.load(open("from-b.eval"))["loss"]
print("adapter on the NF4 checkpoint: zt eval %.10f, the run's last held-out loss %.10f" % (got, run))
assert abs(got - run) <= 1e-5 * run, (got, run)
PY
    fail "zt eval of the adapter on the NF4 checkpoint"
else fail "zt eval of the adapter on the NF4 checkpoint (exit $?)"; cat from-b.err >&2; fi

# --- the NF4 checkpoint as floats: zt export, zt export --merge of its adapter, a full fine-tune -----
# zt export decodes it tensor by tensor: each linear weight what bitsandbytes decodes (bnb.py), the
# rest as stored, bit for bit, and a config.json without quantization_config (transformers would
# read the floats as encodings); so too the merged model and a full fine-tune's final/.
expect_ok "zt export of the NF4 checkpoint" "$ZT" export b --out b-export
expect_ok "zt export --merge of an adapter trained on it" "$ZT" export from-b --merge --out b-merged
printf '[model]\npath = "b"\ndtype = "fp32"\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 32\n[train]\nmax_steps = 1\nmicro_batch_size = 2\n[output]\ndir = "b-full"\n' > full.toml
expect_ok "a full fine-tune of the NF4 checkpoint" "$ZT" pretrain full.toml
# streamed into the stage-3 swap file unit by unit, each linear weight decoded as a unit reaches it
expect_ok "a full fine-tune of the NF4 checkpoint, streamed" "$ZT" pretrain full.toml output.dir=b-full-nvme \
  zero.stage=3 offload.param=nvme offload.optimizer=nvme offload.nvme_path=swap
cmp -s b-full/final/model.safetensors b-full-nvme/final/model.safetensors &&
  say "ok - the NF4 checkpoint streamed and decoded unit by unit trains bitwise as decoded whole" ||
  fail "the streamed full fine-tune of the NF4 checkpoint differs"
$PY - <<'PY' && say "ok - exported, merged and fine-tuned: floats, the decoded weights, no quantization_config" ||
import json, os
import numpy as np
exec(open(os.environ["ROOT"] + "/tests/cli/llama_ref.py").read().split("def inv_freq")[0])
exec(open("bnb.py").read())
want = {k: decode(k) if head[k]["dtype"] == "U8" else t(k) for k in head if not companion(k)}
E = read_st("b-export/model.safetensors")
assert E.keys() == want.keys(), sorted(set(E) ^ set(want))
for k in want:
    assert np.array_equal(E[k], want[k]), k
raw = open("b-export/model.safetensors", "rb").read()
stored = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])
assert all(v["dtype"] == "F32" for k, v in stored.items() if k != "__metadata__"), stored
src = json.load(open("b/config.json"))
del src["quantization_config"]
for d in ("b-export", "b-merged", "b-full/final"):
    cfg = json.load(open(d + "/config.json"))
    assert "quantization_config" not in cfg, d
    assert {k: v for k, v in cfg.items() if k not in ("torch_dtype", "zt_version")} == \
        {k: v for k, v in src.items() if k not in ("torch_dtype", "zt_version")}, d
# the merge: the decoded W plus s·B·A, in fp32: a sum of r + 1 = 5 terms rounded, within
# 5·2^-24 ≈ 3e-7 of their magnitudes' sum (1e-6 here)
M, A = read_st("b-merged/model.safetensors"), read_st("from-b/final/adapter_model.safetensors")
for k, w in want.items():
    key = "base_model.model." + k.replace(".weight", "")
    if key + ".lora_A.weight" not in A:
        assert np.array_equal(M[k], w), k
        continue
    a, b = A[key + ".lora_A.weight"].astype(np.float64), A[key + ".lora_B.weight"].astype(np.float64)
    bound = 1e-6 * (np.abs(w) + 4 * np.abs(b) @ np.abs(a))
    assert (np.abs(M[k] - (w + 4 * b @ a)) <= bound).all(), k
PY
  fail "exported, merged or fine-tuned NF4 checkpoint"

# LoRA with lora.quantize_base = "none" on it: the base decoded to fp32, the same weights as the
# quantized base's tiles, so the first step's loss (the adapters' B is 0) within the 1e-5 above
expect_ok "LoRA on the NF4 checkpoint decoded (quantize_base none)" one output.dir=decoded model.path=b \
  lora.quantize_base=none lora.double_quant=false
$PY - <<'PY' && say "ok - its first loss is the quantized base's" || fail "LoRA on the decoded NF4 checkpoint"
import json
first = lambda d: [json.loads(l)["loss"] for l in open(d + "/metrics.jsonl") if '"split"' not in l][0]
a, b = first("from-b"), first("decoded")
assert abs(a - b) <= 1e-5 * a, (a, b)
PY

# --- refusals ----------------------------------------------------------------------------------------
expect_exit 2 "a bitsandbytes model as int8" \
  "holds linear weights quantized by bitsandbytes as NF4 with double quantization: set lora.quantize_base = \"nf4\"" \
  one output.dir=x model.path=b lora.quantize_base=int8 lora.double_quant=false
expect_exit 2 "a bitsandbytes model without its double quantization" "and lora.double_quant = true" \
  one output.dir=x model.path=b lora.double_quant=false
expect_exit 2 "qwZ on a quantized base" "override 'zero.quantized_weights=true': zero.quantized_weights \(qwZ\)" \
  two output.dir=x zero.stage=3 zero.quantized_weights=true
expect_exit 2 "MLP tiles on a quantized base" "override 'zero.mlp_tiles=2': zero.mlp_tiles cuts the MLP weights" \
  one output.dir=x $NVME zero.mlp_tiles=2
expect_exit 2 "zt init --quantize int8" "--quantize writes \"nf4\" only" \
  "$ZT" init --arch llama --out x --quantize int8
expect_exit 2 "zt init --double-quant alone" "--double-quant needs --quantize nf4" \
  "$ZT" init --arch llama --out x --double-quant
done_testing
