#!/usr/bin/env bash
# LoRA with zt rlhf: DPO whose reference is the base with the adapters switched off (the
# reference log-probabilities bitwise those of the same model trained fully, although the
# adapter it starts from moves the policy's), a first loss of ln 2 from fresh adapters, the
# loss falling and the preferences learnt, final/ a PEFT adapter directory, ZeRO stages 1, 2
# and 3 on 2 ranks against 1 rank; GRPO and PPO with a LoRA actor (the reference the base with the
# adapters off, generation through the adapters: as the merged model against the base; at ZeRO
# stage 3 on 2 ranks, generating from the gathered base, as 1 rank) and PPO's LoRA critic (a PEFT
# SEQ_CLS adapter directory, resumed bit for bit); a reward
# model whose score head trains fully beside the adapters (PEFT's SEQ_CLS adapter:
# modules_to_save = ["classifier", "score"], as PEFT writes it) and its merged export; the
# DoRA with GRPO and PPO; GRPO and PPO on a quantized base (QLoRA: the decoder on the NF4 tiles,
# the critic quantized alike, sharded and streamed); the refusals (an adapter of the other kind).
. "$(dirname "$0")/lib.sh"
need_cmd spm_train sentencepiece
export ROOT  # the Python checks read safetensors with llama_ref.py's reader

# the task: after a random word, the chosen answer is a word of the letters a-e, the rejected
# one of f-j (which a tiny random model learns in a few steps)
$PY - <<'PY'
import json, random
r = random.Random(5)
word = lambda n, s="abcdefghij": "".join(r.choice(s) for _ in range(n))
with open("corpus.txt", "w") as c:
    c.write("abcdefghij\n" * 20)
for name, n in (("pref.jsonl", 64), ("valid.jsonl", 32)):
    with open(name, "w") as f:
        for _ in range(n):
            k = r.randrange(3, 7)
            f.write(json.dumps({"prompt": word(k) + " ", "chosen": word(k, "abcde"), "rejected": word(k, "fghij")}) + "\n")
PY
spm_train --input=corpus.txt --model_prefix=tok --vocab_size=16 --model_type=char --minloglevel=2 \
  --hard_vocab_limit=false >/dev/null 2>&1 || fail "spm_train"
make_tiny m bos_token_id=1 eos_token_id=2 && cp tok.model m/tokenizer.model || { fail "setup"; exit 1; }

cat > dpo.toml <<'TOML'
[model]
path = "m"
dtype = "fp32"
[data]
train = "pref.jsonl"
valid = "valid.jsonl"
format = "preference"
max_length = 16
shuffle = false
cache_dir = "cache"
[train]
max_steps = 20
micro_batch_size = 4
gradient_accumulation_steps = 2
learning_rate = 1e-2
lr_scheduler_type = "constant"
logging_steps = 1
eval_steps = 20
seed = 1
[rlhf]
algorithm = "dpo"
[lora]
r = 8
alpha = 16
target_modules = "all-linear"
[output]
dir = "dpo"
TOML

# --- DPO ---------------------------------------------------------------------------------------
expect_ok "DPO with LoRA, learning rate 0 (the base's preference accuracy)" "$ZT" rlhf dpo.toml output.dir=dpo0 \
  train.max_steps=1 train.learning_rate=0
expect_ok "DPO with LoRA" "$ZT" rlhf dpo.toml
$PY - <<'PY' && say "ok - DPO with LoRA: first loss ln 2, the loss falls, the held-out preferences are learnt" || fail "DPO with LoRA"
import json, math
rows = lambda d: [r for r in map(json.loads, open(d + "/metrics.jsonl"))]
train = [r for r in rows("dpo") if "split" not in r]
valid = lambda d: [r for r in rows(d) if r.get("split") == "valid"][-1]
before, after = valid("dpo0"), valid("dpo")
print("loss %.4f -> %.4f; held-out: chosen likelier %.3f -> %.3f, reward accuracy %.3f" % (
    train[0]["loss"], train[-1]["loss"], before["preference_accuracy"], after["preference_accuracy"],
    after["reward_accuracy"]))
