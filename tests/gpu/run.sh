#!/usr/bin/env bash
# tests/gpu/run.sh: the checks that need a GPU, run on the GPU machine from the repository root, in
# under 5 minutes:
#   machine           nvidia-smi -L and the versions of the driver, CUDA, torch, zt and MPI
#   test_cuda_ops     the CUDA kernels against their CPU twins (exit 77: skipped)
#   test_cuda_quant   the CUDA quantization kernels and a quantized base's NF4/int8 decoders against theirs
#   test_cuda_attention_bf16  the tensor-core attention against the CPU's fp32 attention, and its speed
#   tiny model        zt init of a tiny Llama (hidden 256, 2 layers, 4 heads / 2 KV: head size 64, vocab 512) and
#                     64 random sequences of 128 tokens
#   cuda vs cpu fp32  10 steps of 4 sequences with model.device = "cuda" and "cpu": every step's loss
#                     within 1e-3 relative
#   cuda vs cpu bf16  the same in bf16, within 2e-2
#   families, LoRA    the same in bf16 for tiny Qwen3 (q and k norms), Gemma 2 (GeGLU, soft-capping, sandwich
#                     norms), Phi-3 (partial rotary), Granite (its multipliers) and Qwen3-MoE (4 experts) models, LoRA on every linear, QLoRA (NF4 with
#                     double_quant), LoRA at stage 3 with offload.param = "cpu", and the MLP in 2 tiles
#   generation        a tiny model with a real tokenizer (tests/fixtures): zt generate's greedy text on the
#                     device equals the CPU's, and 2 GRPO steps (completions decoded side by side on the
#                     device, a reward program) against the CPU: the same rewards, gradient norms within 1e-3
#   offload           offload.optimizer = "cpu" and "nvme", offload.param = "cpu" and "nvme" (stage 3 in
#                     one process) against the device run without offload: fp32 within 1e-5, bf16 within
#                     2e-2 relative, every step
#   zero 2 ranks      `mpirun -np 2 zt pretrain` at ZeRO stage 3 on the one GPU (MPI carries the
#                     collectives through host memory) against one rank with the same global batch
#                     (micro-batch 2 on each of 2 ranks, 4 on one): every loss within 1e-3 relative;
#                     then stages 3 and 2 on the device arrays (zero.device_collectives), AdamW on the GPU,
#                     and LoRA at stage 3 (its base sharded) on the device arrays against LoRA on one rank
#   test_nccl         NCCL's collectives of device buffers against the same through host memory and MPI,
#                     bitwise, at world size 1 (ZT_NCCL_LIB: the machine's libnccl, else PyTorch's)
# Every part runs, each under `timeout`, whatever the others did. With .gpu/ (tests/gpu/pack.sh made it
# on the build machine) it runs the packed binaries after `. .gpu/env.sh`; without, it builds
# (`make all tests`). ZT_GPU_DEVICE=cpu puts the "cuda" side on the CPU, to try the script without a GPU.
# Writes ${OUT:-build/gpu}/run.log (everything) and summary.md (the table); exits 1 if a part failed.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
SELF=$ROOT/tests/gpu/run.sh
WORK=$ROOT/build/gpu-work
DEVICE=${ZT_GPU_DEVICE:-cuda}

