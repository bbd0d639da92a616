#!/usr/bin/env bash
# zt rlhf with KTO on the demo task (reverse a word): an under-trained SFT model, then KTO on the
# demo's preference pairs taken one answer at a time (held-out pairs: the KTO model's implicit
# reward prefers the right answer in >= 90% of them, from the SFT model's 0); the same answers
# as unpaired data (TRL's prompt / completion / label) train bit for bit as the pairs; a batch of
# tests/fixtures/kto as TRL's KTOTrainer computes it; ZeRO-3 on 2 ranks against 1 with a KL
# estimate above 0; the device path; apo_zero_unpaired; LoRA; NVMe streaming with the I/O zt
# validate predicts; and the errors: labels that are not booleans, the wrong data format, KTO's
# keys with another algorithm.
. "$(dirname "$0")/lib.sh"
rlhf_demo_sft

rlhf_demo_pairs kto kto > kto.toml
expect_ok "KTO on the pairs' answers, 300 steps" "$ZT" rlhf kto.toml train.max_steps=300
ZT_LOG=info "$ZT" rlhf kto.toml train.max_steps=1 train.logging_steps=1 output.dir=kto1 > kto1.log 2>&1
grep -q "log-probabilities from the cache" kto1.log &&
  say "ok - a second run reads the cached reference log-probabilities" || fail "the reference log-probabilities were not cached"

# What KTO learnt, measured as DPO measures it: the held-out pairs scored by DPO's implicit reward
# β·(π − ρ) of the KTO model against the SFT model (a DPO run that takes no step). The SFT model
# against itself scores 0 (every margin exactly 0). The bar is t2300-rlhf.sh's for DPO, for its
# reasons: runs that differ only in summation order (the CPU kernel levels) end 200 chaotic steps
# with a few pairs near margin 0 decided otherwise, and 180 of 200 right by chance has odds of
# 1e-33. KTO learns slower than DPO here (its KL estimate is mostly 0, so each answer moves on
# its own): 300 steps. Measured (Zen 3) 0.945 at avx2 and 0.975 at ZT_CPU=scalar, 0.995 and 0.985
# with train.seed 2 and 3; 200 steps gave 0.925-0.935, and a learning rate of 5e-4 diverged
# with one seed (0.01).
rlhf_demo_pairs dpo judge > judge.toml
# (it trains nothing: the held-out pairs serve as its training data too, for a short reference pass)
expect_ok "the KTO model judged by DPO's implicit reward (no step)" "$ZT" rlhf judge.toml model.path=kto/final \
  rlhf.reference=sft/final train.max_steps=1 train.learning_rate=0 data.train=pref_valid.jsonl
$PY - <<'PY' && say "ok - KTO: held-out reward accuracy >= 90%, from the SFT model's 0; its metrics logged" || fail "KTO accuracy"
import json
rows = [json.loads(l) for l in open("judge/metrics.jsonl")]
valid = [r for r in rows if r.get("split") == "valid"][-1]
print("KTO model against the SFT model on 200 held-out pairs: reward accuracy %.3f, margin %.3f" % (
    valid["reward_accuracy"], valid["reward_margin"]))
assert valid["reward_accuracy"] >= 0.90 and valid["reward_margin"] > 0
kto = [json.loads(l) for l in open("kto/metrics.jsonl")]
train = [r for r in kto if "split" not in r]
for k in ("rewards_chosen", "rewards_rejected", "reward_margin", "kl", "loss"):
    assert all(k in r for r in train), k
assert all(r["kl"] >= 0 for r in train) and "reward_accuracy" not in train[0]
v = [r for r in kto if r.get("split") == "valid"][-1]
assert v["answers"] == 400 and v["reward_margin"] > 0, v
PY

# --- against TRL: a micro-batch of tests/fixtures/kto as KTOTrainer computes it ------------------
# Six answers of unpaired text data, desirable and not in turn, a policy and a reference of
# their own (make_fixture.py: a batch of all six, so that TRL's KL rows pair each prompt with the
# answer before it in the file over the whole file, as zt's do), one step at learning rate 0: its metrics are the batch's before any
# update. Both sides run float32: each answer's log-probability is a sum of at most 10 float32
# log-softmax values (logits below 9 in size: a few ulps, 1e-6 each), so a log-ratio is within
# 2e-5 and so is the KL estimate (a mean of them); a loss's slope is at most β/4 = 0.025 in
# either, the rewards are β times the log-ratios: 1e-5 on the loss and the rewards, 5e-5 on the
# estimate. Measured: 4e-8 on the loss, 1.6e-6 on the estimate (Zen 3, avx2).
FX="$ROOT/tests/fixtures/kto"
for loss in kto apo_zero_unpaired; do
  expect_ok "KTO ($loss) on tests/fixtures/kto, learning rate 0" "$ZT" rlhf kto.toml model.path="$FX/policy" \
    rlhf.reference="$FX/reference" tokenizer.chat_template=auto data.train="$FX/data.jsonl" data.valid= \
    data.format=unpaired data.shuffle=false model.dtype=fp32 train.micro_batch_size=6 train.max_steps=1 \
    train.learning_rate=0 train.logging_steps=1 rlhf.loss_type=$loss output.dir=trl-$loss
