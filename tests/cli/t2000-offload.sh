#!/usr/bin/env bash
# Optimizer offload (offload.optimizer = nvme): AdamW's moments in a swap file through
# io_uring give bitwise the weights of none and cpu, on one rank and at ZeRO stages 1 and 3
# on 2 ranks, with the file striped over two directories; the I/O counters count every
# byte; a checkpoint streams the moments out and a resume writes them back, bitwise; a
# full file system (a 64 KiB tmpfs, where root may mount one) ends the run with the file
# named, and the checkpoint before it still resumes; a swap file truncated under a running
# job stops it, naming the file. offload.param = nvme keeps the weights' and gradient's slices in
# the swap file too, bitwise; on one rank with 4 micro-batches a step every placement gives bitwise the losses
# and weights in memory. offload.optimizer = "auto" keeps the state in memory when it
# fits and moves it to NVMe when only that fits (at stage 3 the weights too when needed).
# offload.activations moves the checkpointed layer inputs through a file or host memory, bitwise.
. "$(dirname "$0")/lib.sh"
need_mpi

make_tiny model num_hidden_layers=3
random_tokens data.jsonl 6 60
printf '[model]\npath = "model"\ndtype = "fp32"\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 32\npacking = false\n[train]\nmax_steps = 4\nmicro_batch_size = 1\ngradient_accumulation_steps = 2\nlearning_rate = 1e-3\nlogging_steps = 1\n[offload]\nnvme_path = ["swap-a", "swap-b"]\n[offload.aio]\nblock_size = 4096\nqueue_depth = 4\n' > recipe.toml

for o in none cpu nvme; do
  expect_ok "one rank, offload.optimizer = $o" "$ZT" pretrain recipe.toml output.dir=one-$o offload.optimizer=$o
done
for o in cpu nvme; do
  cmp -s one-none/final/model.safetensors one-$o/final/model.safetensors && say "ok - $o: bitwise the weights of none" \
    || fail "offload.optimizer = $o changed the weights"
done
for stage in 1 3; do
  for o in none nvme; do
    expect_ok "2 ranks, stage $stage, $o" $MPI -np 2 "$ZT" pretrain recipe.toml output.dir=s$stage-$o zero.stage=$stage \
      offload.optimizer=$o train.gradient_accumulation_steps=1
  done
  cmp -s s$stage-none/final/model.safetensors s$stage-nvme/final/model.safetensors \
    && say "ok - stage $stage on 2 ranks: bitwise the same with the moments on disk" || fail "stage $stage with nvme differs"
done
[ -z "$(find swap-a swap-b -type f)" ] && say "ok - the swap files are gone after the runs" || fail "left: $(find swap-a swap-b -type f)"

