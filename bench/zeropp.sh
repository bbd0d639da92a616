#!/usr/bin/env bash
# bench/zeropp.sh: ZeRO++ where it matters, in four parts; prints tables and appends them to
# bench/RESULTS.md. Not part of `make bench` (the network part needs root; all four take about
# 50 minutes): run it as `bench/zeropp.sh [convergence] [text] [blocks] [network]` (all by default).
#
# convergence: the demo task (recipes/demo-sft.toml: a tiny Llama learns to reverse words,
#   asked in chat) on 4 ranks posing as 2 nodes × 2 (ZT_RANKS_PER_NODE=2), global batch 8 as
#   the demo's, ZeRO stage 3 plain against qwZ + hpZ + qgZ, the same steps, for each data
#   order seed in BENCH_SEEDS (default "1 2 3"): the loss at every logged step, the final
#   loss, the held-out loss and exact-match accuracy (zt eval), and the ratio of the final
#   losses with its spread over the seeds.
# text: the same comparison pretraining the demo's model shape on Debian's fortunes
#   (bench/fortunes.toml), where the loss levels off instead of going to zero.
# blocks: zero.measure_quantization's error of qwZ's weights and qgZ's gradients, and the
#   inter-node bytes, for each block size in BENCH_BLOCKS, on the demo's first 100 steps.
#   BENCH_BLOCK sets the block size of the other parts (default: the recipe's).
# network: scripts/netns-testbed.sh's two namespace hosts, 2 ranks each, the link between
#   them limited to BENCH_RATE (default 1gbit) with tc; bench/llama60m.toml's shape (56.4M
#   parameters), 1 × 256 tokens a rank per step; step time of plain stage 3 against each of
#   qwZ, hpZ, qgZ and all three, and the inter-node bytes a step.
set -u
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
OUT=build/bench/zeropp
ZT=$PWD/zt
mkdir -p "$OUT"
PARTS=${*:-convergence text blocks network}
SEEDS=${BENCH_SEEDS:-1 2 3}
ZEROPP=(zero.quantized_weights=true zero.hpz_partition_size=2 zero.quantized_gradients=true)
BLOCK_KEY=() # every run with a quantization takes it
[ -n "${BENCH_BLOCK:-}" ] && BLOCK_KEY=(zero.quant_block_size=$BENCH_BLOCK)
MPI=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np 4 -x ZT_RANKS_PER_NODE=2 -x OMP_NUM_THREADS=1
     -x OPENBLAS_NUM_THREADS=1)
log() { echo "bench: $*" >&2; }
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo "no commit")
[ -n "$(git status --porcelain 2>/dev/null | head -1)" ] && COMMIT+=" (uncommitted changes)"
CPU="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') ($(nproc) cores online)"

report() { # report TITLE INFO TABLE
    local head="### $(date -u '+%Y-%m-%d %H:%M UTC') · $COMMIT · $1"
    printf '\n%s\n%s\n\n%s\n' "$head" "$2" "$3"
    printf '\n%s\n%s\n\n%s\n' "$head" "$2" "$3" >> bench/RESULTS.md
}

# pairs NAME RECIPE COMMAND EVAL: plain stage 3 and ZeRO++ on RECIPE for each seed of SEEDS, into
# $OUT/NAME-{plain,zeropp}-SEED; with EVAL = 1, zt eval on each final model too
pairs() {
    local name=$1 recipe=$2 cmd=$3 eval=$4 run seed
    for seed in $SEEDS; do
        for run in plain zeropp; do
            local keys=() d=$OUT/$name-$run-$seed
            [ $run = zeropp ] && keys=("${ZEROPP[@]}" "${BLOCK_KEY[@]}")
            log "$name, 4 ranks, stage 3, $run, train.seed = $seed"
            rm -rf "$d" # never resume an older run's checkpoints
            "${MPI[@]}" "$ZT" "$cmd" "$recipe" output.dir="$PWD/$d" zero.stage=3 train.micro_batch_size=2 \
                train.seed=$seed "${keys[@]}" > "$d.log" 2>&1 || { log "failed: $d.log"; continue; }
            [ "$eval" = 1 ] || continue
            "$ZT" eval "$recipe" --checkpoint "$d/final" > "$d.eval" 2> "$d.eval.log" || log "eval failed: $d.eval.log"
        done
    done
}