# fresh adapters (B = 0) add exact zeros: the policy is the reference bit for bit, h = 0
assert train[0]["loss"] == math.log(2) and train[0]["reward_margin"] == 0, train[0]
# measured: 0.82 ln 2 for the last five steps' mean, held-out accuracy 0.22 -> 1
assert sum(r["loss"] for r in train[-5:]) / 5 < 0.9 * math.log(2), [r["loss"] for r in train]
assert after["preference_accuracy"] >= 0.9 and before["preference_accuracy"] < 0.5, (before, after)
assert after["reward_accuracy"] >= 0.9, after
PY
# TRL's other DPO losses: at the first step the policy is the reference (c = r = 0 exactly, as
# above), so each loss is its value at 0 (β 0.1; EXO's ε 1e-3); the second step's differs
for want in hinge=1 robust=ln2 exo_pair=exo nca_pair=2ln2 bco_pair=2ln2 sppo_hard=50 apo_zero=1 apo_down=1; do
  lt=${want%%=*}
  expect_ok "DPO with LoRA, loss_type $lt" "$ZT" rlhf dpo.toml output.dir=dpo-$lt train.max_steps=2 train.eval_steps=0 \
    rlhf.loss_type=$lt rlhf.label_smoothing=$([ $lt = exo_pair ] && echo 0.001 || echo 0)
  $PY - dpo-$lt "${want#*=}" <<'PY' && say "ok - $lt: the first loss is its value at 0, then it trains" || fail "$lt: $(head -c 300 dpo-$lt/metrics.jsonl)"
import json, math, sys
rows = [r for r in map(json.loads, open(sys.argv[1] + "/metrics.jsonl")) if "split" not in r]
want = {"1": 1.0, "ln2": math.log(2), "2ln2": 2 * math.log(2), "50": 2 * (0.5 / 0.1) ** 2,
        "exo": -math.log(2) - 0.5 * math.log(0.999 * 0.001)}[sys.argv[2]]
assert abs(rows[0]["loss"] - want) <= 1e-12 * want and rows[1]["loss"] != rows[0]["loss"], (rows[0]["loss"], want)
PY
done
# SimPO: no reference model; one pair a step, so its logged rewards are that pair's β times the
# average log-probabilities, and the loss is -log σ(their difference - γ)
expect_ok "SimPO with LoRA" "$ZT" rlhf dpo.toml output.dir=simpo train.max_steps=3 train.micro_batch_size=1 \
  train.gradient_accumulation_steps=1 train.eval_steps=0 rlhf.loss_type=simpo rlhf.beta=2 rlhf.simpo_gamma=0.5
grep -q "reference log-probabilities" "$TMP/err" && fail "SimPO computed reference log-probabilities" \
  || say "ok - SimPO computes no reference log-probabilities"
$PY <<'PY' && say "ok - SimPO: each step's loss is -log σ(β·(c̄ - r̄) - γ)" || fail "SimPO"
import json, math
rows = [r for r in map(json.loads, open("simpo/metrics.jsonl")) if "split" not in r]
for r in rows:
    x = r["rewards_chosen"] - r["rewards_rejected"] - 0.5
    want = math.log1p(math.exp(-x)) if x > 0 else -x + math.log1p(math.exp(x))
    assert abs(r["loss"] - want) <= 1e-9 * want, (r, want)
assert rows[0]["rewards_chosen"] < 0 and len(rows) == 3
PY
# ORPO: no reference model; one pair a step, so its rewards give the pair's average
# log-probabilities c̄ = rewards_chosen/β, r̄ likewise, and the loss is the chosen answer's mean NLL
# -c̄ plus -β·log σ(log odds(c̄) - log odds(r̄)), log odds(x) = x - log(1 - e^x)
expect_ok "ORPO with LoRA" "$ZT" rlhf dpo.toml output.dir=orpo train.max_steps=3 train.micro_batch_size=1 \
  train.gradient_accumulation_steps=1 train.eval_steps=0 rlhf.loss_type=orpo
