#!/usr/bin/env bash
# train.optim = "adamw_8bit" (lib/optim/adamw8bit.h, lib/zero/optstate8.h): AdamW with its moments in
# 8-bit blocks of 256, as bitsandbytes' AdamW8bit. One process follows fp32 AdamW's losses; on 3 ranks
# stages 1 and 2 end bitwise as stage 0 (which updates every element on every rank) though the rank
# boundaries cut blocks, and every block of a stage-3 checkpoint is quantized with one absmax (as one
# process would; zt-test-tool moments8); a cut-off run resumes bitwise, also at stage 3, and on other
# ranks and stages; checkpoints pass between adamw_torch and adamw_8bit; Hugging Face's names read as
# zt's; what cannot work with it is refused; zt validate counts its bytes.
. "$(dirname "$0")/lib.sh"
need_mpi

# tensors of 4096 elements and more (64 x 64 and up): 8-bit moments; the norms keep fp32 ones
make_tiny model hidden_size=64 intermediate_size=128 vocab_size=128
random_tokens data.jsonl 7 80 128
printf '[model]\npath = "model"\ndtype = "fp32"\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 32\n[train]\nmax_steps = 6\nsave_steps = 2\nmicro_batch_size = 2\ngradient_accumulation_steps = 2\nlearning_rate = 1e-3\nweight_decay = 0.01\nlogging_steps = 1\noptim = "adamw_8bit"\n' > recipe.toml

expect_ok "adamw_8bit, one process" "$ZT" pretrain recipe.toml output.dir=q8
expect_ok "adamw_torch, one process" "$ZT" pretrain recipe.toml output.dir=f32 train.optim=adamw_torch
# Step 1 is the same (zero moments); after it a moment differs from fp32's by at most half a code's
# spacing relative to its block's absmax (0.7% near the absmax, up to 5% of the value for the
# smallest of a decade), so an update is off by a few percent: the loss falls about 0.005 a step here,
# and a few percent of that over 6 steps is under 1e-3 of the loss (measured: 2.7e-4)
$PY - q8/metrics.jsonl f32/metrics.jsonl <<'PY' && say "ok - the losses follow fp32 AdamW's within 1e-3" || fail "losses"
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(p)] for p in sys.argv[1:])
assert len(a) == len(b) == 6 and a[0] == b[0], (a, b)
assert all(abs(x - y) <= 1e-3 * y for x, y in zip(a, b)) and a != b, (a, b)
PY

for s in 0 1 2 3; do
  expect_ok "3 ranks, stage $s" $MPI -np 3 "$ZT" pretrain recipe.toml output.dir=s$s zero.stage=$s train.max_grad_norm=0
done
for s in 1 2; do
  cmp -s s0/final/model.safetensors s$s/final/model.safetensors && say "ok - stage $s ends bitwise as stage 0" \
    || fail "stage $s differs from stage 0"
done
# every block one absmax, also those the ranks' boundaries cut (without the ranks' exchange of their
# parts' maxima such a block has two); stage 3's reductions differ from stage 0's, so it is checked so
for s in 1 3; do
  got=$(test_tool moments8 model s$s/checkpoints/step-000004 --world 3 --stage $s | tr '\n' ' ')
  echo "$got" | grep -qE '^blocks ([0-9]+) exact \1 cut [1-9]' && say "ok - stage $s: $got" || fail "stage $s moments: $got"
done

# the device path (the CPU posing as one: the moments, the block table and the cut blocks' parts in
# "device" memory, the backend's adamw8 and adamw8_finish, as on a GPU) bitwise as the CPU's: one
# process (the update on the device's arrays), 3 ranks at stage 1 with device collectives and stage 3
expect_ok "one process, as a device" env ZT_CPU_AS_DEVICE=1 "$ZT" pretrain recipe.toml output.dir=dev
cmp -s q8/final/model.safetensors dev/final/model.safetensors && say "ok - as a device: bitwise as on the CPU" \
  || fail "as a device: differs"
for s in 1 3; do
  expect_ok "3 ranks, stage $s, as a device" env ZT_CPU_AS_DEVICE=1 $MPI -np 3 -x ZT_CPU_AS_DEVICE "$ZT" pretrain \
    recipe.toml output.dir=dev$s zero.stage=$s zero.device_collectives=true train.max_grad_norm=0
  cmp -s s$s/final/model.safetensors dev$s/final/model.safetensors \
    && say "ok - stage $s as a device: bitwise as on the CPU" || fail "stage $s as a device: differs"
done
cp -r dev3 devcut && rm -rf devcut/final devcut/summary.json
expect_ok "stage 3 as a device: resume = auto" env ZT_CPU_AS_DEVICE=1 $MPI -np 3 -x ZT_CPU_AS_DEVICE "$ZT" pretrain \
  recipe.toml output.dir=devcut zero.stage=3 zero.device_collectives=true train.max_grad_norm=0
cmp -s s3/final/model.safetensors devcut/final/model.safetensors && say "ok - as a device: resumes bitwise" \
  || fail "as a device: the resumed run differs"