# run.sh: everything, logged by tee; run.sh --all: the same without the log; run.sh --part FUNCTION ...
if [ $# = 0 ]; then
    OUT=${OUT:-build/gpu}
    mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
    rm -rf "$WORK" && mkdir -p "$WORK/home"
    OUT=$OUT bash "$SELF" --all 2>&1 | tee "$OUT/run.log"
    exit "${PIPESTATUS[0]}"
fi
[ "$1" = --all ] && [ ! -f .gpu/env.sh ] && { make -j"$(nproc)" all tests || exit 1; }
if [ -f .gpu/env.sh ]; then
    . .gpu/env.sh
    ZT=$ZT_GPU/bin/zt
    TESTS=$ZT_GPU/bin
else
    ZT=$ROOT/zt
    TESTS=$ROOT/build/gpu
fi
export HOME=$WORK/home  # zt's default cache lives under it
# NCCL for zt's device collectives: the machine's, else the one PyTorch's wheels bring
if [ -z "${ZT_NCCL_LIB:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2 '; then
    ZT_NCCL_LIB=$(LD_LIBRARY_PATH=${ZT_GPU_SYSTEM_LD_LIBRARY_PATH-${LD_LIBRARY_PATH:-}} python3 -c \
        'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
    export ZT_NCCL_LIB
fi
# python3 runs with the machine's libraries, not the packed ones
py() { LD_LIBRARY_PATH=${ZT_GPU_SYSTEM_LD_LIBRARY_PATH-${LD_LIBRARY_PATH:-}} python3 "$@"; }

# --- the parts: each prints its detail line last and returns 0 (pass), 77 (skip) or else (fail) ---------

machine() {
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" --version | tail -1
    py -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, torch.cuda.is_available())'
    "$ZT" env
    echo "$(mpirun --version 2>&1 | head -1) at $(command -v mpirun) (env.sh: ${ZT_GPU_MPI:-no pack})"
    ldd --version | head -1
    nvidia-smi -L | grep '^GPU'
}

gpu_test() {
    [ -x "$TESTS/$1" ] || { echo "$TESTS/$1 is not built"; return 1; }
    "$TESTS/$1"
}

tiny_model() {
    "$ZT" init --arch llama --out "$WORK/model" --seed 1 hidden_size=256 intermediate_size=512 \
        num_hidden_layers=2 num_attention_heads=4 num_key_value_heads=2 vocab_size=512 \
        max_position_embeddings=128 tie_word_embeddings=false || return 1
    py -c 'import json, random
r = random.Random(1)
for _ in range(64): print(json.dumps({"input_ids": [r.randrange(512) for _ in range(128)]}))' > "$WORK/tokens.jsonl"
    printf '%s\n' '[model]' "path = \"$WORK/model\"" 'dtype = "fp32"' 'activation_checkpointing = false' \
        '[data]' "train = \"$WORK/tokens.jsonl\"" 'format = "tokens"' 'max_length = 128' 'packing = false' \
        'shuffle = false' "cache_dir = \"$WORK/cache\"" \
        '[train]' 'max_steps = 10' 'micro_batch_size = 4' 'learning_rate = 3e-3' 'logging_steps = 1' \
        '[output]' 'overwrite = true' 'tensorboard = false' > "$WORK/recipe.toml"
    echo "in $WORK"
}

# train NAME [overrides...]: the recipe's 10 steps into $WORK/NAME
train() {
    local name=$1
    shift
    echo "--- zt pretrain $* ($name)"
    OMP_NUM_THREADS=8 "$ZT" pretrain "$WORK/recipe.toml" output.dir="$WORK/$name" "$@"
}

# compare A B TOL: every step's loss of run B within TOL (relative) of run A's; prints both columns
compare() {
    py - "$WORK/$1/metrics.jsonl" "$WORK/$2/metrics.jsonl" "$3" "$1" "$2" <<'EOF'
import json, sys
a, b = ([json.loads(l) for l in open(p) if l.startswith("{")] for p in sys.argv[1:3])
tol = float(sys.argv[3])
print(f"{'step':>4} {sys.argv[4]:>14} {sys.argv[5]:>14} {'rel diff':>10}")
worst = 0.0
for x, y in zip(a, b):
    rel = abs(x["loss"] - y["loss"]) / abs(x["loss"])
    worst = max(worst, rel)
    print(f"{x['step']:>4} {x['loss']:>14.8f} {y['loss']:>14.8f} {rel:>10.2e}{'  <- over' if rel > tol else ''}")
same_tokens = all(x["target_tokens"] == y["target_tokens"] for x, y in zip(a, b))
print(f"{len(a)} and {len(b)} steps{'' if same_tokens else ', different token counts'}, "
      f"max rel diff {worst:.2e} (limit {tol:g})")
sys.exit(0 if len(a) == len(b) == 10 and same_tokens and worst <= tol else 1)
EOF
}

# pair NAME TOL [overrides...]: the recipe with the overrides on the CPU and on the device
pair() {
    local name=$1 tol=$2
    shift 2
    train "cpu-$name" model.device=cpu "$@" || return 1
    train "$DEVICE-$name" model.device="$DEVICE" "$@" || return 1
    compare "cpu-$name" "$DEVICE-$name" "$tol"
}

cuda_vs_cpu() { pair "$1" "$2" model.dtype="$1"; }

# bf16 runs of what came after the first GPU runs: model families with kernels of their own, LoRA,
# a tiled MLP; every one is compared, the part fails if any does
variants() {
    local arch extra failed=""
    for arch in qwen3 gemma2 phi3 granite gemma glm4; do
        extra=() # Granite: multipliers as Granite 3's (the scores' 1/64 is head size 64's 1/sqrt(64)^2)
        [ $arch = granite ] && extra=(embedding_multiplier=12 attention_multiplier=0.015625 residual_multiplier=0.22
            logits_scaling=8)
        [ $arch = gemma ] && extra=(hidden_act=gelu head_dim=64) # the exact GELU
        [ $arch = glm4 ] && extra=(head_dim=64)                  # interleaved rotary pairs on half of each head
        "$ZT" init --arch $arch --out "$WORK/model-$arch" --seed 1 hidden_size=256 intermediate_size=512 \
            num_hidden_layers=2 num_attention_heads=4 num_key_value_heads=2 vocab_size=512 \
            max_position_embeddings=128 tie_word_embeddings=false "${extra[@]}" > /dev/null || return 1
        pair "$arch" 2e-2 model.dtype=bf16 model.path="$WORK/model-$arch" || failed+=" $arch"
    done
    # a mixture of experts: the routing decided on the host, the experts' rows gathered and scattered
    # with the embedding's kernels
    "$ZT" init --arch qwen3_moe --out "$WORK/model-moe" --seed 1 hidden_size=256 moe_intermediate_size=256 \
        num_experts=4 num_experts_per_tok=2 output_router_logits=true num_hidden_layers=2 num_attention_heads=4 \
        num_key_value_heads=2 head_dim=64 vocab_size=512 max_position_embeddings=128 > /dev/null || return 1
    pair qwen3_moe 2e-2 model.dtype=bf16 model.path="$WORK/model-moe" || failed+=" qwen3_moe"
    pair qwen3_moe-lora 2e-2 model.dtype=bf16 model.path="$WORK/model-moe" lora.r=8 lora.alpha=16 \
        lora.target_modules=all-linear || failed+=" qwen3_moe-lora"
    pair qwen3_moe-qlora 2e-2 model.dtype=bf16 model.path="$WORK/model-moe" lora.r=8 lora.alpha=16 \
        lora.target_modules=all-linear lora.quantize_base=nf4 lora.double_quant=true || failed+=" qwen3_moe-qlora"
    # a shared expert behind its sigmoid gate, its adapters too
    "$ZT" init --arch qwen2_moe --out "$WORK/model-moe2" --seed 1 hidden_size=256 moe_intermediate_size=256 \
        shared_expert_intermediate_size=512 num_experts=4 num_experts_per_tok=2 output_router_logits=true \
        num_hidden_layers=2 num_attention_heads=4 num_key_value_heads=2 vocab_size=512 max_position_embeddings=128 \
        > /dev/null || return 1
    pair qwen2_moe-lora 2e-2 model.dtype=bf16 model.path="$WORK/model-moe2" lora.r=8 lora.alpha=16 \
        lora.target_modules=all-linear || failed+=" qwen2_moe-lora"
    pair lora 2e-2 model.dtype=bf16 lora.r=8 lora.alpha=16 lora.target_modules=all-linear || failed+=" lora"
    # the dropout masks the CPU's (the same counter-based draws), trainable tokens' rows written over the lookups
    pair lora-dropout-tokens 2e-2 model.dtype=bf16 lora.r=8 lora.alpha=16 lora.target_modules=all-linear \
        lora.dropout=0.1 'lora.trainable_token_indices=[3, 17, 40]' || failed+=" lora-dropout-tokens"
    # DoRA: the weight norms, the outputs' scaling and the magnitudes' gradient in the DoRA kernels
    pair dora 2e-2 model.dtype=bf16 lora.r=8 lora.alpha=16 lora.target_modules=all-linear lora.method=dora \
        || failed+=" dora"
    # 8-bit AdamW: the moments' blocks in the adamw8 kernels (one process: no cut blocks)
    pair adamw-8bit 2e-2 model.dtype=bf16 train.optim=adamw_8bit || failed+=" adamw-8bit"
    pair mlp-tiles 2e-2 model.dtype=bf16 zero.mlp_tiles=2 || failed+=" mlp-tiles"
    pair qlora 2e-2 model.dtype=bf16 lora.r=8 lora.alpha=16 lora.target_modules=all-linear lora.quantize_base=nf4 \
        lora.double_quant=true || failed+=" qlora"
    pair lora-offload 2e-2 model.dtype=bf16 lora.r=8 lora.alpha=16 lora.target_modules=all-linear zero.stage=3 \
        offload.param=cpu offload.optimizer=cpu || failed+=" lora-offload"
    [ -z "$failed" ] || { echo "failed:$failed"; return 1; }
    echo "qwen3, gemma2, phi3, granite, gemma, glm4, qwen3_moe (and its experts' LoRA and QLoRA), qwen2_moe's LoRA, LoRA, QLoRA, LoRA on a streamed base, 8-bit AdamW and a tiled MLP within 2e-2 of the CPU"
}

zero3() {
    local run name keys base failed="" lora="lora.r=8 lora.alpha=16 lora.target_modules=all-linear"
    train zero-1rank model.device="$DEVICE" zero.stage=3 || return 1
    train lora-1rank model.device="$DEVICE" zero.stage=3 $lora || return 1
    # stage 3 on host copies; stages 3 and 2 on the device arrays (NCCL refuses two ranks on one GPU:
    # through host memory, as the log says), AdamW on the GPU
    for run in "s3-host zero.stage=3 zero.device_collectives=false" "s3-device zero.stage=3" "s2-device zero.stage=2" \
        "lora-s3-device zero.stage=3 $lora"; do
        read -r name keys <<< "$run"
        [[ $name = lora-* ]] && base=lora-1rank || base=zero-1rank
        echo "--- mpirun -np 2 zt pretrain model.device=$DEVICE $keys train.micro_batch_size=2 ($name)"
        OMP_NUM_THREADS=4 ZT_LOG=info mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x ZT_LOG "$ZT" \
            pretrain "$WORK/recipe.toml" output.dir="$WORK/$name" model.device="$DEVICE" $keys \
            train.micro_batch_size=2 > "$WORK/$name.log" 2>&1 || { tail -5 "$WORK/$name.log"; failed+=" $name"; continue; }
        grep -m2 -E 'collectives|host copies' "$WORK/$name.log"
        py -c 'import json, sys; assert json.load(open(sys.argv[1]))["world_size"] == 2' "$WORK/$name/run.json" &&
            compare $base "$name" 1e-3 || failed+=" $name"
    done
    [ -z "$failed" ] || { echo "failed:$failed"; return 1; }
    echo "2 ranks at stage 3 (host copies, device arrays; LoRA's base) and stage 2 within 1e-3 of one rank"
}

# the KV-cached decoder on the device: greedy text, then GRPO's side-by-side completions
generation() {
    local d=$WORK/gen tok=$ROOT/tests/fixtures/tokenizers/bpe_llama3 where text_cpu text_dev
    mkdir -p "$d"
    "$ZT" init --arch llama --out "$d/model" --seed 2 hidden_size=256 intermediate_size=512 num_hidden_layers=2 \
        num_attention_heads=4 num_key_value_heads=2 vocab_size=1024 max_position_embeddings=128 bos_token_id=0 \
        eos_token_id=3 tie_word_embeddings=false > /dev/null 2>&1 || return 1
    cp "$tok/tokenizer.json" "$tok/tokenizer_config.json" "$d/model/"
    for where in cpu "$DEVICE"; do
        OMP_NUM_THREADS=8 "$ZT" generate --model "$d/model" --prompt "the quick brown fox" --max-new-tokens 24 \
            --device "$where" > "$d/text-$where" || return 1
    done
    text_cpu=$(cat "$d/text-cpu") text_dev=$(cat "$d/text-$DEVICE")
    echo "greedy: '$text_cpu'"
    [ "$text_cpu" = "$text_dev" ] || { echo "greedy text on $DEVICE differs: '$text_dev'"; return 1; }
    py -c 'import json
for w in ["the fox", "a red cat", "hello there", "one two three", "green trees", "blue sky", "fast cars", "old books"]:
    print(json.dumps({"prompt": [{"role": "user", "content": w}]}))' > "$d/prompts.jsonl"
    printf '%s\n' 'import json, sys' 'for line in sys.stdin:' \
        '    print(len(json.loads(line)["completion"]) / 40, flush=True)' > "$d/reward.py"
    printf '%s\n' '[model]' "path = \"$d/model\"" 'dtype = "fp32"' '[tokenizer]' 'chat_template = "chatml"' '[data]' \
        "train = \"$d/prompts.jsonl\"" 'format = "prompt"' 'max_length = 64' "cache_dir = \"$d/cache\"" '[train]' \
        'max_steps = 2' 'micro_batch_size = 8' 'learning_rate = 1e-4' 'logging_steps = 1' 'eval_steps = 0' '[rlhf]' \
        'algorithm = "grpo"' 'num_generations = 4' 'max_new_tokens = 16' 'beta = 0.04' \
        "reward_command = \"env LD_LIBRARY_PATH=${ZT_GPU_SYSTEM_LD_LIBRARY_PATH-${LD_LIBRARY_PATH:-}} python3 $d/reward.py\"" '[output]' 'overwrite = true' 'tensorboard = false' \
        > "$d/grpo.toml"
    for where in cpu "$DEVICE"; do
        echo "--- zt rlhf (GRPO) model.device=$where"
        OMP_NUM_THREADS=8 "$ZT" rlhf "$d/grpo.toml" model.device="$where" \
            output.dir="$WORK/grpo-$where" || return 1
    done
    # the same completions (their logits agree far inside a sampling boundary), so the same
    # rewards; the gradient norms within 1e-3 (the loss itself is near 0: advantages sum to 0)
    py - "$WORK/grpo-cpu" "$WORK/grpo-$DEVICE" <<'EOF'
import json, sys
a, b = ([r for r in map(json.loads, open(d + "/metrics.jsonl")) if "split" not in r] for d in sys.argv[1:])
for x, y in zip(a, b):
    print(f"step {x['step']}: reward {x['reward_mean']:.6f} {y['reward_mean']:.6f}, grad norm {x['grad_norm']:.6f} "
          f"{y['grad_norm']:.6f}, generated tokens/s {x['generate_tokens_per_s']:.0f} {y['generate_tokens_per_s']:.0f}")
ok = len(a) == len(b) == 2 and all(x["reward_mean"] == y["reward_mean"] and
                                     abs(x["grad_norm"] - y["grad_norm"]) <= 1e-3 * x["grad_norm"] for x, y in zip(a, b))
print("GRPO: the same rewards, gradient norms within 1e-3" if ok else "GRPO differs")
sys.exit(0 if ok else 1)
EOF
}

# offload on the GPU, each tier against the run without it (the "cuda vs cpu" parts' device runs): the
# optimizer's state on the host or NVMe (the gradient down and the weights up in windows beside the
# host's AdamW), the weights' slices too (stage 3 in one process: units uploaded ahead on the copy
# stream, gradients downloaded as each unit's backward ends, granules pooled); fp32 within 1e-5,
# bf16 within 2e-2, with each run's GPU peak
offload() {
    local dtype tol name failed="" nvme=$WORK/nvme
    mkdir -p "$nvme"
    for dtype in fp32 bf16; do
        [ $dtype = fp32 ] && tol=1e-5 || tol=2e-2
        for name in optimizer-cpu optimizer-nvme param-cpu param-nvme; do
            local keys=(model.device="$DEVICE" model.dtype=$dtype offload.nvme_path="[\"$nvme\"]")
            case $name in
                optimizer-cpu) keys+=(offload.optimizer=cpu) ;;
                optimizer-nvme) keys+=(offload.optimizer=nvme) ;;
                param-cpu) keys+=(zero.stage=3 offload.param=cpu offload.optimizer=cpu) ;;
                param-nvme) keys+=(zero.stage=3 offload.param=nvme offload.optimizer=nvme) ;;
            esac
            train "$name-$dtype" "${keys[@]}" && compare "$DEVICE-$dtype" "$name-$dtype" $tol || failed+=" $name-$dtype"
        done
    done
    py -c 'import json, sys
