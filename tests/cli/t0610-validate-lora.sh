#!/usr/bin/env bash
# zt validate with LoRA: the frozen base at its dtype (fp32; fp32 and the bf16 copy; NF4 with
# double_quant), the adapters (DoRA's magnitudes, the copies of modules_to_save) with their
# gradients and AdamW state, the activations and the adapters' scratch, and the start, where the
# base is read whole. On a 125M-parameter model (zt init: its 477 MiB of fp32 weights dominate the
# 16 MiB of the process itself) each estimate is within 25% of the peak RSS a real run measures
# (summary.json's peak_rss_train_bytes), as t0600-validate.sh holds the whole model's; an NF4 base
# is encoded as it is read, never whole in fp32, so its run peaks in training too. Measured on 2
# AMX cores: fp32 +4.6%, bf16 +5.4%, NF4 +4.7%, DoRA +4.1%, modules_to_save +0.0% (the runtime's
# OpenBLAS packing buffers are counted at their largest, and the start counts them too). The NF4
# base streamed from NVMe at stage 3 (offload.param = "nvme"): the peak within 25% too, and the
# bytes a step reads from the swap file exactly as predicted (every unit's slice, whole blocks,
# once for the forward and once for the backward; nothing written).
. "$(dirname "$0")/lib.sh"

"$ZT" init --arch llama --out big --seed 1 hidden_size=768 intermediate_size=2048 num_hidden_layers=12 \
  num_attention_heads=12 num_key_value_heads=4 vocab_size=32000 max_position_embeddings=512 >/dev/null 2>&1 \
  || { fail "zt init"; exit 1; }
random_tokens data.jsonl 1 16 32000 100 260
printf '[model]\npath = "big"\ndtype = "fp32"\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 256\ncache_dir = ""\n[train]\nmax_steps = 1\nmicro_batch_size = 2\nlearning_rate = 1e-4\n[lora]\nr = 16\nalpha = 32\ntarget_modules = "all-linear"\n' > lora.toml

mib() { sed -n "s/^#   $1 *\([0-9.]*\) MiB.*/\1/p" "$TMP/out"; }
# within NAME ESTIMATE_MIB SUMMARY_KEY RUN: the estimate within 25% of the run's measure
within() {
  $PY - "$@" <<'PY' && say "ok - $1: estimate $2 MiB within 25% of $3" || fail "$1: estimate $2 MiB is off ($3)"
import json, sys
name, est, key, run = sys.argv[1], float(sys.argv[2]) * 2**20, sys.argv[3], sys.argv[4]
got = json.load(open(run + "/summary.json"))[key]
print("%s: estimate %.1f MiB, %s %.1f MiB (%+.1f%%)" % (name, est / 2**20, key, got / 2**20, 100 * (est / got - 1)),
      file=sys.stderr)
sys.exit(0 if abs(est - got) <= 0.25 * got else 1)
PY
}
for spec in "fp32|" "bf16|model.dtype=bf16" "nf4|lora.quantize_base=nf4 lora.double_quant=true" "dora|lora.method=dora" \
  "saved|lora.modules_to_save=[embed_tokens,lm_head]" \
  "nf4-nvme|lora.quantize_base=nf4 lora.double_quant=true offload.param=nvme offload.nvme_path=swap"; do
  name=${spec%%|*} keys=${spec#*|}
  expect_ok "validate, $name" "$ZT" validate lora.toml $keys
  total=$(mib total) training=$(mib "  training") start=$(mib "  at the start")
  io=$(sed -n 's/^# offload I\/O per optimizer step: \([0-9]*\) bytes read, \([0-9]*\) written.*/\1 \2/p' "$TMP/out")
  [ "$name" = fp32 ] && fp32=$total
  grep -q "^# LoRA: [0-9]* parameters trained" "$TMP/out" || fail "$name: no LoRA line: $(grep '^#' "$TMP/out")"
  expect_ok "train, $name" "$ZT" pretrain lora.toml $keys output.dir=run-$name
  within "$name" "$total" peak_rss_train_bytes run-$name
  $PY -c "import sys; sys.exit(not float('$training') > float('$start'))" \
    && say "ok - $name: the training is the peak ($training > $start MiB)" || fail "$name: start $start, training $training"
  if [ "$name" = nf4-nvme ]; then
    $PY - run-$name $io <<'PY' && say "ok - nf4-nvme: a step reads the predicted bytes, writes none ($io)" || fail "nf4-nvme I/O: $io"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl") if "io_read_bytes" in l and "split" not in l]
assert rows and all(r["io_read_bytes"] == int(sys.argv[2]) and r["io_write_bytes"] == int(sys.argv[3]) for r in rows), \
    (sys.argv[2:], [(r["io_read_bytes"], r["io_write_bytes"]) for r in rows])
PY
  fi
done
expect_ok "validate, the whole model" "$ZT" validate lora.toml lora.r=0
full=$(mib total)
$PY -c "import sys; sys.exit(not float('$full') > 2.5 * float('$fp32'))" \
  && say "ok - training the whole model needs far more ($full against $fp32 MiB)" || fail "whole model $full MiB"
done_testing
