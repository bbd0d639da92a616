#!/usr/bin/env bash
# bench/bf16_demo.sh: the built-in demo (recipes/demo-sft.toml) trained in fp32 and in bf16
# from the same start, and in fp32 again at a lower kernel level (ZT_CPU=avx2: other summation
# orders, the size of fp32 rounding) as the yardstick of how far rounding alone moves a run:
# each step's loss against the fp32 run's (the largest relative gap over steps 1..100, and the
# step where the runs first part by more than 1e-2), the mean loss of the first 100 steps, and
# the held-out exact-match accuracy of each final model. Prints a table and appends it to
# bench/RESULTS.md. About 8 minutes on 2 cores.
set -u
cd "$(dirname "$0")/.."
. bench/record.sh
OUT=build/bench/bf16-demo
PY=/usr/bin/python3
mkdir -p "$OUT"
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
log() { echo "bench: $*" >&2; }
[ -x ./zt ] || { log "./zt not built"; exit 1; }
scripts/demo-prepare.sh > "$OUT/prepare.log" 2>&1 || { log "demo data: see $OUT/prepare.log"; exit 1; }

# run NAME [overrides...]: the whole demo training, every step logged, then zt eval of final/
run() {
    local name=$1
    shift
    log "demo $name"
    ./zt sft recipes/demo-sft.toml output.dir="$PWD/$OUT/$name" train.logging_steps=1 "$@" > "$OUT/$name.log" 2>&1 &&
        ./zt eval recipes/demo-sft.toml --checkpoint "$OUT/$name/final" "$@" > "$OUT/$name.eval" 2>> "$OUT/$name.log" ||
        log "demo $name failed: see $OUT/$name.log"
}
run fp32
run bf16 model.dtype=bf16
ZT_CPU=avx2 run fp32-avx2

TABLE=$($PY - "$OUT" <<'EOF'
import json, sys
out = sys.argv[1]
def load(name):
    try:
        rows = {r["step"]: r["loss"] for r in map(json.loads, open(f"{out}/{name}/metrics.jsonl"))
                if "loss" in r and r.get("split") is None}
        acc = json.loads(open(f"{out}/{name}.eval").read().strip().splitlines()[-1]).get("accuracy")
    except (OSError, ValueError, IndexError):
        return None
    return rows, acc
base = load("fp32")
lines = ["| run | largest gap to fp32, steps 1-100 | first step > 1e-2 apart | mean loss, steps 1-100 | held-out accuracy |",
         "|---|---:|---:|---:|---:|"]
for name, label in (("fp32", "fp32"), ("fp32-avx2", "fp32, ZT_CPU=avx2"), ("bf16", "bf16")):
    r = load(name)
    if not r or not base:
        lines.append(f"| {label} | missing | | | |")
        continue
    steps = [s for s in sorted(base[0]) if s <= 100 and s in r[0]]
    gaps = [abs(r[0][s] - base[0][s]) / base[0][s] for s in steps]
    first = next((s for s, g in zip(steps, gaps) if g > 1e-2), None)
    mean = sum(r[0][s] for s in steps) / len(steps)
    lines.append(f"| {label} | {max(gaps):.2e} | {first if first else '-'} | {mean:.4f} | {r[1]} |")
print("\n".join(lines))
EOF
)
INFO="- CPU: $(bench_cpu); load average at the start: $LOAD"
bench_record "the demo in fp32 and bf16 (bench/bf16_demo.sh)" "$INFO" "$TABLE"
