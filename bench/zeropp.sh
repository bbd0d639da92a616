#!/usr/bin/env bash
# bench/zeropp.sh: ZeRO++ where it matters, in two parts; prints tables and appends them to
# bench/RESULTS.md. Not part of `make bench` (it needs root for the network part and takes
# about 25 minutes): run it as `bench/zeropp.sh [convergence] [network]` (both by default).
#
# convergence: the demo task (recipes/demo-sft.toml: a tiny Llama learns to reverse words,
#   asked in chat) on 4 ranks posing as 2 nodes × 2 (ZT_RANKS_PER_NODE=2), global batch 8 as
#   the demo's, ZeRO stage 3 plain against qwZ + hpZ + qgZ, the same steps, for each data
#   order seed in BENCH_SEEDS (default "1 2 3"): the loss at every logged step, the final
#   loss, the held-out loss and exact-match accuracy (zt eval).
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
    local load=$(cut -d' ' -f1-3 /proc/loadavg) run seed seeds=${BENCH_SEEDS:-1 2 3}
    for seed in $seeds; do
        for run in plain zeropp; do
            local keys=() name=$run-$seed
            [ $run = zeropp ] && keys=("${ZEROPP[@]}")
            log "demo, 4 ranks, stage 3, $run, train.seed = $seed"
            rm -rf "$OUT/demo-$name" # never resume an older run's checkpoints
            "${MPI[@]}" "$ZT" sft recipes/demo-sft.toml output.dir="$PWD/$OUT/demo-$name" zero.stage=3 \
                train.micro_batch_size=2 train.seed=$seed "${keys[@]}" > "$OUT/demo-$name.log" 2>&1 \
                || { log "failed: $OUT/demo-$name.log"; continue; }
            "$ZT" eval recipes/demo-sft.toml --checkpoint "$OUT/demo-$name/final" > "$OUT/eval-$name.out" \
                2> "$OUT/eval-$name.log" || log "eval failed: $OUT/eval-$name.log"
        done
    done
    local table
    table=$($PY - "$OUT" $seeds <<'EOF'
import json, sys
out, seeds = sys.argv[1], sys.argv[2:]
def rows(name):
    try:
        return {x["step"]: x["loss"] for x in map(json.loads, open(f"{out}/demo-{name}/metrics.jsonl")) if "split" not in x}
    except OSError:
        return {}
def ev(name):
    try:
        return json.loads(open(f"{out}/eval-{name}.out").read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return {}
def f(v, fmt="{:.4f}"):
    return "" if v is None else fmt.format(v)
runs = {(r, s): rows(f"{r}-{s}") for r in ("plain", "zeropp") for s in seeds}
steps = sorted(set().union(*runs.values()))
head = " | ".join(f"{r} seed {s}" for s in seeds for r in ("stage 3", "ZeRO++"))
lines = [f"| step | {head} |", "|---:|" + "---:|" * 2 * len(seeds)]
for st in steps:
    lines.append(f"| {st} | " + " | ".join(f(runs[(r, s)].get(st)) for s in seeds for r in ("plain", "zeropp")) + " |")
lines += ["", "| seed | stage 3 final loss | ZeRO++ final loss | stage 3 held-out loss, accuracy | ZeRO++ held-out loss, accuracy |",
          "|---:|---:|---:|---:|---:|"]
final = {k: v[max(v)] if v else None for k, v in runs.items()}
for s in seeds:
    cells = []
    for r in ("plain", "zeropp"):
        e = ev(f"{r}-{s}")
        acc = e.get("accuracy")
        cells.append(f"{f(e.get('loss'))}, {f(None if acc is None else 100 * acc, '{:.1f}%')}")
    lines.append(f"| {s} | {f(final[('plain', s)])} | {f(final[('zeropp', s)])} | {cells[0]} | {cells[1]} |")
got = {r: [final[(r, s)] for s in seeds if final[(r, s)] is not None] for r in ("plain", "zeropp")}
if all(got.values()):
    mean = {r: sum(v) / len(v) for r, v in got.items()}
    lines.append(f"\nFinal training loss, mean over seeds: {mean['plain']:.4f} (stage 3, seeds from {min(got['plain']):.4f} "
                 f"to {max(got['plain']):.4f}) against {mean['zeropp']:.4f} (ZeRO++, {min(got['zeropp']):.4f} to "
                 f"{max(got['zeropp']):.4f}): {100 * (mean['zeropp'] - mean['plain']) / mean['plain']:+.1f}%.")
print("\n".join(lines))
EOF
)
    report "ZeRO++ convergence over seeds (bench/zeropp.sh)" "- $CPU; load average at the start: $load
- the demo (recipes/demo-sft.toml: 0.75M parameters, chat, reverse a word), 4 ranks as 2 nodes × 2 (ZT_RANKS_PER_NODE=2), micro-batch 2 (global batch 8, as the demo's), zero.stage = 3, quant_block_size 2048; ZeRO++ = quantized_weights + hpz_partition_size 2 + quantized_gradients; each pair of runs with train.seed = $seeds (the data order)" "$table"
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
