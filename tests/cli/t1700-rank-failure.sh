#!/usr/bin/env bash
# A rank killed with SIGKILL mid-run takes the whole job down within the collective
# timeout, with a non-zero exit and a message naming the rank; a rank stopped with SIGSTOP
# is named by the ranks that wait for it.
# kernel levels: own only (what it checks does not depend on the CPU kernels)
. "$(dirname "$0")/lib.sh"
need_mpi

make_tiny model
$PY -c "
import json
with open('data.jsonl', 'w') as f:
    for i in range(40): f.write(json.dumps({'input_ids': [(i * 5 + j) % 64 for j in range(24)]}) + '\n')
"
printf '[model]\npath = "model"\ndtype = "fp32"\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 32\n[train]\nmax_steps = 100000\nmicro_batch_size = 1\ncollective_timeout_s = 10\n[zero]\nstage = 3\n' > recipe.toml
start=$(date +%s)
$MPI -np 3 "$ZT" pretrain recipe.toml output.dir=run >out 2>err &
pid=$!
for i in $(seq 1 50); do [ "$(pgrep -P $pid | wc -l)" -ge 3 ] && [ -s run/metrics.jsonl ] && break; sleep 0.2; done
victim=$(pgrep -P $pid | sed -n 2p)
kill -9 "$victim"
wait $pid; code=$?
took=$(( $(date +%s) - start ))
[ "$code" != 0 ] && say "ok - the job failed (exit $code)" || fail "the job exited 0 after a rank was killed"
[ "$took" -le 30 ] && say "ok - every rank gone after ${took}s" || fail "took ${took}s"
pgrep -f "output.dir=run" >/dev/null && fail "ranks still running" || say "ok - no rank left"
grep -qiE "rank [0-9]|process rank" err && say "ok - the message names the rank: $(grep -iE 'rank [0-9]|process rank' err | head -1)" \
  || { fail "no rank named"; cat err >&2; }

# SIGSTOP: the stopped rank never fails, the others' watchdogs find it and name it
timeout 120 $MPI -np 3 "$ZT" pretrain recipe.toml output.dir=stop train.collective_timeout_s=5 >out 2>err &
pid=$!  # timeout's; mpirun is its child, the ranks mpirun's
for i in $(seq 1 50); do
  mpirun_pid=$(pgrep -P $pid)
  [ -n "$mpirun_pid" ] && [ "$(pgrep -P "$mpirun_pid" | wc -l)" -ge 3 ] && [ -s stop/metrics.jsonl ] && break; sleep 0.2
done
victim=$(pgrep -P "$mpirun_pid" | sed -n 2p)
vrank=$(tr '\0' '\n' < /proc/$victim/environ | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
kill -STOP "$victim"
wait $pid; code=$?
kill -KILL "$victim" 2>/dev/null
[ "$code" != 0 ] && [ "$code" != 124 ] && say "ok - the job failed (exit $code)" || fail "the job with a stopped rank: exit $code"
grep -qE "rank $vrank did not reach [a-z -]+(\(f64\) )?#[0-9]+ within 5 s \(stopped or stuck" err \
  && say "ok - the stopped rank $vrank is named: $(grep -E "rank $vrank did not reach" err | head -1)" \
  || { fail "the stopped rank $vrank is not named"; cat err >&2; }

# an error that only rank 0 can see (it alone checks the output directory) ends every rank
# at once, with rank 0's message, not at the watchdog's timeout
mkdir -p busy && echo x > busy/file
timeout 60 $MPI -np 2 "$ZT" pretrain recipe.toml output.dir=busy train.max_steps=2 >out 2>err; code=$?
[ "$code" != 0 ] && [ "$code" != 124 ] && say "ok - a rank-0 setup error fails the job (exit $code)" \
  || fail "a rank-0 setup error: exit $code"
grep -q "busy' is not empty" err && say "ok - rank 0's message is shown" || { fail "rank 0's message is missing"; cat err >&2; }
done_testing
