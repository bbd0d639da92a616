#!/usr/bin/env bash
# bench/download.sh: zt download's throughput from a fake Hub on loopback (tests/fixtures/
# hub_server.py: resolve answers 302 to a second port that sends the file with sendfile) for a
# repository of 4 files of BENCH_DOWNLOAD_MIB (256) MiB, 1 GiB in all: zt with 1 and with 8
# workers, against curl fetching the same 4 files through the same redirects, one after the
# other and in parallel (-Z). zt hashes every byte (sha256) and fsyncs every file before it
# moves it into place; curl does neither, so curl runs once more followed by an fsync of its
# files (`sync -f`). Best of BENCH_ROUNDS (2) rounds. Not part of `make bench` (it needs about
# 2.5 GiB of disk under build/bench and the curl program); prints a table and appends it to
# bench/RESULTS.md (or BENCH_RESULTS). About a minute.
set -u
cd "$(dirname "$0")/.."

OUT=$PWD/build/bench/download
MIB=${BENCH_DOWNLOAD_MIB:-256}
ROUNDS=${BENCH_ROUNDS:-2}
PY=/usr/bin/python3
ZT=$PWD/zt
RESULTS=${BENCH_RESULTS:-bench/RESULTS.md}
log() { echo "bench: $*" >&2; }
[ -x "$ZT" ] || { log "./zt not built (make)"; exit 1; }
command -v curl > /dev/null || { log "curl not installed (ZT_BENCH_DEPS=1 scripts/install-deps.sh)"; exit 1; }
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)

rm -rf "$OUT" && mkdir -p "$OUT/repo"
for i in 1 2 3 4; do head -c $((MIB << 20)) /dev/urandom > "$OUT/repo/model-0000$i-of-00004.safetensors"; done
echo '{}' > "$OUT/control.json"
$PY tests/fixtures/hub_server.py --repo org/bench="$OUT/repo" --ports "$OUT/ports" --log /dev/null \
    --control "$OUT/control.json" 2> "$OUT/server.err" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; rm -rf "$OUT/repo" "$OUT/dest"' EXIT
for _ in $(seq 600); do [ -s "$OUT/ports" ] && break; sleep 0.1; done # the server hashes 1 GiB first
read -r HUB _ < "$OUT/ports" || { log "the server did not start: $(cat "$OUT/server.err")"; exit 1; }
export HF_ENDPOINT=http://127.0.0.1:$HUB
unset HF_TOKEN HF_HUB_OFFLINE

now() { date +%s.%N; }
# run NAME COMMAND...: one timed pass into a fresh $OUT/dest, seconds appended to $OUT/NAME.times
run() {
    local name=$1 t0 t1
    shift
    rm -rf "$OUT/dest" && mkdir -p "$OUT/dest"
    sync
    t0=$(now)
    "$@" > /dev/null 2>> "$OUT/errors" || log "$name failed (see $OUT/errors)"
    t1=$(now)
    awk "BEGIN { print $t1 - $t0 }" >> "$OUT/$name.times"
}
urls=()
for i in 1 2 3 4; do urls+=(-o "$OUT/dest/f$i" "$HF_ENDPOINT/org/bench/resolve/main/model-0000$i-of-00004.safetensors"); done
curl_serial() { for i in 1 2 3 4; do curl -sSfL "${urls[@]:$((3 * i - 3)):3}" || return 1; done; }
curl_sync() { curl -sSfL -Z --parallel-max 8 "${urls[@]}" && sync -f "$OUT"/dest/f*; }
rm -f "$OUT"/*.times "$OUT/errors"
for round in $(seq "$ROUNDS"); do
    log "round $round of $ROUNDS"
    run zt1 "$ZT" download org/bench --cache-dir "$OUT/dest" --max-workers 1
    run zt8 "$ZT" download org/bench --cache-dir "$OUT/dest" --max-workers 8
    run curl1 curl_serial
    run curl8 curl -sSfL -Z --parallel-max 8 "${urls[@]}"
    run curl8sync curl_sync
done

TABLE=$($PY - "$OUT" "$MIB" <<'EOF'
import sys
out, mib = sys.argv[1], int(sys.argv[2])
total = 4 * mib * 2**20
def best(name):
    try:
        times = [float(x) for x in open(f"{out}/{name}.times") if x.strip()]
    except OSError:
        return None, ""
    return min(times), ", ".join(f"{t:.2f}" for t in times)
rows = [("zt download --max-workers 1 (sha256, fsync)", "zt1"), ("zt download --max-workers 8 (sha256, fsync)", "zt8"),
        ("curl -L, one file after the other", "curl1"), ("curl -L -Z --parallel-max 8", "curl8"),
        ("curl -L -Z --parallel-max 8, then sync -f", "curl8sync")]
lines = ["| client | s, best (rounds) | MB/s |", "|---|---:|---:|"]
got = {}
for label, name in rows:
    t, all_ = best(name)
    got[name] = total / t / 1e6 if t else None
    lines.append(f"| {label} | {t:.2f} ({all_}) | {got[name]:.0f} |" if t else f"| {label} | missing | |")
if got["zt8"] and got["curl8"] and got["curl8sync"] and got["zt1"]:
    lines += ["", f"zt with 8 workers moves {100 * got['zt8'] / got['curl8']:.0f}% of curl -Z's rate and "
              f"{100 * got['zt8'] / got['curl8sync']:.0f}% of curl -Z followed by an fsync; 8 workers run "
              f"{got['zt8'] / got['zt1']:.2f}x as fast as 1."]
print("\n".join(lines))
EOF
)

COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo "no commit")
[ -n "$(git status --porcelain 2>/dev/null | head -1)" ] && COMMIT+=" (uncommitted changes)"
MEM=$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 2^20}' /proc/meminfo)
HEAD="### $(date -u '+%Y-%m-%d %H:%M UTC') · $COMMIT · zt download: loopback throughput (bench/download.sh)"
INFO="- $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') ($(nproc) cores online), $MEM memory, Linux $(uname -r); load average at the start: $LOAD
- 4 files of $MIB MiB (random bytes, sent by tests/fixtures/hub_server.py with sendfile from the page cache) into
  $(findmnt -n -T "$OUT" -o FSTYPE) under build/bench; $(curl --version | head -1 | cut -d' ' -f1-2), libcurl \
$(pkg-config --modversion libcurl); MB = 10^6 bytes; $ROUNDS rounds, each client into an empty directory"
printf '\n%s\n%s\n\n%s\n' "$HEAD" "$INFO" "$TABLE"
printf '\n%s\n%s\n\n%s\n' "$HEAD" "$INFO" "$TABLE" >> "$RESULTS"
