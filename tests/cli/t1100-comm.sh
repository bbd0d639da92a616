#!/usr/bin/env bash
# The collectives under mpirun (tests/unit/test_comm.c at 2, 3 and 4 ranks, and 4 ranks posing
# as 2 nodes; tests/unit/test_comm_device.c at 2 and 3), a bad ZT_RANKS_PER_NODE, and the watchdog: a rank that hangs or dies inside a
# loop of collectives must end the whole job, non-zero, within the timeout plus 10 s.
# kernel levels: own only (what it checks does not depend on the CPU kernels)
. "$(dirname "$0")/lib.sh"
need_cmd mpirun "Open MPI"
case "$(basename "$ZT")" in *-san) build=build-san ;; *) build=build ;; esac
T=$ROOT/$build/tests/test_comm
[ -x "$T" ] || { fail "$T is missing (make tests)"; done_testing; }
ldd "$T" | grep -q libmpi || skip "$T was built without MPI"
MPI=(timeout 120 mpirun --allow-run-as-root --oversubscribe)

for n in 2 3 4; do expect_ok "collectives at $n ranks" "${MPI[@]}" -np $n "$T"; done
# collectives of device buffers: the ranks agree on the backend's own or host memory
for n in 2 3; do expect_ok "device collectives at $n ranks" "${MPI[@]}" -np $n "${T}_device"; done
expect_ok "collectives at 4 ranks as 2 nodes" "${MPI[@]}" -np 4 -x ZT_RANKS_PER_NODE=2 "$T"
expect_exit 2 "ranks per node that do not divide the world" \
  "rank [0-3]: comm init: ZT_RANKS_PER_NODE=3 does not divide the world size 4" "${MPI[@]}" -np 4 -x ZT_RANKS_PER_NODE=3 "$T"
expect_exit 2 "ranks per node that are not a number" \
  "ZT_RANKS_PER_NODE='two' is not a positive integer" "${MPI[@]}" -np 2 -x ZT_RANKS_PER_NODE=two "$T"

# victim WHAT PATTERN [ARGS]: rank 1 of 3 stops at its 5th collective; with a 3 s timeout every
# rank must be gone within 13 s, the exit status non-zero and stderr must match PATTERN
victim() {
  local what=$1 pattern=$2; shift 2
  local start=$(date +%s%N)
  timeout 30 mpirun --allow-run-as-root --oversubscribe -np 3 "$T" --victim 1 --timeout 3 "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$? ms=$((($(date +%s%N) - start) / 1000000))
  local pids=$(awk '$1 == "rank" && $3 == "pid" {print $4}' "$TMP/out")
  if [ "$rc" = 0 ] || [ "$rc" = 124 ]; then fail "$what: exit $rc"; cat "$TMP/err" >&2; return; fi
  [ "$(echo $pids | wc -w)" = 3 ] || { fail "$what: $(echo $pids | wc -w) ranks started, wanted 3"; cat "$TMP/out" "$TMP/err" >&2; return; }
  [ "$ms" -le 13000 ] || fail "$what: the job took $ms ms"
  grep -qE -- "$pattern" "$TMP/err" || { fail "$what: stderr does not match '$pattern'"; cat "$TMP/err" >&2; return; }
  for pid in $pids; do # zombies are gone, waiting for init to reap them
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      case "$(ps -o stat= -p "$pid" 2>/dev/null)" in "" | Z*) break ;; esac
      sleep 0.5
    done
    case "$(ps -o stat= -p "$pid" 2>/dev/null)" in "" | Z*) ;; *) fail "$what: rank process $pid still runs" ;; esac
  done
  say "ok - $what (exit $rc after $ms ms)"
}
victim "a stuck rank ends the job, named by the others" \
  "zt: error: rank 1 did not reach all-reduce #[0-9]+ within 3 s \(stuck outside collectives since all-reduce #[0-9]+; seen from rank [02]\)"
victim "a killed rank ends the job" \
  "rank 1 did not reach all-reduce #[0-9]+ within 3 s|process rank 1 with PID .* signal 9" --kill
done_testing
