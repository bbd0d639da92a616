#!/usr/bin/env bash
# Checkpoints and resume: a run cut off after a checkpoint and started again with
# train.resume = auto ends bitwise identical to an uninterrupted run; a different
# world size or ZeRO stage re-shards; changed data-defining keys are refused;
# SIGTERM writes a checkpoint and exits 0; zt export writes a loadable model. Bad input:
# a flipped bit in a shard and a trainer_state.json the shards contradict are refused by
# resume, re-sharded resume and export; a run killed before its first checkpoint starts
# afresh; a disk that fills up mid-run reports the first write that failed.
. "$(dirname "$0")/lib.sh"
need_mpi

make_tiny model
random_tokens data.jsonl 7 80
printf '[model]\npath = "model"\ndtype = "fp32"\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 32\n[train]\nmax_steps = 6\nsave_steps = 2\nsave_total_limit = 2\nmicro_batch_size = 2\ngradient_accumulation_steps = 2\nlearning_rate = 1e-3\nlogging_steps = 1\n' > recipe.toml

expect_ok "uninterrupted, 2 ranks" $MPI -np 2 "$ZT" pretrain recipe.toml output.dir=full zero.stage=1
ls full/checkpoints | tr '\n' ' ' >&2; echo >&2
[ -f full/checkpoints/step-000004/DONE ] && [ ! -e full/checkpoints/step-000002 ] \
  && say "ok - checkpoints rotated (save_total_limit = 2 keeps 2 and 4; 2 went when 4... )" || true
# a run that died after the step-4 checkpoint: its files as they were then
cp -r full cut && rm -rf cut/final cut/summary.json
$PY -c "
rows = [l for l in open('cut/metrics.jsonl')]
open('cut/metrics.jsonl', 'w').writelines(rows + rows[4:5])  # a row past the checkpoint, to be dropped
"
expect_ok "resume = auto" $MPI -np 2 "$ZT" pretrain recipe.toml output.dir=cut zero.stage=1
cmp -s full/final/model.safetensors cut/final/model.safetensors && say "ok - resumed run is bitwise identical" \
  || fail "resumed weights differ from the uninterrupted run"
[ "$($PY -c "import json; print([json.loads(l)['step'] for l in open('cut/metrics.jsonl')])")" = "[1, 2, 3, 4, 5, 6]" ] \
  && say "ok - metrics.jsonl reads as one run" || fail "metrics: $(cat cut/metrics.jsonl | cut -c1-60)"

cp -r full reshard && rm -rf reshard/final reshard/summary.json
expect_ok "resume on 4 ranks at stage 2 (the same global batch)" $MPI -np 4 "$ZT" pretrain recipe.toml \
  output.dir=reshard zero.stage=2 train.gradient_accumulation_steps=1
# micro-batches of 2 on both: the same products, the gradients summed over ranks in another
# grouping; 1e-5 of each tensor's largest for the reasons (and measurements) in t1500-zero.sh
$PY - <<'PY' && say "ok - re-sharded resume matches" || fail "re-sharded resume differs"
import json, struct
import numpy as np
def load(d):
    b = open(d + "/final/model.safetensors", "rb").read(); k = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + k]); h.pop("__metadata__")
    return {t: np.frombuffer(b[8 + k + e["data_offsets"][0]:8 + k + e["data_offsets"][1]], "<f4") for t, e in h.items()}
a, b = load("full"), load("reshard")
for t in a:
    assert np.abs(a[t] - b[t]).max() <= 1e-5 * max(np.abs(a[t]).max(), 1e-30), t
PY
# one flipped bit in the step-4 checkpoint's weights: a resume in the same layout, a
# re-sharded resume and an export each refuse it, naming the shard and the segment
cp -r full flipped && rm -rf flipped/final flipped/summary.json
$PY - flipped/checkpoints/step-000004/rank-00000-of-00002.bin <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:  # params start after the 64-byte header and a 1-segment table
    f.seek(64 + 16 + 8 + 4 * 10 + 2); b = f.read(1); f.seek(-1, 1); f.write(bytes([b[0] ^ 0x10]))
PY
flip_msg="rank-00000-of-00002.bin': segment 0 .*params .*checksum"
expect_exit 2 "resume of a flipped bit" "$flip_msg" $MPI -np 2 "$ZT" pretrain recipe.toml output.dir=flipped zero.stage=1
expect_exit 2 "re-sharded resume of a flipped bit" "$flip_msg" $MPI -np 4 "$ZT" pretrain recipe.toml \
  output.dir=flipped zero.stage=2 train.gradient_accumulation_steps=1
expect_exit 2 "export of a flipped bit" "$flip_msg" "$ZT" export flipped --out flipped-export

# trainer_state.json that the shards or the directory's name contradict
for key in step=999999 world=1 numel=5; do
  d=state-${key%=*}
  cp -r full $d && rm -rf $d/final $d/summary.json
  $PY -c "import json, sys; p = '$d/checkpoints/step-000004/trainer_state.json'; s = json.load(open(p)); \
s['${key%=*}'] = ${key#*=}; json.dump(s, open(p, 'w'))"
  expect_exit 2 "resume of trainer_state.json with $key" "step-000004/trainer_state.json': '${key%=*}' is ${key#*=}, but" \
    $MPI -np 2 "$ZT" pretrain recipe.toml output.dir=$d zero.stage=1
  expect_exit 2 "export of trainer_state.json with $key" "step-000004/trainer_state.json': '${key%=*}' is ${key#*=}, but" \
    "$ZT" export $d --out $d-export
done

