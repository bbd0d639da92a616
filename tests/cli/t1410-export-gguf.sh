#!/usr/bin/env bash
# zt export --format gguf: the files of the models of tests/fixtures/gguf/models.sh (Qwen3's,
# SmolLM2's, GPT-2's, Mistral's and Phi-3.5's real tokenizers; Gemma and Gemma 2; fp32, fp16, bf16,
# Q8_0) hold what llama.cpp's own converter writes, key by key and tensor by tensor (make_gguf.py
# wrote its files' contents: Mistral's token scores and the Phi-3 and Gemma files zt's own, once
# llama.cpp tokenized with them as Hugging Face and computed transformers' logits); a run's checkpoint and
# a LoRA run merged export as their Hugging Face exports do; bad input exits 2 and leaves no file.
# kernel levels: own only (the export converts in plain C; the runs it exports are compared with each other)
. "$(dirname "$0")/lib.sh"
FX=$ROOT/tests/fixtures
. "$FX/gguf/models.sh"
gguf_models "$ZT" "$FX" models 2>/dev/null || fail "the models of models.sh"

# contents FILE: zt-test-tool's lines without the name and the converter's add_sep_token false
# (nothing added between two texts, llama.cpp's default); then a flag only one side writes is
# dropped from both: zt writes add_bos/add_eos false where the tokenizer says nothing (Hugging
# Face's encode then adds nothing), the converter add_space_prefix from tokenizer_config.json,
# zt from the tokenizer's Metaspace or Prepend ("llama" tokenizers), each llama.cpp's default there
contents() { grep -vE '^kv (general\.name |general\.size_label |tokenizer\.ggml\.add_sep_token 7 00$)' "$1" | sort; }
flags() { grep -oE '^kv tokenizer\.ggml\.add_(bos_token|eos_token|space_prefix) ' "$1" | sort; }
same_contents() { # WHAT REFERENCE_LINES FILE
  test_tool gguf "$3" > got.txt || { fail "$1: zt-test-tool gguf $3"; return; }
  contents "$2" > want.s
  contents got.txt > got.s
  comm -3 <(flags want.s) <(flags got.s) | sed 's/^\t//' > one-sided
  grep -vFf one-sided want.s > want.t; grep -vFf one-sided got.s > got.t
  [ -s one-sided ] || { cp want.s want.t; cp got.s got.t; }
  if cmp -s want.t got.t; then say "ok - $1: the $(wc -l < got.t) keys and tensors of the fixture"
  else fail "$1 differs (< the converter, > zt):"; diff want.t got.t | head -20 >&2; fi
}

# under the sanitizers, the types once each: the other qwen3 files are the same code on the largest
# vocabulary again
san=0
[ "$(basename "$ZT")" = zt-san ] && san=1
while read -r model dtype; do
  [ $san = 1 ] && [ "$model $dtype" != "qwen3 q8_0" ] && [ "$model" = qwen3 ] && continue
  expect_ok "export $model $dtype" "$ZT" export "models/$model" --format gguf --dtype "$dtype" --out "$model-$dtype.gguf"
  same_contents "$model $dtype" "$FX/gguf/$model-$dtype.txt" "$model-$dtype.gguf"
done < <(gguf_cases)

# a full fine-tune's newest checkpoint, and a LoRA run merged: as their Hugging Face exports
$PY - <<'PY'
import json
with open("data.jsonl", "w") as f:
    for i in range(8):
        f.write(json.dumps({"input_ids": [(i * 7919 + j * 104729) % 49152 for j in range(24)]}) + "\n")
PY
recipe() { printf '[model]\npath = "models/llama"\ndtype = "fp32"\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 32\n[train]\nmax_steps = 3\nsave_steps = 2\nmicro_batch_size = 2\nlearning_rate = 1e-2\n%b' "$1"; }
recipe '' > full.toml
recipe '[lora]\nr = 4\nalpha = 8\ntarget_modules = "all-linear"\n' > lora.toml
expect_ok "full fine-tuning" "$ZT" pretrain full.toml output.dir=full
expect_ok "LoRA" "$ZT" pretrain lora.toml output.dir=lora
# same_as_hf WHAT GGUF HF_DIR: the GGUF of HF_DIR (an fp32 export) has GGUF's keys and tensors
same_as_hf() {
  expect_ok "$1: GGUF of the Hugging Face export" "$ZT" export "$3" --format gguf --dtype q8_0 --out via-hf.gguf
  test_tool gguf "$2" | grep -v '^kv general.name ' > a.txt
  test_tool gguf via-hf.gguf | grep -v '^kv general.name ' > b.txt
  [ -s a.txt ] && cmp -s a.txt b.txt && say "ok - $1: the same file as through the Hugging Face export" || fail "$1 differs from the GGUF of $3"
}
expect_ok "export the run (its checkpoint)" env ZT_LOG=info "$ZT" export full --format gguf --dtype q8_0 --out full.gguf
grep -q "step 2" "$TMP/err" || fail "the run's export is not its step-2 checkpoint: $(cat "$TMP/err")"
expect_ok "export the run as Hugging Face" "$ZT" export full --dtype fp32 --out full-hf
same_as_hf "a checkpoint" full.gguf full-hf
expect_ok "export --merge of the LoRA run" "$ZT" export lora --merge --format gguf --dtype q8_0 --out merged.gguf
expect_ok "export --merge as Hugging Face" "$ZT" export lora --merge --dtype fp32 --out merged-hf
same_as_hf "a merged LoRA run" merged.gguf merged-hf
test_tool gguf merged.gguf | grep '^tensor' > merged.txt
test_tool gguf llama-q8_0.gguf | grep '^tensor' > base.txt
[ ! -s merged.txt ] || cmp -s merged.txt base.txt && fail "the merged model's tensors are the base's" || say "ok - the merged model's tensors are not the base's"

