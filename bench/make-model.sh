#!/usr/bin/env bash
# bench/make-model.sh: what bench/llama60m.toml names, under build/bench/: the model
# (zt init: hidden 512, 8 layers, 8 heads / 4 KV, intermediate 1408, vocab 32000, untied)
# and 64 sequences of 256 random token ids, the same every time. Made afresh each call.
# Used by bench/run.sh, bench/zero.sh and bench/zeropp.sh; needs ./zt built.
set -eu
cd "$(dirname "$0")/.."
rm -rf build/bench/model && mkdir -p build/bench
./zt init --arch llama --out build/bench/model --seed 1 hidden_size=512 intermediate_size=1408 \
    num_hidden_layers=8 num_attention_heads=8 num_key_value_heads=4 vocab_size=32000 \
    max_position_embeddings=256 tie_word_embeddings=false
/usr/bin/python3 -c '
import json, random
r = random.Random(1)
for _ in range(64):
    print(json.dumps({"input_ids": [r.randrange(32000) for _ in range(256)]}))' > build/bench/tokens.jsonl
