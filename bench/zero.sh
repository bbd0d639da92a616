#!/usr/bin/env bash
# bench/zero.sh: ZeRO on this machine: step time at 1, 2 and 4 ranks for stages 0 and 3,
# the overlap of stage 3's prefetch (gather time exposed with zero.prefetch_layers = 0 and
# = 1), and peak RSS per rank. `make bench` runs it after bench/run.sh; it prints a table
# and appends it to bench/RESULTS.md.
#
# Model: bench/llama60m.toml's shape (56.4M parameters, untied), one 256-token sequence per
# micro-batch, a global batch of 4 sequences (1 rank × 4 micro-batches, 2 × 2, 4 × 1), 6
# steps; times are the mean of steps 3..6. Threads per rank: 2 / ranks (at least 1), so the
# ranks share the machine's cores; with 4 ranks on 2 cores they also share them in time.
set -u
cd "$(dirname "$0")/.."

OUT=build/bench/zero
PY=/usr/bin/python3
RECIPE=bench/llama60m.toml
CORES=${BENCH_THREADS:-2}
mkdir -p "$OUT"
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
log() { echo "bench: $*" >&2; }

command -v mpirun >/dev/null || { log "mpirun not installed: no ZeRO benchmark"; exit 0; }
[ -x ./zt ] || { log "./zt not built"; exit 1; }
[ -f build/bench/model/config.json ] || bench/make-model.sh >/dev/null || { log "bench/make-model.sh failed"; exit 1; }

# run NAME RANKS STAGE PREFETCH: one training run; its directory is $OUT/NAME
run() {
    local name=$1 n=$2 stage=$3 prefetch=$4 threads=$(( CORES / $2 ))
    [ "$threads" -ge 1 ] || threads=1
    log "zt $name: $n rank(s), stage $stage, prefetch $prefetch, $threads thread(s) each"
    local args=("$RECIPE" output.dir="$PWD/$OUT/$name" train.max_steps=6 train.micro_batch_size=1
                train.gradient_accumulation_steps=$(( 4 / n )) zero.stage=$stage zero.prefetch_layers=$prefetch)
    if [ "$n" = 1 ]; then
        OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads ./zt pretrain "${args[@]}" > "$OUT/$name.log" 2>&1
    else
        mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$n" -x OMP_NUM_THREADS=$threads \
            -x OPENBLAS_NUM_THREADS=$threads ./zt pretrain "${args[@]}" > "$OUT/$name.log" 2>&1
    fi || log "zt $name failed: see $OUT/$name.log"
}

run n1-s0 1 0 1
for n in 2 4; do
    run n$n-s0 $n 0 1
    run n$n-s3-p0 $n 3 0
    run n$n-s3-p1 $n 3 1
done

TABLE=$($PY - "$OUT" <<'EOF'
import json, os, sys
out = sys.argv[1]
def stats(name):
    d = os.path.join(out, name)
    try:
        rows = [json.loads(l) for l in open(d + "/metrics.jsonl") if l.startswith("{")]
        s = json.load(open(d + "/summary.json"))
    except (OSError, ValueError):
        return None
    rows = [r for r in rows if "input_tokens_per_s" in r]
    t = [b["elapsed_s"] - a["elapsed_s"] for a, b in zip(rows, rows[1:]) if b["step"] >= 3]
    w = [r.get("gather_wait_s", 0) for r in rows if r["step"] >= 3]
    c = [r["comm_bytes_intra"] + r["comm_bytes_inter"] for r in rows if r["step"] >= 3]
    m = s.get("model_state_bytes", {})
    return dict(step=sum(t) / len(t), wait=sum(w) / len(w), comm=sum(c) / len(c) / 2**20,
                rss=s.get("peak_rss_train_bytes", 0) / 2**20,
                state=(m.get("params", 0) + m.get("grads", 0) + m.get("optimizer", 0)) / 2**20,
                gathered=m.get("gathered_peak", 0) / 2**20)
lines = ["| ranks | stage | prefetch | step (s) | vs 1 rank | gather wait, rank 0 (s/step) | comm (MiB/step, all ranks) "
         "| model state / rank (MiB) | gathered peak (MiB) | peak RSS, rank 0 (MiB) |",
         "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
base = stats("n1-s0")
for name, n, stage, pf in (("n1-s0", 1, 0, "-"), ("n2-s0", 2, 0, "-"), ("n2-s3-p0", 2, 3, 0), ("n2-s3-p1", 2, 3, 1),
                           ("n4-s0", 4, 0, "-"), ("n4-s3-p0", 4, 3, 0), ("n4-s3-p1", 4, 3, 1)):
    s = stats(name)
    if not s:
        lines.append(f"| {n} | {stage} | {pf} | failed | | | | | | |")
        continue
    rel = f"{s['step'] / base['step']:.2f}x" if base else ""
    lines.append(f"| {n} | {stage} | {pf} | {s['step']:.2f} | {rel} | {s['wait']:.3f} | {s['comm']:.0f} | "
                 f"{s['state']:.0f} | {s['gathered']:.0f} | {s['rss']:.0f} |")
for n in (2, 4):
    p0, p1 = stats(f"n{n}-s3-p0"), stats(f"n{n}-s3-p1")
    if p0 and p1 and p0["wait"] > 0:
        lines.append(f"\n{n} ranks, stage 3: gathers take {p0['wait']:.3f} s a step when nothing is prefetched; with "
                     f"prefetch_layers = 1, {p1['wait']:.3f} s stay exposed ({100 * (1 - p1['wait'] / p0['wait']):.0f}% "
                     f"hidden), and the step takes {p1['step']:.2f} s against {p0['step']:.2f} s.")
print("\n".join(lines))
EOF
)

COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo "no commit")
[ -n "$(git status --porcelain 2>/dev/null | head -1)" ] && COMMIT+=" (uncommitted changes)"
HEAD="### $(date -u '+%Y-%m-%d %H:%M UTC') · $COMMIT · ZeRO stages 0 and 3 (bench/zero.sh)"
INFO="- $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') ($(nproc) cores online), Open MPI $(mpirun --version 2>/dev/null | head -1 | grep -o '[0-9.]*$'), shared memory between ranks; load average at the start: $LOAD
- model: llama60m shape (56.4M parameters, untied), 1 × 256 tokens a micro-batch, 4 sequences a step; $CORES cores split between the ranks"
printf '\n%s\n%s\n\n%s\n' "$HEAD" "$INFO" "$TABLE"
printf '\n%s\n%s\n\n%s\n' "$HEAD" "$INFO" "$TABLE" >> bench/RESULTS.md