# bad input: exit 2 naming the file and key, no file left behind
"$ZT" init --arch olmo2 --out olmo2 --seed 1 hidden_size=32 intermediate_size=64 num_hidden_layers=1 \
  num_attention_heads=2 num_key_value_heads=1 vocab_size=64 >/dev/null 2>&1 || fail "zt init olmo2"
expect_exit 2 "an olmo2 model" "config.json': model_type 'olmo2'" "$ZT" export olmo2 --format gguf --out bad.gguf
cp -r models/gemma2 nocap && sed -i 's/"attn_logit_softcapping":[^,]*,/"attn_logit_softcapping": null,/' nocap/config.json
expect_exit 2 "Gemma 2 without soft-capping" "config.json': attn_logit_softcapping: llama.cpp's Gemma 2 always" \
  "$ZT" export nocap --format gguf --out bad.gguf
cp -r models/gpt2 notok && rm notok/tokenizer.json
expect_exit 2 "no tokenizer.json" "notok': no tokenizer.json" "$ZT" export notok --format gguf --out bad.gguf
cp -r models/mistral spm && sed -i 's/"split": *false/"split": true/' spm/tokenizer.json
cmp -s spm/tokenizer.json models/mistral/tokenizer.json && fail "the Metaspace edit changed nothing"
expect_exit 2 "a Metaspace that splits" "tokenizer.json': normalizer, pre_tokenizer: spaces not handled" \
  "$ZT" export spm --format gguf --out bad.gguf
cp -r models/gpt2 wp && gzip -dc "$FX/tokenizers/real/gpt2/tokenizer.json.gz" | sed 's/"type": *"BPE"/"type": "WordPiece"/' > wp/tokenizer.json
expect_exit 2 "a WordPiece tokenizer" "tokenizer.json': model: zt writes GGUF for BPE tokenizers" \
  "$ZT" export wp --format gguf --out bad.gguf
# Qwen2's pre-tokenizer on 300 pieces (tests/fuzz/corpus/tokenizer/qwen2-small.json): its regex
# changed, and its first added token's id past the vocabulary
small=$ROOT/tests/fuzz/corpus/tokenizer/qwen2-small.json
cp -r models/gpt2 regex && sed 's/\\\\p{N}| ?/\\\\p{N}{1,2}| ?/' "$small" > regex/tokenizer.json
cmp -s regex/tokenizer.json "$small" && fail "the regex edit changed nothing"
expect_exit 2 "an unknown pre-tokenizer" "tokenizer.json': pre_tokenizer" "$ZT" export regex --format gguf --out bad.gguf
cp -r models/gpt2 big && sed 's/"id": *300,/"id": 50257,/' "$small" > big/tokenizer.json
cmp -s big/tokenizer.json "$small" && fail "the id edit changed nothing"
expect_exit 2 "a token id past vocab_size" "tokenizer.json': added_tokens: an id not below config.json's vocab_size 50257" \
  "$ZT" export big --format gguf --out bad.gguf
expect_exit 2 "--dtype q4_0" "dtype 'q4_0': GGUF export writes fp32, fp16, bf16 or q8_0" \
  "$ZT" export models/gpt2 --format gguf --dtype q4_0 --out bad.gguf
expect_exit 2 "--dtype q8_0 without gguf" "dtype 'q8_0'" "$ZT" export models/gpt2 --dtype q8_0 --out bad
expect_exit 2 "--format onnx" "--format 'onnx' is not hf or gguf" "$ZT" export models/gpt2 --format onnx --out bad.gguf
if [ -e bad.gguf ] || [ -e bad ]; then fail "a refused export left a file"; else say "ok - refused exports left no file"; fi
ls -a | grep -q '\.tmp' && fail "a temporary file was left: $(ls -a)"
done_testing
