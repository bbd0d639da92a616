#!/usr/bin/env bash
# Mixtures of experts through the CLI: zt init makes Qwen3-MoE, Mixtral, OLMoE and Qwen2-MoE (a
# shared expert) models; zt
# pretrain trains them with the load-balancing loss (output_router_logits) logged and in the
# loss; on 2 ranks under ZeRO stage 3 like one rank; with activation checkpointing bitwise as
# without; in bf16 near fp32; zt generate and zt export take them; LoRA adapters on their
# attention, router and experts train as PEFT's; DPO adds the load-balancing loss; bad expert keys
# are refused by name. (Their parity with
# transformers: test_parity and t0510-saved-parity.sh; their gradients: test_grad_model.)
. "$(dirname "$0")/lib.sh"
need_mpi

make_tiny qwen3_moe model_type=qwen3_moe num_experts=4 num_experts_per_tok=2 moe_intermediate_size=24 head_dim=8 \
  norm_topk_prob=true output_router_logits=true router_aux_loss_coef=0.05 max_position_embeddings=64 &&
  $PY "$ROOT/tests/cli/llama_ref.py" perturb qwen3_moe || fail "qwen3_moe model"
make_tiny mixtral model_type=mixtral num_local_experts=3 num_experts_per_tok=2 max_position_embeddings=64 ||
  fail "mixtral model"
make_tiny olmoe model_type=olmoe num_experts=5 num_experts_per_tok=3 pad_token_id=-1 max_position_embeddings=64 ||
  fail "olmoe model"
make_tiny qwen2_moe model_type=qwen2_moe num_experts=4 num_experts_per_tok=2 moe_intermediate_size=16 \
  shared_expert_intermediate_size=40 output_router_logits=true router_aux_loss_coef=0.05 max_position_embeddings=64 &&
  $PY "$ROOT/tests/cli/llama_ref.py" perturb qwen2_moe || fail "qwen2_moe model"
grep -qE '"num_local_experts":\s+3' mixtral/config.json && grep -qE '"num_experts":\s+5' olmoe/config.json &&
  grep -qE '"moe_intermediate_size":\s+24' qwen3_moe/config.json &&
  grep -qE '"shared_expert_intermediate_size":\s+40' qwen2_moe/config.json && say "ok - zt init writes the experts' keys" ||
  fail "zt init: the experts' keys"
random_tokens data.jsonl 7 60
printf '[model]\ndtype = "fp32"\nactivation_checkpointing = false\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 32\npacking = false\n[train]\nmax_steps = 4\nmicro_batch_size = 1\nlearning_rate = 1e-2\nadam_epsilon = 1\nlogging_steps = 1\n[zero]\nstage = 3\n' > recipe.toml

same() { $PY "$ROOT/tests/cli/same_run.py" "$@"; }
bitwise() { cmp -s "$1/final/model.safetensors" "$2/final/model.safetensors" && [ "$(loss_bits "$1")" = "$(loss_bits "$2")" ]; }
loss_bits() { $PY -c "import json, sys; print([json.loads(l)['loss'].hex() for l in open(sys.argv[1])])" "$1/metrics.jsonl"; }
for fam in qwen3_moe mixtral olmoe qwen2_moe; do
  one() { "$ZT" pretrain recipe.toml model.path=$fam output.dir=$fam-$1 "${@:2}"; }
  two() { $MPI -np 2 "$ZT" pretrain recipe.toml model.path=$fam output.dir=$fam-$1 "${@:2}"; }
  expect_ok "$fam: one rank, accumulation 4" one 1 train.gradient_accumulation_steps=4
  expect_ok "$fam: 2 ranks, accumulation 2" two 2 train.gradient_accumulation_steps=2
  expect_ok "$fam: one rank, checkpointing" one 1c train.gradient_accumulation_steps=4 model.activation_checkpointing=true
  # the passes of a step are the same micro-batches of one row either way, so each pass's
  # load-balancing loss is too; only the sums regroup (t1810-zero3-families.sh: why 1e-5)
  if got=$(same $fam-1 $fam-2); then say "ok - $fam: 2 ranks train like one ($got)"; else fail "$fam: 2 ranks against one"; fi
  bitwise $fam-1 $fam-1c && say "ok - $fam: checkpointing bitwise as without" || fail "$fam: checkpointing differs"
