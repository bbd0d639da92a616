#!/usr/bin/env bash
# Corrupt checkpoints: each bad-file case exits 2 with a message naming the file
# (and the tensor where there is one), never a crash; run under the sanitizer build too.
# A sharded checkpoint with an index loads like a single file.
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
expect_exit 2 "no such model" "nosuch.*config.json" "$ZT" eval recipe.toml --checkpoint nosuch
done_testing
