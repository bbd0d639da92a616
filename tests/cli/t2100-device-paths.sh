#!/usr/bin/env bash
# The trainer's device paths without a GPU: ZT_CPU_AS_DEVICE=1 makes the CPU backend pose
# as a device (its memory not host memory), so training takes the paths a CUDA run takes:
# the optimizer on the device's own arrays (one process), or host copies that gradients come
# down to and weights go up from (several ranks, offload.optimizer = cpu or nvme, every ZeRO
# stage), checkpoints through downloads, resume through uploads. Each run must end bitwise
# equal to the same run on the plain CPU backend.
. "$(dirname "$0")/lib.sh"
need_mpi

make_tiny model
random_tokens data.jsonl 5 60
printf '[model]\npath = "model"\ndtype = "bf16"\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 32\npacking = false\n[train]\nmax_steps = 4\nsave_steps = 2\nmicro_batch_size = 1\ngradient_accumulation_steps = 4\nlearning_rate = 1e-3\nlogging_steps = 1\nmax_grad_norm = 0.5\n' > recipe.toml

same() { # same DIR_A DIR_B WHAT: equal losses and bitwise equal final weights (a LoRA run's: its adapter's)
  $PY - "$1" "$2" <<'PY' && say "ok - $3" || fail "$3: $1 and $2 differ"
import json, os, sys
a, b = ([json.loads(l)["loss"] for l in open(d + "/metrics.jsonl")] for d in sys.argv[1:3])
assert len(a) == 4 and a == b, (a, b)
name = "/final/adapter_model.safetensors" if os.path.exists(sys.argv[1] + "/final/adapter_model.safetensors") else "/final/model.safetensors"
assert open(sys.argv[1] + name, "rb").read() == open(sys.argv[2] + name, "rb").read()
PY
}