done
# on a device (the CPU posing as one): the router's and the shared expert's gate logits downloaded,
# the pairs' and rows' dot products staged through host memory; bitwise the CPU
expect_ok "qwen2_moe: as a device" env ZT_CPU_AS_DEVICE=1 "$ZT" pretrain recipe.toml model.path=qwen2_moe \
  output.dir=qwen2_moe-dev train.gradient_accumulation_steps=4
bitwise qwen2_moe-1 qwen2_moe-dev && say "ok - qwen2_moe: on a device bitwise as on the CPU" ||
  fail "qwen2_moe: the device path differs"

# the load-balancing loss: logged every step; with output_router_logits in the loss (Qwen3-MoE here)
$PY - <<'PY' && say "ok - $(cat msg)" || fail "router_aux_loss in metrics.jsonl"
import json
rows = [json.loads(l) for l in open("qwen3_moe-1/metrics.jsonl")]
aux = [r["router_aux_loss"] for r in rows if "router_aux_loss" in r]
assert len(aux) == 4 and all(a > 0 for a in aux), aux
rows = [json.loads(l) for l in open("mixtral-1/metrics.jsonl")]
assert all(r["router_aux_loss"] > 0 for r in rows if "loss" in r and "router_aux_loss" in r)
open("msg", "w").write("router_aux_loss logged at every step: " + ", ".join(f"{a:.4f}" for a in aux))
PY
# output_router_logits: the step's loss is the cross-entropy plus the coefficient times it; the
# same model without it (output_router_logits false) differs by that much at step 1
cp -r qwen3_moe qwen3_moe_noaux && $PY - <<'PY' || fail "qwen3_moe_noaux"
import json
c = json.load(open("qwen3_moe_noaux/config.json")); c["output_router_logits"] = False
json.dump(c, open("qwen3_moe_noaux/config.json", "w"))
PY
"$ZT" pretrain recipe.toml model.path=qwen3_moe_noaux output.dir=noaux train.max_steps=1 \
  train.gradient_accumulation_steps=4 >/dev/null 2>&1 || fail "pretrain without the load-balancing loss"
$PY - <<'PY' && say "ok - $(cat msg)" || fail "the load-balancing loss in the loss"
import json
a = [json.loads(l) for l in open("qwen3_moe-1/metrics.jsonl") if '"loss"' in l][0]
b = [json.loads(l) for l in open("noaux/metrics.jsonl") if '"loss"' in l][0]
d = a["loss"] - b["loss"]
assert abs(d - 0.05 * a["router_aux_loss"]) <= 1e-6 * a["loss"], (a, b)
open("msg", "w").write(f"step 1's loss {a['loss']:.6f} is the cross-entropy {b['loss']:.6f} plus 0.05 x {a['router_aux_loss']:.6f}")
PY

# bf16 against fp32 over the 4 steps: within 1e-2 (the issue's bound for bf16 training)
expect_ok "qwen3_moe: bf16" "$ZT" pretrain recipe.toml model.path=qwen3_moe output.dir=bf16 model.dtype=bf16 \
  train.gradient_accumulation_steps=4
$PY - <<'PY' && say "ok - $(cat msg)" || fail "bf16 against fp32"
import json
a = [json.loads(l)["loss"] for l in open("qwen3_moe-1/metrics.jsonl") if '"loss"' in l]
b = [json.loads(l)["loss"] for l in open("bf16/metrics.jsonl") if '"loss"' in l]
worst = max(abs(x - y) / x for x, y in zip(a, b))
assert len(a) == len(b) == 4 and worst <= 1e-2 and a != b, (a, b)
open("msg", "w").write(f"bf16 losses within {worst:.2g} of fp32's")
PY

# export of the trained model
expect_ok "qwen3_moe: zt export" "$ZT" export qwen3_moe-1/final --out exported
$PY - <<'PY' && say "ok - the exported model has the router and every expert" || fail "export: tensor names"
import json, struct
blob = open("exported/model.safetensors", "rb").read()
names = json.loads(blob[8:8 + struct.unpack("<Q", blob[:8])[0]])
for l in range(2):
    assert f"model.layers.{l}.mlp.gate.weight" in names
    for e in range(4):
        for p in ("gate_proj", "up_proj", "down_proj"):
            assert f"model.layers.{l}.mlp.experts.{e}.{p}.weight" in names, (l, e, p)