$PY <<'PY' && say "ok - ORPO: each step's loss is the chosen answer's NLL plus the odds-ratio term" || fail "ORPO"
import json, math
rows = [r for r in map(json.loads, open("orpo/metrics.jsonl")) if "split" not in r]
beta = 0.1
for r in rows:
    c, w = r["rewards_chosen"] / beta, r["rewards_rejected"] / beta
    odds = (c - w) - (math.log(-math.expm1(c)) - math.log(-math.expm1(w)))
    want = -c + beta * (math.log1p(math.exp(-odds)) if odds > 0 else -odds + math.log1p(math.exp(odds)))
    assert abs(r["loss"] - want) <= 1e-9 * want, (r, want)
assert len(rows) == 3, rows
PY
$PY - <<'PY' && say "ok - final/ is a PEFT adapter directory (CAUSAL_LM), no base weights" || fail "DPO final/"
import json, os
exec(open(os.environ["ROOT"] + "/tests/cli/llama_ref.py").read().split("def inv_freq")[0])
assert not os.path.exists("dpo/final/model.safetensors")
c = json.load(open("dpo/final/adapter_config.json"))
assert c["task_type"] == "CAUSAL_LM" and c["modules_to_save"] is None and c["r"] == 8, c
A = read_st("dpo/final/adapter_model.safetensors")
assert len(A) == 2 * 7 * 2 and all(".lora_A." in k or ".lora_B." in k for k in A), sorted(A)
PY

# The reference: the adapter of the run above moves the policy (its first step's implicit
# rewards are not 0), yet the reference log-probabilities it computes with the adapters off are
# those of the base trained without LoRA, byte for byte (the same cache key: the same base)
for dt in fp32 bf16; do
  expect_ok "DPO from that adapter ($dt)" "$ZT" rlhf dpo.toml output.dir=again-$dt lora.r=0 lora.adapter=dpo/final \
    train.max_steps=1 train.learning_rate=0 model.dtype=$dt data.cache_dir=cache-adapter-$dt
  expect_ok "DPO without LoRA ($dt)" "$ZT" rlhf dpo.toml output.dir=full-$dt lora.r=0 train.max_steps=1 \
    model.dtype=$dt data.cache_dir=cache-full-$dt
  ref_a=$(ls cache-adapter-$dt/dpo-ref-*.f64) ref_f=$(ls cache-full-$dt/dpo-ref-*.f64)
  [ "$(basename "$ref_a")" = "$(basename "$ref_f")" ] && cmp -s "$ref_a" "$ref_f" && $PY -c "
import json; r = json.loads(open('again-$dt/metrics.jsonl').readline()); assert abs(r['reward_margin']) > 1e-3, r" &&
    say "ok - $dt: the reference with the adapters off is the full model's, bitwise" ||
    fail "$dt: reference log-probabilities differ"
done

# --- GRPO and PPO with a LoRA actor -------------------------------------------------------------
# the prompts, the reward (the share of the completion's letters in a-e, what the DPO adapter
# prefers) and GRPO with LoRA
letters_task 4 8 1 8 1e-8
printf '%s\n' '[output]' 'dir = "grpo"' >> grpo.toml
for algo in grpo ppo; do
  expect_ok "$algo with a LoRA actor" "$ZT" rlhf grpo.toml rlhf.algorithm=$algo output.dir=$algo train.save_steps=2
  $PY - $algo <<'PY' && say "ok - $algo: KL 0 from fresh adapters (the reference is the base), then not; final/ holds adapters" || fail "$algo with LoRA"
import json, os, sys
d = sys.argv[1]
rows = [r for r in map(json.loads, open(d + "/metrics.jsonl")) if "split" not in r]
assert len(rows) == 4 and rows[0]["kl"] == 0 and all(r["kl"] != 0 for r in rows[1:]), rows
assert os.path.exists(d + "/final/adapter_model.safetensors") and not os.path.exists(d + "/final/model.safetensors")
PY
done
# a LoRA actor on a device (ZT_CPU_AS_DEVICE=1: the CPU backend poses as one) generates there,
# through its adapters, on the weights in place: the CPU run's steps and adapters, bit for bit
expect_ok "grpo with a LoRA actor as a device" env ZT_CPU_AS_DEVICE=1 "$ZT" rlhf grpo.toml output.dir=grpo-dev \
  train.save_steps=2
