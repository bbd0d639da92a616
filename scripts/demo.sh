#!/usr/bin/env bash
# README's first command (make demo): installs what is missing, builds, makes the
# demo's data, a character-level SentencePiece tokenizer (spm_train) and a tiny
# model (zt init), fine-tunes it with zt sft on a chat task (reverse a word), and
# reports held-out exact-match accuracy and a sample conversation.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
make -j2
d=build/demo
rm -rf "$d" && mkdir -p "$d"
/usr/bin/python3 scripts/demo_data.py "$d"
spm_train --input="$d/corpus.txt" --model_prefix="$d/tok" --vocab_size=60 --model_type=char \
    --user_defined_symbols='<|im_start|>,<|im_end|>' --hard_vocab_limit=false --minloglevel=2 >/dev/null 2>&1
./zt init --arch llama --out "$d/model" --seed 1 vocab_size=40 hidden_size=128 intermediate_size=352 \
    num_hidden_layers=4 num_attention_heads=4 num_key_value_heads=2 max_position_embeddings=256 \
    bos_token_id=1 eos_token_id=2
cp "$d/tok.model" "$d/model/tokenizer.model"
start=$(date +%s)
./zt sft recipes/demo-sft.toml
echo "demo: held-out accuracy (words never seen in training; guessing scores under 0.01%):"
./zt eval recipes/demo-sft.toml --checkpoint runs/demo-sft/final
echo "demo: trained and evaluated in $(( $(date +%s) - start )) s. A sample conversation:"
echo '{"messages": [{"role": "user", "content": "spell zebra in reverse"}]}' > "$d/sample.jsonl"
./zt generate --model runs/demo-sft/final --chat-template chatml --input "$d/sample.jsonl" --output - |
    /usr/bin/python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print("  user:      " + r["messages"][0]["content"]); print("  assistant: " + r["completion"].strip())'
