#!/usr/bin/env bash
# bench/qlora30b.sh: the QLoRA headline on this machine: LoRA steps on a Llama shape of 32.5
# billion parameters (LLaMA-30B's: hidden 6656, 60 layers, 52 heads, intermediate 17920, vocab
# 32000, untied) whose base is NF4 with double quantization, streamed from NVMe
# (offload.param = "nvme"), one process on 2 cores and 24 GiB. The base in fp32 is 130 GB, in
# bf16 65 GB: neither fits the memory, nor the disk beside the run.
# BENCH_QLORA_MODEL=qwen3-30b-a3b runs the same on Qwen3-30B-A3B's shape instead (a mixture of
# experts of 30.5 billion parameters: hidden 2048, 48 layers, 32 heads / 4 KV of 128, 128 experts
# of 768 a layer, 8 a token, vocab 151936), under build/bench/qlora-qwen3-30b-a3b;
# BENCH_QLORA_MODEL=qwen1.5-moe-a2.7b on Qwen1.5-MoE-A2.7B's (qwen2_moe, 14.3 billion parameters:
# hidden 2048, 24 layers, 16 heads of 128, 60 experts of 1408 a layer, 4 a token, a shared expert
# of 5632, vocab 151936), under build/bench/qlora-qwen1.5-moe-a2.7b.
#
# Makes the model once with zt init --quantize nf4 --double-quant (random weights, the linear ones
# written in the bitsandbytes 4-bit format tensor by tensor, the embedding, norms and LM head in
# bf16: about 18 GB under build/bench/qlora30b, kept between runs), then trains BENCH_QLORA_STEPS
# (2) steps of one sequence of BENCH_QLORA_SEQ (64) tokens: LoRA r = 16 on q_proj and v_proj, the
# base at ZeRO stage 3 streamed from its swap file (the layers' encodings with their norms, a
# layer a unit; the embedding and the LM head, fp32 there, in 8 vocabulary tiles each), without
# activation checkpointing (a step then dequantizes and multiplies each weight twice, not three
# times, for 1.5 GB of activations). Prints and appends to bench/RESULTS.md (BENCH_RECORD=0: print only) the peak RSS,
# the time and bytes read of each step, and the machine's conditions. BENCH_QLORA_SHAPE replaces
# the shape (config.json keys) for a smaller trial. Checks the free disk first: the model (18 GB),
# the swap file (the base's units: 18 GB), 40 GB in all.
set -u
cd "$(dirname "$0")/.."
MODEL=${BENCH_QLORA_MODEL:-llama-30b}
case $MODEL in
llama-30b)
    ARCH=llama DIR=qlora30b
    SHAPE="hidden_size=6656 intermediate_size=17920 num_hidden_layers=60 num_attention_heads=52
           num_key_value_heads=52 vocab_size=32000 max_position_embeddings=2048 tie_word_embeddings=false" ;;
qwen3-30b-a3b)
    ARCH=qwen3_moe DIR=qlora-qwen3-30b-a3b
    SHAPE="hidden_size=2048 moe_intermediate_size=768 num_experts=128 num_experts_per_tok=8 norm_topk_prob=true
           num_hidden_layers=48 num_attention_heads=32 num_key_value_heads=4 head_dim=128 vocab_size=151936
           max_position_embeddings=2048 rms_norm_eps=1e-6 tie_word_embeddings=false" ;;
qwen1.5-moe-a2.7b)
    ARCH=qwen2_moe DIR=qlora-qwen1.5-moe-a2.7b
    SHAPE="hidden_size=2048 moe_intermediate_size=1408 shared_expert_intermediate_size=5632 num_experts=60
           num_experts_per_tok=4 num_hidden_layers=24 num_attention_heads=16 num_key_value_heads=16 vocab_size=151936
           max_position_embeddings=2048 rms_norm_eps=1e-6 rope_theta=1000000 tie_word_embeddings=false" ;;
