#!/usr/bin/env bash
# bench/gguf.sh: zt export --format gguf against llama.cpp's convert_hf_to_gguf.py on the same
# model directory, one after the other on the same machine: wall time, peak RSS, and whether the
# two files hold the same keys and tensors (zt-test-tool gguf; docs/export.md says what may differ).
# Model: Qwen3-0.6B's shape (zt init --arch qwen3: hidden 1024, 28 layers, 16/8 heads of 128,
# intermediate 3072, tied; 596M parameters, random weights, bf16, kept under build/bench/gguf)
# with Qwen3's real tokenizer (151,669 tokens, 151,387 merges) and a chat template.
#     LLAMA_CPP=DIR PYTHON=VENV/bin/python bash bench/gguf.sh
# DIR holds convert_hf_to_gguf.py (llama.cpp, or llama-cpp-python's vendor/llama.cpp), PYTHON has
# torch, transformers and numpy; without them only zt is measured. Not in `make bench`.
set -u
cd "$(dirname "$0")/.."
OUT=$PWD/build/bench/gguf
. bench/lib.sh
. bench/record.sh
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
TOOL=build/zt-test-tool
[ -x "$TOOL" ] || { log "$TOOL is not built (make tests)"; exit 1; }

if [ ! -f "$OUT/model/config.json" ]; then
    log "zt init: Qwen3-0.6B's shape"
    ./zt init --arch qwen3 --out "$OUT/model" --seed 1 --dtype bf16 hidden_size=1024 intermediate_size=3072 \
        num_hidden_layers=28 num_attention_heads=16 num_key_value_heads=8 head_dim=128 vocab_size=151936 \
        tie_word_embeddings=true bos_token_id=151643 eos_token_id=151645 >"$OUT/init.log" 2>&1 \
        || { log "zt init failed: see $OUT/init.log"; exit 1; }
    gzip -dc tests/fixtures/tokenizers/real/qwen3/tokenizer.json.gz > "$OUT/model/tokenizer.json"
    cp tests/fixtures/gguf/qwen3/tokenizer_config.json "$OUT/model/"
fi

# run NAME COMMAND...: "wall_s peak_rss_kb" of the command into $OUT/NAME.time
run() {
    local name=$1; shift
    /usr/bin/time -f '%e %M' -o "$OUT/$name.time" "$@" > "$OUT/$name.log" 2>&1 || { log "$name failed: see $OUT/$name.log"; echo "- -" > "$OUT/$name.time"; }
}
contents() { "$TOOL" gguf "$1" 2>/dev/null | grep -vE '^kv (general\.name|general\.size_label|tokenizer\.ggml\.add_(bos|eos|space_prefix)_token|tokenizer\.ggml\.add_space_prefix) ' | sort; }

ROWS=""
for dtype in bf16 q8_0; do
    log "zt export, $dtype"
    rm -f "$OUT/zt-$dtype.gguf"
    run "zt-$dtype" ./zt export "$OUT/model" --format gguf --dtype "$dtype" --out "$OUT/zt-$dtype.gguf"
    read -r zt_s zt_kb < "$OUT/zt-$dtype.time"
    conv="| convert_hf_to_gguf.py | $dtype | not run (set LLAMA_CPP and PYTHON) | | | |"
    if [ -n "${LLAMA_CPP:-}" ] && [ -n "${PYTHON:-}" ]; then
        log "convert_hf_to_gguf.py, $dtype"
        rm -f "$OUT/ref-$dtype.gguf"
        run "ref-$dtype" "$PYTHON" "$LLAMA_CPP/convert_hf_to_gguf.py" "$OUT/model" --outtype "$dtype" --outfile "$OUT/ref-$dtype.gguf"
        read -r ref_s ref_kb < "$OUT/ref-$dtype.time"
        same=differ
        contents "$OUT/zt-$dtype.gguf" > "$OUT/a.txt"; contents "$OUT/ref-$dtype.gguf" > "$OUT/b.txt"
        [ -s "$OUT/a.txt" ] && cmp -s "$OUT/a.txt" "$OUT/b.txt" && same="the same $(wc -l < "$OUT/a.txt") keys and tensors"
        conv="| convert_hf_to_gguf.py | $dtype | $ref_s s | $((ref_kb / 1024)) MiB | $(stat -c %s "$OUT/ref-$dtype.gguf" 2>/dev/null) | $same |"
    fi
    ROWS+="| zt export --format gguf | $dtype | $zt_s s | $((zt_kb / 1024)) MiB | $(stat -c %s "$OUT/zt-$dtype.gguf" 2>/dev/null) | |"$'\n'"$conv"$'\n'
done
TABLE="| writer | dtype | wall | peak RSS | bytes | contents |
|---|---|---:|---:|---:|---|
${ROWS%$'\n'}"
bench_record "GGUF export of Qwen3-0.6B's shape: zt against llama.cpp's converter (bench/gguf.sh)" \
    "- $(bench_cpu) threads ${OMP_NUM_THREADS:-all}; load average $LOAD; source bf16 safetensors (1.2 GB) with Qwen3's tokenizer; the converter: $(cd "${LLAMA_CPP:-.}" 2>/dev/null && basename "$(dirname "$(dirname "$PWD")")") with $("${PYTHON:-false}" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)' 2>/dev/null)" \
    "$TABLE"
