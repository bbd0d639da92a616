#!/usr/bin/env bash
# QLoRA (lora.quantize_base): LoRA trains on an NF4 base (with double_quant) and an int8 one; the
# quantized base is cached in data.cache_dir, read by the next run, and a corrupt cache file is
# noticed and rebuilt, each time to the same adapter bit for bit; zt eval and zt export --merge use
# the dequantized base (the merged weights are dequant(quant(W)) + s·B·A); what cannot work exits 2
# naming the key.
. "$(dirname "$0")/lib.sh"
export ROOT  # the Python checks read safetensors with llama_ref.py's reader

make_tiny m || { fail "setup"; exit 1; }
random_tokens train.jsonl 7 40
printf '[model]\npath = "m"\ndtype = "fp32"\n[data]\ntrain = "train.jsonl"\nformat = "tokens"\nmax_length = 32\n[train]\nmax_steps = 3\nmicro_batch_size = 2\nlearning_rate = 1e-2\nlogging_steps = 1\n[lora]\nr = 4\nalpha = 16\ntarget_modules = "all-linear"\nquantize_base = "nf4"\ndouble_quant = true\n' > q.toml
CACHE=$HOME/.cache/zt

export ZT_LOG=info
expect_ok "LoRA on an NF4 base" "$ZT" pretrain q.toml output.dir=one
grep -q "base: linear weights quantized to nf4 with double_quant" "$TMP/err" && say "ok - the base was quantized" \
  || fail "no quantization logged: $(cat "$TMP/err")"
[ "$(ls "$CACHE"/base-nf4-dq-*.bin 2>/dev/null | wc -l)" = 1 ] && say "ok - one cache file" || fail "cache: $(ls "$CACHE")"
expect_ok "again, from the cache" "$ZT" pretrain q.toml output.dir=two
grep -q "base: linear weights read from the cache in nf4" "$TMP/err" && say "ok - the cache was read" \
  || fail "the cache was not used: $(cat "$TMP/err")"
cmp -s one/final/adapter_model.safetensors two/final/adapter_model.safetensors \
  && say "ok - the same adapter from the cache" || fail "the adapters differ"
$PY - "$CACHE"/base-nf4-dq-*.bin <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
b[len(b) // 2] ^= 1
open(sys.argv[1], "wb").write(b)
PY
expect_ok "again, the cache corrupt" "$ZT" pretrain q.toml output.dir=three
grep -q "is bad (checksum mismatch): quantizing the base again" "$TMP/err" && say "ok - the corruption was noticed" \
  || fail "corruption not reported: $(cat "$TMP/err")"
cmp -s one/final/adapter_model.safetensors three/final/adapter_model.safetensors \
  && say "ok - the same adapter after the rebuild" || fail "the adapters differ after the rebuild"
export ZT_LOG=warn
grep -qE '"quantize_base":[[:space:]]*"nf4"' one/final/zt_quantization.json && say "ok - final/ notes the quantized base" \
  || fail "final/zt_quantization.json: $(cat one/final/zt_quantization.json)"

# export --merge: the dequantized base plus s·B·A. Against numpy: W + s·B·A computed in float64
# from the adapter, the difference being NF4's error, at most 0.152·absmax of W's 64-element block
# (the double-quantized absmax itself off by at most 1% of the largest: 8-bit codes of the absmax
# values' spread); and it must not be zero (the base was really quantized).
expect_ok "export --merge" "$ZT" export one --merge --out merged
$PY - <<'PY' && say "ok - the merged weights are the dequantized base's" || fail "merged weights"
import json
import numpy as np
exec(open(__import__("os").environ["ROOT"] + "/tests/cli/llama_ref.py").read().split("def inv_freq")[0])
W, M, A = read_st("m/model.safetensors"), read_st("merged/model.safetensors"), read_st("one/final/adapter_model.safetensors")
s = 16 / 4
for name, w in W.items():
    key = "base_model.model." + name.replace(".weight", "")
    if key + ".lora_A.weight" not in A:
        assert np.array_equal(M[name], w), name  # the embedding, norms and head are not quantized
        continue
    want = w.astype(np.float64) + s * A[key + ".lora_B.weight"].astype(np.float64) @ A[key + ".lora_A.weight"]
    d = np.abs(M[name] - want).reshape(-1, 64)
    absmax = np.abs(w).reshape(-1, 64).max(axis=1, keepdims=True)
    assert d.max() > 0, name
    assert (d <= 0.152 * absmax + 0.01 * absmax.max() + 1e-6).all(), (name, (d / absmax).max())
PY
printf '[model]\npath = "m"\ndtype = "fp32"\n[data]\ntrain = "train.jsonl"\nformat = "tokens"\nmax_length = 32\n' > e.toml
# the same products (the quantized base's, dequantized), the adapter rounded apart from W or into it: 1e-5 (t2400)
adapted=$("$ZT" eval e.toml --checkpoint one/final) && merged=$("$ZT" eval e.toml --checkpoint merged) \
  && plain=$("$ZT" eval e.toml) && $PY -c "
import json; a, m, p = json.loads('$adapted'), json.loads('$merged'), json.loads('$plain')
assert abs(a['loss'] - m['loss']) < 1e-5 * a['loss'], (a, m)
assert abs(a['loss'] - p['loss']) > 1e-4 * a['loss'], (a, p)" && say "ok - zt eval of the adapter uses the dequantized base" \
  || fail "eval: adapter $adapted, merged $merged, base $plain"

expect_ok "LoRA on an int8 base" "$ZT" pretrain q.toml output.dir=i8 lora.quantize_base=int8 lora.double_quant=false
expect_exit 2 "quantize_base without LoRA" "q.toml:[0-9]+:[0-9]+: lora.quantize_base = \"nf4\" quantizes the frozen base of LoRA" \
  "$ZT" pretrain q.toml output.dir=x lora.r=0
expect_exit 2 "an unknown quantize_base" "override 'lora.quantize_base=nf5': 'nf5' is not one of none, nf4, int8" "$ZT" pretrain q.toml output.dir=x lora.quantize_base=nf5
# on a device (the CPU posing as one): the base held there, each tile dequantized by the backend's
# decoders, the offsets of double_quant read from the parts' headers by downloads; bitwise the CPU
for k in "nf4|lora.quantize_base=nf4 lora.double_quant=true" "int8|lora.quantize_base=int8 lora.double_quant=false" \
         "nf4 at stage 3, offload.param = cpu|lora.quantize_base=nf4 lora.double_quant=true zero.stage=3 offload.param=cpu"; do
  name=${k%%|*} keys=${k#*|} tag=$(echo "${k%%|*}" | tr -c 'a-z0-9\n' '-')
  expect_ok "$name on the CPU" "$ZT" pretrain q.toml output.dir=dc-cpu-$tag $keys
  expect_ok "$name as a device" env ZT_CPU_AS_DEVICE=1 "$ZT" pretrain q.toml output.dir=dc-dev-$tag $keys
  cmp -s dc-cpu-$tag/final/adapter_model.safetensors dc-dev-$tag/final/adapter_model.safetensors \
    && say "ok - $name: a quantized base on a device trains bitwise as on the CPU" || fail "$name: the device path differs"
done
expect_exit 2 "quantize_base with DoRA" "override 'lora.method=dora': lora.quantize_base = \"nf4\" with lora.method = \"dora\"" \
  "$ZT" pretrain q.toml output.dir=x lora.method=dora
expect_exit 2 "double_quant without nf4" "lora.double_quant quantizes NF4's absmax values" \
  "$ZT" pretrain q.toml output.dir=x lora.quantize_base=int8
done_testing