PY

# LoRA: PEFT's all-linear adapters of a Qwen3-MoE, a Mixtral and a Qwen2-MoE model (the attention,
# the router and every expert, Qwen2-MoE's shared expert and its gate:
# tests/fixtures/lora/make_moe_fixture.py) train 10 steps to PEFT's losses, within t2400-lora.sh's
# bound (the same products, each expert's on its rows); on 2 ranks under ZeRO stage 3 like one rank;
# DoRA on the experts is refused
F=$ROOT/tests/fixtures/lora/moe
for fam in qwen3_moe mixtral qwen2_moe; do
  peft_steps "$fam" "$F/$fam/base" "$F/$fam/adapter" ${fam}_train_losses 10 "" "$F/expected.json"
done
printf '[lora]\nr = 4\nalpha = 8\ntarget_modules = "all-linear"\n' > lora.toml
cat recipe.toml lora.toml > lora_recipe.toml
expect_ok "qwen3_moe: LoRA all-linear, one rank" "$ZT" sft lora_recipe.toml model.path=qwen3_moe output.dir=lora1 \
  train.gradient_accumulation_steps=2
expect_ok "qwen3_moe: LoRA all-linear, 2 ranks" $MPI -np 2 "$ZT" sft lora_recipe.toml model.path=qwen3_moe \
  output.dir=lora2 train.gradient_accumulation_steps=1
$PY - <<'PY' && say "ok - $(cat msg)" || fail "LoRA on a mixture of experts: 2 ranks against one"
import json
a = [json.loads(l)["loss"] for l in open("lora1/metrics.jsonl") if '"loss"' in l]
b = [json.loads(l)["loss"] for l in open("lora2/metrics.jsonl") if '"loss"' in l]
worst = max(abs(x - y) / x for x, y in zip(a, b))
assert len(a) == len(b) == 4 and worst <= 1e-5, (a, b)
cfg = json.load(open("lora1/final/adapter_config.json"))
assert sorted(cfg["target_modules"]) == sorted(["q_proj", "k_proj", "v_proj", "o_proj", "gate", "gate_proj", "up_proj", "down_proj"]), cfg
open("msg", "w").write(f"LoRA on 2 ranks within {worst:.2g} of one rank; target_modules {cfg['target_modules']}")
PY
# dropout on the experts' rows (its masks keyed by expert, rank and pass: t2400-lora.sh checks resuming)
expect_ok "qwen3_moe: LoRA all-linear with dropout" "$ZT" sft lora_recipe.toml model.path=qwen3_moe \
  output.dir=lora-drop lora.dropout=0.1
cmp -s lora1/final/adapter_model.safetensors lora-drop/final/adapter_model.safetensors &&
  fail "dropout changes nothing" || say "ok - dropout changes the trained adapters"
expect_exit 2 "qwen3_moe: DoRA on the experts refused" "DoRA.*experts" \
  "$ZT" pretrain lora_recipe.toml model.path=qwen3_moe output.dir=lora3 lora.method=dora lora.dropout=0
# Qwen2-MoE: gate_proj, up_proj and down_proj name the shared expert's too (as PEFT matches names), and
# shared_expert_gate its gate; on 2 ranks like one rank; QLoRA encodes the shared expert and its gate
expect_ok "qwen2_moe: LoRA on the MLPs, one rank" "$ZT" sft lora_recipe.toml model.path=qwen2_moe output.dir=q2lora1 \
  'lora.target_modules=["gate_proj", "up_proj", "down_proj", "shared_expert_gate"]' train.gradient_accumulation_steps=2
expect_ok "qwen2_moe: LoRA on the MLPs, 2 ranks" $MPI -np 2 "$ZT" sft lora_recipe.toml model.path=qwen2_moe \
  output.dir=q2lora2 'lora.target_modules=["gate_proj", "up_proj", "down_proj", "shared_expert_gate"]'
expect_ok "qwen2_moe: QLoRA all-linear" "$ZT" sft lora_recipe.toml model.path=qwen2_moe output.dir=q2qlora \
  lora.quantize_base=nf4 train.gradient_accumulation_steps=2