*) echo "BENCH_QLORA_MODEL: llama-30b, qwen3-30b-a3b or qwen1.5-moe-a2.7b, not '$MODEL'" >&2; exit 2 ;;
esac
OUT=${BENCH_QLORA_DIR:-$PWD/build/bench/$DIR} # absolute: the recipe's paths are read relative to its directory
PY=/usr/bin/python3
STEPS=${BENCH_QLORA_STEPS:-2}
SEQ=${BENCH_QLORA_SEQ:-64}
SHAPE=${BENCH_QLORA_SHAPE:-$SHAPE}
. bench/lib.sh

have_model=$([ -f "$OUT/model/config.json" ] && echo 1)
rm -rf "$OUT/run" "$OUT/swap"
[ -n "${BENCH_QLORA_SHAPE:-}" ] || need_disk $((have_model ? 22 : 40)) "the model and the swap file"
if [ -z "$have_model" ]; then
    log "zt init: the model, its linear weights NF4 with double quantization"
    /usr/bin/time -f "%e %M" -o "$OUT/init.time" ./zt init --arch $ARCH --out "$OUT/model" --seed 1 --dtype bf16 \
        --quantize nf4 --double-quant $SHAPE || { rm -rf "$OUT/model"; exit 1; }
fi
{ cat <<TOML
[model]
path = "$OUT/model"
dtype = "fp32"
activation_checkpointing = false
TOML
    steps_recipe $SEQ $STEPS 1e-3
    cat <<TOML
[lora]
r = 16
alpha = 32
target_modules = ["q_proj", "v_proj"]
quantize_base = "nf4"
double_quant = true
[zero]
stage = 3
prefetch_layers = 1
embedding_tiles = 8
head_tiles = 8
[offload]
param = "nvme"
TOML
    nvme_recipe
} > "$OUT/recipe.toml"
cond() { # the machine's conditions now
    echo "load average $(cut -d' ' -f1-3 /proc/loadavg), $(($(df --output=avail -B1 "$OUT" | tail -1) / 1000000000)) GB free on the disk"
}
log "zt validate: its prediction of the peak memory, the bytes read and the step's time"
./zt validate "$OUT/recipe.toml" > "$OUT/validate.txt" 2>&1 || log "zt validate failed: see $OUT/validate.txt"
before=$(cond)
log "zt pretrain: $STEPS steps ($before)"
t0=$(date +%s)
ZT_LOG=info /usr/bin/time -f "%M" -o "$OUT/maxrss" ./zt pretrain "$OUT/recipe.toml" 2> "$OUT/train.log" || { tail -5 "$OUT/train.log"; exit 1; }
t1=$(date +%s)
after=$(cond)
./zt env 2>&1 | grep -m1 "kernels" > "$OUT/env.txt"
du -sb "$OUT/model" | cut -f1 > "$OUT/model.bytes"
$PY - "$OUT" $((t1 - t0)) "$before" "$after" <<'PY' | tee "$OUT/table.md"
import json, os, re, sys, time
out, wall, before, after = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
rows = [json.loads(l) for l in open(out + "/run/metrics.jsonl")]
summary = json.load(open(out + "/run/summary.json"))
log = open(out + "/train.log").read()
params = re.search(r"model '.*': (\d+) parameters \((\d+) trained\), (\d+) layers", log)
cfg = json.load(open(out + "/model/config.json"))
C, L, V = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
n = int(params.group(1)) if params else 0
if cfg.get("num_experts"):
    shape = (f"a {n / 1e9:.1f}B mixture of experts ({cfg['model_type']})",
             f"{cfg['num_experts']} experts of {cfg['moe_intermediate_size']} a layer, {cfg['num_experts_per_tok']} a token"
             + (f", a shared expert of {cfg['shared_expert_intermediate_size']}" if cfg.get("shared_expert_intermediate_size") else ""))
else:
    shape = (f"a {n / 1e9:.1f}B Llama shape", f"intermediate {cfg['intermediate_size']}")