for d in sys.argv[1:]:
    print(d.rsplit("/", 1)[1], "device_peak_bytes", json.load(open(d + "/summary.json"))["device_peak_bytes"])' \
        "$WORK/$DEVICE-fp32" "$WORK"/*-fp32 2>/dev/null | sort -u
    [ -z "$failed" ] || { echo "failed:$failed"; return 1; }
    echo "optimizer cpu/nvme, param cpu/nvme: fp32 within 1e-5, bf16 within 2e-2 of no offload"
}

if [ "$1" = --part ]; then
    shift
    "$@"
    exit
fi

# --- the run: every part in its own process under a time limit ---------------------------------------
names=() results=() details=()
part() {
    local name=$1 limit=$2 rc
    shift 2
    printf '\n=== %s\n' "$name"
    timeout -k 10 "$limit" bash "$SELF" --part "$@" > "$WORK/part.out" 2>&1
    rc=$?
    [ $rc = 124 ] || [ $rc = 137 ] && echo "timed out after $limit s" >> "$WORK/part.out"
    cat "$WORK/part.out"
    names+=("$name")
    case $rc in 0) results+=(pass) ;; 77) results+=(skip) ;; *) results+=("FAIL ($rc)") ;; esac
    details+=("$(grep -v '^[[:space:]]*$' "$WORK/part.out" | tail -1 | cut -c1-120 | tr '|' '/')")
}
part machine 20 machine
part test_cuda_ops 70 gpu_test test_cuda_ops
part test_cuda_quant 40 gpu_test test_cuda_quant
part test_cuda_attention_bf16 60 gpu_test test_cuda_attention_bf16
part "tiny model" 20 tiny_model
part "cuda vs cpu fp32" 40 cuda_vs_cpu fp32 1e-3
part "cuda vs cpu bf16" 40 cuda_vs_cpu bf16 2e-2
part "families, LoRA" 150 variants
part generation 60 generation
part offload 120 offload
part "zero 2 ranks vs 1" 110 zero3
part nccl 40 gpu_test test_nccl

{
    echo "| part | result | detail |"
    echo "|---|---|---|"
    for i in "${!names[@]}"; do echo "| ${names[$i]} | ${results[$i]} | ${details[$i]} |"; done
} > "$OUT/summary.md"
echo
cat "$OUT/summary.md"
for r in "${results[@]}"; do [[ $r != FAIL* ]] || exit 1; done