$PY - <<'PY' && say "ok - $(cat msg)" || fail "LoRA on Qwen2-MoE's shared expert"
import json, struct
a = [json.loads(l)["loss"] for l in open("q2lora1/metrics.jsonl") if '"loss"' in l]
b = [json.loads(l)["loss"] for l in open("q2lora2/metrics.jsonl") if '"loss"' in l]
worst = max(abs(x - y) / x for x, y in zip(a, b))
assert len(a) == len(b) == 4 and worst <= 1e-5, (a, b)
cfg = json.load(open("q2lora1/final/adapter_config.json"))
assert sorted(cfg["target_modules"]) == ["down_proj", "gate_proj", "shared_expert_gate", "up_proj"], cfg
blob = open("q2lora1/final/adapter_model.safetensors", "rb").read()
names = json.loads(blob[8:8 + struct.unpack("<Q", blob[:8])[0]])
for m in ("shared_expert.gate_proj", "shared_expert.up_proj", "shared_expert.down_proj", "shared_expert_gate",
          "experts.3.down_proj"):
    assert f"base_model.model.model.layers.1.mlp.{m}.lora_B.weight" in names, m
q = [json.loads(l)["loss"] for l in open("q2qlora/metrics.jsonl") if '"loss"' in l]
assert len(q) == 4 and q[-1] < q[0], q
open("msg", "w").write(f"LoRA on the experts and the shared expert: 2 ranks within {worst:.2g} of one rank; QLoRA {q[0]:.4f} -> {q[-1]:.4f}")
PY

# QLoRA: the router and every expert's weights quantized as bitsandbytes quantizes a mixture
# (test_qbase, test_qbase_bnb: the products, bitsandbytes' checkpoints); 2 ranks under ZeRO stage 3
# (the encodings gathered with their layer) train like one; zt eval of the adapter is zt eval of
# zt export --merge (the dequantized base plus s·B·A, t2410-qlora.sh's bound); zt init --quantize
# writes a mixture in bitsandbytes' format (its router and experts encoded), which QLoRA reads as
# stored (zt generate with a mixture's QLoRA adapter: t2430-lora-generate.sh)
q="lora.quantize_base=nf4 lora.double_quant=true"
expect_ok "qwen3_moe: QLoRA, one rank" "$ZT" sft lora_recipe.toml model.path=qwen3_moe output.dir=qlora1 $q \
  train.gradient_accumulation_steps=2
expect_ok "qwen3_moe: QLoRA, 2 ranks" $MPI -np 2 "$ZT" sft lora_recipe.toml model.path=qwen3_moe \
  output.dir=qlora2 $q train.gradient_accumulation_steps=1
$PY - <<'PY' && say "ok - $(cat msg)" || fail "QLoRA on a mixture of experts: 2 ranks against one"
import json
loss = lambda d: [json.loads(l)["loss"] for l in open(d + "/metrics.jsonl") if '"loss"' in l]
a, b, plain = loss("qlora1"), loss("qlora2"), loss("lora1")
worst = max(abs(x - y) / x for x, y in zip(a, b))
assert len(a) == len(b) == 4 and worst <= 1e-5, (a, b)
assert a[0] != plain[0], (a, plain)  # the quantized base computes another loss
open("msg", "w").write(f"QLoRA on 2 ranks within {worst:.2g} of one rank; step 1 {a[0]:.6f} against {plain[0]:.6f} unquantized")
PY
# streamed from NVMe a layer at a time (the router's and experts' encodings with the layer's
# norms), bitwise the base held whole (t2411-qlora-zero3.sh)
expect_ok "qwen3_moe: QLoRA streamed from NVMe" "$ZT" sft lora_recipe.toml model.path=qwen3_moe output.dir=qlora-nvme \
  $q train.gradient_accumulation_steps=2 offload.param=nvme offload.nvme_path=swap
cmp -s qlora1/final/adapter_model.safetensors qlora-nvme/final/adapter_model.safetensors &&
  say "ok - QLoRA of a mixture streamed from NVMe trains bitwise as held" || fail "QLoRA of a mixture: NVMe differs"
