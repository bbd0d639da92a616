#!/usr/bin/env bash
# bench/rlhf.sh: zt rlhf on the built-in demo task (reverse a word; scripts/demo-prepare.sh).
#  1. GRPO from an under-trained SFT model (BENCH_SFT_STEPS, 150, of the demo's SFT recipe)
#     with the exact-match reward program (scripts/demo_reward.py) for at most
#     BENCH_GRPO_MINUTES (20) on this machine: held-out greedy exact-match accuracy (the mean
#     reward on data.valid) at each evaluation, with the elapsed time.
#  2. Generation speed inside GRPO under ZeRO-3 with 1 and 2 ranks (sampled tokens per second,
#     gathers included) against plain single-process sampling of the same model (zt generate).
#  3. PPO (recipes/demo-ppo.toml) from the same SFT model with the same reward (0 or 1 per
#     answer) for at most BENCH_PPO_MINUTES (20; BENCH_PPO_STEPS caps the steps): the mean
#     training reward of the last 20% of the steps against the first 20%.
# BENCH_RLHF_PARTS ("grpo ppo") picks the parts. Not part of `make bench` (about 50 minutes);
# appends tables to bench/RESULTS.md (or BENCH_RESULTS).
set -u
cd "$(dirname "$0")/.."
OUT=$PWD/build/bench/rlhf
ZT=${ZT:-$PWD/zt}
PY=/usr/bin/python3
RESULTS=${BENCH_RESULTS:-bench/RESULTS.md}
SFT_STEPS=${BENCH_SFT_STEPS:-150}
MINUTES=${BENCH_GRPO_MINUTES:-20}
PARTS=${BENCH_RLHF_PARTS:-grpo ppo}
PPO_STEPS=${BENCH_PPO_STEPS:-100000}
PPO_MINUTES=${BENCH_PPO_MINUTES:-20}
log() { echo "bench: $*" >&2; }
[ -x "$ZT" ] || { log "./zt not built (make)"; exit 1; }
[ -f build/demo/prompts_valid.jsonl ] || scripts/demo-prepare.sh
mkdir -p "$OUT"
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)

SFT=$OUT/sft/final
if [ ! -f "$SFT/config.json" ]; then
    log "SFT for $SFT_STEPS steps"
    "$ZT" sft recipes/demo-sft.toml train.max_steps="$SFT_STEPS" output.dir="$OUT/sft" 2> "$OUT/sft.log" || exit 1
fi

