#!/usr/bin/env bash
# Gemma 3's image-text checkpoints (tests/fixtures/lora/gemma3-vision/base, a
# Gemma3ForConditionalGeneration as transformers saved it): zt trains the language model and
# carries the vision tower through every save byte for byte, its config.json's vision_config too:
# a full run's final/, its checkpoint exported with --base (a checkpoint holds the language model
# alone), a LoRA run's adapter (PEFT's names under language_model., target_modules a pattern over
# the language model) merged by zt export --merge; PEFT's all-linear adapter, which adapts the vision
# tower too, evaluated and merged whole. What cannot work exits 2 naming why.
. "$(dirname "$0")/lib.sh"
BASE=$ROOT/tests/fixtures/lora/gemma3-vision/base
random_tokens data.jsonl 3 12 64
printf '[model]\npath = "%s"\ndtype = "fp32"\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 32\n[train]\nmax_steps = 4\nsave_steps = 2\nmicro_batch_size = 2\nlearning_rate = 1e-2\n' "$BASE" > full.toml
{ cat full.toml; printf '[lora]\nr = 4\nalpha = 8\ntarget_modules = "all-linear"\n'; } > lora.toml

# carried SOURCE OUT: OUT's vision tower and projector are SOURCE's, the same dtype and bytes, its
# language model's tensors (names, shapes) SOURCE's, and its config.json SOURCE's vision_config
carried() {
  $PY - "$1" "$2" <<'PY'
import json, os, struct, sys
def tensors(d):
    out = {}
    for f in sorted(os.listdir(d)):
        if f.endswith(".safetensors"):
            blob = open(os.path.join(d, f), "rb").read()
            n = struct.unpack("<Q", blob[:8])[0]
            header = json.loads(blob[8:8 + n])
            header.pop("__metadata__", None)
            for name, e in header.items():
                a, b = e["data_offsets"]
                out[name] = (e["dtype"], e["shape"], blob[8 + n + a:8 + n + b])
    return out
src, out = tensors(sys.argv[1]), tensors(sys.argv[2])
vision = [k for k in src if not k.startswith("language_model.")]
assert vision and all(out[k] == src[k] for k in vision), "the vision tower changed"
assert sorted(out) == sorted(src), (sorted(set(out) ^ set(src)))
assert all(out[k][1] == src[k][1] for k in src)
changed = [k for k in src if k.startswith("language_model.") and out[k][2] != src[k][2]]
cfg = [json.load(open(os.path.join(d, "config.json"))) for d in sys.argv[1:3]]
assert cfg[1]["model_type"] == "gemma3" and cfg[1]["vision_config"] == cfg[0]["vision_config"]
assert cfg[1]["text_config"] == cfg[0]["text_config"]
print(f"{len(vision)} vision tensors unchanged, {len(changed)} of the language model's trained")
PY
}

expect_ok "full fine-tuning" "$ZT" pretrain full.toml output.dir=full
got=$(carried "$BASE" full/final) && say "ok - final/: $got" || fail "final/ carried the vision tower"
expect_exit 2 "a checkpoint without --base" "image-text model alone: give --base DIR" \
  "$ZT" export full/checkpoints/step-000002 --out ck
expect_ok "a checkpoint exported with --base" "$ZT" export full/checkpoints/step-000002 --out ck --base "$BASE"
got=$(carried "$BASE" ck) && say "ok - the exported checkpoint: $got" || fail "the exported checkpoint"
expect_ok "the exported checkpoint evaluates" "$ZT" eval full.toml model.path=ck
make_tiny m
random_tokens small.jsonl 4 4 64
printf '[model]\npath = "m"\n[data]\ntrain = "small.jsonl"\nformat = "tokens"\n[train]\nmax_steps = 1\n' > small.toml
expect_ok "a Llama run" "$ZT" pretrain small.toml output.dir=small
expect_exit 2 "--base with a text model" "--base goes with --merge, or with a checkpoint of an image-text model" \
  "$ZT" export small --out sm --base m

expect_ok "LoRA" "$ZT" pretrain lora.toml output.dir=lora
$PY - lora/final <<'PY' && say "ok - the adapter: PEFT's names under language_model., a pattern" || fail "the adapter"
import json, struct, sys
cfg = json.load(open(sys.argv[1] + "/adapter_config.json"))
pattern = r"language_model\.model\.layers\.\d+\.(self_attn|mlp)\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)"
assert cfg["target_modules"] == pattern, cfg["target_modules"]
blob = open(sys.argv[1] + "/adapter_model.safetensors", "rb").read()
names = [k for k in json.loads(blob[8:8 + struct.unpack("<Q", blob[:8])[0]]) if k != "__metadata__"]
assert len(names) == 2 * 7 * 2 and all(k.startswith("base_model.model.language_model.model.layers.") for k in names)
PY
expect_ok "the adapter evaluates" "$ZT" eval full.toml lora.adapter=lora/final
expect_ok "merged" "$ZT" export lora --merge --out merged
got=$(carried "$BASE" merged) && say "ok - merged: $got" || fail "merged carried the vision tower"


# PEFT's "all-linear" adapts the vision tower too (tests/fixtures/lora/gemma3-vision/all-linear):
# zt evaluates with it (text does not reach the tower), refuses to train from it (its saved adapter
# would lose those), and zt export --merge merges all of it
ALL=$ROOT/tests/fixtures/lora/gemma3-vision/all-linear
expect_ok "PEFT's all-linear adapter evaluates" "$ZT" eval full.toml model.path="$ALL/base" lora.adapter="$ALL/adapter"
expect_exit 2 "training from it" "adapts the vision tower too \(18 tensors\).*zt export --merge" \
  "$ZT" pretrain full.toml model.path="$ALL/base" lora.adapter="$ALL/adapter" output.dir=va
expect_ok "merging it" "$ZT" export "$ALL/adapter" --merge --base "$ALL/base" --out allmerged
$PY - "$ALL/base" allmerged <<'PY' && say "ok - merged: $(cat msg)" || fail "the merged vision tower"
import json, os, struct, sys
def tensors(d):
    blob = open(os.path.join(d, "model.safetensors"), "rb").read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    return {k: blob[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]] for k, e in header.items()}
base, out = tensors(sys.argv[1]), tensors(sys.argv[2])
assert sorted(base) == sorted(out)
changed = sorted(k for k in base if base[k] != out[k] and not k.startswith("language_model."))
assert len(changed) == 9 and all(k.endswith("proj.weight") or ".fc" in k for k in changed), changed
open("msg", "w").write(f"{len(changed)} weights of the vision tower changed, its other tensors as they were")
PY
done_testing