# on a device (the CPU posing as one, t2410-qlora.sh): the encodings there, the tiles dequantized by
# the backend's decoders, the routing staged through host memory; bitwise the CPU
expect_ok "qwen3_moe: QLoRA as a device" env ZT_CPU_AS_DEVICE=1 "$ZT" sft lora_recipe.toml model.path=qwen3_moe \
  output.dir=qlora-dev $q train.gradient_accumulation_steps=2
cmp -s qlora1/final/adapter_model.safetensors qlora-dev/final/adapter_model.safetensors &&
  say "ok - QLoRA of a mixture on a device trains bitwise as on the CPU" || fail "QLoRA of a mixture: the device path differs"
printf '[model]\npath = "qwen3_moe"\ndtype = "fp32"\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 32\n' > e.toml
expect_ok "qwen3_moe: QLoRA export --merge" "$ZT" export qlora1 --merge --out qmerged
adapted=$("$ZT" eval e.toml --checkpoint qlora1/final) && merged=$("$ZT" eval e.toml --checkpoint qmerged) &&
  $PY -c "
import json; a, m = json.loads('$adapted'), json.loads('$merged')
assert abs(a['loss'] - m['loss']) < 1e-5 * a['loss'], (a, m)" &&
  say "ok - zt eval of the QLoRA adapter is zt eval of its merge" || fail "eval: adapter $adapted, merged $merged"
make_tiny qinit model_type=qwen3_moe num_experts=4 num_experts_per_tok=2 moe_intermediate_size=64 head_dim=8 \
  hidden_size=64 max_position_embeddings=64 --quantize nf4 --double-quant || fail "zt init --quantize of qwen3_moe"
$PY - <<'PY' && say "ok - zt init --quantize encodes the router and every expert" || fail "zt init --quantize: $(cat msg)"
import json
raw = open("qinit/model.safetensors", "rb").read()
head = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])
states = {k[: -len(".quant_state.bitsandbytes__nf4")] for k in head if k.endswith(".quant_state.bitsandbytes__nf4")}
want = {f"model.layers.{l}.{n}.weight" for l in range(2) for n in ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
        "self_attn.o_proj", "mlp.gate"] + [f"mlp.experts.{e}.{p}" for e in range(4) for p in ("gate_proj", "up_proj", "down_proj")]}
open("msg", "w").write(str(sorted(states ^ want)))
assert states == want
PY
export ZT_LOG=info
expect_ok "qwen3_moe: QLoRA on zt init --quantize's model" "$ZT" sft lora_recipe.toml model.path=qinit output.dir=qlora3 $q
grep -q "base: linear weights read as stored in nf4 with double_quant" "$TMP/err" &&
  say "ok - the bitsandbytes mixture was read as stored" || fail "not read as stored: $(cat "$TMP/err")"
export ZT_LOG=warn

# bad expert keys, by file and key
cp -r mixtral bad && $PY - <<'PY'
import json
c = json.load(open("bad/config.json")); c["num_experts_per_tok"] = 4
json.dump(c, open("bad/config.json", "w"))
PY
expect_exit 2 "mixtral: num_experts_per_tok above the experts" "bad/config.json.*num_experts_per_tok" \
  "$ZT" pretrain recipe.toml model.path=bad output.dir=bad-run
$PY - <<'PY'
import json
c = json.load(open("bad/config.json")); c["num_experts_per_tok"] = 2; c["router_jitter_noise"] = 0.1
json.dump(c, open("bad/config.json", "w"))
PY
expect_exit 2 "mixtral: router_jitter_noise refused" "bad/config.json.*router_jitter_noise" \
  "$ZT" pretrain recipe.toml model.path=bad output.dir=bad-run
# Qwen2-MoE's: a shared expert of no size, layers without experts, q/k/v biases not a boolean
for edit in '"shared_expert_intermediate_size": 0|shared_expert_intermediate_size' \
            '"mlp_only_layers": [1]|mlp_only_layers' '"decoder_sparse_step": 2|decoder_sparse_step' \
            '"qkv_bias": "yes"|qkv_bias'; do
  rm -rf bad2 && cp -r qwen2_moe bad2
  $PY -c 'import json, sys; p="bad2/config.json"; c=json.load(open(p)); c.update(json.loads("{" + sys.argv[1] + "}")); json.dump(c, open(p,"w"))' "${edit%|*}"
  expect_exit 2 "qwen2_moe: config.json with ${edit%|*}" "bad2/config.json.*${edit#*|}" \
    "$ZT" pretrain recipe.toml model.path=bad2 output.dir=bad-run