# The quantization block size pairs NAME ran ZeRO++ with (the recipe's default unless BENCH_BLOCK set it).
block_of() {
    local s
    for s in $SEEDS; do
        grep -m1 '^quant_block_size' "$OUT/$1-zeropp-$s/recipe.resolved.toml" 2>/dev/null | tr -dc '0-9' && return
    done
}

# pairs_table NAME: the losses of pairs NAME at every logged step, then per seed the final
# training loss and the held-out loss (and exact-match accuracy where zt eval measured it),
# and the ratio ZeRO++ / stage 3 of the final losses: each seed's, and their geometric mean
# with a 95% interval (Student's t over the seeds' log ratios)
pairs_table() {
    $PY - "$OUT" "$1" $SEEDS <<'EOF'
import json, math, sys
out, name, seeds = sys.argv[1], sys.argv[2], sys.argv[3:]
T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23}
def load(run, s):
    base = f"{out}/{name}-{run}-{s}"
    try:
        rows = [json.loads(l) for l in open(f"{base}/metrics.jsonl")]
    except OSError:
        return None
    train = {r["step"]: r["loss"] for r in rows if "split" not in r}
    held = [r for r in rows if "split" in r]
    res = {"curve": train, "final": train[max(train)] if train else None,
           "held": held[-1]["loss"] if held else None, "acc": None}
    try:
        ev = json.loads(open(f"{base}.eval").read().strip().splitlines()[-1])
        res["held"], res["acc"] = ev.get("loss"), ev.get("accuracy")
    except (OSError, ValueError, IndexError):
        pass
    return res if train else None
def f(v, fmt="{:.4f}"):
    return "" if v is None else fmt.format(v)
runs = {(r, s): load(r, s) for r in ("plain", "zeropp") for s in seeds}
steps = sorted(set().union(*(v["curve"] for v in runs.values() if v)))
lines = ["| step | " + " | ".join(f"{n} seed {s}" for s in seeds for n in ("stage 3", "ZeRO++")) + " |",
         "|---:|" + "---:|" * 2 * len(seeds)]
for st in steps:
    lines.append(f"| {st} | " + " | ".join(f(runs[(r, s)]["curve"].get(st) if runs[(r, s)] else None)
                                           for s in seeds for r in ("plain", "zeropp")) + " |")
lines += ["", "| seed | stage 3 final loss | ZeRO++ final loss | ZeRO++ / stage 3 | stage 3 held-out | ZeRO++ held-out |",
          "|---:|---:|---:|---:|---:|---:|"]
logs = []
for s in seeds:
    a, b = runs[("plain", s)], runs[("zeropp", s)]
    if not a or not b:
        lines.append(f"| {s} | failed | | | | |")
        continue
    logs.append(math.log(b["final"] / a["final"]))
    held = [f(x["held"]) + ("" if x["acc"] is None else f", {100 * x['acc']:.1f}%") for x in (a, b)]
    lines.append(f"| {s} | {f(a['final'])} | {f(b['final'])} | {b['final'] / a['final']:.3f} | {held[0]} | {held[1]} |")
if logs:
    m = sum(logs) / len(logs)
    line = f"\nZeRO++ / stage 3 final training loss, geometric mean over {len(logs)} seeds: {math.exp(m):.3f}"
    if len(logs) > 1:
        se = math.sqrt(sum((x - m) ** 2 for x in logs) / (len(logs) - 1) / len(logs))
        t = T95.get(len(logs) - 1, 2.0)
        line += f" (95% interval {math.exp(m - t * se):.3f} to {math.exp(m + t * se):.3f})"
    lines.append(line + ".")
print("\n".join(lines))
EOF
}