numel=$(test_tool layout model | awk '$1 == "numel" {print $2}')  # the model's parameters, as zt lays them out
$PY - "${numel:-0}" <<'PY' && say "ok - io_read_bytes and io_write_bytes: m and v of every element, each step" || fail "I/O counters"
import json, sys
rows = [json.loads(l) for l in open("one-nvme/metrics.jsonl")]
numel = int(sys.argv[1])
assert numel > 0
want = 2 * ((numel * 4 + 4095) // 4096 * 4096)  # m and v, whole blocks
for r in rows:
    assert r["io_read_bytes"] == want and r["io_write_bytes"] == want, (r["io_read_bytes"], r["io_write_bytes"], want)
assert all(r["io_read_bytes"] == 0 for r in map(json.loads, open("one-none/metrics.jsonl")))
assert json.load(open("one-nvme/summary.json"))["io_bytes"] == 2 * want * len(rows)
PY

# zt validate predicts the bytes each step moves: exactly on one rank; on 2 ranks at stage 3
# (every rank about rank 0's share) within 5%
for cfg in "1 0 one-nvme" "2 3 s3-nvme"; do
  set -- $cfg
  expect_ok "zt validate, $1 rank(s), stage $2" "$ZT" validate recipe.toml --world-size $1 zero.stage=$2 offload.optimizer=nvme
  predicted=$(sed -n 's/^# offload I\/O per optimizer step: \([0-9]*\) bytes.*/\1/p' "$TMP/out")
  $PY - "$3" "$1" "${predicted:-0}" <<'PY' && say "ok - $1 rank(s): the predicted I/O per step matches the run's counters" \
    || fail "$1 rank(s): predicted ${predicted:-nothing}"
import json, sys
run, ranks, predicted = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for r in map(json.loads, open(run + "/metrics.jsonl")):
    for k in ("io_read_bytes", "io_write_bytes"):
        assert (r[k] == predicted) if ranks == 1 else abs(r[k] - ranks * predicted) <= 0.05 * ranks * predicted, (k, r[k], predicted)
PY
done

# checkpoints: cut after step 2, resume with the moments on disk, and with them in memory
expect_ok "2 ranks, stage 3, nvme, checkpoints" $MPI -np 2 "$ZT" pretrain recipe.toml output.dir=full zero.stage=3 \
  offload.optimizer=nvme train.gradient_accumulation_steps=1 train.save_steps=2
for o in nvme none; do
  cp -r full cut-$o && rm -rf cut-$o/final cut-$o/summary.json
  expect_ok "resume with $o" $MPI -np 2 "$ZT" pretrain recipe.toml output.dir=cut-$o zero.stage=3 offload.optimizer=$o \
    train.gradient_accumulation_steps=1 train.save_steps=2
  cmp -s full/final/model.safetensors cut-$o/final/model.safetensors && say "ok - resumed with $o: bitwise" \
    || fail "resume with $o differs"
done

# a full file system: a clean failure naming the file; the checkpoint before it resumes
mkdir -p small
if mount -t tmpfs -o size=64k zt-test small 2>/dev/null; then
  cp -r full enospc && rm -rf enospc/final enospc/summary.json
  expect_exit 1 "the swap file on a full file system" "small/zt-.*rank-00000.optim.*No space left on device" \
    "$ZT" pretrain recipe.toml output.dir=enospc offload.optimizer=nvme offload.nvme_path=small \
    train.gradient_accumulation_steps=2 zero.stage=3
  umount small
  expect_ok "resume after it" "$ZT" pretrain recipe.toml output.dir=enospc offload.optimizer=nvme \
    train.gradient_accumulation_steps=2 zero.stage=3
  $PY - <<'PY' && say "ok - the earlier checkpoint resumed, on one rank" || fail "resume after ENOSPC"
import json
s = json.load(open("enospc/summary.json"))
assert s["status"] == "ok" and s["steps"] == 4, s
PY
else
  say "skip: cannot mount a tmpfs here (the ENOSPC case)"
fi

# the swap file cut short under a running job: the next step's read meets its end, or (when
# a write made it long again) its checksum; either way the run stops naming the file
timeout 120 "$ZT" pretrain recipe.toml output.dir=cutswap offload.optimizer=nvme train.max_steps=100000 train.save_steps=0 \
  >cutswap.out 2>cutswap.err &
pid=$!
for i in $(seq 1 100); do [ -s cutswap/metrics.jsonl ] && break; sleep 0.1; done
swap=$(find swap-a -name 'zt-*.optim' | head -1)
# a truncation during the optimizer's own chunk write is healed by that write (nothing is
# lost then): cut it again until one lands between a write and the next read
for i in $(seq 1 300); do
  kill -0 $pid 2>/dev/null || break
  [ -n "$swap" ] && truncate -s 0 "$swap" 2>/dev/null
  sleep 0.1
done
wait $pid; code=$?
[ "$code" = 1 ] && grep -qE "reading '.*zt-.*\.optim' at byte .*the file ends there|swap file '.*zt-.*\.optim' changed underneath" cutswap.err \
  && say "ok - a truncated swap file stops the run: $(grep -o "reading.*" cutswap.err | head -1)" \
  || { fail "truncated swap file: exit $code"; cat cutswap.err >&2; }

# offload.param = nvme: the weights' and gradient's slices in the swap file with the moments,
# a unit a transfer; bitwise offload.param = cpu on one rank (both stage 3 there) and plain
# stage 3 on two; validate's bytes per step are the counters'; checkpoints resume bitwise
pn="zero.stage=3 offload.param=nvme offload.optimizer=nvme"
expect_ok "one rank, offload.param = nvme" "$ZT" pretrain recipe.toml output.dir=p1-nvme $pn
expect_ok "one rank, offload.param = cpu" "$ZT" pretrain recipe.toml output.dir=p1-cpu zero.stage=3 offload.param=cpu
cmp -s p1-cpu/final/model.safetensors p1-nvme/final/model.safetensors \
  && say "ok - ...bitwise the weights of offload.param = cpu, saved from the file" || fail "offload.param = nvme, one rank"
# one rank, 4 micro-batches a step: each unit's gradient goes back into the model's array before
# its backward pass adds to it, as without ZeRO, so every placement is bitwise none, losses and weights
loss_bits() { $PY -c "import json, sys; print([json.loads(l)['loss'].hex() for l in open(sys.argv[1])])" "$1/metrics.jsonl"; }
expect_ok "one rank, accumulation 4, in memory" "$ZT" pretrain recipe.toml output.dir=a4-none train.gradient_accumulation_steps=4
for o in "offload.param=nvme offload.optimizer=nvme" "offload.param=cpu" "offload.optimizer=nvme" "offload.optimizer=cpu" \
  "offload.param=nvme offload.optimizer=nvme, under mpirun"; do
  launch=$([ "${o#*mpirun}" != "$o" ] && echo "$MPI -np 1")
  expect_ok "one rank, accumulation 4, stage 3, $o" $launch "$ZT" pretrain recipe.toml output.dir=a4-this zero.stage=3 \
    ${o%, under mpirun} train.gradient_accumulation_steps=4
  cmp -s a4-none/final/model.safetensors a4-this/final/model.safetensors && [ "$(loss_bits a4-none)" = "$(loss_bits a4-this)" ] \
    && say "ok - ...bitwise the losses and weights in memory" || fail "accumulation 4, $o: $(loss_bits a4-this) against $(loss_bits a4-none)"
  rm -rf a4-this
done
expect_ok "2 ranks, offload.param = nvme" $MPI -np 2 "$ZT" pretrain recipe.toml output.dir=p2-nvme $pn \
  train.gradient_accumulation_steps=1
cmp -s s3-none/final/model.safetensors p2-nvme/final/model.safetensors \
  && say "ok - ...bitwise the weights of plain stage 3" || fail "offload.param = nvme, 2 ranks"
[ -z "$(find swap-a swap-b -type f)" ] && say "ok - no swap file left behind" || fail "swap files left: $(find swap-a swap-b -type f)"
expect_ok "one rank, offload.param = nvme, the LM head in 4 tiles" "$ZT" pretrain recipe.toml output.dir=p1-tiles $pn \
  zero.head_tiles=4
# every part tiled, with checkpointing: a layer's MLP tiles are read twice in backward, but
# for the last two, which the prefetch of the layer above brings in and the recompute keeps
alltiles="zero.embedding_tiles=3 zero.mlp_tiles=3 zero.head_tiles=4 zero.prefetch_layers=2"
expect_ok "one rank, offload.param = nvme, every part in tiles" "$ZT" pretrain recipe.toml output.dir=p1-alltiles $pn \
  $alltiles
for cfg in "1 2 p1-nvme" "2 1 p2-nvme" "1 2 p1-tiles zero.head_tiles=4" "1 2 p1-alltiles $alltiles"; do
  set -- $cfg
  expect_ok "zt validate, offload.param = nvme, $1 rank(s) ${*:4}" "$ZT" validate recipe.toml --world-size $1 $pn \
    train.gradient_accumulation_steps=$2 "${@:4}"
  io=$(sed -n 's/^# offload I\/O per optimizer step: \([0-9]*\) bytes read, \([0-9]*\) written.*/\1 \2/p' "$TMP/out")
  grep -qE '^# step time, predicted: [0-9.]+ s = forward and backward [0-9.]+ s \([0-9.]+ GFLOP at [0-9.]+ GFLOP/s' \
    "$TMP/out" && say "ok - ...with a predicted step time" || fail "no predicted step time: $(grep -i 'step time' "$TMP/out")"
  $PY - "$3" "$1" ${io:-0 0} <<'PY' && say "ok - ...its bytes read and written per step are the run's ($io)" \
    || fail "offload.param = nvme, $1 rank(s): predicted ${io:-nothing}"
import json, sys
run, ranks, rd, wr = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
for r in map(json.loads, open(run + "/metrics.jsonl")):
    for k, want in (("io_read_bytes", rd), ("io_write_bytes", wr)):
        assert (r[k] == want) if ranks == 1 else abs(r[k] - ranks * want) <= 0.05 * ranks * want, (k, r[k], want)
PY
done
expect_ok "offload.param = nvme, checkpoints" "$ZT" pretrain recipe.toml output.dir=p-full $pn train.save_steps=2
for o in nvme cpu; do
  cp -r p-full p-cut-$o && rm -rf p-cut-$o/final p-cut-$o/summary.json
  expect_ok "resume with offload.param = $o" "$ZT" pretrain recipe.toml output.dir=p-cut-$o zero.stage=3 \
    offload.param=$o offload.optimizer=nvme train.save_steps=2
  cmp -s p-full/final/model.safetensors p-cut-$o/final/model.safetensors && say "ok - ...bitwise" \
    || fail "resume with offload.param = $o differs"
done
expect_exit 2 "offload.param = nvme without the moments on NVMe" \
  'offload.param.*needs offload.optimizer = "nvme" \(it is "cpu"\)' \
  "$ZT" pretrain recipe.toml output.dir=bad zero.stage=3 offload.param=nvme offload.optimizer=cpu

# offload.activations: the checkpointed layer inputs through a file (nvme) or, beside a device, host memory
# (cpu; ZT_CPU_AS_DEVICE makes the CPU backend one): bitwise the weights of none, and the file's I/O as
# zt validate predicts it; what cannot work is refused
expect_ok "one rank, offload.activations = nvme" "$ZT" pretrain recipe.toml output.dir=acts-nvme offload.activations=nvme
expect_ok "one rank, offload.activations = cpu, as a device" env ZT_CPU_AS_DEVICE=1 "$ZT" pretrain recipe.toml \
  output.dir=acts-cpu offload.activations=cpu
for o in nvme cpu; do
  cmp -s one-none/final/model.safetensors acts-$o/final/model.safetensors \
    && say "ok - activations $o: bitwise the weights of none" || fail "offload.activations = $o changed the weights"
done
expect_ok "validate, offload.activations = nvme" "$ZT" validate recipe.toml offload.activations=nvme
predicted=$(grep -o 'per optimizer step: [0-9]*' "$TMP/out" | grep -o '[0-9]*$')
$PY - "${predicted:-0}" <<'PY' && say "ok - the layer inputs' I/O is what validate predicts ($predicted bytes a step each way)" \
  || fail "activation I/O against validate's $predicted"
import json, sys
rows = [json.loads(l) for l in open("acts-nvme/metrics.jsonl")]
assert all(r["io_read_bytes"] == r["io_write_bytes"] == int(sys.argv[1]) > 0 for r in rows), (rows[0], sys.argv[1])
PY
$PY -c "import json; assert all(json.loads(l)['io_wait_s'] > 0 for l in open('acts-nvme/metrics.jsonl'))" \
  && say "ok - metrics.jsonl has the I/O time nothing hid (io_wait_s)" || fail "io_wait_s"
expect_exit 2 "activations to host memory on the CPU backend" "moves nothing" \
  "$ZT" pretrain recipe.toml output.dir=bad offload.activations=cpu
expect_exit 2 "activation offload without checkpointing" "needs model.activation_checkpointing = true" \
  "$ZT" pretrain recipe.toml output.dir=bad offload.activations=nvme model.activation_checkpointing=false

# offload.optimizer = "auto": the state stays in memory when the estimate fits, goes to NVMe when only that
# fits (ZT_MEMORY_AVAILABLE stands in for the machine's memory), and a rank that fits neither way is refused
# (small swap buffers: with the whole state in one chunk, three chunks of it would outweigh the state itself)
small=offload.max_pinned_bytes=24576
total() { "$ZT" validate recipe.toml $small "$@" | awk '/# memory per rank/ {on = 1} on && $2 == "total" {print $3; exit}'; }
in_mem=$(total offload.optimizer=none) on_disk=$(total offload.optimizer=nvme)
between=$($PY -c "import sys; a, b = map(float, sys.argv[1:]); print(int((a + b) / 2 / 0.9 * 2**20))" "$in_mem" "$on_disk")
expect_ok "validate, auto, plenty of memory" "$ZT" validate recipe.toml offload.optimizer=auto
grep -q 'offload = "auto": offload.optimizer = "none"' "$TMP/out" && say "ok - ...the moments stay in memory" \
  || fail "auto with memory: $(grep auto "$TMP/out")"
expect_ok "validate, auto, $between bytes" env ZT_MEMORY_AVAILABLE=$between "$ZT" validate recipe.toml $small \
  offload.optimizer=auto
grep -q 'offload = "auto": offload.optimizer = "nvme"' "$TMP/out" && grep -q '^#   optimizer state .*(during AdamW)' "$TMP/out" \
  && say "ok - ...the moments go to NVMe, the disk measured: $(grep -o 'seconds at .*' "$TMP/out")" \
  || fail "auto with little memory: $(grep -E 'auto|disk' "$TMP/out")"
expect_ok "train, auto, $between bytes" env ZT_MEMORY_AVAILABLE=$between "$ZT" pretrain recipe.toml output.dir=auto \
  $small offload.optimizer=auto
grep -q 'optimizer = "nvme"' auto/recipe.resolved.toml && cmp -s one-none/final/model.safetensors auto/final/model.safetensors \
  && $PY -c "import json; assert sum(json.loads(l)['io_read_bytes'] for l in open('auto/metrics.jsonl')) > 0" \
  && say "ok - ...and trains through the swap file, bitwise the weights of none" || fail "auto run"
# at stage 3 the weights follow when even that does not fit (a larger shape, which validate
# reads from config.json alone: the tiny model's weights weigh less than their staging buffers)
mkdir -p wide && sed -e 's/"hidden_size":.*/"hidden_size": 256,/' -e 's/"intermediate_size":.*/"intermediate_size": 1024,/' \
  -e 's/"vocab_size":.*/"vocab_size": 4096,/' -e 's/"head_dim":.*/"head_dim": 64,/' model/config.json > wide/config.json
s3="model.path=wide zero.stage=3 offload.optimizer=auto"
opt_only=$(total $s3 offload.optimizer=nvme) both=$(total $s3 offload.optimizer=nvme offload.param=nvme)
between=$($PY -c "import sys; a, b = map(float, sys.argv[1:]); print(int((a + b) / 2 / 0.9 * 2**20))" "$opt_only" "$both")
expect_ok "validate, auto weights, $between bytes" env ZT_MEMORY_AVAILABLE=$between "$ZT" validate recipe.toml $small \
  $s3 offload.param=auto
grep -q 'offload = "auto": offload.optimizer = "nvme", offload.param = "nvme"' "$TMP/out" \
  && grep -q '^#   weights, gradients' "$TMP/out" && say "ok - ...and at stage 3 the weights go to NVMe too" \
  || fail "auto weights: $(grep -E 'auto' "$TMP/out")"
expect_exit 2 "auto, too little memory" 'a rank needs .* MiB of memory, and has 0.0 MiB' \
  env ZT_MEMORY_AVAILABLE=1000 "$ZT" pretrain recipe.toml output.dir=small offload.optimizer=auto
# a damaged disk-speed cache (~/.cache/zt/disk2-<device>.txt) is measured again, not believed
mkdir -p "$HOME/.cache/zt" swap-a
cache="$HOME/.cache/zt/disk2-$(printf %x "$(stat -c %d swap-a)").txt"
for bad in "read nan write nan" "read -5 write 1e999" "read 1 write 0" "read 7 write"; do
  printf '%s\n' "$bad" > "$cache"
  expect_ok "validate, a disk cache of '$bad'" "$ZT" validate recipe.toml offload.optimizer=nvme
  grep -qE '^# offload I/O per step .* seconds at [0-9]+ MB/s read, [0-9]+ MB/s write$' "$TMP/out" \
    && grep -qE '^read [0-9]+ write [0-9]+$' "$cache" && say "ok - ...measured again" \
    || fail "a disk cache of '$bad': $(grep -i 'disk\|MB/s' "$TMP/out"), cache $(cat "$cache")"
done
done_testing