cp -r full changed && rm -rf changed/final
expect_exit 2 "changed data-defining keys" "other data-defining keys" $MPI -np 2 "$ZT" pretrain recipe.toml zero.stage=1 \
  output.dir=changed train.seed=9

# SIGTERM (preemption): a checkpoint, exit 0, then resume finishes the run
expect_ok "long run" true
$MPI -np 2 "$ZT" pretrain recipe.toml output.dir=pre zero.stage=1 train.max_steps=100000 train.save_steps=0 >pre.out 2>pre.err &
pid=$!
for i in $(seq 1 50); do [ -s pre/metrics.jsonl ] && break; sleep 0.2; done
sleep 1
kill -TERM $(pgrep -P $pid)  # to the ranks, as Slurm's preemption does
wait $pid; code=$?
[ $code = 0 ] && say "ok - SIGTERM: exit 0" || { fail "SIGTERM: exit $code"; cat pre.err >&2; }
$PY -c "import json; s=json.load(open('pre/summary.json')); assert s['status'] == 'preempted', s" \
  && say "ok - summary says preempted" || fail "summary: $(cat pre/summary.json 2>/dev/null)"
ls pre/checkpoints/*/DONE >/dev/null 2>&1 && say "ok - SIGTERM wrote a checkpoint" || fail "no checkpoint after SIGTERM"

# SIGTERM in a long step: said on stderr, the step goes on; a second SIGTERM ends zt at once
# (it went on to the step's end, however long that took)
"$ZT" pretrain recipe.toml output.dir=twice train.gradient_accumulation_steps=100000 >twice.out 2>twice.err &
pid=$!
caught=0  # until zt's handler is in place (SigCgt holds SIGTERM, bit 15)
for i in $(seq 1 100); do
  mask=$(sed -n 's/^SigCgt:[[:space:]]*//p' /proc/$pid/status 2>/dev/null)
  [ -n "$mask" ] && (( (16#$mask >> 14) & 1 )) && caught=1 && break
  sleep 0.1
done
kill -TERM $pid; sleep 0.5
kill -0 $pid 2>/dev/null && [ $caught = 1 ] && grep -q "SIGTERM: finishing this step" twice.err \
  && say "ok - a first SIGTERM is acknowledged and the step goes on" || fail "first SIGTERM: $(cat twice.err)"
kill -TERM $pid
for i in $(seq 1 50); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
kill -0 $pid 2>/dev/null && kill -KILL $pid
wait $pid; code=$?
[ $code = 143 ] && say "ok - a second SIGTERM ends zt at once" || fail "second SIGTERM: exit $code"

# SIGKILL before the first checkpoint (and an interrupted save): resume = auto starts the
# same recipe afresh; another recipe, or a run with a final model, still finds it not empty
long="train.max_steps=100000 train.save_steps=0"
"$ZT" pretrain recipe.toml output.dir=killed $long >killed.out 2>killed.err &
pid=$!
for i in $(seq 1 50); do [ -s killed/metrics.jsonl ] && break; sleep 0.2; done
kill -KILL $pid; wait $pid
mkdir -p killed/checkpoints/step-000003 && : > killed/checkpoints/step-000003/rank-00000-of-00001.bin
expect_exit 2 "killed run, another recipe" "killed' is not empty" "$ZT" pretrain recipe.toml output.dir=killed $long \
  train.learning_rate=2e-3
mkdir killed/final
expect_exit 2 "killed run with a final model" "killed' is not empty" "$ZT" pretrain recipe.toml output.dir=killed $long
rmdir killed/final
"$ZT" pretrain recipe.toml output.dir=killed $long >killed.out 2>killed.err &
pid=$!
# its rows, once the earlier start's files (the interrupted save among them) are gone
for i in $(seq 1 50); do
  [ ! -e killed/checkpoints/step-000003 ] && grep -q '"step":2,' killed/metrics.jsonl 2>/dev/null && break; sleep 0.2
done
kill -TERM $pid; wait $pid; code=$?
steps_ok=$($PY -c "import json; s = [json.loads(l)['step'] for l in open('killed/metrics.jsonl')]; print(s == list(range(1, len(s) + 1)))")
[ $code = 0 ] && [ "$steps_ok" = True ] && [ ! -e killed/checkpoints/step-000003 ] && say "ok - resume = auto of a run killed before its first checkpoint" \
  || { fail "restart of a killed run: exit $code, metrics $(head -c 40 killed/metrics.jsonl)"; cat killed.err >&2; }

# a file system that fills up mid-run: the first write that failed (a metrics row) is the
# one reported, not the summary.json that cleaning up could not write after it
mkdir -p small
if mount -t tmpfs -o size=1m zt-test small 2>/dev/null; then
  "$ZT" pretrain recipe.toml output.dir=small/run $long output.tensorboard=false >full-disk.out 2>full-disk.err &
  pid=$!
  for i in $(seq 1 50); do [ -s small/run/metrics.jsonl ] && break; sleep 0.2; done
  dd if=/dev/zero of=small/filler bs=4k 2>/dev/null  # until no space is left
  wait $pid; code=$?
  [ $code = 1 ] && grep -q "metrics.jsonl.*No space left on device" full-disk.err \
    && say "ok - a full disk mid-run: the metrics.jsonl write is reported" \
    || { fail "a full disk mid-run: exit $code"; cat full-disk.err >&2; }
  umount small
else
  say "skip: cannot mount a tmpfs here (the full disk case)"
fi

expect_ok "zt export" "$ZT" export full --out exported
expect_ok "eval of the export" "$ZT" eval recipe.toml --checkpoint exported
done_testing
