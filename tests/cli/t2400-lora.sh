#!/usr/bin/env bash
# LoRA: zt's loss with a PEFT adapter against the NumPy reference (tests/cli/llama_ref.py,
# which merges W + s·B·A as PEFT's forward computes it); a LoRA run's final/ is a PEFT
# adapter directory (names, shapes, adapter_config.json) and the base is not written; a run
# cut after a checkpoint resumes bitwise (dropout included); a checkpoint refuses another base;
# lora.adapter starts from an adapter; 2 ranks at ZeRO stages 1 and 2 match 1 rank; what is
# not supported yet exits 2 naming the keys. Phi-3's fused qkv_proj and gate_up_proj take one
# adapter each, as PEFT's: PEFT's adapter trains in zt as in PEFT, and zt's merges.
. "$(dirname "$0")/lib.sh"
export ROOT  # the Python checks read safetensors with llama_ref.py's reader

make_tiny m && $PY "$ROOT/tests/cli/llama_ref.py" perturb m || { fail "setup"; exit 1; }
$PY - <<'PY'
import json, random
r = random.Random(11)
with open("data.jsonl", "w") as f:
    for n in (5, 17, 9, 30, 2, 12):
        f.write(json.dumps({"input_ids": [r.randrange(64) for _ in range(n)]}) + "\n")
PY
printf '[model]\npath = "m"\ndtype = "fp32"\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 32\nshuffle = false\n[train]\nmicro_batch_size = 2\nmax_steps = 1\n' > eval.toml

# parity: the tolerance is t0500-reference.sh's (zt in fp32 against float64, dot products of at
# most 64 terms; an adapter adds one product of r = 4 terms and one of at most 64 to a layer's
# output, the same size of error again): 1e-5 relative
parity() { # parity NAME R ALPHA RSLORA MODULE...
  local name=$1; shift
  rm -rf ad && $PY "$ROOT/tests/cli/llama_ref.py" adapter m ad "$@" || { fail "$name: adapter"; return; }
  local base ref got ckpt
  base=$($PY "$ROOT/tests/cli/llama_ref.py" loss m data.jsonl)
  ref=$($PY "$ROOT/tests/cli/llama_ref.py" loss m data.jsonl ad)
  got=$("$ZT" eval eval.toml lora.adapter=ad) || { fail "$name: zt eval"; cat "$TMP/err" >&2; return; }
  ckpt=$("$ZT" eval eval.toml --checkpoint ad) || { fail "$name: zt eval --checkpoint"; return; }
  $PY - "$base" "$ref" "$got" "$ckpt" <<'PY' && say "ok - $name: $ref" || fail "$name: base $base, reference $ref, zt $got, --checkpoint $ckpt"
import json, sys
base, ref, got, ckpt = (json.loads(a) for a in sys.argv[1:])
assert abs(base["loss"] - ref["loss"]) > 1e-3 * ref["loss"]  # the adapters matter: 100 times the tolerance
assert ref["tokens"] == got["target_tokens"]
assert abs(ref["loss"] - got["loss"]) < 1e-5 * ref["loss"]
assert got == ckpt
PY
}
parity "every linear layer" 4 8 false q_proj k_proj v_proj o_proj gate_proj up_proj down_proj
parity "rsLoRA on k, o and down" 3 5 true k_proj o_proj down_proj

# 10 AdamW steps from PEFT's adapter (tests/fixtures/lora: the losses torch and PEFT logged with
# the same settings, expected.json's train_losses), compared without Python. The first loss
# agrees to 3e-8 (test_lora_peft.c), the later ones drift apart as fp32 roundings of the
# gradients feed AdamW's steps of 1e-2 (measured: 6e-6 at step 10); 1e-4 relative is 16 times
# that, and 12 times smaller than what leaving out the weight decay changes (1.2e-3; the
# second moment's beta 0.95 for 0.999: 7e-3; no clipping: 4e-2). The same from PEFT's adapter on
# a tiny Phi-3 (phi3/: qkv_proj and gate_up_proj adapted as one module each; measured: 1.3e-5
# at step 10, 2.9e-6 before it: 1e-4 is 7 times that)
F=$ROOT/tests/fixtures/lora
peft_steps llama "$F/base" "$F/adapter" train_losses
peft_steps phi3 "$F/phi3/base" "$F/phi3/adapter" phi3_train_losses
# LoRA+ (lora.loraplus_lr_ratio = 16: B at 16 times A's learning rate of 1e-2, PEFT's
# create_loraplus_optimizer): steps of 0.16 make the run chaotic, so only the first 5 losses are
# compared (measured: 1.8e-6 at step 5, 1.2e-5 at step 6, 5e-4 at step 9); without the ratio step 2 is
# already 1.3e-2 off
peft_steps loraplus "$F/base" "$F/adapter" loraplus_train_losses 5 "loraplus_lr_ratio = 16"