runs=(
  "one process|"
  "one process, offload.optimizer = cpu|offload.optimizer=cpu"
  "one process, offload.optimizer = nvme|offload.optimizer=nvme offload.nvme_path=[\"$PWD\"]"
  "one process, offload.param = cpu|offload.param=cpu offload.optimizer=cpu zero.stage=3"
  "one process, offload.param = nvme|offload.param=nvme offload.optimizer=nvme zero.stage=3 offload.nvme_path=[\"$PWD\"]"
  "one process, LoRA, offload.param = cpu|lora.r=4 lora.target_modules=all-linear offload.param=cpu offload.optimizer=cpu zero.stage=3"
  "one process, LoRA with dropout|lora.r=4 lora.target_modules=all-linear lora.dropout=0.1"
)
for spec in "${runs[@]}"; do
  name=${spec%%|*} keys=${spec#*|}
  tag=$(echo "$name" | tr -c 'a-z0-9\n' '-')
  expect_ok "$name, cpu" "$ZT" pretrain recipe.toml output.dir=cpu-$tag $keys
  expect_ok "$name, as a device" env ZT_LOG=info ZT_CPU_AS_DEVICE=1 "$ZT" pretrain recipe.toml output.dir=dev-$tag $keys
  grep -q "on cpu (as a device)" "$TMP/err" && say "ok - $name: took the device path" || fail "$name: not as a device"
  same cpu-$tag dev-$tag "$name: the device path trains like the CPU"
done
for stage in 0 1 2 3; do
  expect_ok "2 ranks, stage $stage, cpu" $MPI -np 2 "$ZT" pretrain recipe.toml output.dir=cpu-s$stage \
    zero.stage=$stage train.gradient_accumulation_steps=2
  expect_ok "2 ranks, stage $stage, as a device" env ZT_LOG=info ZT_CPU_AS_DEVICE=1 $MPI -np 2 -x ZT_CPU_AS_DEVICE -x ZT_LOG "$ZT" pretrain \
    recipe.toml output.dir=dev-s$stage zero.stage=$stage train.gradient_accumulation_steps=2 zero.device_collectives=false
  grep -q "on cpu (as a device) (optimizer and collectives on host copies)" "$TMP/err" \
    && say "ok - stage $stage: took the staged path" || fail "stage $stage: not staged"
  same cpu-s$stage dev-s$stage "2 ranks at stage $stage: host copies train like the CPU"
  # the default: collectives on the device's arrays (through host memory: the CPU has no NCCL),
  # AdamW on the device (at stage 3 this rank's slices there too)
  expect_ok "2 ranks, stage $stage, device collectives" env ZT_LOG=info ZT_CPU_AS_DEVICE=1 $MPI -np 2 -x ZT_CPU_AS_DEVICE -x ZT_LOG \
    "$ZT" pretrain recipe.toml output.dir=dc-s$stage zero.stage=$stage train.gradient_accumulation_steps=2
  grep -q "on cpu (as a device) (collectives of the device arrays through host memory)" "$TMP/err" \
    && say "ok - stage $stage: collectives of the device arrays" || fail "stage $stage: not on the device arrays"
  same cpu-s$stage dc-s$stage "2 ranks at stage $stage: collectives of the device arrays train like the CPU"
  bytes=$(grep -o '"comm_bytes[a-z_]*":[0-9]*' cpu-s$stage/metrics.jsonl)
  [ -n "$bytes" ] && [ "$bytes" = "$(grep -o '"comm_bytes[a-z_]*":[0-9]*' dc-s$stage/metrics.jsonl)" ] \
    && say "ok - stage $stage: the same bytes counted" || fail "stage $stage: device collectives count other bytes"
done
# LoRA on 2 ranks: the frozen base sharded at stage 3 and the adapters reduced on the device's arrays
lora="lora.r=4 lora.target_modules=all-linear zero.stage=3 train.gradient_accumulation_steps=2"
expect_ok "2 ranks, LoRA, stage 3, cpu" $MPI -np 2 "$ZT" pretrain recipe.toml output.dir=cpu-lora3 $lora
expect_ok "2 ranks, LoRA, stage 3, device collectives" env ZT_LOG=info ZT_CPU_AS_DEVICE=1 $MPI -np 2 -x ZT_CPU_AS_DEVICE -x ZT_LOG \
  "$ZT" pretrain recipe.toml output.dir=dc-lora3 $lora
same cpu-lora3 dc-lora3 "2 ranks, LoRA at stage 3: collectives of the device arrays train like the CPU"

# ZeRO++ at stage 3 quantizes on the host: staged whatever zero.device_collectives says
expect_ok "2 ranks, stage 3, qwZ, as a device" env ZT_LOG=info ZT_CPU_AS_DEVICE=1 $MPI -np 2 -x ZT_CPU_AS_DEVICE -x ZT_LOG \
  "$ZT" pretrain recipe.toml output.dir=dq-s3 zero.stage=3 train.gradient_accumulation_steps=2 zero.quantized_weights=true
grep -q "(optimizer and collectives on host copies)" "$TMP/err" && say "ok - stage 3 with qwZ: staged" \
  || fail "stage 3 with qwZ: not staged"

# offload.param = cpu in one process is stage 3 with a single slice: the same products summed
# in the same order as without offload, so it trains bitwise alike
same cpu-one-process cpu-one-process--offload-param---cpu "offload.param = cpu trains like no offload"

# resume from the step-2 checkpoint, through uploads of weights and moments (at stage 3 on 2 ranks
# into host copies, and into this rank's slices on the device)
for d in one-process s3 dc-s3; do
  src=dev-$d launch="" keys=""
  [ $d = dc-s3 ] && src=dc-s3
  [ $d != one-process ] && launch="$MPI -np 2 -x ZT_CPU_AS_DEVICE -x ZT_LOG" keys="zero.stage=3 train.gradient_accumulation_steps=2"
  [ $d = s3 ] && keys+=" zero.device_collectives=false"
  cp -r $src cut-$d && rm -rf cut-$d/final cut-$d/summary.json cut-$d/checkpoints/step-000004
  expect_ok "resume $d as a device" env ZT_LOG=info ZT_CPU_AS_DEVICE=1 $launch "$ZT" pretrain recipe.toml output.dir=cut-$d $keys
  cmp -s $src/final/model.safetensors cut-$d/final/model.safetensors && say "ok - resumed $d is bitwise identical" \
    || fail "resumed $d differs"
done
done_testing
