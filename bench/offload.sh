#!/usr/bin/env bash
# bench/offload.sh: the two speeds optimizer offload rests on, each beside its ceiling on
# this machine: zt's I/O engine (bench/aio_bw.c) against fio on the same disk, and the CPU
# AdamW step (bench/adamw_bw.c) against a STREAM-like triad. `make bench` runs it after
# bench/zero.sh; it prints two tables and appends them to bench/RESULTS.md.
#
# Disk: a file of BENCH_AIO_SIZE bytes (2G) under build/bench/offload, 1 MiB blocks, queue
# depth 32, O_DIRECT, io_uring on both sides: written new (fsync at the end), rewritten in
# place (fsync), read back. fio writes its new file with --fallocate=none, as zt's engine
# creates its files empty, and --end_fsync=1. Four rounds, since a virtual disk's bandwidth
# wanders from one pass to the next; zt goes first in odd rounds, fio in even ones; the table
# gives the best and every round. Needs about BENCH_AIO_SIZE free (one file at a time).
# AdamW: 64M parameters, BENCH_THREADS (2) OpenMP threads, best of 8 passes. About 2 minutes.
set -u
cd "$(dirname "$0")/.."

OUT=build/bench/offload
PY=/usr/bin/python3
THREADS=${BENCH_THREADS:-2}
SIZE=${BENCH_AIO_SIZE:-2G}
BLOCK=1M
DEPTH=32
ROUNDS=4
mkdir -p "$OUT"
LOAD=$(cut -d' ' -f1-3 /proc/loadavg) # other work on the machine skews every number below
log() { echo "bench: $*" >&2; }

[ -f build/libzt.a ] || { log "build/libzt.a not built (make)"; exit 1; }
URING_LIBS=$(pkg-config --libs liburing 2>/dev/null)
gcc -std=gnu11 -O3 -Wall -Wextra -I. bench/aio_bw.c build/libzt.a $URING_LIBS -lm -o "$OUT/aio_bw" ||
    log "aio_bw did not build"
gcc -std=gnu11 -O3 -Wall -Wextra -fopenmp -I. bench/adamw_bw.c build/libzt.a -lm -o "$OUT/adamw_bw" ||
    log "adamw_bw did not build"
rm -f "$OUT"/aio-*.json "$OUT"/fio-*.json "$OUT"/adamw.json

# fio_pass NAME RW [options]: one fio job on $OUT/fio.dat, its JSON report in $OUT/fio-NAME.json
fio_pass() {
    local name=$1 rw=$2
    shift 2
    fio --name="$name" --ioengine=io_uring --direct=1 --rw="$rw" --bs=$BLOCK --iodepth=$DEPTH --size="$SIZE" \
        --filename="$OUT/fio.dat" --output-format=json --output="$OUT/fio-$name.json" "$@" > /dev/null ||
        log "fio $name failed"
}

HAVE_FIO=$(command -v fio >/dev/null && echo 1)
[ -n "$HAVE_FIO" ] || log "fio not installed (ZT_BENCH_DEPS=1 scripts/install-deps.sh): no fio column"
zt_round() {
    [ -x "$OUT/aio_bw" ] || return
    log "zt aio, round $1: $SIZE, block $BLOCK, depth $DEPTH"
    "$OUT/aio_bw" --dir "$OUT" --size "$SIZE" --block $BLOCK --depth $DEPTH > "$OUT/aio-$1.json" || log "aio_bw failed"
}
fio_round() {
    [ -n "$HAVE_FIO" ] || return
    log "fio, round $1"
    rm -f "$OUT/fio.dat"
    fio_pass write-$1 write --fallocate=none --end_fsync=1
    fio_pass rewrite-$1 write --end_fsync=1
    fio_pass read-$1 read
    rm -f "$OUT/fio.dat"
}
for round in $(seq $ROUNDS); do
    if [ $((round % 2)) = 1 ]; then
        zt_round $round
        fio_round $round
    else
        fio_round $round
        zt_round $round
    fi
done

if [ -x "$OUT/adamw_bw" ]; then
    log "AdamW and triad ($THREADS threads)"
    OMP_NUM_THREADS=$THREADS "$OUT/adamw_bw" > "$OUT/adamw.json" || log "adamw_bw failed"
fi