convergence() {
    scripts/demo-prepare.sh > "$OUT/prepare.log" 2>&1 || { log "demo-prepare failed: $OUT/prepare.log"; return; }
    local load=$(cut -d' ' -f1-3 /proc/loadavg)
    pairs demo recipes/demo-sft.toml sft 1
    report "ZeRO++ convergence over seeds: the demo (bench/zeropp.sh)" "- $CPU; load average at the start: $load
- the demo (recipes/demo-sft.toml: 0.75M parameters, chat, reverse a word), 4 ranks as 2 nodes × 2 (ZT_RANKS_PER_NODE=2), micro-batch 2 (global batch 8, as the demo's), zero.stage = 3; ZeRO++ = quantized_weights + hpz_partition_size 2 + quantized_gradients, quant_block_size $(block_of demo); each pair of runs with train.seed = $SEEDS (the data order); held-out: zt eval's loss and exact-match accuracy" "$(pairs_table demo)"
}

# pretraining, where the loss levels off near the text's entropy instead of going to zero
text() {
    local d=$OUT/text
    if [ ! -f "$d/model/config.json" ]; then
        [ -d /usr/share/games/fortunes ] || apt-get install -y -qq fortunes > "$OUT/apt.log" 2>&1 \
            || { log "no fortunes (apt-get install fortunes): $OUT/apt.log"; return; }
        rm -rf "$d" && mkdir -p "$d" && $PY bench/fortunes_data.py "$d" >&2 || return
        spm_train --input="$d/corpus.txt" --model_prefix="$d/tok" --vocab_size=256 --model_type=char \
            --hard_vocab_limit=false --character_coverage=0.9995 --minloglevel=2 > /dev/null 2>&1 \
            || { log "spm_train failed"; return; }
        "$ZT" init --arch llama --out "$d/model" --seed 1 vocab_size="$(wc -l < "$d/tok.vocab")" hidden_size=128 \
            intermediate_size=352 num_hidden_layers=4 num_attention_heads=4 num_key_value_heads=2 \
            max_position_embeddings=256 bos_token_id=1 eos_token_id=2 > /dev/null \
            && cp "$d/tok.model" "$d/model/tokenizer.model" || return
    fi
    local load=$(cut -d' ' -f1-3 /proc/loadavg)
    pairs text bench/fortunes.toml pretrain 0
    report "ZeRO++ convergence over seeds: pretraining on text (bench/zeropp.sh)" "- $CPU; load average at the start: $load
- bench/fortunes.toml: the demo's model shape (0.76M parameters, character-level tokenizer) pretrained on Debian's fortunes (2.4 MB of text, 1 in 20 fortunes held out) for 600 steps, under one epoch; 4 ranks as 2 nodes × 2, micro-batch 2 (global batch 8), zero.stage = 3; ZeRO++ = quantized_weights + hpz_partition_size 2 + quantized_gradients, quant_block_size $(block_of text); train.seed = $SEEDS; held-out: the run's loss on valid.jsonl at its end" "$(pairs_table text)"
}

# What quantizing loses at each block size (zero.measure_quantization) against the bytes it
# moves: the demo's first 100 steps with all three parts on.
blocks() {
    [ -f build/demo/train.jsonl ] || scripts/demo-prepare.sh > "$OUT/prepare.log" 2>&1 \
        || { log "demo-prepare failed: $OUT/prepare.log"; return; }
    local load=$(cut -d' ' -f1-3 /proc/loadavg) b sizes=${BENCH_BLOCKS:-4096 2048 1024 512 256 128 64 32 16}
    for b in $sizes; do
        log "demo, 100 steps, all three, quant_block_size = $b, measured"
        rm -rf "$OUT/blocks-$b"
        "${MPI[@]}" "$ZT" sft recipes/demo-sft.toml output.dir="$PWD/$OUT/blocks-$b" zero.stage=3 train.micro_batch_size=2 \
            train.max_steps=100 train.logging_steps=10 "${ZEROPP[@]}" zero.quant_block_size=$b \
            zero.measure_quantization=true > "$OUT/blocks-$b.log" 2>&1 || log "failed: $OUT/blocks-$b.log"
    done
    local table
    table=$($PY - "$OUT" $sizes <<'EOF'
import json, sys
out, sizes = sys.argv[1], sys.argv[2:]
lines = ["| block | qwZ weight error | qgZ gradient error | forward gather, inter-node KiB / step | gradient reduce, inter-node KiB / step |",
         "|---:|---:|---:|---:|---:|"]
for b in sizes:
    try:
        rows = [json.loads(l) for l in open(f"{out}/blocks-{b}/metrics.jsonl")]
        rows = [r for r in rows if "split" not in r]
    except OSError:
        rows = []
    if not rows:
        lines.append(f"| {b} | failed | | | |")
        continue
    steps = rows[-1]["step"]
    mean = lambda k: sum(r[k] for r in rows) / len(rows)
    per_step = lambda k: sum(r[k] for r in rows) / steps / 1024
    lines.append(f"| {b} | {100 * mean('quant_error_weights'):.3f}% | {100 * mean('quant_error_grads'):.1f}% | "
                 f"{per_step('comm_bytes_fwd_gather_inter'):.1f} | {per_step('comm_bytes_grad_reduce_inter'):.1f} |")
print("\n".join(lines))
EOF
)
    report "ZeRO++ quantization error against block size (bench/zeropp.sh)" "- $CPU; load average at the start: $load
- the demo, 4 ranks as 2 nodes × 2, micro-batch 2, zero.stage = 3 with qwZ + hpZ + qgZ, 100 steps; zero.measure_quantization: ‖quantized − exact‖ / ‖exact‖ of the weights qwZ gathered and of the gradients qgZ reduced, mean of the 10 logged rows; bytes from comm_bytes_*_inter (all ranks, fp32 model)" "$table"
}

network() {
    [ "$(id -u)" = 0 ] || { log "network part needs root: skipped"; return; }
    . scripts/netns-testbed.sh
    local tb=$OUT/testbed rate=${BENCH_RATE:-1gbit}
    rm -rf "$tb" && mkdir -p "$tb"
    testbed_up "$PWD/$tb" || { log "no testbed: $TB_ERR"; return; }
    trap testbed_down EXIT
    testbed_rate "$rate" || { log "tc failed"; return; }
    [ -f build/bench/model/config.json ] || bench/make-model.sh >/dev/null || { log "bench/make-model.sh failed"; return; }
    local load=$(cut -d' ' -f1-3 /proc/loadavg) run
    for run in plain qwz hpz qgz all; do
        local keys=()
        case $run in
            qwz) keys=(zero.quantized_weights=true) ;;
            hpz) keys=(zero.hpz_partition_size=2) ;;
            qgz) keys=(zero.quantized_gradients=true) ;;
            all) keys=("${ZEROPP[@]}") ;;
        esac
        log "network ($rate), 2 hosts × 2 ranks, stage 3, $run"
        rm -rf "$OUT/net-$run"
        testbed_launch 900 -- "$ZT" pretrain "$PWD/bench/llama60m.toml" output.dir="$PWD/$OUT/net-$run" \
            train.max_steps=4 train.micro_batch_size=1 zero.stage=3 "${keys[@]}" "${BLOCK_KEY[@]}" > "$OUT/net-$run.log" 2>&1 \
            || log "failed: $OUT/net-$run.log"
    done
    testbed_down
    trap - EXIT
    local table
    table=$($PY - "$OUT" <<'EOF'
import json, sys
out = sys.argv[1]
def stats(run):
    try:
        rows = [json.loads(l) for l in open(f"{out}/net-{run}/metrics.jsonl")]
    except OSError:
        return None
    t = [b["elapsed_s"] - a["elapsed_s"] for a, b in zip(rows, rows[1:])]
    last = rows[-1]
    return dict(step=sum(t) / len(t) if t else float("nan"), inter=last["comm_bytes_inter"] / 2**20,
                intra=last["comm_bytes_intra"] / 2**20, loss=last["loss"])
base = stats("plain")
lines = ["| run | step (s) | speed-up | inter-node MiB / step | intra-node MiB / step | loss at step 4 |",
         "|---|---:|---:|---:|---:|---:|"]
for run, name in (("plain", "stage 3"), ("qwz", "+ qwZ"), ("hpz", "+ hpZ"), ("qgz", "+ qgZ"), ("all", "+ qwZ + hpZ + qgZ")):
    s = stats(run)
    if not s:
        lines.append(f"| {name} | failed | | | | |")
        continue
    up = f"{base['step'] / s['step']:.2f}x" if base else ""
    lines.append(f"| {name} | {s['step']:.2f} | {up} | {s['inter']:.0f} | {s['intra']:.0f} | {s['loss']:.4f} |")
print("\n".join(lines))
EOF
)
    report "ZeRO++ over a rate-limited link (bench/zeropp.sh)" "- $CPU; load average at the start: $load
- scripts/netns-testbed.sh: 2 network-namespace hosts × 2 ranks, Open MPI over TCP only (btl tcp,self), the veth limited to $rate each way (tc tbf); llama60m shape (56.4M parameters, fp32), 1 × 256 tokens a rank a step, zero.stage = 3, quant_block_size $(grep -m1 '^quant_block_size' "$OUT/net-all/recipe.resolved.toml" | tr -dc '0-9'); step time is the mean of steps 2..4" "$table"
}

for part in $PARTS; do "$part"; done