grpo_part() {
log "GRPO for up to $MINUTES minutes"
grpo() { "$ZT" rlhf recipes/demo-grpo.toml model.path="$SFT" "$@"; }
grpo output.dir="$OUT/grpo0" train.max_steps=1 train.learning_rate=0 2> "$OUT/grpo0.log" || exit 1
timeout $((MINUTES * 60)) "$ZT" rlhf recipes/demo-grpo.toml model.path="$SFT" output.dir="$OUT/grpo" \
    train.max_steps=100000 train.eval_steps="${BENCH_EVAL_STEPS:-50}" train.save_steps=0 2> "$OUT/grpo.log"
log "generation speed"
prompts=$OUT/prompts.jsonl
head -64 build/demo/prompts_train.jsonl > "$prompts"
gen=(data.train="$prompts" data.valid="$prompts" train.max_steps=4 train.eval_steps=0 zero.stage=3 train.logging_steps=4)
grpo output.dir="$OUT/gen1" "${gen[@]}" 2> "$OUT/gen1.log" || exit 1
mpirun --allow-run-as-root --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -np 2 "$ZT" rlhf recipes/demo-grpo.toml \
    model.path="$SFT" output.dir="$OUT/gen2" "${gen[@]}" train.micro_batch_size=8 2> "$OUT/gen2.log" || exit 1
ZT_LOG=info "$ZT" generate --model "$SFT" --chat-template chatml --input "$prompts" --output "$OUT/plain.jsonl" \
    --max-new-tokens 12 --temperature 1 2> "$OUT/plain.log" || exit 1

$PY - "$OUT" "$SFT_STEPS" "$MINUTES" "$LOAD" "$(nproc)" <<'PY' | tee -a "$RESULTS"
import json, re, sys
out, sft_steps, minutes, load, cores = sys.argv[1:]
rows = lambda d: [json.loads(l) for l in open(f"{out}/{d}/metrics.jsonl")]
start = [r for r in rows("grpo0") if r.get("split") == "valid"][-1]["reward_mean"]
curve = [(r["step"], r["reward_mean"]) for r in rows("grpo") if r.get("split") == "valid"]
train = {r["step"]: r for r in rows("grpo") if "split" not in r}
elapsed = lambda step: max(r["elapsed_s"] for s, r in train.items() if s <= step)
speed = lambda d: [r["generate_tokens_per_s"] for r in rows(d) if "generate_tokens_per_s" in r][-1]
m = re.search(r"generated (\d+) tokens in ([\d.]+) s", open(f"{out}/plain.log").read())
plain = int(m.group(1)) / float(m.group(2))
print(f"\n## zt rlhf: GRPO on the demo task (bench/rlhf.sh)\n")
print(f"Conditions: {cores} cores, load {load}; SFT {sft_steps} steps of recipes/demo-sft.toml, then "
      f"recipes/demo-grpo.toml (8 completions per prompt, 8 prompts per step, temperature 1, lr 3e-5, beta 0.04) "
      f"for at most {minutes} minutes; held-out accuracy = greedy exact match on the 200 held-out words.\n")
print("| step | elapsed (s) | held-out accuracy |\n| --- | --- | --- |")
print(f"| 0 | 0 | {start:.3f} |")
for step, acc in curve:
    print(f"| {step} | {elapsed(step):.0f} | {acc:.3f} |")
best = max((a for _, a in curve), default=start)
print(f"\nStart {start:.3f}, best {best:.3f} ({100 * (best - start):+.1f} points).\n")
print("Generation (sampled tokens/s, temperature 1, max 12 new tokens, the same SFT model):\n")
print("| run | tokens/s |\n| --- | --- |")
print(f"| zt generate, one process | {plain:.0f} |")
print(f"| GRPO, ZeRO-3, 1 rank | {speed('gen1'):.0f} |")
print(f"| GRPO, ZeRO-3, 2 ranks (1 thread each) | {speed('gen2'):.0f} |")
PY
}

ppo_part() {
log "PPO: $PPO_STEPS steps, at most $PPO_MINUTES minutes"
timeout $((PPO_MINUTES * 60)) "$ZT" rlhf recipes/demo-ppo.toml model.path="$SFT" output.dir="$OUT/ppo" \
    train.max_steps="$PPO_STEPS" train.logging_steps=1 train.eval_steps=0 2> "$OUT/ppo.log"
$PY - "$OUT/ppo/metrics.jsonl" "$LOAD" "$(nproc)" <<'PY' | tee -a "$RESULTS"
import json, sys
path, load, cores = sys.argv[1:]
rows = [r for r in map(json.loads, open(path)) if "split" not in r and r.get("reward_mean") is not None]
k = max(1, len(rows) // 5)
first, last = (sum(r["reward_mean"] for r in part) / len(part) for part in (rows[:k], rows[-k:]))
print(f"\n## zt rlhf: PPO on the demo task (bench/rlhf.sh)\n")
print(f"Conditions: {cores} cores, load {load}; the same SFT model; recipes/demo-ppo.toml (64 prompts "
      f"a step, one completion each, actor lr 6e-5, critic 2e-4, DeepSpeed-Chat's constants); exact-match reward.\n")
print(f"{len(rows)} steps in {rows[-1]['elapsed_s']:.0f} s. Mean reward, first 20% of the steps: {first:.3f}; "
      f"last 20%: {last:.3f} ({last - first:+.3f}).")
print(f"KL per token at the end {rows[-1]['kl']:.4f}, value loss {rows[-1]['value_loss']:.4f}.")
PY
}

for part in $PARTS; do "${part}_part"; done