TABLE=$($PY - "$OUT" "$ROUNDS" <<'EOF'
import json, os, sys
out, rounds = sys.argv[1], range(1, int(sys.argv[2]) + 1)
def load(name):
    try:
        with open(os.path.join(out, name)) as f:
            return json.loads(f.read())
    except (OSError, ValueError):
        return None
def fio(name):
    j = load(f"fio-{name}.json")
    if not j:
        return None
    job = j["jobs"][0]
    return (job["write"]["bw_bytes"] or job["read"]["bw_bytes"]) / 1e6
spread = []
def cell(v):
    ok = [x for x in v if x is not None]
    if not ok:
        return "missing", None
    spread.append(max(ok) / min(ok))
    return f"{max(ok):.0f} ({', '.join('-' if x is None else f'{x:.0f}' for x in v)})", max(ok)

lines = ["| pass | zt MB/s, best (rounds) | fio MB/s, best (rounds) | zt / fio |", "|---|---:|---:|---:|"]
ratios = {}
for what, key, label in (("writing a new file", "write_MBps", "write, new file"),
                         ("rewriting it", "rewrite_MBps", "rewrite in place"), ("reading", "read_MBps", "read")):
    zt_text, zt = cell([(load(f"aio-{r}.json") or {}).get(key) for r in rounds])
    fio_text, fb = cell([fio(f"{key.split('_')[0]}-{r}") for r in rounds])
    ratio = f"{100 * zt / fb:.0f}%" if zt and fb else ""
    if ratio:
        ratios[what] = ratio
    lines.append(f"| {label} | {zt_text} | {fio_text} | {ratio} |")

a = load("adamw.json")
lines += ["", "| kernel | bytes counted per element | ms / pass | GB/s | AdamW / this |", "|---|---:|---:|---:|---:|"]
if a:
    lines.append(f"| zt AdamW ({a['cpu_level']}, bf16 copy) | 30 | {a['adamw_ms']:.1f} | {a['adamw_GBps']:.2f} | |")
    lines.append(f"| triad, STREAM's count | 12 | {a['triad_ms']:.1f} | {a['triad_GBps']:.2f} | "
                 f"{100 * a['adamw_vs_triad']:.0f}% |")
    lines.append(f"| triad, with write-allocate | 16 | {a['triad_ms']:.1f} | {a['triad_wa_GBps']:.2f} | "
                 f"{100 * a['adamw_vs_triad_wa']:.0f}% |")
else:
    lines.append("| AdamW / triad | missing | | | |")

said = []
if ratios:
    moves = ", ".join(f"{v} {k}" for k, v in ratios.items()).replace(" ", " of fio's bandwidth ", 1)
    said.append(f"zt's engine moves {moves} (target: 90% both ways), the best of rounds that differ by up to "
                f"{100 * (max(spread) - 1):.0f}%")
if a:
    said.append(f"AdamW streams its state at {a['adamw_GBps']:.1f} GB/s, {100 * a['adamw_vs_triad_wa']:.0f}% of the "
                f"triad's memory traffic counted with write-allocate ({100 * a['adamw_vs_triad']:.0f}% of STREAM's "
                f"count; target: 80%)")
if said:
    lines += ["", "; ".join(said) + "."]
print("\n".join(lines))
EOF
)

COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo "no commit")
[ -n "$(git status --porcelain 2>/dev/null | head -1)" ] && COMMIT+=" (uncommitted changes)"
DISK=$(findmnt -n -T "$OUT" -o SOURCE,FSTYPE | tr -s ' ')
DEV=$(basename "$(echo "$DISK" | cut -d' ' -f1)")
ROT=$(cat "/sys/block/$DEV/queue/rotational" 2>/dev/null)
SCHED=$(grep -o '\[[a-z-]*\]' "/sys/block/$DEV/queue/scheduler" 2>/dev/null | tr -d '[]')
MEM=$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 2^20}' /proc/meminfo)
HEAD="### $(date -u '+%Y-%m-%d %H:%M UTC') · $COMMIT · offload: disk and AdamW bandwidth (bench/offload.sh)"
INFO="- $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') ($(nproc) cores online), $MEM memory, Linux $(uname -r); load average at the start: $LOAD
- disk: $DISK under $OUT (rotational: ${ROT:-?}, scheduler: ${SCHED:-?}); liburing $(pkg-config --modversion liburing 2>/dev/null || echo '?'), $(fio --version 2>/dev/null || echo 'no fio')
- I/O: $SIZE file, $BLOCK blocks, queue depth $DEPTH, O_DIRECT, io_uring; zt queues 64 transfers of one block in a ring of buffers; zt first in odd rounds, fio in even ones; fio's new file with --fallocate=none, writes with --end_fsync=1; MB = 10^6 bytes; $ROUNDS rounds
- AdamW: 64M parameters, bf16 copy written, decay on, $THREADS OpenMP threads; triad a = b + s·c over 3 × 160M floats (the same 1.9 GB); best of 8 passes each; GB = 10^9 bytes"
printf '\n%s\n%s\n\n%s\n' "$HEAD" "$INFO" "$TABLE"
printf '\n%s\n%s\n\n%s\n' "$HEAD" "$INFO" "$TABLE" >> bench/RESULTS.md
