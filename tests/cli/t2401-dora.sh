#!/usr/bin/env bash
# DoRA (lora.method = "dora"): 10 AdamW steps from PEFT's DoRA adapter log the losses PEFT
# logged; a DoRA run's final/ is a PEFT DoRA adapter (use_dora, lora_magnitude_vector) that
# starts a run unchanged; a run cut after a checkpoint resumes bitwise (dropout included); the
# merged export's loss is the adapters'; what is not supported exits 2 naming the keys.
. "$(dirname "$0")/lib.sh"
export ROOT  # the Python checks read safetensors with llama_ref.py's reader

# 10 AdamW steps from tests/fixtures/lora/dora (expected.json's dora_train_losses: torch and PEFT
# with the same settings as t2400-lora.sh's LoRA steps), compared without Python. The first loss
# agrees to 3e-8 (test_lora_peft.c); the later ones drift apart as fp32 roundings of the
# gradients feed AdamW's steps of 1e-2 (measured: at most 9e-7, at step 9, also with ZT_CPU=scalar); 1e-4 relative as for LoRA, 10 times smaller than
# what leaving out the weight decay changes (1e-3)
F=$ROOT/tests/fixtures/lora
peft_steps dora "$F/base" "$F/dora" dora_train_losses
# LoRA+ on DoRA: B and the magnitudes at 16 times the learning rate (PEFT puts every 1-D adapter
# with B); the first 5 losses, as for LoRA in t2400-lora.sh (measured: 6e-6 at step 5; the
# magnitudes at the plain rate put step 2 2.4e-2 off)
peft_steps dora-loraplus "$F/base" "$F/dora" dora_loraplus_train_losses 5 "loraplus_lr_ratio = 16"

# a DoRA run: final/ is a PEFT DoRA adapter directory
make_tiny m || { fail "setup"; exit 1; }
random_tokens train.jsonl 7 80
printf '[model]\npath = "m"\ndtype = "fp32"\n[data]\ntrain = "train.jsonl"\nformat = "tokens"\nmax_length = 32\n[train]\nmax_steps = 4\nsave_steps = 2\nmicro_batch_size = 2\nlearning_rate = 1e-2\nlogging_steps = 1\n[lora]\nr = 4\nalpha = 16\ndropout = 0.1\nmethod = "dora"\ntarget_modules = ["q_proj", "o_proj", "down_proj"]\n' > dora.toml
expect_ok "DoRA run" "$ZT" pretrain dora.toml output.dir=full
$PY - <<'PY' && say "ok - final/ is a PEFT DoRA adapter directory" || fail "final/ is not what PEFT reads"
import json
import numpy as np
exec(open(__import__("os").environ["ROOT"] + "/tests/cli/llama_ref.py").read().split("def inv_freq")[0])
c = json.load(open("full/final/adapter_config.json"))
assert c["use_dora"] is True and c["peft_type"] == "LORA" and c["r"] == 4, c
A = read_st("full/final/adapter_model.safetensors")
W = read_st("m/model.safetensors")
names = set()
for l in range(2):
    for p in ("self_attn.q_proj", "self_attn.o_proj", "mlp.down_proj"):
        p = "model.layers.%d.%s" % (l, p)
        mag = A["base_model.model." + p + ".lora_magnitude_vector"]
        start = np.linalg.norm(W[p + ".weight"], axis=1)  # where DoRA starts it: ||W|| row by row
        # trained: 4 AdamW steps of 1e-2 move an element by about 4e-2 at most
        assert mag.shape == start.shape and 0 < np.abs(mag - start).max() < 0.1, (p, np.abs(mag - start).max())
        names |= {"base_model.model." + p + s for s in (".lora_A.weight", ".lora_B.weight", ".lora_magnitude_vector")}
assert set(A) == names, sorted(set(A) ^ names)
PY

# resume: cut after the step-2 checkpoint, the same adapters bit for bit
cp -r full cut && rm -rf cut/final cut/summary.json cut/checkpoints/step-000004
expect_ok "resume" "$ZT" pretrain dora.toml output.dir=cut
cmp -s full/final/adapter_model.safetensors cut/final/adapter_model.safetensors && say "ok - resumed adapters are bitwise identical" \
  || fail "resumed adapters differ"

# lora.adapter: a run from final/ with a learning rate of 0 writes the same adapters back, DoRA's
expect_ok "start from a DoRA adapter" "$ZT" pretrain dora.toml output.dir=again lora.r=0 lora.method=lora \
  lora.adapter=full/final train.learning_rate=0 train.max_steps=1
cmp -s full/final/adapter_model.safetensors again/final/adapter_model.safetensors \
  && grep -qE '"use_dora":[[:space:]]*true' again/final/adapter_config.json && say "ok - the DoRA adapter loaded and saved unchanged" \
  || fail "the adapter changed"

# zt export --merge: the base with g·(W + s·B·A), whose loss is the adapters' (t2400-lora.sh's
# tolerance: the same products, the adapter's rounded apart from W's or into it)
expect_ok "export --merge" "$ZT" export full --merge --out merged
printf '[model]\npath = "m"\ndtype = "fp32"\n[data]\ntrain = "train.jsonl"\nformat = "tokens"\nmax_length = 32\n' > e.toml
base=$("$ZT" eval e.toml) && adapted=$("$ZT" eval e.toml --checkpoint full/final) \
  && merged=$("$ZT" eval e.toml --checkpoint merged) && $PY -c "
import json; b, a, m = json.loads('$base'), json.loads('$adapted'), json.loads('$merged')
assert abs(b['loss'] - a['loss']) > 1e-4 * a['loss'], (b, a)  # the adapters matter: 10 times the tolerance
assert abs(a['loss'] - m['loss']) < 1e-5 * a['loss'], (a, m)" && say "ok - the merged model's loss is the adapters'" \
  || fail "base: $base, merged: $merged, with adapters: $adapted"

# on a device (the CPU posing as one: the norms, the outputs' scaling, the magnitudes' gradient and
# the dropout masks through the backend's kernels, the magnitudes started there) bitwise as on the
# CPU; zt eval of the adapter there likewise
expect_ok "DoRA as a device" env ZT_CPU_AS_DEVICE=1 "$ZT" pretrain dora.toml output.dir=dev
cmp -s full/final/adapter_model.safetensors dev/final/adapter_model.safetensors \
  && say "ok - DoRA on a device trains bitwise as on the CPU" || fail "DoRA: the device path differs"
dev_eval=$(env ZT_CPU_AS_DEVICE=1 "$ZT" eval e.toml --checkpoint full/final) && [ "$dev_eval" = "$adapted" ] \
  && say "ok - zt eval of the DoRA adapter on a device: the CPU's loss" || fail "eval as a device: $dev_eval, $adapted"

# refusals
expect_exit 2 "lora.method with lora.adapter" "lora.adapter supplies the method .*: leave lora.method unset" \
  "$ZT" pretrain dora.toml output.dir=x lora.r=0 lora.adapter=full/final
done_testing
