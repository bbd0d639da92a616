#!/usr/bin/env bash
# zt export --format gguf: the files of the models of tests/fixtures/gguf/models.sh (Qwen3's,
# SmolLM2's, GPT-2's, Mistral's and Phi-3.5's real tokenizers; Gemma, Gemma 2 and Gemma 3; the
# mixtures of experts Qwen3-MoE, Qwen2-MoE, Mixtral and OLMoE; OLMo 2, SmolLM3, Granite; fp32, fp16,
# bf16, Q8_0) hold what llama.cpp's own converter writes, key by key and tensor by tensor (make_gguf.py
# wrote its files' contents: Mistral's token scores and the Phi-3 and Gemma files zt's own, once
# llama.cpp tokenized with them as Hugging Face and computed transformers' logits); a run's checkpoint and
# a LoRA run merged export as their Hugging Face exports do, LoRA adapters as llama.cpp's LoRA
# converter writes them; bad input exits 2 and leaves no file.
# kernel levels: own only (the export converts in plain C; the runs it exports are compared with each other)
. "$(dirname "$0")/lib.sh"
FX=$ROOT/tests/fixtures
. "$FX/gguf/models.sh"
small=$ROOT/tests/fuzz/corpus/tokenizer/qwen2-small.json # Qwen2's pre-tokenizer on 300 pieces
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

# under the sanitizers, the types once each, and no more of the largest vocabulary than the older
# models' (its tokenizer's million JSON nodes take 20 s there): the other qwen3 files, Qwen3-MoE's,
# Qwen2-MoE's and Gemma 3's are the same code again (Mixtral's and OLMoE's experts, Gemma 2's keys),
# as are SmolLM3's and Granite's but for a few keys
san=0
[ "$(basename "$ZT")" = zt-san ] && san=1
while read -r model dtype; do
  [ $san = 1 ] && [ "$model $dtype" != "qwen3 q8_0" ] && [ "$model" = qwen3 ] && continue
  [ $san = 1 ] && case $model in qwen3_moe | qwen2_moe | gemma3 | smollm3 | granite) continue ;; esac
  expect_ok "export $model $dtype" "$ZT" export "models/$model" --format gguf --dtype "$dtype" --out "$model-$dtype.gguf"
  same_contents "$model $dtype" "$FX/gguf/$model-$dtype.txt" "$model-$dtype.gguf"
done < <(gguf_cases)

# what the converter's files do not show: Gemma 3's windows on another pattern than llama.cpp
# assumes (every third layer global) named; Qwen2-MoE's tied head written, which llama.cpp requires
# (under the sanitizers left out: two more exports of a vocabulary of 150K, the same code)
if [ $san = 0 ]; then
  cp -r models/gemma3 g3pattern && sed -i 's/"sliding_window_pattern":[^,]*,/"sliding_window_pattern": 3,/' g3pattern/config.json
  expect_ok "export Gemma 3 windowed on a pattern of 3" "$ZT" export g3pattern --format gguf --out g3pattern.gguf
  test_tool gguf g3pattern.gguf | grep -q '^kv gemma3.attention.sliding_window_pattern 4 03000000$' &&
    say "ok - the pattern of 3 is in the file" || fail "gemma3.attention.sliding_window_pattern is not 3"
  cp -r models/qwen2_moe tied && sed -i 's/"tie_word_embeddings":[^,]*,/"tie_word_embeddings": true,/' tied/config.json
  expect_ok "export a tied Qwen2-MoE" "$ZT" export tied --format gguf --dtype fp16 --out tied.gguf
  test_tool gguf tied.gguf > tied.txt
  embd=$(sed -n 's/^tensor token_embd.weight //p' tied.txt); head=$(sed -n 's/^tensor output.weight //p' tied.txt)
  [ -n "$embd" ] && [ "$embd" = "$head" ] && say "ok - the tied head is written as the embedding" ||
    fail "the tied head ($head) is not the embedding ($embd)"
fi

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

# LoRA adapters as GGUF adapters (llama.cpp's --lora): PEFT's tests/fixtures/lora/adapter as
# llama.cpp's LoRA converter writes it; rsLoRA's scale alpha / sqrt(r) as alpha·sqrt(r) over r (the
# converter ignores use_rslora); the LoRA run's final/, every adapted matrix's A and B; DoRA refused
LA=$ROOT/tests/fixtures/lora
expect_ok "export a PEFT adapter as GGUF" "$ZT" export "$LA/adapter" --base "$LA/base" --format gguf --dtype q8_0 \
  --out adapter.gguf
same_contents "the adapter" "$FX/gguf/lora-adapter-q8_0.txt" adapter.gguf
cp -r "$LA/adapter" rslora && sed -i 's/"use_rslora": false/"use_rslora": true/' rslora/adapter_config.json
expect_ok "export an rsLoRA adapter" "$ZT" export rslora --base "$LA/base" --format gguf --out rslora.gguf
test_tool gguf rslora.gguf | grep -q '^kv adapter.lora.alpha 6 00008041$' && say "ok - rsLoRA's alpha is 8·sqrt(4)" ||
  fail "rsLoRA's adapter.lora.alpha is not 16: $(test_tool gguf rslora.gguf | grep alpha)"
