#!/usr/bin/env bash
# scripts/demo-prepare.sh: what recipes/demo-sft.toml names, in build/demo: the chat data
# (scripts/demo_data.py), a character-level SentencePiece tokenizer (spm_train) and a tiny
# model (zt init), and the same task as preference pairs and prompts for zt rlhf
# (scripts/demo_rl_data.py). Used by scripts/demo.sh and bench/zeropp.sh; needs ./zt built.
set -euo pipefail
cd "$(dirname "$0")/.."
d=build/demo
rm -rf "$d" && mkdir -p "$d"
/usr/bin/python3 scripts/demo_data.py "$d"
/usr/bin/python3 scripts/demo_rl_data.py "$d"
spm_train --input="$d/corpus.txt" --model_prefix="$d/tok" --vocab_size=60 --model_type=char \
    --user_defined_symbols='<|im_start|>,<|im_end|>' --hard_vocab_limit=false --minloglevel=2 >/dev/null 2>&1
./zt init --arch llama --out "$d/model" --seed 1 vocab_size=40 hidden_size=128 intermediate_size=352 \
    num_hidden_layers=4 num_attention_heads=4 num_key_value_heads=2 max_position_embeddings=256 \
    bos_token_id=1 eos_token_id=2
cp "$d/tok.model" "$d/model/tokenizer.model"