done

# a Qwen3-MoE model memorises a text and zt generate (the KV-cache decoder, its experts chosen
# token by token) continues its first words with the rest
if command -v spm_train >/dev/null; then
  story="the quick brown fox jumps over the lazy dog and then runs far away into the green forest"
  for i in $(seq 1 50); do echo "$story number $i is here"; echo "a small cat sleeps on the warm mat $i"; done >corpus.txt
  spm_train --input=corpus.txt --model_prefix=tok --vocab_size=100 --model_type=bpe --minloglevel=2 >/dev/null 2>&1 ||
    fail "spm_train"
  echo "$story" | spm_encode --model=tok.model --output_format=id >ids.txt
  $PY -c "
import json
ids = [1] + [int(x) for x in open('ids.txt').read().split()] + [2]
open('story.jsonl', 'w').write(json.dumps({'input_ids': ids}) + '\n')
"
  make_tiny story model_type=qwen3_moe num_experts=4 num_experts_per_tok=2 moe_intermediate_size=32 head_dim=8 \
    vocab_size=100 bos_token_id=1 eos_token_id=2 max_position_embeddings=64 || fail "story model"
  cp tok.model story/tokenizer.model
  printf '[model]\npath = "story"\ndtype = "fp32"\n[data]\ntrain = "story.jsonl"\nformat = "tokens"\nmax_length = 64\n[train]\nmax_steps = 150\nmicro_batch_size = 1\nlearning_rate = 1e-2\nlr_scheduler_type = "constant"\n' >story.toml
  expect_ok "qwen3_moe: memorise the story" "$ZT" pretrain story.toml output.dir=story-run
  "$ZT" generate --model story-run/final --prompt "the quick brown fox" --max-new-tokens 40 >gen.txt 2>gen.err
  grep -q "jumps over the lazy dog and then runs far away into the green forest" gen.txt &&
    say "ok - zt generate continues the story: $(head -c 120 gen.txt)" || { fail "zt generate: $(cat gen.txt)"; cat gen.err >&2; }
  # DPO on it with output_router_logits: at step 1 the policy is its reference, so the sigmoid
  # loss is log 2 exactly, and the step's loss that plus the coefficient times the logged
  # load-balancing loss (TRL's DPO trainer adds it so)
  cp -r story-run/final story-aux && $PY - <<'PY' || fail "story-aux"
import json
c = json.load(open("story-aux/config.json")); c["output_router_logits"] = True; c["router_aux_loss_coef"] = 0.02
json.dump(c, open("story-aux/config.json", "w"))
with open("pairs.jsonl", "w") as f:
    for i in range(8):
        f.write(json.dumps({"prompt": "the quick brown", "chosen": " fox jumps over the lazy dog",
                            "rejected": " cat sleeps on the warm mat %d" % i}) + "\n")
PY
  printf '[model]\npath = "story-aux"\ndtype = "fp32"\n[data]\ntrain = "pairs.jsonl"\nformat = "preference"\nmax_length = 32\n[train]\nmax_steps = 2\nmicro_batch_size = 2\ngradient_accumulation_steps = 2\nlearning_rate = 1e-3\nlogging_steps = 1\n[rlhf]\nalgorithm = "dpo"\n[output]\ndir = "dpo"\n' >dpo.toml
  expect_ok "qwen3_moe: DPO with the load-balancing loss" "$ZT" rlhf dpo.toml
  $PY - <<'PY' && say "ok - $(cat msg)" || fail "DPO's load-balancing loss"
import json, math
r = [json.loads(l) for l in open("dpo/metrics.jsonl") if '"loss"' in l][0]
want = math.log(2) + 0.02 * r["router_aux_loss"]
assert abs(r["loss"] - want) <= 1e-6, (r, want)
open("msg", "w").write(f"DPO step 1: loss {r['loss']:.7f} = log 2 + 0.02 x {r['router_aux_loss']:.5f}")
PY
else
  fail "spm_train (sentencepiece-tools) is missing"
fi
done_testing