expect_ok "export the LoRA run's adapter" "$ZT" export lora --format gguf --out lora-adapter.gguf
[ "$(test_tool gguf lora-adapter.gguf | grep -c '^tensor blk\.[01]\.[a-z_]*\.weight\.lora_[ab] ')" = 28 ] &&
  say "ok - the run's adapter has A and B of its 14 matrices" || fail "the run's adapter: $(test_tool gguf lora-adapter.gguf | grep -c '^tensor')"
expect_exit 2 "a DoRA adapter" "dora': use_dora: llama.cpp's adapters are LoRA's A and B alone" \
  "$ZT" export "$LA/dora" --base "$LA/base" --format gguf --out bad.gguf

# Gemma 3's image-text checkpoint (tests/fixtures/lora/gemma3-vision/base): its language model, as the
# same model saved as a Gemma3ForCausalLM (the language_model. tensors renamed, text_config for
# config.json, pad_token_id at Gemma3TextConfig's default, as transformers would save it), the vision
# tower left out; with a 64-id tokenizer (tests/fixtures/gguf/tiny_tokenizer.py) whose added
# tokens' texts are also vocabulary entries of other ids, which become "[PADi]" (llama.cpp needs each
# text once): as a tokenizer that has those texts at the added ids only
$PY "$FX/gguf/tiny_tokenizer.py" "$small" tiny.json || fail "tiny_tokenizer.py"
$PY - "$ROOT/tests/fixtures/lora/gemma3-vision/base" tiny.json <<'PY'
import json, os, shutil, struct, sys
base, tiny = sys.argv[1:3]
t = json.load(open(tiny))
keep = t["model"]["vocab"]
shutil.copytree(base, "vision")
os.makedirs("text")
c = json.load(open(os.path.join(base, "config.json")))
json.dump(dict({"pad_token_id": 0}, **c["text_config"], architectures=["Gemma3ForCausalLM"]), open("text/config.json", "w"))
blob = open(os.path.join(base, "model.safetensors"), "rb").read()
n = struct.unpack("<Q", blob[:8])[0]
header, out, data, at = json.loads(blob[8:8 + n]), {}, [], 0
for k, e in sorted(header.items()):
    if k.startswith("language_model."):
        b = blob[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]]
        out[k[len("language_model."):]] = {"dtype": e["dtype"], "shape": e["shape"], "data_offsets": [at, at + len(b)]}
        at += len(b)
        data.append(b)