$PY - <<'PY' && say "ok - grpo: a LoRA actor as a device trains as on the CPU" || fail "grpo with LoRA as a device"
import json
a, b = ([{k: r[k] for k in ("loss", "reward_mean", "kl", "completion_length", "grad_norm")}
         for r in map(json.loads, open(d + "/metrics.jsonl")) if "split" not in r] for d in ("grpo", "grpo-dev"))
assert len(a) == 4 and a == b, (a, b)
assert open("grpo/final/adapter_model.safetensors", "rb").read() == open("grpo-dev/final/adapter_model.safetensors", "rb").read()
PY
# PPO's critic with LoRA: its own adapters on the base and its value head trained whole, final
# critic/ a PEFT SEQ_CLS adapter directory (as a reward model's, zt export --merge makes the model);
# the value loss falls; a run cut after the step-2 checkpoint resumes both bit for bit
$PY - <<'PY' && say "ok - PPO's critic: a PEFT SEQ_CLS adapter, its value loss falling" || fail "PPO's LoRA critic"
import json, os
import numpy as np
exec(open(os.environ["ROOT"] + "/tests/cli/llama_ref.py").read().split("def inv_freq")[0])
c = json.load(open("ppo/critic/adapter_config.json"))
assert c["task_type"] == "SEQ_CLS" and c["modules_to_save"] == ["classifier", "score"] and c["r"] == 8, c
assert c["base_model_name_or_path"].endswith("/m") and not os.path.exists("ppo/critic/model.safetensors")
A, P = read_st("ppo/critic/adapter_model.safetensors"), read_st("ppo/final/adapter_model.safetensors")
assert A["base_model.model.score.weight"].shape == (1, 32) and len(A) == 2 * 7 * 2 + 1, sorted(A)
assert set(A) - {"base_model.model.score.weight"} == set(P)  # the actor's kind of adapters, its own values
assert all(not np.array_equal(A[k], P[k]) for k in P if ".lora_B." in k)
rows = [r for r in map(json.loads, open("ppo/metrics.jsonl")) if "split" not in r]
print("value loss", [round(r["value_loss"], 4) for r in rows])
assert rows[-1]["value_loss"] < 0.75 * rows[0]["value_loss"], rows  # measured: to 0.45 of the first in 4 steps
PY
cp -r ppo ppo-cut && rm -rf ppo-cut/final ppo-cut/critic ppo-cut/summary.json ppo-cut/checkpoints/step-000004
expect_ok "PPO resumed" "$ZT" rlhf grpo.toml rlhf.algorithm=ppo output.dir=ppo-cut train.save_steps=2
cmp -s ppo/final/adapter_model.safetensors ppo-cut/final/adapter_model.safetensors \
  && cmp -s ppo/critic/adapter_model.safetensors ppo-cut/critic/adapter_model.safetensors \
  && say "ok - PPO with LoRA resumes the actor and the critic bit for bit" || fail "PPO's resumed adapters differ"
expect_ok "export --merge of the critic" "$ZT" export ppo/critic --merge --out critic-merged
grep -q '"LlamaForSequenceClassification"' critic-merged/config.json && say "ok - the merged critic is a value model" \
  || fail "merged critic: $(cat critic-merged/config.json)"
# From the DPO adapter at learning rate 0, against the merged model with the base as
# rlhf.reference: the decoder applies the adapters (the same completions, which the adapter's
# preference for a-e changes) and the reference is the base. The merged weights round apart from
# W and s·B·A: the log-probabilities agree to ~1e-7 relative (measured 8e-8 on the KL), so 1e-5
# on the KL; a sampled token would flip only where its draw lies within that of a boundary.
expect_ok "GRPO from the DPO adapter" "$ZT" rlhf grpo.toml lora.r=0 lora.adapter=dpo/final train.learning_rate=0 \
  train.max_steps=2 output.dir=grpo-adapter
