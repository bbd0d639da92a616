#!/usr/bin/env bash
# README's first command (also make demo): installs the Debian packages that are missing
# (make and the compiler too, so it runs on a bare Debian 12 machine), builds, makes the
# demo's data, a character-level SentencePiece tokenizer (spm_train) and a tiny
# model (zt init), fine-tunes it with zt sft on a chat task (reverse a word), and
# reports held-out exact-match accuracy and a sample conversation.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --packages
make -j2
scripts/demo-prepare.sh
d=build/demo
start=$(date +%s)
./zt sft recipes/demo-sft.toml
echo "demo: held-out accuracy (words never seen in training; guessing scores under 0.01%):"
./zt eval recipes/demo-sft.toml --checkpoint runs/demo-sft/final
echo "demo: trained and evaluated in $(( $(date +%s) - start )) s. A sample conversation:"
echo '{"messages": [{"role": "user", "content": "spell zebra in reverse"}]}' > "$d/sample.jsonl"
./zt generate --model runs/demo-sft/final --chat-template chatml --input "$d/sample.jsonl" --output - |
    /usr/bin/python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print("  user:      " + r["messages"][0]["content"]); print("  assistant: " + r["completion"].strip())'
