#!/usr/bin/env bash
# bench/zeropp.sh: ZeRO++ where it matters, in two parts; prints tables and appends them to
# bench/RESULTS.md. Not part of `make bench` (it needs root for the network part and takes
# about 15 minutes): run it as `bench/zeropp.sh [convergence] [network]` (both by default).
#
# convergence: the demo task (recipes/demo-sft.toml: a tiny Llama learns to reverse words,
#   asked in chat) on 4 ranks posing as 2 nodes × 2 (ZT_RANKS_PER_NODE=2), global batch 8 as
#   the demo's, ZeRO stage 3 plain against qwZ + hpZ + qgZ, the same steps: the loss at every
#   logged step, the held-out loss and exact-match accuracy (zt eval).
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
PARTS=${*:-convergence network}
ZEROPP=(zero.quantized_weights=true zero.hpz_partition_size=2 zero.quantized_gradients=true)
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

convergence() {
    scripts/demo-prepare.sh > "$OUT/prepare.log" 2>&1 || { log "demo-prepare failed: $OUT/prepare.log"; return; }
    local load=$(cut -d' ' -f1-3 /proc/loadavg) run
    for run in plain zeropp; do
        local keys=()
        [ $run = zeropp ] && keys=("${ZEROPP[@]}")
        log "demo, 4 ranks, stage 3, $run"
        rm -rf "$OUT/demo-$run" # never resume an older run's checkpoints
        "${MPI[@]}" "$ZT" sft recipes/demo-sft.toml output.dir="$PWD/$OUT/demo-$run" zero.stage=3 \
            train.micro_batch_size=2 "${keys[@]}" > "$OUT/demo-$run.log" 2>&1 || { log "failed: $OUT/demo-$run.log"; continue; }
        "$ZT" eval recipes/demo-sft.toml --checkpoint "$OUT/demo-$run/final" > "$OUT/eval-$run.out" 2> "$OUT/eval-$run.log" \
            || log "eval failed: $OUT/eval-$run.log"
    done
    local table
    table=$($PY - "$OUT" <<'EOF'
import json, sys
out = sys.argv[1]
def rows(run):
    try:
        return [json.loads(l) for l in open(f"{out}/demo-{run}/metrics.jsonl")]
    except OSError:
        return []
def ev(run):
    try:
        return json.loads(open(f"{out}/eval-{run}.out").read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return {}
train = {r: {x["step"]: x["loss"] for x in rows(r) if "split" not in x} for r in ("plain", "zeropp")}
lines = ["| step | stage 3 loss | stage 3 + ZeRO++ loss | difference |", "|---:|---:|---:|---:|"]
for s in sorted(set(train["plain"]) | set(train["zeropp"])):
    a, b = train["plain"].get(s), train["zeropp"].get(s)
    d = f"{100 * (b - a) / a:+.2f}%" if a and b else ""
    lines.append(f"| {s} | {a if a is None else f'{a:.4f}'} | {b if b is None else f'{b:.4f}'} | {d} |")
e = {r: ev(r) for r in ("plain", "zeropp")}
lines.append("")
lines.append("| run | held-out loss | held-out accuracy |")
lines.append("|---|---:|---:|")
for r, name in (("plain", "stage 3"), ("zeropp", "stage 3 + qwZ + hpZ + qgZ")):
    x = e[r]
    acc = x.get("accuracy")
    lines.append(f"| {name} | {x.get('loss', float('nan')):.4f} | {'' if acc is None else f'{100 * acc:.1f}%'} |")
fa, fb = (max(train[r].items())[1] if train[r] else None for r in ("plain", "zeropp"))  # the last training row
if fa and fb:
    lines.append(f"\nFinal training loss: {fa:.4f} (stage 3) against {fb:.4f} (ZeRO++), {100 * (fb - fa) / fa:+.2f}%.")
print("\n".join(lines))
EOF
)
    report "ZeRO++ convergence (bench/zeropp.sh)" "- $CPU; load average at the start: $load
- the demo (recipes/demo-sft.toml: 0.75M parameters, chat, reverse a word), 4 ranks as 2 nodes × 2 (ZT_RANKS_PER_NODE=2), micro-batch 2 (global batch 8, as the demo's), zero.stage = 3, quant_block_size 2048; ZeRO++ = quantized_weights + hpz_partition_size 2 + quantized_gradients" "$table"
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
            train.max_steps=4 train.micro_batch_size=1 zero.stage=3 "${keys[@]}" > "$OUT/net-$run.log" 2>&1 \
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
- scripts/netns-testbed.sh: 2 network-namespace hosts × 2 ranks, Open MPI over TCP only (btl tcp,self), the veth limited to $rate each way (tc tbf); llama60m shape (56.4M parameters, fp32), 1 × 256 tokens a rank a step, zero.stage = 3; step time is the mean of steps 2..4" "$table"
}

for part in $PARTS; do "$part"; done