# training: final/ is a PEFT adapter directory
random_tokens train.jsonl 7 80
printf '[model]\npath = "m"\ndtype = "fp32"\n[data]\ntrain = "train.jsonl"\nformat = "tokens"\nmax_length = 32\n[train]\nmax_steps = 6\nsave_steps = 2\nmicro_batch_size = 2\ngradient_accumulation_steps = 2\nlearning_rate = 1e-2\nlogging_steps = 1\n[lora]\nr = 4\nalpha = 16\ndropout = 0.1\ntarget_modules = "all-linear"\n' > lora.toml
expect_ok "LoRA run" "$ZT" pretrain lora.toml output.dir=full
[ ! -e full/final/model.safetensors ] && say "ok - final/ holds no base weights" || fail "final/ has model.safetensors"
$PY - <<'PY' && say "ok - final/ is a PEFT adapter directory" || fail "final/ is not what PEFT reads"
import json
exec(open(__import__("os").environ["ROOT"] + "/tests/cli/llama_ref.py").read().split("def inv_freq")[0])
c = json.load(open("full/final/adapter_config.json"))
want = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 4, "lora_alpha": 16, "lora_dropout": 0.1, "bias": "none",
        "use_dora": False, "use_rslora": False, "modules_to_save": None}
assert all(c[k] == v for k, v in want.items()), c
assert c["base_model_name_or_path"].endswith("/m"), c
mods = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
assert c["target_modules"] == mods, c
A = read_st("full/final/adapter_model.safetensors")
W = read_st("m/model.safetensors")
names = set()
for l in range(2):
    for mod in mods:
        p = "model.layers.%d.%s.%s" % (l, "mlp" if mod in mods[4:] else "self_attn", mod)
        o, i = W[p + ".weight"].shape
        a, b = A["base_model.model." + p + ".lora_A.weight"], A["base_model.model." + p + ".lora_B.weight"]
        assert a.shape == (4, i) and b.shape == (o, 4), (p, a.shape, b.shape)
        assert abs(b).max() > 0  # trained away from B = 0
        names |= {"base_model.model." + p + ".lora_A.weight", "base_model.model." + p + ".lora_B.weight"}
assert set(A) == names, sorted(set(A) ^ names)
PY
$PY -c "
import json; rows = [json.loads(l) for l in open('full/metrics.jsonl')]
assert rows[-1]['loss'] < rows[0]['loss'], rows" && say "ok - the loss falls" || fail "the loss did not fall"

# resume: cut after the step-4 checkpoint, the same adapters bit for bit (dropout masks follow the step)
cp -r full cut && rm -rf cut/final cut/summary.json cut/checkpoints/step-000006
expect_ok "resume" "$ZT" pretrain lora.toml output.dir=cut
cmp -s full/final/adapter_model.safetensors cut/final/adapter_model.safetensors && say "ok - resumed adapters are bitwise identical" \
  || fail "resumed adapters differ"
grep -q '"base_hash"' full/checkpoints/step-000004/trainer_state.json && say "ok - the checkpoint records the base" \
  || fail "no base_hash in trainer_state.json"