expect_ok "export --merge of the DPO adapter" "$ZT" export dpo --merge --out dpo-merged
expect_ok "GRPO of the merged model, the base as reference" "$ZT" rlhf grpo.toml lora.r=0 model.path=dpo-merged \
  rlhf.reference=m train.learning_rate=0 train.max_steps=2 output.dir=grpo-merged
$PY - <<'PY' && say "ok - GRPO with adapters generates and scores as the merged model against the base" || fail "GRPO adapter vs merged"
import json
rows = lambda d: [r for r in map(json.loads, open(d + "/metrics.jsonl")) if "split" not in r]
for a, b in zip(rows("grpo-adapter"), rows("grpo-merged")):
    assert a["reward_mean"] == b["reward_mean"] and a["completion_length"] == b["completion_length"], (a, b)
    assert a["kl"] > 0 and abs(a["kl"] - b["kl"]) <= 1e-5 * a["kl"], (a, b)
PY

# DoRA: the decoder applies (g - 1)·W·x + g·s·B·A·x with the norms of the step's weights. From a
# DoRA adapter (6 DPO steps) at learning rate 0, against its merged model: the same completions
# and rewards, the KL within 1e-5 (the tolerance above); and PPO with a DoRA actor and critic trains
expect_ok "DPO with DoRA" "$ZT" rlhf dpo.toml output.dir=dpo-dora lora.method=dora train.max_steps=6 train.eval_steps=0
expect_ok "GRPO from the DoRA adapter" "$ZT" rlhf grpo.toml lora.r=0 lora.adapter=dpo-dora/final train.learning_rate=0 \
  train.max_steps=2 output.dir=grpo-dora
expect_ok "export --merge of the DoRA adapter" "$ZT" export dpo-dora --merge --out dora-merged
expect_ok "GRPO of the merged DoRA model, the base as reference" "$ZT" rlhf grpo.toml lora.r=0 model.path=dora-merged \
  rlhf.reference=m train.learning_rate=0 train.max_steps=2 output.dir=grpo-dora-merged
$PY - <<'PY' && say "ok - GRPO with a DoRA adapter generates and scores as its merged model" || fail "GRPO DoRA vs merged"
import json
rows = lambda d: [r for r in map(json.loads, open(d + "/metrics.jsonl")) if "split" not in r]
for a, b in zip(rows("grpo-dora"), rows("grpo-dora-merged")):
    assert a["reward_mean"] == b["reward_mean"] and a["completion_length"] == b["completion_length"], (a, b)
    assert a["kl"] > 0 and abs(a["kl"] - b["kl"]) <= 1e-5 * a["kl"], (a, b)
PY
expect_ok "PPO with DoRA" "$ZT" rlhf grpo.toml rlhf.algorithm=ppo lora.method=dora output.dir=ppo-dora
grep -qE '"use_dora":[[:space:]]*true' ppo-dora/final/adapter_config.json \
  && grep -qE '"use_dora":[[:space:]]*true' ppo-dora/critic/adapter_config.json \
  && say "ok - PPO's DoRA actor and critic" || fail "PPO with DoRA: $(cat ppo-dora/critic/adapter_config.json)"

# --- ZeRO: 2 ranks against 1 (stage 1 all-reduces the adapters' gradients, stages 2 and 3
# reduce-scatter them; stage 3 shards the frozen base and gathers it per unit), 2 micro-batches of 4 pairs on 1 rank against 1 on each of 2. The
# per-pair values are computed alike, the gradients summed in another grouping (fp32 roundings),
# and adam_epsilon = 1e-6 keeps the gradient elements that are rounding noise still (t2300-rlhf.sh
# says why): 1e-5 relative on the losses and margins, 1e-4 on the gradient norms, as t2300's
# GRPO, plus 1e-6 absolute: step 1's margin is 0 in exact arithmetic (B starts at zero) and
# what is left is rounding, β times differences of sequence log-probabilities summed in other
# row groupings (measured 3e-9 with OpenBLAS's Zen kernels). Measured: 4e-9, 1e-7 and 9e-8
# (avx512 and scalar). The adapters themselves are not
# compared: an element whose gradient is noise-sized still moves by up to lr·|g|/(|g| + eps) ----
need_mpi
expect_ok "DPO with LoRA, 1 rank, 6 steps" "$ZT" rlhf dpo.toml output.dir=one train.max_steps=6 train.eval_steps=0 \
  train.adam_epsilon=1e-6
