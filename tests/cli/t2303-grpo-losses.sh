#!/usr/bin/env bash
# GRPO's loss types and reward scalings (TRL's loss_type, scale_rewards, epsilon_high,
# mask_truncated_completions), on the letters task with a LoRA policy: each trains; where TRL's
# definitions coincide, zt's runs are bitwise the same (bnpo is grpo with one completion a
# micro-batch, the step's reward std is the group's with one group a step, a clip above what
# ratios reach changes nothing); where they differ, the runs differ; the metrics say how many
# completions were cut off. (2 ranks against 1 for the step-wide sums: t2300-rlhf.sh.)
. "$(dirname "$0")/lib.sh"
need_cmd spm_train sentencepiece

printf 'abcdefghij \n%.0s' $(seq 20) > corpus.txt
spm_train --input=corpus.txt --model_prefix=tok --vocab_size=16 --model_type=char --minloglevel=2 \
  --hard_vocab_limit=false >/dev/null 2>&1 || fail "spm_train"
make_tiny m bos_token_id=1 eos_token_id=2 && cp tok.model m/tokenizer.model || { fail "setup"; exit 1; }
letters_task 3 1 4 8 1e-8  # 3 steps, micro-batches of 1 row, 4 of them: one group of 4 a step
adapters() { cmp -s "$1/final/adapter_model.safetensors" "$2/final/adapter_model.safetensors"; }
run() { local name=$1; shift; expect_ok "$name" "$ZT" rlhf grpo.toml output.dir="$name" "$@"; }

run grpo
run bnpo rlhf.loss_type=bnpo
adapters grpo bnpo && say "ok - bnpo with one completion a micro-batch is grpo, bit for bit" || fail "bnpo differs from grpo"
run batch rlhf.scale_rewards=batch
adapters grpo batch && say "ok - the step's reward std with one group a step is the group's" || fail "batch differs"
run high rlhf.cliprange_high=50
adapters grpo high && say "ok - an upper clip no ratio reaches changes nothing (one step a batch: ratio 1)" \
  || fail "cliprange_high changed a run whose ratios are all 1"
for loss in dapo dr_grpo; do
  run $loss rlhf.loss_type=$loss
  adapters grpo $loss && fail "$loss trains what grpo trains" || say "ok - $loss averages otherwise than grpo"
done
run none rlhf.scale_rewards=none
adapters grpo none && fail "unscaled advantages train what scaled ones do" || say "ok - scale_rewards = none differs"
run cut rlhf.max_new_tokens=2 rlhf.mask_truncated_completions=true
run uncut rlhf.max_new_tokens=2
$PY <<'PY' && say "ok - truncated_fraction: most 2-token completions are cut off; the mask changes training" || fail "truncation"
import json
rows = lambda d: [r for r in map(json.loads, open(d + "/metrics.jsonl")) if "split" not in r]
for d in ("cut", "uncut"):
    assert all(0.5 <= r["truncated_fraction"] <= 1 for r in rows(d)), rows(d)
assert all(0 <= r["truncated_fraction"] <= 1 for r in rows("grpo"))
assert [r["loss"] for r in rows("cut")] != [r["loss"] for r in rows("uncut")]
PY
expect_exit 2 "a DPO loss type for GRPO" "rlhf.loss_type = \"ipo\" is DPO's, not grpo's" "$ZT" rlhf grpo.toml \
  output.dir=bad rlhf.loss_type=ipo
done_testing