h = json.dumps(out).encode()
h += b" " * (-len(h) % 8)
open("text/model.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + b"".join(data))
json.dump(t, open("vision/tokenizer.json", "w"))
json.dump(t, open("text/tokenizer.json", "w"))
dups = {a["content"] for a in t["added_tokens"]} & set(keep)
assert dups, "no added token's text is in the vocabulary"
t["model"]["vocab"] = {("[PAD%d]" % v if k in dups else k): v for k, v in keep.items()}
os.makedirs("unique")
json.dump(t, open("unique/tokenizer.json", "w"))
PY
cp text/config.json text/model.safetensors unique/
for m in vision text unique; do
  expect_ok "export the $m model" "$ZT" export $m --format gguf --dtype q8_0 --out $m.gguf
  test_tool gguf $m.gguf | grep -v '^kv general.name ' > $m.txt
done
[ -s vision.txt ] && cmp -s vision.txt text.txt && say "ok - an image-text Gemma 3 is its language model" ||
  fail "the image-text Gemma 3's file is not its language model's: $(diff vision.txt text.txt | head -5)"
[ "$(grep -c '^tensor ' vision.txt)" = 28 ] || fail "not the language model's 28 tensors: $(grep -c '^tensor ' vision.txt)"
grep '^kv tokenizer.ggml.tokens ' text.txt > a.txt; grep '^kv tokenizer.ggml.tokens ' unique.txt > b.txt
[ -s a.txt ] && cmp -s a.txt b.txt && say "ok - a vocabulary entry of an added token's text is a placeholder" ||
  fail "the tokens with an added token's text in the vocabulary: $(cat a.txt b.txt)"
# a run's checkpoint (the language model alone): no --base, the same file as its Hugging Face export's
random_tokens vision.jsonl 4 12 60
printf '[model]\npath = "vision"\ndtype = "fp32"\n[data]\ntrain = "vision.jsonl"\nformat = "tokens"\nmax_length = 16\n[train]\nmax_steps = 3\nsave_steps = 2\nmicro_batch_size = 2\nlearning_rate = 1e-2\n' > vision.toml
expect_ok "fine-tune the image-text Gemma 3" "$ZT" pretrain vision.toml output.dir=vision-run
expect_ok "export its checkpoint as GGUF" "$ZT" export vision-run --format gguf --dtype q8_0 --out vision-run.gguf
expect_ok "export its checkpoint as Hugging Face" "$ZT" export vision-run --base vision --dtype fp32 --out vision-hf
cp vision/tokenizer.json vision-hf/
same_as_hf "an image-text run's checkpoint" vision-run.gguf vision-hf
expect_exit 2 "--base with GGUF" "--base: a GGUF file holds the language model alone" \
  "$ZT" export vision-run --base vision --format gguf --out bad.gguf

# bad input: exit 2 naming the file and key, no file left behind
"$ZT" init --arch glm4 --out glm4 --seed 1 hidden_size=32 intermediate_size=64 num_hidden_layers=1 \
  num_attention_heads=2 num_key_value_heads=1 vocab_size=64 >/dev/null 2>&1 || fail "zt init glm4"
expect_exit 2 "a glm4 model" "config.json': model_type 'glm4'" "$ZT" export glm4 --format gguf --out bad.gguf
# refused WHAT MODEL EDIT PATTERN: models/MODEL with the sed EDIT on its config.json exits 2 (PATTERN)
refused() {
  rm -rf edited && cp -r "models/$2" edited && sed -i "$3" edited/config.json
  cmp -s edited/config.json "models/$2/config.json" && fail "$1: the edit changed nothing"
  expect_exit 2 "$1" "$4" "$ZT" export edited --format gguf --out bad.gguf
}
refused "Gemma 2 without soft-capping" gemma2 's/"attn_logit_softcapping":[^,]*,/"attn_logit_softcapping": null,/' \
  "config.json': attn_logit_softcapping: llama.cpp's Gemma 2 always"
refused "Qwen3-MoE without renormalised experts" qwen3_moe 's/"norm_topk_prob":[^,]*,/"norm_topk_prob": false,/' \
  "config.json': norm_topk_prob: llama.cpp's qwen3_moe always"
# llama.cpp knows Gemma 2 27B by its 46 layers and scales its queries by (hidden_size / heads)^-1/2
refused "a 46-layer Gemma 2 scaled by head_dim" gemma2 \
  's/"num_hidden_layers":[^,]*,/"num_hidden_layers": 46,/; s/"head_dim":[^,]*,/"head_dim": 8,/; s/"query_pre_attn_scalar":[^,]*,/"query_pre_attn_scalar": 8,/' \
  "config.json': query_pre_attn_scalar: llama.cpp scales gemma2's scores by 16"
refused "SmolLM3 with the rotary embedding left out of layer 0" smollm3 \
  's/"no_rope_layers":[^]]*],/"no_rope_layers": [0, 1, 1, 0, 1],/' \
  "config.json': no_rope_layers: llama.cpp's SmolLM3 leaves the rotary embedding out of every fourth layer"
refused "Granite with heads of another size" granite 's/"head_dim":[^,]*,/"head_dim": 8,/' \
  "config.json': head_dim: llama.cpp's granite has heads of hidden_size / num_attention_heads"
refused "an untied Gemma 2" gemma2 's/"tie_word_embeddings":[^,]*,/"tie_word_embeddings": false,/' \
  "config.json': tie_word_embeddings: llama.cpp's gemma2's head is its embedding"
refused "Llama 3's rope scaling on a qwen3" qwen3 \
  's/"rope_scaling":[^,]*,/"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 256},/' \
  "config.json': rope_scaling type 'llama3': zt writes GGUF of qwen3 with linear"
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
cp -r models/gpt2 regex && sed 's/\\\\p{N}| ?/\\\\p{N}{1,2}| ?/' "$small" > regex/tokenizer.json
cmp -s regex/tokenizer.json "$small" && fail "the regex edit changed nothing"
expect_exit 2 "an unknown pre-tokenizer" "tokenizer.json': pre_tokenizer" "$ZT" export regex --format gguf --out bad.gguf
cp -r models/gpt2 big && sed 's/"id": *300,/"id": 50257,/' "$small" > big/tokenizer.json
cmp -s big/tokenizer.json "$small" && fail "the id edit changed nothing"
expect_exit 2 "a token id past vocab_size" "tokenizer.json': added_tokens: an id not below config.json's vocab_size 50257" \
  "$ZT" export big --format gguf --out bad.gguf
cp -r models/gpt2 twice && $PY - "$small" twice/tokenizer.json <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t["added_tokens"][1]["content"] = t["added_tokens"][0]["content"]
json.dump(t, open(sys.argv[2], "w"))
PY
expect_exit 2 "two added tokens of one text" "tokenizer.json': model.vocab, added_tokens: ids" \
  "$ZT" export twice --format gguf --out bad.gguf
expect_exit 2 "--dtype q4_0" "dtype 'q4_0': GGUF export writes fp32, fp16, bf16 or q8_0" \
  "$ZT" export models/gpt2 --format gguf --dtype q4_0 --out bad.gguf
expect_exit 2 "--dtype q8_0 without gguf" "dtype 'q8_0'" "$ZT" export models/gpt2 --dtype q8_0 --out bad
expect_exit 2 "--format onnx" "--format 'onnx' is not hf or gguf" "$ZT" export models/gpt2 --format onnx --out bad.gguf
if [ -e bad.gguf ] || [ -e bad ]; then fail "a refused export left a file"; else say "ok - refused exports left no file"; fi
ls -a | grep -q '\.tmp' && fail "a temporary file was left: $(ls -a)"
done_testing