for stage in 1 2 3; do
  expect_ok "DPO with LoRA, 2 ranks, stage $stage" $MPI -np 2 "$ZT" rlhf dpo.toml output.dir=two$stage \
    train.max_steps=6 train.eval_steps=0 train.adam_epsilon=1e-6 train.gradient_accumulation_steps=1 zero.stage=$stage
  $PY - two$stage <<'PY' && say "ok - DPO with LoRA: stage $stage on 2 ranks matches 1 rank" || fail "stage $stage on 2 ranks differs"
import json, sys
rows = lambda d: [r for r in map(json.loads, open(d + "/metrics.jsonl")) if "split" not in r]
a, b = rows("one"), rows(sys.argv[1])
assert len(a) == len(b) == 6
for x, y in zip(a, b):
    for k, rel in (("loss", 1e-5), ("reward_margin", 1e-5), ("grad_norm", 1e-4)):
        assert abs(x[k] - y[k]) <= rel * max(abs(x[k]), abs(y[k])) + 1e-6, (x["step"], k, x[k], y[k])
PY
done
# GRPO at stage 3 generates from the base gathered whole: 4 prompts × 4 completions a rank against
# 8 × 4 on one, the same completions (each drawn from a stream of its prompt), so the same rewards
# and lengths (their means summed per rank first: double roundings, 1e-12 relative); step 1's loss and KL (0 from fresh adapters) within the DPO runs' bounds above, and
# step 2's KL, a mean of per-token differences of log-probabilities (about 1e-6 here, the adapters
# one AdamW step from zero) whose two runs differ by the adapters' summation-order roundings (1e-7
# relative of that step): within 1e-5 relative plus 1e-9 absolute (measured 7e-12 absolute)
expect_ok "GRPO with LoRA, 1 rank, 2 steps" "$ZT" rlhf grpo.toml output.dir=grpo-z1 train.max_steps=2 train.adam_epsilon=1
expect_ok "GRPO with LoRA, 2 ranks, stage 3" $MPI -np 2 "$ZT" rlhf grpo.toml output.dir=grpo-z3 train.max_steps=2 \
  train.adam_epsilon=1 train.micro_batch_size=4 zero.stage=3
$PY - <<'PY' && say "ok - GRPO with LoRA: stage 3 on 2 ranks generates and trains as 1 rank" || fail "GRPO at stage 3 differs"
import json
rows = lambda d: [r for r in map(json.loads, open(d + "/metrics.jsonl")) if "split" not in r]
a, b = rows("grpo-z1"), rows("grpo-z3")
assert len(a) == len(b) == 2
for x, y in zip(a, b):
    assert abs(x["reward_mean"] - y["reward_mean"]) <= 1e-12 * x["reward_mean"], (x, y)
    assert x["completion_length"] == y["completion_length"], (x, y)
    for k in ("loss", "kl"):
        assert abs(x[k] - y[k]) <= 1e-5 * max(abs(x[k]), abs(y[k])) + 1e-9, (x["step"], k, x[k], y[k])
assert a[0]["kl"] == b[0]["kl"] == 0 and a[1]["kl"] > 0, (a, b)
PY

