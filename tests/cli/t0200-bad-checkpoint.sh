#!/usr/bin/env bash
# Corrupt checkpoints: each bad-file case exits 2 with a message naming the file
# (and the tensor where there is one), never a crash; run under the sanitizer build too.
# A sharded checkpoint with an index loads like a single file.
# kernel levels: own only (what it checks does not depend on the CPU kernels)
. "$(dirname "$0")/lib.sh"

make_tiny good
make_tiny sharded --max-shard-size 20KB
$PY - <<'PY'
import json
with open("data.jsonl", "w") as f:
    for i in range(4):
        f.write(json.dumps({"input_ids": [(i * 5 + j * 3) % 64 for j in range(20)]}) + "\n")
PY
printf '[model]\npath = "good"\ndtype = "fp32"\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 32\n[train]\nmax_steps = 1\nmicro_batch_size = 2\n' > recipe.toml

expect_ok "eval of a good model" "$ZT" eval recipe.toml
good_loss=$(cat "$TMP/out")
[ -f sharded/model.safetensors.index.json ] && [ -f sharded/model-00002-of-0000*.safetensors ] \
  && say "ok - sharded save wrote an index and shards" || fail "no sharded checkpoint: $(ls sharded)"
expect_ok "eval of the sharded model" "$ZT" eval recipe.toml --checkpoint sharded
[ "$(cat "$TMP/out")" = "$good_loss" ] && say "ok - sharded model gives the same loss" \
  || fail "sharded loss $(cat "$TMP/out") != $good_loss"
$PY "$ROOT/tests/unit/st_check.py" sharded --any-values >/dev/null && say "ok - sharded passes the independent check" \
  || fail "sharded checkpoint fails the independent check"