done
$PY - "$FX/expected.json" <<'PY' && say "ok - KTO's loss, KL estimate and rewards are TRL's KTOTrainer's" || fail "KTO against TRL"
import json, sys
want = json.load(open(sys.argv[1]))
for loss in ("kto", "apo_zero_unpaired"):
    got, w = json.loads(open("trl-%s/metrics.jsonl" % loss).readline()), want[loss]
    pairs = [("loss", got["loss"], w["loss"], 1e-5),
             ("rewards_chosen", got["rewards_chosen"], w["rewards/chosen_sum"] / w["count/chosen"], 1e-5),
             ("rewards_rejected", got["rewards_rejected"], w["rewards/rejected_sum"] / w["count/rejected"], 1e-5)]
    if loss == "kto":
        pairs.append(("kl", got["kl"], w["kl"], 5e-5))
    for k, a, b, bound in pairs:
        print("%s %s: zt %.9g, TRL %.9g" % (loss, k, a, b))
        assert abs(a - b) <= bound, (loss, k, a, b)
assert want["kto"]["kl"] > 0.05 and "kl" not in got
PY

# --- unpaired data: the pairs' answers as TRL unpairs them ---------------------------------------
# (its unpair_preference_dataset maps batches of 1000 pairs: each batch's chosen answers, then its
# rejected ones)
$PY - <<'PY'
import json
for split, src in (("train", "pref_small.jsonl"), ("valid", "pref_valid.jsonl")):
    rows = [json.loads(l) for l in open(src)]
    with open("unpaired_%s.jsonl" % split, "w") as f:
        for b in range(0, len(rows), 1000):
            for side, label in (("chosen", True), ("rejected", False)):
                for r in rows[b:b + 1000]:
                    f.write(json.dumps({"prompt": r["prompt"], "completion": r[side], "label": label}) + "\n")
PY
expect_ok "KTO on the pairs, 20 steps" "$ZT" rlhf kto.toml train.max_steps=20 output.dir=pairs20
expect_ok "KTO on the same answers as unpaired data, 20 steps" "$ZT" rlhf kto.toml train.max_steps=20 \
  output.dir=unpaired20 data.format=unpaired data.train=unpaired_train.jsonl data.valid=unpaired_valid.jsonl
cmp -s pairs20/final/model.safetensors unpaired20/final/model.safetensors &&
  say "ok - unpaired data of the pairs' answers trains bit for bit as the pairs" || fail "unpaired against pairs"
"$ZT" data inspect kto.toml data.format=unpaired data.train=unpaired_train.jsonl data.valid= --n 3 --json > inspect.jsonl 2> inspect.err
$PY - <<'PY' && say "ok - zt data inspect shows the answers, not the placeholders" || fail "zt data inspect of unpaired data"
import json
rows = [json.loads(l) for l in open("inspect.jsonl")]
assert len(rows) == 3 and all(len(r["input_ids"]) > 1 for r in rows), rows
PY
shuf --random-source=<(yes) unpaired_train.jsonl | head -400 > unpaired_mixed.jsonl
expect_ok "KTO on unpaired data in any order, 10% held out" env ZT_LOG=info "$ZT" rlhf kto.toml train.max_steps=5 \
  output.dir=mixed data.format=unpaired data.train=unpaired_mixed.jsonl data.valid= data.valid_split=0.1 train.eval_steps=5
grep -q "cached the tokenized data: 400 answers" "$TMP/err" && say "ok - the cache counts the file's 400 answers" ||
  fail "the tokenized data's count: $(grep "tokenized data" "$TMP/err")"
grep -qE '"answers":40[,}]' mixed/metrics.jsonl && say "ok - data.valid_split holds out 10% of the answers" ||
  fail "valid_split of unpaired data"