# --- reward model ------------------------------------------------------------------------------
expect_ok "reward model with LoRA" "$ZT" rlhf dpo.toml rlhf.algorithm=reward output.dir=rm
$PY - <<'PY' && say "ok - reward model with LoRA: the loss falls, held-out accuracy >= 0.9, the score head trained" || fail "reward model with LoRA"
import json, os
import numpy as np
exec(open(os.environ["ROOT"] + "/tests/cli/llama_ref.py").read().split("def inv_freq")[0])
rows = [r for r in map(json.loads, open("rm/metrics.jsonl"))]
train = [r for r in rows if "split" not in r]
valid = [r for r in rows if r.get("split") == "valid"][-1]
print("loss %.4f -> %.4f; held-out accuracy %.3f" % (train[0]["loss"], train[-1]["loss"], valid["reward_accuracy"]))
assert np.mean([r["loss"] for r in train[-5:]]) < 0.5 * np.mean([r["loss"] for r in train[:5]])
assert valid["reward_accuracy"] >= 0.9, valid
assert not os.path.exists("rm/final/model.safetensors")
c = json.load(open("rm/final/adapter_config.json"))
assert c["task_type"] == "SEQ_CLS" and c["modules_to_save"] == ["classifier", "score"], c
A = read_st("rm/final/adapter_model.safetensors")
assert A["base_model.model.score.weight"].shape == (1, 32) and len(A) == 2 * 7 * 2 + 1, sorted(A)
PY
expect_ok "export --merge of the reward adapter" "$ZT" export rm --merge --out rm-merged
$PY - <<'PY' && say "ok - the merged reward model: LlamaForSequenceClassification with the trained score head" || fail "merged reward model"
import json, os
import numpy as np
exec(open(os.environ["ROOT"] + "/tests/cli/llama_ref.py").read().split("def inv_freq")[0])
cfg = json.load(open("rm-merged/config.json"))
assert cfg["architectures"] == ["LlamaForSequenceClassification"] and cfg["num_labels"] == 1, cfg
M, A = read_st("rm-merged/model.safetensors"), read_st("rm/final/adapter_model.safetensors")
assert np.array_equal(M["score.weight"], A["base_model.model.score.weight"]) and "lm_head.weight" not in M
PY
expect_ok "the merged reward model, evaluated" "$ZT" rlhf dpo.toml output.dir=rm-eval lora.r=0 \
  rlhf.algorithm=reward model.path=rm-merged train.max_steps=1 train.learning_rate=0
$PY - <<'PY' && say "ok - the merged model's held-out rewards are the adapter's (learning rate 0)" || fail "merged rewards"
import json
v = lambda d: [r for r in map(json.loads, open(d + "/metrics.jsonl")) if r.get("split") == "valid"][-1]
a, b = v("rm"), v("rm-eval")
# the same products, the adapters' merged into W: t2400-lora.sh's tolerance for the merge
assert a["reward_accuracy"] == b["reward_accuracy"] and abs(a["loss"] - b["loss"]) <= 1e-5 * a["loss"], (a, b)
PY

# --- GRPO and PPO on a quantized base (lora.quantize_base): the decoder multiplies the NF4 tiles --
# From a QLoRA DPO adapter at learning rate 0, against its merged model (dequant(quant(W)) + s·B·A)
# with the quantized base itself as the reference (the merge of fresh adapters: dequant(quant(W)))
# the same completions and rewards, the KL within the 1e-5 above; PPO's critic quantized alike;
# stage 3 on 2 ranks as 1 rank (the bounds above), the base streamed from NVMe bitwise as held.
Q="lora.quantize_base=nf4 lora.double_quant=true"
expect_ok "QLoRA DPO" "$ZT" rlhf dpo.toml $Q output.dir=dpo-nf4 train.max_steps=6 train.eval_steps=0
expect_ok "QLoRA DPO, fresh adapters" "$ZT" rlhf dpo.toml $Q output.dir=nf4-zero train.max_steps=1 \
  train.learning_rate=0 train.eval_steps=0
expect_ok "export --merge of the QLoRA adapter" "$ZT" export dpo-nf4 --merge --out dpo-nf4-merged
expect_ok "export --merge of fresh adapters: the quantized base" "$ZT" export nf4-zero --merge --out m-nf4
expect_ok "GRPO from the QLoRA adapter" "$ZT" rlhf grpo.toml lora.r=0 lora.adapter=dpo-nf4/final $Q \
  train.learning_rate=0 train.max_steps=2 output.dir=grpo-nf4