# bad DIR NAME PYTHON: copies the good model to DIR and applies the python snippet to
# the bytes `b` of DIR/model.safetensors (header dict `h`, rewrite with put(h, data))
bad() {
  local dir=$1 code=$2
  cp -r good "$dir"
  $PY - "$dir/model.safetensors" "$code" <<'PY'
import json, struct, sys
path, code = sys.argv[1], sys.argv[2]
b = open(path, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
data = b[8 + n:]
def put(h, data, raw=None):
    raw = raw if raw is not None else json.dumps(h).encode()
    open(path, "wb").write(struct.pack("<Q", len(raw)) + raw + data)
exec(code)
PY
}

bad truncated 'open(path, "wb").write(b[:len(b) // 2])'
bad tiny 'open(path, "wb").write(b[:5])'
bad hugeheader 'open(path, "wb").write(struct.pack("<Q", 1 << 40) + b[8:])'
bad range 'h["model.norm.weight"]["data_offsets"][1] += 10**6; put(h, data)'
bad overlap 'e = h["model.norm.weight"]["data_offsets"]; f = h["model.layers.0.input_layernorm.weight"]["data_offsets"]; f[0], f[1] = e[0], e[1]; put(h, data)'
bad dtype 'h["model.norm.weight"]["dtype"] = "F16"; put(h, data)'
bad shape 'e = h["model.layers.1.mlp.up_proj.weight"]; e["shape"] = [e["shape"][1], e["shape"][0]]; put(h, data)'
bad missing 'del h["model.layers.1.mlp.down_proj.weight"]; put(h, data)'
bad unexpected 'h["model.layers.9.extra.weight"] = dict(h["model.norm.weight"]); h["model.layers.9.extra.weight"]["data_offsets"] = [len(data), len(data) + 128]; put(h, data + bytes(128))'
bad utf8 'raw = json.dumps(h).encode(); i = raw.index(b"model.norm"); put(h, data, raw[:i] + b"\xff\xfe" + raw[i + 2:])'
bad json 'raw = json.dumps(h).encode(); put(h, data, raw[:-1] + b",,}")'
bad intdtype 'e = h["model.norm.weight"]; e["dtype"] = "I32"; put(h, data)'
# set(NAME, I, VALUE): element I of an F32 tensor
setf='def set(name, i, v):
    global data
    at = h[name]["data_offsets"][0] + 4 * i
    data = data[:at] + struct.pack("<f", v) + data[at + 4:]
'
bad nan "$setf"'set("model.layers.1.mlp.up_proj.weight", 5, float("nan")); put(h, data)'
bad inf "$setf"'set("model.norm.weight", 3, float("-inf")); put(h, data)'
# finite weights whose logits overflow fp32: the loss is not a number
bad overflow "$setf"'[set("lm_head.weight", i, 3e38) for i in range(64 * 32)]; put(h, data)'

expect_exit 2 "truncated file" "truncated/model.safetensors" "$ZT" eval recipe.toml --checkpoint truncated
expect_exit 2 "file shorter than its header length" "tiny/model.safetensors" "$ZT" eval recipe.toml --checkpoint tiny
expect_exit 2 "header larger than the file" "hugeheader/model.safetensors.*header" "$ZT" eval recipe.toml --checkpoint hugeheader
expect_exit 2 "offsets out of range" "range/model.safetensors.*model.norm.weight" "$ZT" eval recipe.toml --checkpoint range
expect_exit 2 "overlapping tensors" "overlap/model.safetensors.*overlap" "$ZT" eval recipe.toml --checkpoint overlap
expect_exit 2 "dtype mismatch (size)" "dtype/model.safetensors.*model.norm.weight" "$ZT" eval recipe.toml --checkpoint dtype
expect_exit 2 "shape mismatch with config" "shape/model.safetensors.*up_proj.*shape" "$ZT" eval recipe.toml --checkpoint shape
expect_exit 2 "missing tensor" "missing.*missing tensor 'model.layers.1.mlp.down_proj.weight'" "$ZT" eval recipe.toml --checkpoint missing
expect_exit 2 "unexpected tensor" "unexpected/model.safetensors.*model.layers.9.extra.weight" "$ZT" eval recipe.toml --checkpoint unexpected
expect_exit 2 "header not UTF-8" "utf8/model.safetensors.*UTF-8" "$ZT" eval recipe.toml --checkpoint utf8
expect_exit 2 "header not JSON" "json/model.safetensors.*JSON" "$ZT" eval recipe.toml --checkpoint json
expect_exit 2 "integer dtype" "intdtype/model.safetensors.*model.norm.weight" "$ZT" eval recipe.toml --checkpoint intdtype
expect_exit 2 "a NaN weight" "nan/model.safetensors.*model.layers.1.mlp.up_proj.weight.*element 5 is NaN" \
  "$ZT" eval recipe.toml --checkpoint nan
expect_exit 2 "an infinite weight" "inf/model.safetensors.*model.norm.weight.*element 3 is -inf" \
  "$ZT" eval recipe.toml --checkpoint inf
expect_exit 2 "a NaN weight read for training" "nan/model.safetensors.*up_proj" \
  "$ZT" pretrain recipe.toml model.path=nan output.dir=r-nan
expect_exit 2 "a NaN weight exported" "nan/model.safetensors.*model.layers.1.mlp.up_proj.weight.*element 5 is NaN" \
  "$ZT" export nan --out x-nanw
[ -e x-nanw/model.safetensors ] && fail "...an export was written" || say "ok - ...and nothing exported"
expect_exit 1 "a loss that is not finite" "loss is (NaN|inf).*numerical" "$ZT" eval recipe.toml --checkpoint overflow
grep -q loss "$TMP/out" && fail "a non-finite loss was printed: $(cat "$TMP/out")" || say "ok - and no loss printed"

# a training checkpoint whose master weights hold a NaN, saved with checksums that agree (a
# run that diverged): the block's CRC-32C is recomputed, so only the finite check can refuse it
build=build
[ "$(basename "$ZT")" = zt-san ] && build=build-san
"$ROOT/$build/tests/test_state" --make-checkpoint good run 3 2 >/dev/null 2>&1 || fail "test_state --make-checkpoint"
shard=run/checkpoints/step-000003/rank-00001-of-00002.bin
$PY - "$shard" <<'PY'
import struct, sys
def crc32c(data):
    table = [0] * 256
    for i in range(256):
        c = i
        for _ in range(8): c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        table[i] = c
    c = 0xFFFFFFFF
    for x in data: c = table[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF
b = bytearray(open(sys.argv[1], "rb").read())
nseg, total = struct.unpack_from("<Q", b, 32)[0], struct.unpack_from("<Q", b, 48)[0]
data = 64 + 16 * nseg + 8
n = min(65536, struct.unpack_from("<Q", b, 64 + 8)[0])  # block 0 of segment 0 of the params
struct.pack_into("<f", b, data + 4 * 7, float("nan"))  # params element 7 of this shard
struct.pack_into("<I", b, data + 3 * 4 * total, crc32c(b[data:data + 4 * n]))
open(sys.argv[1], "wb").write(b)
PY
expect_exit 2 "a NaN in a checkpoint's weights" "tensor '[a-z_.0-9]+'.*rank-00001-of-00002.bin.*params is NaN" \
  "$ZT" export run/checkpoints/step-000003 --out x-nan

cp -r sharded noshard && rm noshard/model-00002-of-0000*.safetensors
expect_exit 2 "missing shard" "noshard.*model-00002" "$ZT" eval recipe.toml --checkpoint noshard
cp -r good badcfg && echo '{"model_type": "llama", "hidden_size": 32,' > badcfg/config.json
expect_exit 2 "malformed config.json" "badcfg/config.json" "$ZT" eval recipe.toml --checkpoint badcfg
cp -r good wrongcfg
$PY -c 'import json; p="wrongcfg/config.json"; c=json.load(open(p)); c["intermediate_size"]=96; json.dump(c, open(p,"w"))'
expect_exit 2 "config disagrees with weights" "wrongcfg/model.safetensors.*shape" "$ZT" eval recipe.toml --checkpoint wrongcfg
for id in 1e10 1.5 -7 '[2, 3e40]'; do
  rm -rf tokcfg && cp -r good tokcfg
  $PY -c 'import json, sys; p="tokcfg/config.json"; c=json.load(open(p)); c["eos_token_id"]=json.loads(sys.argv[1]); json.dump(c, open(p,"w"))' "$id"
  expect_exit 2 "eos_token_id = $id" "tokcfg/config.json.*eos_token_id" "$ZT" eval recipe.toml --checkpoint tokcfg
done
# keys zt does not implement, each refused by name: another family, Qwen3's window on its upper
# layers only (max_window_layers is 28 without the key), another activation, dropout; Gemma's
# keys out of range (another activation, no window, a negative cap, a pattern of 0, a text theta);
# Gemma 1's activation other than its two GELUs; GLM's rotary share out of range; a window on OLMo 2 or Gemma 1, whose attention has none; Phi-3's dropouts, a rotary share out of range or of
# no pair, biases, rope scaling other than longrope, longrope factors not one per rotary pair or with
# a key Phi3Config refuses, an original length whose log is 0
for edit in '"model_type": "phimoe"|model_type' '"model_type": "olmo2", "sliding_window": 8|sliding_window' \
            '"model_type": "qwen3", "use_sliding_window": true, "sliding_window": 4|max_window_layers' \
            '"model_type": "qwen3", "hidden_act": "gelu"|hidden_act' '"attention_dropout": 0.1|attention_dropout' \
            '"model_type": "gemma2", "hidden_activation": "gelu"|hidden_activation' \
            '"model_type": "gemma", "hidden_act": "gelu_new"|hidden_act' \
            '"model_type": "glm", "partial_rotary_factor": 0|partial_rotary_factor' \
            '"model_type": "gemma", "hidden_act": "gelu", "sliding_window": 8|sliding_window' \
            '"model_type": "gemma2", "sliding_window": null|sliding_window' \
            '"model_type": "gemma2", "sliding_window": 8, "attn_logit_softcapping": -1|attn_logit_softcapping' \
            '"model_type": "gemma3_text", "sliding_window": 8, "final_logit_softcapping": 0|final_logit_softcapping' \
            '"model_type": "gemma3_text", "sliding_window": 8, "attn_logit_softcapping": 50|attn_logit_softcapping' \
            '"model_type": "gemma3_text", "sliding_window": 8, "sliding_window_pattern": 0|sliding_window_pattern' \
            '"model_type": "gemma3_text", "sliding_window": 8, "rope_local_base_freq": "1e4"|rope_local_base_freq' \
            '"model_type": "gemma2", "sliding_window": 8, "query_pre_attn_scalar": 0|query_pre_attn_scalar' \
            '"model_type": "phi3", "resid_pdrop": 0.1|resid_pdrop' '"model_type": "phi3", "embd_pdrop": 0.1|embd_pdrop' \
            '"model_type": "phi3", "partial_rotary_factor": 1.5|partial_rotary_factor' \
            '"model_type": "phi3", "partial_rotary_factor": 0.1|partial_rotary_factor' \
            '"model_type": "phi3", "attention_bias": true|attention_bias' \
            '"model_type": "phi3", "rope_scaling": {"type": "linear", "factor": 2.0}|rope_scaling' \
            '"model_type": "phi3", "rope_scaling": {"type": "longrope", "short_factor": [1, 2], "long_factor": [1, 2, 3, 4]}|rope_scaling.short_factor' \
            '"model_type": "phi3", "rope_scaling": {"type": "longrope", "short_factor": [1, 2, 3, 4], "long_factor": [1, 2, 3, 4], "factor": 2}|rope_scaling.factor' \
            '"model_type": "smollm3", "no_rope_layers": [1, 2]|no_rope_layers' \
            '"model_type": "smollm3", "no_rope_layer_interval": 0|no_rope_layer_interval' \
            '"model_type": "smollm3", "layer_types": ["full_attention", "chunked_attention"]|layer_types' \
            '"model_type": "smollm3", "no_rope_layer_interval": 1, "use_sliding_window": true, "sliding_window": 4|use_sliding_window' \
            '"model_type": "granite", "residual_multiplier": 0|residual_multiplier' \
            '"model_type": "granite", "logits_scaling": "8"|logits_scaling' \
            '"model_type": "phi3", "original_max_position_embeddings": 1, "rope_scaling": {"type": "longrope", "short_factor": [1, 2, 3, 4], "long_factor": [1, 2, 3, 4]}|original_max_position_embeddings'; do
  rm -rf keycfg && cp -r good keycfg
  $PY -c 'import json, sys; p="keycfg/config.json"; c=json.load(open(p)); c.update(json.loads("{" + sys.argv[1] + "}")); json.dump(c, open(p,"w"))' "${edit%|*}"
  expect_exit 2 "config.json with ${edit%|*}" "keycfg/config.json.*${edit#*|}" "$ZT" eval recipe.toml --checkpoint keycfg
done
# a Qwen3 config.json on Llama weights: the q/k norms are missing
rm -rf keycfg && cp -r good keycfg
$PY -c 'import json; p="keycfg/config.json"; c=json.load(open(p)); c["model_type"]="qwen3"; c["head_dim"]=c["hidden_size"]//c["num_attention_heads"]; json.dump(c, open(p,"w"))'
expect_exit 2 "qwen3 without q_norm" "keycfg.*q_norm" "$ZT" eval recipe.toml --checkpoint keycfg
# a Gemma 2 config.json on Llama weights: the post norms are missing
$PY -c 'import json; p="keycfg/config.json"; c=json.load(open(p)); c["model_type"]="gemma2"; c["sliding_window"]=8; json.dump(c, open(p,"w"))'
expect_exit 2 "gemma2 without its post norms" "keycfg.*feedforward_layernorm" "$ZT" eval recipe.toml --checkpoint keycfg
# an OLMo 2 config.json on Llama weights: their pre norms are tensors OLMo 2 has none of
$PY -c 'import json; p="keycfg/config.json"; c=json.load(open(p)); c["model_type"]="olmo2"; c.pop("sliding_window", None); json.dump(c, open(p,"w"))'
expect_exit 2 "olmo2 on pre norms" "keycfg.*input_layernorm" "$ZT" eval recipe.toml --checkpoint keycfg
# a Phi-3 config.json on Llama weights: their q/k/v and gate/up are not fused
$PY -c 'import json; p="keycfg/config.json"; c=json.load(open(p)); c["model_type"]="phi3"; json.dump(c, open(p,"w"))'
expect_exit 2 "phi3 on separate projections" "keycfg.*q_proj" "$ZT" eval recipe.toml --checkpoint keycfg
expect_exit 2 "no such model" "nosuch.*config.json" "$ZT" eval recipe.toml --checkpoint nosuch
done_testing