init = open(out + "/init.time").read().split() if os.path.exists(out + "/init.time") else None
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
env = open(out + "/env.txt").read().strip()
print(f"\n### {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} · QLoRA on {shape[0]}, NF4 base with double quantization streamed from NVMe (bench/qlora30b.sh)")
print(f"- hidden {C}, {L} layers, {shape[1]}, vocab {V}: {n / 1e9:.2f}B parameters ({n * 4 / 1e9:.0f} GB in fp32); "
      f"the model as zt init wrote it {int(open(out + '/model.bytes').read()) / 1e9:.1f} GB"
      + (f" in {float(init[0]) / 60:.1f} min, peak RSS {int(init[1]) / 2**20:.2f} GiB" if init else ""))
print(f"- LoRA r = 16 on q_proj and v_proj: {params.group(2) if params else '?'} trained parameters; 1 × {rows[0]['target_tokens']} target tokens a step; "
      f"no activation checkpointing; one process, {os.environ.get('OMP_NUM_THREADS', '2')} threads; {cpu}, {env}")
print(f"- conditions: before the run {before}; after it {after} (the machine is shared: other workers' jobs ran beside it)")
print(f"- peak RSS {int(open(out + '/maxrss').read()) / 2**20:.2f} GiB for the whole process (the start: the base read, "
      f"the swap file filled; the final save included); during training {summary['peak_rss_train_bytes'] / 2**30:.2f} GiB; "
      f"wall {wall} s: the start (the base read and written to the swap file, a unit at a time) {wall - summary['time_s']:.0f} s, "
      f"the steps {summary['time_s']:.0f} s")
print("\n| step | loss | seconds | exposed I/O wait s | GB read | GB written | read GB/s over the step |")
print("|---:|---:|---:|---:|---:|---:|---:|")
prev = 0.0
for r in rows:
    dt = r["elapsed_s"] - prev
    prev = r["elapsed_s"]
    print(f"| {r['step']} | {r['loss']:.4f} | {dt:.1f} | {r['io_wait_s']:.1f} | {r['io_read_bytes'] / 1e9:.2f} | "
          f"{r['io_write_bytes'] / 1e9:.2f} | {r['io_read_bytes'] / dt / 1e9:.2f} |")
PY
$PY - "$OUT" <<'PY' | tee -a "$OUT/table.md"
import json, re, sys
out = sys.argv[1]
v = open(out + "/validate.txt").read()
total = re.search(r"^#   total +([0-9.]+) MiB", v, re.M)
step = re.search(r"^# step time, predicted: ([0-9.]+) s", v, re.M)
io = re.search(r"^# offload I/O per optimizer step: ([0-9]+) bytes read, ([0-9]+) written", v, re.M)
rows = [json.loads(l) for l in open(out + "/run/metrics.jsonl")]
peak = int(open(out + "/maxrss").read()) * 1024
times = [b["elapsed_s"] - a["elapsed_s"] for a, b in zip([{"elapsed_s": 0}] + rows, rows)]
print("\n| zt validate's prediction | predicted | measured | predicted / measured |")
print("|---|---:|---:|---:|")
if total:
    print(f"| peak RSS | {float(total.group(1)) / 1024:.2f} GiB | {peak / 2**30:.2f} GiB | {float(total.group(1)) * 2**20 / peak:.2f} |")
if step:
    for i, t in enumerate(times):
        print(f"| step {i + 1} time | {float(step.group(1)):.0f} s | {t:.0f} s | {float(step.group(1)) / t:.2f} |")
if io:
    print(f"| bytes read a step | {int(io.group(1)) / 1e9:.2f} GB | {rows[-1]['io_read_bytes'] / 1e9:.2f} GB | "
          f"{int(io.group(1)) / rows[-1]['io_read_bytes']:.2f} |")
    print(f"| bytes written a step | {int(io.group(2)) / 1e9:.2f} GB | {rows[-1]['io_write_bytes'] / 1e9:.2f} GB | |")
PY
if [ "${BENCH_RECORD:-1}" = 1 ]; then # BENCH_RECORD=0: print only
    cat "$OUT/table.md" >> bench/RESULTS.md
fi
rm -rf "$OUT/swap"