# the same path, other weights: refused
cp -r full rebased && rm -rf rebased/final rebased/summary.json && mkdir m2 && cp m/* m2/
"$ZT" init --arch llama --out other --seed 2 hidden_size=32 intermediate_size=64 num_hidden_layers=2 \
  num_attention_heads=4 num_key_value_heads=2 vocab_size=64 max_position_embeddings=64 >/dev/null 2>&1
cp other/model.safetensors m/model.safetensors
expect_exit 2 "resume onto another base" "LoRA adapters trained on another base model" \
  "$ZT" pretrain lora.toml output.dir=rebased
cp m2/model.safetensors m/model.safetensors
expect_exit 2 "resume of a LoRA checkpoint without lora.*" "holds LoRA adapters: resume it with the run's lora" \
  "$ZT" pretrain lora.toml output.dir=rebased lora.r=0 train.resume_force=true

# lora.adapter: a run from final/ with a learning rate of 0 writes the same adapters back
expect_ok "start from an adapter" "$ZT" pretrain lora.toml output.dir=again lora.r=0 lora.adapter=full/final \
  train.learning_rate=0 train.max_steps=1
cmp -s full/final/adapter_model.safetensors again/final/adapter_model.safetensors && say "ok - the adapter loaded and saved unchanged" \
  || fail "the adapter changed"
$PY -c "
import json; c = json.load(open('again/final/adapter_config.json')); assert c['r'] == 4 and c['lora_alpha'] == 16, c" \
  && say "ok - r and alpha from adapter_config.json" || fail "adapter_config.json not taken"

# zt export --merge: the base with W + s·B·A, whose loss is the adapters' (the tolerance of the
# parity checks above: the same products, the adapter's rounded apart from W's or into it)
expect_exit 2 "export of a LoRA run without --merge" "holds LoRA adapters: export the run's final/ with --merge" \
  "$ZT" export full --out plain
expect_ok "export --merge" "$ZT" export full --merge --out merged
printf '[model]\npath = "m"\ndtype = "fp32"\n[data]\ntrain = "train.jsonl"\nformat = "tokens"\nmax_length = 32\n' > e.toml
adapted=$("$ZT" eval e.toml --checkpoint full/final) && merged=$("$ZT" eval e.toml --checkpoint merged) \
  && $PY -c "
import json, sys; a, m = json.loads('$adapted'), json.loads('$merged')
assert abs(a['loss'] - m['loss']) < 1e-5 * a['loss'], (a, m)" && say "ok - the merged model's loss is the adapters'" \
  || fail "merged: $merged, with adapters: $adapted"

# bad adapters and combinations not supported yet
cp -r full/final saved && $PY -c "
import json; p = 'saved/adapter_config.json'; c = json.load(open(p)); c['modules_to_save'] = ['norm']; json.dump(c, open(p, 'w'))"
expect_exit 2 "an adapter with modules_to_save zt cannot train" "saved/adapter_config.json': 'modules_to_save' names a module zt cannot train whole" \
  "$ZT" pretrain lora.toml output.dir=d lora.r=0 lora.adapter=saved
cp -r full/final badname && $PY - <<'PY'
exec(open(__import__("os").environ["ROOT"] + "/tests/cli/llama_ref.py").read().split("def inv_freq")[0])
A = read_st("badname/adapter_model.safetensors")
A["base_model.model.model.layers.9.self_attn.q_proj.lora_A.weight"] = A.pop("base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight")
write_st("badname/adapter_model.safetensors", A)
PY
expect_exit 2 "an adapter for another model" "tensor 'base_model.model.model.layers.9.self_attn.q_proj.lora_A.weight' is not an adapter" \
  "$ZT" pretrain lora.toml output.dir=b lora.r=0 lora.adapter=badname
expect_exit 2 "an unknown target" "lora.target_modules: 'qkv' is not one of" "$ZT" pretrain lora.toml output.dir=u \
  'lora.target_modules=[q_proj, qkv]'

# Phi-3: PEFT adapts the fused qkv_proj and gate_up_proj as one module each; all-linear is those,
# o_proj and down_proj, and the merged model's loss is the adapters'
make_tiny phimodel model_type=phi3 partial_rotary_factor=0.75 && $PY "$ROOT/tests/cli/llama_ref.py" perturb phimodel \
  || fail "phi3 model"
expect_ok "LoRA on Phi-3, all-linear" "$ZT" pretrain lora.toml output.dir=phi model.path=phimodel train.save_steps=0
$PY -c "
import json; c = json.load(open('phi/final/adapter_config.json'))
assert c['target_modules'] == ['o_proj', 'down_proj', 'qkv_proj', 'gate_up_proj'], c" \
  && say "ok - ...on qkv_proj, o_proj, gate_up_proj and down_proj" || fail "Phi-3's target_modules"
expect_ok "export --merge of the Phi-3 adapters" "$ZT" export phi --merge --out phimerged
adapted=$("$ZT" eval e.toml model.path=phimodel --checkpoint phi/final) && merged=$("$ZT" eval e.toml --checkpoint phimerged) \
  && $PY -c "
import json, sys; a, m = json.loads('$adapted'), json.loads('$merged')
assert abs(a['loss'] - m['loss']) < 1e-5 * a['loss'], (a, m)" && say "ok - the merged Phi-3's loss is the adapters'" \
  || fail "Phi-3 merged: $merged, with adapters: $adapted"
expect_exit 2 "Llama's default targets on Phi-3" \
  "lora: target_modules \(q_proj, v_proj\) name no module of a phi3 model \(it has o_proj, down_proj, qkv_proj, gate_up_proj\)" \
  "$ZT" pretrain lora.toml output.dir=phidef model.path=phimodel 'lora.target_modules=[q_proj, v_proj]'
# as PEFT, names the model lacks are left out: a Llama list adapts Phi-3's o_proj alone
expect_ok "a Llama list on Phi-3" "$ZT" pretrain lora.toml output.dir=phio model.path=phimodel \
  'lora.target_modules=[q_proj, o_proj]' train.max_steps=1
grep -q "target_modules q_proj name no module of a phi3 model .*: not adapted" "$TMP/err" \
  && $PY -c "import json; assert json.load(open('phio/final/adapter_config.json'))['target_modules'] == ['o_proj']" \
  && say "ok - ...with a warning, o_proj alone" || fail "a Llama list on Phi-3: $(cat "$TMP/err")"
# PEFT saves all-linear as each layer's module path (phi3/adapter): a module in part of the layers, or
# a path zt does not know, is refused
paths() { # paths KEEP ADD WHAT MESSAGE: phi3/adapter with the target_modules paths holding KEEP, and ADD
  rm -rf part && cp -r "$F/phi3/adapter" part && $PY - "$1" "$2" <<'PY'
import json, sys
c = json.load(open("part/adapter_config.json"))
c["target_modules"] = [t for t in c["target_modules"] if sys.argv[1] in t] + sys.argv[2:3] * (sys.argv[2] != "")
json.dump(c, open("part/adapter_config.json", "w"))
PY
  expect_exit 2 "$3" "$4" "$ZT" pretrain lora.toml output.dir=p1 lora.r=0 lora.adapter=part model.path="$F/phi3/base"
}
paths .layers.0. "" "an adapter on layer 0 of Phi-3's two" \
  "target_modules name (o_proj|down_proj|qkv_proj|gate_up_proj) in layers 0 to 0 of the model's 2: adapters on part of the layers"
paths .layers.1. "" "an adapter on layer 1 of Phi-3's two" \
  "part/adapter_config.json': 'target_modules' names (o_proj|down_proj|qkv_proj|gate_up_proj) in some layers only"
paths . model.layers.0.attn.qkv_proj "a module path zt does not know" \
  "part/adapter_config.json': 'target_modules': 'model.layers.0.attn.qkv_proj' is not one of"

# several ranks: the adapters replicated, their gradients reduced (stage 1: all-reduce, 2:
# reduce-scatter); 2 ranks × 1 micro-batch against 1 rank × 2, no dropout (each rank draws its
# own masks). The same products, summed over ranks in another grouping: 1e-5 of each tensor's
# largest as in t1500-zero.sh. adam_epsilon = 1 makes AdamW's step about lr·m (the gradients are
# far below 1), linear in the gradient: with the default 1e-8 an element whose gradient is
# rounding noise (B starts at zero) still moves by lr·m/sqrt(v), a full step whose sign the noise
# picks, and lora_B differed by 1e-4 of its largest with OpenBLAS's Zen and Haswell kernels.
command -v mpirun >/dev/null || { say "skip: no mpirun for the multi-rank part"; done_testing; exit; }
need_mpi
expect_ok "1 rank" "$ZT" pretrain lora.toml output.dir=one lora.dropout=0 train.save_steps=0 train.adam_epsilon=1
for stage in 1 2; do
  expect_ok "2 ranks, stage $stage" $MPI -np 2 "$ZT" pretrain lora.toml output.dir=two$stage lora.dropout=0 \
    train.save_steps=0 train.adam_epsilon=1 train.gradient_accumulation_steps=1 zero.stage=$stage
  $PY - two$stage <<'PY' && say "ok - stage $stage on 2 ranks matches 1 rank" || fail "stage $stage on 2 ranks differs"
import sys
import numpy as np
exec(open(__import__("os").environ["ROOT"] + "/tests/cli/llama_ref.py").read().split("def inv_freq")[0])
a, b = read_st("one/final/adapter_model.safetensors"), read_st(sys.argv[1] + "/final/adapter_model.safetensors")
assert set(a) == set(b)
for t in a:
    assert np.abs(a[t] - b[t]).max() <= 1e-5 * max(np.abs(a[t]).max(), 1e-30), t
PY
done
done_testing