# twice as many desirable answers as undesirable ones: the KTO paper's weights (TRL warns too)
{ head -200 unpaired_train.jsonl; sed -n 1001,1100p unpaired_train.jsonl; } > unpaired_few.jsonl
"$ZT" rlhf kto.toml data.format=unpaired data.train=unpaired_few.jsonl data.valid= train.max_steps=1 \
  output.dir=few > few.log 2>&1
"$ZT" rlhf kto.toml data.format=unpaired data.train=unpaired_few.jsonl data.valid= train.max_steps=1 \
  rlhf.desirable_weight=0.6 output.dir=few2 > few2.log 2>&1
grep -q "200 desirable and 100 undesirable answers: set rlhf.desirable_weight in \[0.50, 0.67\]" few.log &&
  ! grep -q "desirable_weight in" few2.log && say "ok - unbalanced answers: a warning names the weights to set" ||
  { fail "the weights' warning"; cat few.log few2.log >&2; }

# --- ZeRO-3 on 2 ranks against 1, with a KL estimate above 0 -------------------------------------
# A policy that is the untrained model and a reference that is the SFT model: the mismatched rows
# are likelier under the policy than under the reference (which knows the answers), so the
# estimate is above 0 in some micro-batches and the answers' losses take it: with train.seed 2 in
# the first (0.64; the first step's values are the untrained model's, the same on every CPU but
# for rounding). Each rank holds half of the step's answers; the estimate is the mean over both ranks' mismatched rows. The bounds
# are t2300-rlhf.sh's compare.py's (its reasoning holds here: smooth functions of per-token
# log-probabilities a few ulps apart, steps 1 and 2); the estimate is a mean of sums of up to 64
# such log-ratios (8e-6 each): 5e-4.
need_mpi
untrained="model.path=model rlhf.reference=sft/final model.dtype=fp32 zero.stage=3 train.seed=2"
expect_ok "KTO, 1 rank" "$ZT" rlhf kto.toml $untrained train.max_steps=2 train.logging_steps=1 output.dir=kto-r1
expect_ok "KTO, ZeRO-3 on 2 ranks" timeout 300 $MPI -np 2 "$ZT" rlhf kto.toml $untrained train.max_steps=2 \
  train.logging_steps=1 train.micro_batch_size=4 output.dir=kto-r2
$PY - <<'PY' && say "ok - KTO: 2 ranks under ZeRO-3 match 1 rank (the KL estimate over both)" || fail "KTO 2 ranks vs 1"
import json
rows = lambda d: [json.loads(l) for l in open(d + "/metrics.jsonl") if '"split"' not in l]
a, b = rows("kto-r1"), rows("kto-r2")
assert len(a) == len(b) == 2
assert max(r["kl"] for r in a) > 0.01, [r["kl"] for r in a]
for x, y in zip(a, b):
    for k, rel, floor in (("loss", 1e-5, 3e-5), ("rewards_chosen", 1e-5, 3e-5), ("rewards_rejected", 1e-5, 3e-5),
                          ("kl", 0, 5e-4), ("grad_norm", 1e-4, 0)):
        assert abs(x[k] - y[k]) <= rel * max(abs(x[k]), abs(y[k])) + floor, (x["step"], k, x[k], y[k])
print("kl:", [r["kl"] for r in a], [r["kl"] for r in b])
PY

# --- the device path, apo_zero_unpaired, LoRA ------------------------------------------------------
expect_ok "KTO, 3 steps as a device" env ZT_CPU_AS_DEVICE=1 "$ZT" rlhf kto.toml train.max_steps=3 output.dir=kto-dev
expect_ok "KTO, 3 steps on the CPU" "$ZT" rlhf kto.toml train.max_steps=3 output.dir=kto-cpu
cmp -s kto-cpu/final/model.safetensors kto-dev/final/model.safetensors &&
  say "ok - KTO: the device path trains like the CPU" || fail "KTO: device path"
# apo_zero_unpaired is kto without the KL term: the same step where kto's estimate is 0 (the
# first step of the SFT model against itself: every log-ratio exactly 0), another where it is
# above 0 (kto-r1's first step)
expect_ok "apo_zero_unpaired" "$ZT" rlhf kto.toml rlhf.loss_type=apo_zero_unpaired train.max_steps=1 \
  train.logging_steps=1 output.dir=apo
expect_ok "apo_zero_unpaired, the untrained policy" "$ZT" rlhf kto.toml rlhf.loss_type=apo_zero_unpaired \
  $untrained train.max_steps=2 train.logging_steps=1 output.dir=apo-r1
