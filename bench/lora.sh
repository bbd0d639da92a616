#!/usr/bin/env bash
# bench/lora.sh: LoRA against a full fine-tune of the same model in zt, and against Hugging
# Face transformers + PEFT on the CPU, in one run with the same threads. `make bench` runs it;
# it prints a table and appends it to bench/RESULTS.md.
#
#   bench/lora.sh
#   BENCH_TORCH_PYTHON=/path/to/venv/bin/python bench/lora.sh   # a Python with torch, transformers, peft
#
# Model: bench/llama60m.toml's shape (56.4M parameters, untied), 4 x 256 random tokens a step,
# 10 steps; LoRA r 16, alpha 32 on every linear layer of the blocks (q, k, v, o, gate, up,
# down: 3.1M adapter parameters), AdamW lr 1e-4 without weight decay, in fp32 and in bf16
# (zt: bf16 weights copies and products; PEFT: bf16 autocast). Neither side recomputes
# activations (transformers trains without gradient checkpointing unless asked, so zt's runs
# set model.activation_checkpointing = false); one more zt LoRA row keeps zt's default
# (checkpointing on: a third more products in the layers, less memory). tokens/s: the mean of
# steps 3..10; peak RSS: the training's (zt: summary.json's peak_rss_train_bytes) or the whole
# process's (PEFT). A part that is missing or fails shows as "missing".
set -u
cd "$(dirname "$0")/.."
. bench/record.sh

THREADS=${BENCH_THREADS:-2}
OUT=build/bench/lora
PY=/usr/bin/python3
TORCH_PY=${BENCH_TORCH_PYTHON:-$PY}
RECIPE=bench/llama60m.toml
mkdir -p "$OUT"
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS
log() { echo "bench: $*" >&2; }

[ -x ./zt ] || { log "./zt not built"; exit 1; }
bench/make-model.sh > "$OUT/init.log" 2>&1 || { log "bench/make-model.sh failed: see $OUT/init.log"; exit 1; }

LORA=(lora.r=16 lora.alpha=32 lora.target_modules=all-linear train.weight_decay=0)
SAME=(model.activation_checkpointing=false train.weight_decay=0) # as transformers trains
# zt_run NAME [overrides...]: one training run; its directory is $OUT/NAME
zt_run() {
    local name=$1
    shift
    log "zt $name"
    ./zt pretrain "$RECIPE" output.dir="$PWD/$OUT/$name" "$@" > "$OUT/$name.log" 2>&1 ||
        log "zt $name failed: see $OUT/$name.log"
}
for dtype in fp32 bf16; do
    zt_run full-$dtype "${SAME[@]}" model.dtype=$dtype
    zt_run lora-$dtype "${LORA[@]}" "${SAME[@]}" model.dtype=$dtype
    zt_run lora-ckpt-$dtype "${LORA[@]}" model.dtype=$dtype
done
for dtype in fp32 bf16; do
    for kind in lora full; do
        log "transformers $kind $dtype ($THREADS threads)"
        $TORCH_PY bench/peft_llama.py --threads "$THREADS" --dtype $dtype $([ $kind = full ] && echo --full) \
            > "$OUT/hf-$kind-$dtype.out" 2> "$OUT/hf-$kind-$dtype.log" ||
            log "transformers $kind $dtype failed: see $OUT/hf-$kind-$dtype.log"
    done
done

TABLE=$($PY - "$OUT" <<'EOF'
import json, os, sys
out = sys.argv[1]
def zt(name):
    try:
        rows = [json.loads(l) for l in open(f"{out}/{name}/metrics.jsonl") if l.startswith("{")]
        s = json.load(open(f"{out}/{name}/summary.json"))
    except (OSError, ValueError):
        return None
    tps = [r["input_tokens_per_s"] for r in rows if "input_tokens_per_s" in r and 3 <= r["step"] <= 10]
    return dict(tps=sum(tps) / len(tps), rss=s.get("peak_rss_train_bytes", 0) / 2**20) if tps else None
def hf(name):
    try:
        r = json.loads(open(f"{out}/hf-{name}.out").read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return None
    return dict(tps=r["tokens_per_s"], rss=r["peak_rss_bytes"] / 2**20, v=(r["torch"], r["transformers"], r["peft"]))
lines = ["| run | fp32 tokens/s | fp32 peak RSS (MiB) | bf16 tokens/s | bf16 peak RSS (MiB) | vs transformers + PEFT LoRA (fp32, bf16) |",
         "|---|---:|---:|---:|---:|---:|"]
ref = {d: hf(f"lora-{d}") for d in ("fp32", "bf16")}
for name, get in (("zt LoRA r 16, all linear layers", lambda d: zt(f"lora-{d}")),
                  ("zt LoRA r 16, activation checkpointing (zt's default)", lambda d: zt(f"lora-ckpt-{d}")),
                  ("zt full fine-tune", lambda d: zt(f"full-{d}")),
                  ("transformers + PEFT LoRA r 16", lambda d: hf(f"lora-{d}")),
                  ("transformers full fine-tune", lambda d: hf(f"full-{d}"))):
    cells, ratios = [], []
    for d in ("fp32", "bf16"):
        s = get(d)
        cells += [f"{s['tps']:.1f}", f"{s['rss']:.0f}"] if s else ["missing", ""]
        ratios.append(f"{s['tps'] / ref[d]['tps']:.2f}x" if s and ref[d] else "")
    lines.append(f"| {name} | " + " | ".join(cells) + " | " + ", ".join(ratios) + " |")
v = next((r["v"] for r in ref.values() if r), None)
if v:
    lines.append(f"\ntorch {v[0]}, transformers {v[1]}, peft {v[2]}; eager attention (transformers' choice on a CPU), no gradient checkpointing.")
print("\n".join(lines))
EOF
)

INFO="- CPU: $(bench_cpu)
- environment: OMP_NUM_THREADS=$THREADS, torch.set_num_threads($THREADS); load average at the start: $LOAD
- model: llama60m shape (56.4M parameters, untied), 4 x 256 random tokens a step; LoRA r 16, alpha 32 on q, k, v, o, gate, up, down; AdamW lr 1e-4, no weight decay, clipping at 1; no activation recomputation on either side but in the row that says so"
bench_record "LoRA against full fine-tuning and transformers + PEFT (bench/lora.sh)" "$INFO" "$TABLE"
