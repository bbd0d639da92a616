#!/usr/bin/env bash
# lora.layers_to_transform: the adapters on the named layers alone, as PEFT's layers_to_transform.
# 10 AdamW steps from PEFT's adapter on layer 1 of 2 log PEFT's losses; a run on layers 0 and 2 of
# 3 saves their adapters alone and says so in adapter_config.json, and zt eval of it is that of its
# merged export; what cannot work exits 2 naming the key (t2420-lora-zero3.sh: stage 3 on 2 ranks
# as 1 rank, the base streamed bitwise).
. "$(dirname "$0")/lib.sh"
export ROOT

# 10 steps from tests/fixtures/lora/layers (make_saved_fixture.py: PEFT 0.15.2 with t2400-lora.sh's
# settings; the first loss agrees within 4.4e-8, test_lora_peft.c; the steps drift as t2440's: 1e-4)
F=$ROOT/tests/fixtures/lora
printf '[model]\npath = "%s/base"\ndtype = "fp32"\n[data]\ntrain = "%s/layers/data.jsonl"\nformat = "tokens"\nmax_length = 32\npacking = false\nshuffle = false\n[train]\nmax_steps = 10\nmicro_batch_size = 2\nlogging_steps = 1\nlearning_rate = 1e-2\nlr_scheduler_type = "constant"\nweight_decay = 0.01\nadam_beta1 = 0.9\nadam_beta2 = 0.999\nadam_epsilon = 1e-8\nmax_grad_norm = 1.0\n[lora]\nadapter = "%s/layers/adapter"\n' \
  "$F" "$F" "$F" > peft.toml
expect_ok "10 steps from PEFT's adapter on layer 1" "$ZT" pretrain peft.toml output.dir=peft
peft_losses peft "$F/layers/expected.json" "layer 1 of 2"

# a fresh run on layers 0 and 2 of 3
make_tiny m num_hidden_layers=3 && $PY "$ROOT/tests/cli/llama_ref.py" perturb m
random_tokens data.jsonl 3 40
printf '[model]\npath = "m"\ndtype = "fp32"\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 32\n[train]\nmax_steps = 6\nmicro_batch_size = 2\nlearning_rate = 1e-2\nlogging_steps = 1\n[lora]\nr = 4\nalpha = 16\ndropout = 0.1\ntarget_modules = "all-linear"\nlayers_to_transform = [2, 0]\n' > lora.toml
expect_ok "layers 0 and 2 of 3" "$ZT" pretrain lora.toml output.dir=run
$PY - <<'PY' && say "ok - final/ holds layers 0 and 2's adapters and names them" || fail "final/"
import json, os
exec(open(os.environ["ROOT"] + "/tests/cli/llama_ref.py").read().split("def inv_freq")[0])
c = json.load(open("run/final/adapter_config.json"))
assert c["layers_to_transform"] == [2, 0] and c["layers_pattern"] is None, c
A = read_st("run/final/adapter_model.safetensors")
layers = sorted({int(k.split(".layers.")[1].split(".")[0]) for k in A})
assert layers == [0, 2] and len(A) == 2 * 7 * 2, (layers, len(A))
assert all(abs(A[k]).max() > 0 for k in A if "lora_B" in k)  # trained
PY
expect_ok "export --merge" "$ZT" export run --merge --out merged
printf '[model]\npath = "m"\ndtype = "fp32"\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 32\n' > e.toml
# the adapters' products merged into W: t2400-lora.sh's bound, 1e-5 relative
adapted=$("$ZT" eval e.toml --checkpoint run/final) && merged=$("$ZT" eval e.toml --checkpoint merged) && $PY -c "
import json; a, m = json.loads('$adapted'), json.loads('$merged')
assert abs(a['loss'] - m['loss']) < 1e-5 * a['loss'], (a, m)" && say "ok - zt eval of the adapter is the merged model's" \
  || fail "eval: adapter $adapted, merged $merged"

# refusals
expect_exit 2 "a layer the model lacks" "lora: layers_to_transform: 3 is not a layer of the model \(layers 0 to 2\)" \
  "$ZT" pretrain lora.toml output.dir=x 'lora.layers_to_transform=[0, 3]'
expect_exit 2 "a layer twice" "lora: layers_to_transform names layer 2 twice" \
  "$ZT" pretrain lora.toml output.dir=x 'lora.layers_to_transform=[2, 0, 2]'
expect_exit 2 "a layer by name" "lora.layers_to_transform.*: expected integers from 0, got a string" \
  "$ZT" pretrain lora.toml output.dir=x 'lora.layers_to_transform=["layers.1"]'
expect_exit 2 "without lora.r" "lora.layers_to_transform places LoRA's adapters: set lora.r too" \
  "$ZT" pretrain lora.toml output.dir=x lora.r=0
expect_exit 2 "with lora.adapter" "lora.adapter supplies layers_to_transform from its adapter_config.json" \
  "$ZT" pretrain lora.toml output.dir=x lora.r=0 lora.adapter=run/final
$PY -c "
import json; p = 'run/final/adapter_config.json'; c = json.load(open(p)); c['layers_pattern'] = 'h'; json.dump(c, open(p, 'w'))"
expect_exit 2 "another layers_pattern" "'layers_pattern' must be null or \"layers\"" \
  "$ZT" eval e.toml --checkpoint run/final
done_testing