# a run cut off after its step-4 checkpoint, resumed: bitwise (the moments' absmax values and codes
# come back from the checkpoint's dequantized values exactly)
for s in 1 3; do
  cp -r s$s cut$s && rm -rf cut$s/final cut$s/summary.json
  expect_ok "stage $s: resume = auto" $MPI -np 3 "$ZT" pretrain recipe.toml output.dir=cut$s zero.stage=$s \
    train.max_grad_norm=0
  cmp -s s$s/final/model.safetensors cut$s/final/model.safetensors && say "ok - stage $s resumes bitwise" \
    || fail "stage $s: the resumed run differs"
done
# on 4 ranks at stage 2, the same global batch: the step-6 checkpoint's blocks, quantized on
# other boundaries, each one absmax again
cp -r s3 re && rm -rf re/final re/summary.json
expect_ok "the stage-3 checkpoint resumed on 4 ranks at stage 2" $MPI -np 4 "$ZT" pretrain recipe.toml \
  output.dir=re zero.stage=2 train.max_grad_norm=0 train.micro_batch_size=1 train.gradient_accumulation_steps=3 \
  train.max_steps=8
got=$(test_tool moments8 model re/checkpoints/step-000006 --world 4 --stage 2 | tr '\n' ' ')
echo "$got" | grep -qE '^blocks ([0-9]+) exact \1 cut [1-9]' && say "ok - re-sharded: $got" || fail "re-sharded moments: $got"

# LoRA's adapters (r 64: A and B of 4096 elements and more, 8-bit; paged_adamw_8bit, as QLoRA recipes
# name it): on 3 ranks at stage 2 bitwise as at stage 0, and their losses as fp32 AdamW's (above)
for s in 0 2; do
  expect_ok "LoRA, 3 ranks, stage $s" $MPI -np 3 "$ZT" pretrain recipe.toml output.dir=lora$s zero.stage=$s \
    lora.r=64 lora.target_modules=all-linear train.optim=paged_adamw_8bit
done
cmp -s lora0/final/adapter_model.safetensors lora2/final/adapter_model.safetensors \
  && say "ok - LoRA: stage 2 ends bitwise as stage 0" || fail "LoRA: stage 2 differs from stage 0"
expect_ok "LoRA, adamw_torch" $MPI -np 3 "$ZT" pretrain recipe.toml output.dir=lora32 lora.r=64 \
  lora.target_modules=all-linear train.optim=adamw_torch
$PY - lora0/metrics.jsonl lora32/metrics.jsonl <<'PY' && say "ok - LoRA: the losses follow fp32 AdamW's within 1e-3" || fail "LoRA losses"
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(p)] for p in sys.argv[1:])
assert len(a) == len(b) == 6 and all(abs(x - y) <= 1e-3 * y for x, y in zip(a, b)) and a != b, (a, b)
PY

# checkpoints between the two: fp32 moments quantized afresh, 8-bit ones read as fp32
cp -r f32 to8 && rm -rf to8/final to8/summary.json
expect_ok "adamw_torch's checkpoint resumed with adamw_8bit" "$ZT" pretrain recipe.toml output.dir=to8
cp -r q8 to32 && rm -rf to32/final to32/summary.json
expect_ok "adamw_8bit's checkpoint resumed with adamw_torch" "$ZT" pretrain recipe.toml output.dir=to32 \
  train.optim=adamw_torch

expect_ok "Hugging Face's paged_adamw_8bit" "$ZT" pretrain recipe.toml output.dir=paged train.optim=paged_adamw_8bit \
  train.max_steps=1
grep -q '^optim = "adamw_8bit"' paged/recipe.resolved.toml && say "ok - written back as adamw_8bit" \
  || fail "paged_adamw_8bit resolved as: $(grep '^optim' paged/*.toml)"
expect_exit 2 "an unknown optimizer" "'adamw_4bit' is not one of adamw_torch, adamw_8bit" \
  "$ZT" pretrain recipe.toml output.dir=bad train.optim=adamw_4bit
expect_exit 2 "adamw_8bit with its moments on NVMe" 'adamw_8bit.*needs offload.optimizer = "none"' \
  "$ZT" pretrain recipe.toml output.dir=bad offload.optimizer=nvme

# summary.json's optimizer bytes and zt validate's: a byte a moment and an element where fp32 has four
# (under half here: this model's norms keep fp32 moments; bench/optim8.sh measures a 0.6B model's)
$PY - q8/summary.json f32/summary.json <<'PY' && say "ok - summary.json: the 8-bit moments' bytes" || fail "summary.json"
import json, sys
q8, f32 = (json.load(open(p))["model_state_bytes"]["optimizer"] for p in sys.argv[1:])
assert 0 < q8 < f32 / 2, (q8, f32)
PY
b32=$("$ZT" validate recipe.toml train.optim=adamw_torch | sed -n 's/^#   optimizer state *\([0-9.]*\) MiB.*/\1/p')
b8=$("$ZT" validate recipe.toml | sed -n 's/^#   optimizer state *\([0-9.]*\) MiB.*/\1/p')
awk -v a="$b8" -v b="$b32" 'BEGIN { exit !(a > 0 && a < b / 2) }' \
  && say "ok - zt validate: optimizer state $b8 MiB against $b32 MiB" || fail "validate: $b8 MiB against $b32 MiB"
done_testing