$PY - <<'PY' && say "ok - apo_zero_unpaired: kto without its KL term" || fail "apo_zero_unpaired"
import json
rows = lambda d: [json.loads(l) for l in open(d + "/metrics.jsonl") if '"split"' not in l]
apo, kto, apo1, kto1 = rows("apo"), rows("kto1"), rows("apo-r1"), rows("kto-r1")
assert all("kl" not in r for r in apo + apo1) and kto[0]["kl"] == 0
assert apo[0]["loss"] == kto[0]["loss"], (apo[0]["loss"], kto[0]["loss"])
assert kto1[0]["kl"] > 0.01 and abs(apo1[0]["loss"] - kto1[0]["loss"]) > 1e-3, (apo1[0]["loss"], kto1[0]["loss"])
PY
expect_ok "KTO with LoRA" "$ZT" rlhf kto.toml lora.r=8 train.max_steps=10 output.dir=kto-lora
[ -f kto-lora/final/adapter_config.json ] && [ -f kto-lora/final/adapter_model.safetensors ] &&
  say "ok - KTO with LoRA saves an adapter" || fail "KTO with LoRA: no adapter in final/"
# streamed from NVMe: the mismatched rows' forward reads the weights once more, as zt validate counts
mkdir -p nvme
nv="zero.stage=3 offload.param=nvme offload.optimizer=nvme offload.nvme_path=$TMP/nvme"
expect_ok "KTO streamed from NVMe" "$ZT" rlhf kto.toml $nv train.max_steps=2 train.logging_steps=1 output.dir=kto-nvme
"$ZT" validate kto.toml $nv > validate.out 2>&1
$PY - <<'PY' && say "ok - KTO from NVMe: each step reads and writes the bytes zt validate predicts" || fail "KTO NVMe I/O"
import json, re
m = re.search(r"offload I/O per optimizer step: (\d+) bytes read, (\d+) written", open("validate.out").read())
rows = [json.loads(l) for l in open("kto-nvme/metrics.jsonl") if '"split"' not in l]
assert m and len(rows) == 2, (m, rows)
for r in rows:
    assert (r["io_read_bytes"], r["io_write_bytes"]) == (int(m[1]), int(m[2])), (r["io_read_bytes"], m[1])
PY
expect_ok "zt validate of a KTO recipe" "$ZT" validate kto.toml

# --- errors ----------------------------------------------------------------------------------------
{ head -1 unpaired_train.jsonl; printf '{"prompt": "a", "completion": "b", "label": "yes"}\n'; } > bad_label.jsonl
expect_exit 2 "a label that is not a boolean" 'bad_label.jsonl:2: "label" is a string, not true or false' \
  "$ZT" rlhf kto.toml data.format=unpaired data.train=bad_label.jsonl data.valid= output.dir=bad1
printf '{"prompt": "a", "completion": "b"}\n' > no_label.jsonl
expect_exit 2 "an answer without a label" 'no_label.jsonl:1: needs "prompt", "completion" and "label"' \
  "$ZT" rlhf kto.toml data.format=unpaired data.train=no_label.jsonl data.valid= output.dir=bad2
expect_exit 2 "KTO on prompts" 'data.format must be "unpaired" or "preference"' "$ZT" rlhf kto.toml \
  data.format=prompt data.train=prompts_valid.jsonl data.valid= output.dir=bad3
expect_exit 2 "DPO on unpaired data" 'data.format must be "preference"' "$ZT" rlhf judge.toml \
  data.format=unpaired data.train=unpaired_train.jsonl data.valid= output.dir=bad4
expect_exit 2 "KTO's loss with DPO" 'rlhf.loss_type = "kto" is KTO.s, not dpo.s' "$ZT" rlhf judge.toml \
  rlhf.loss_type=kto output.dir=bad5
expect_exit 2 "DPO's loss with KTO" 'rlhf.loss_type = "ipo" is DPO.s, not kto.s' "$ZT" rlhf kto.toml \
  rlhf.loss_type=ipo output.dir=bad6
expect_exit 2 "KTO's weights with DPO" 'rlhf.undesirable_weight is KTO.s, not dpo.s' "$ZT" rlhf judge.toml \
  rlhf.undesirable_weight=1.5 output.dir=bad7
expect_exit 2 "SFT on unpaired data" "data.format 'unpaired' is for zt rlhf" "$ZT" sft sft.toml \
  data.format=unpaired data.train=unpaired_train.jsonl output.dir=bad8
done_testing