expect_ok "GRPO of its merged model, the quantized base as reference" "$ZT" rlhf grpo.toml lora.r=0 \
  model.path=dpo-nf4-merged rlhf.reference=m-nf4 train.learning_rate=0 train.max_steps=2 output.dir=grpo-nf4-merged
$PY - <<'PY' && say "ok - GRPO on a quantized base generates and scores as the merged model" || fail "GRPO QLoRA vs merged"
import json
rows = lambda d: [r for r in map(json.loads, open(d + "/metrics.jsonl")) if "split" not in r]
for a, b in zip(rows("grpo-nf4"), rows("grpo-nf4-merged")):
    assert a["reward_mean"] == b["reward_mean"] and a["completion_length"] == b["completion_length"], (a, b)
    assert a["kl"] > 0 and abs(a["kl"] - b["kl"]) <= 1e-5 * a["kl"], (a, b)
PY
expect_ok "PPO with a QLoRA actor" "$ZT" rlhf grpo.toml rlhf.algorithm=ppo $Q output.dir=ppo-nf4
$PY - <<'PY' && say "ok - PPO on a quantized base: the critic's base quantized too, its value loss falling" || fail "PPO QLoRA"
import json
for d in ("ppo-nf4/final", "ppo-nf4/critic"):
    q = json.load(open(d + "/zt_quantization.json"))
    assert q["quantize_base"] == "nf4" and q["double_quant"] is True, (d, q)
rows = [r for r in map(json.loads, open("ppo-nf4/metrics.jsonl")) if "split" not in r]
assert rows[-1]["value_loss"] < 0.75 * rows[0]["value_loss"], rows
PY
expect_ok "QLoRA GRPO, 1 rank" "$ZT" rlhf grpo.toml $Q output.dir=gq-z1 train.max_steps=2 train.adam_epsilon=1
expect_ok "QLoRA GRPO, 2 ranks, stage 3" $MPI -np 2 "$ZT" rlhf grpo.toml $Q output.dir=gq-z3 train.max_steps=2 \
  train.adam_epsilon=1 train.micro_batch_size=4 zero.stage=3
mkdir -p swap
expect_ok "QLoRA GRPO, the base streamed" "$ZT" rlhf grpo.toml $Q output.dir=gq-nvme train.max_steps=2 \
  train.adam_epsilon=1 zero.stage=3 offload.param=nvme offload.nvme_path=swap
$PY - <<'PY' && say "ok - QLoRA GRPO: stage 3 on 2 ranks as 1 rank, streamed bitwise as held" || fail "QLoRA GRPO sharded"
import json
rows = lambda d: [r for r in map(json.loads, open(d + "/metrics.jsonl")) if "split" not in r]
a, b, c = rows("gq-z1"), rows("gq-z3"), rows("gq-nvme")
assert len(a) == len(b) == len(c) == 2, (a, b, c)
keys = ("loss", "kl", "reward_mean", "completion_length", "grad_norm")
assert all(x[k] == z[k] for x, z in zip(a, c) for k in keys), (a, c)
for x, y in zip(a, b):
    assert abs(x["reward_mean"] - y["reward_mean"]) <= 1e-12 * x["reward_mean"], (x, y)
    assert x["completion_length"] == y["completion_length"], (x, y)
    for k in ("loss", "kl"):
        assert abs(x[k] - y[k]) <= 1e-5 * max(abs(x[k]), abs(y[k])) + 1e-9, (x["step"], k, x[k], y[k])
PY

# --- refusals -----------------------------------------------------------------------------------
expect_exit 2 "a reward model's adapter for DPO" "lora.adapter '.*rm/final' is a reward model's adapter" \
  "$ZT" rlhf dpo.toml output.dir=bad1 lora.r=0 lora.adapter=rm/final
expect_exit 2 "a causal LM's adapter for a reward model" "lora.adapter '.*dpo/final' is a causal LM's adapter" \
  "$ZT" rlhf dpo.toml output.dir=bad2 rlhf.algorithm=reward lora.r=0 lora.adapter=dpo/final
done_testing
