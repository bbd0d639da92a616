#!/usr/bin/env bash
# zt generate with a PEFT adapter, not merged: --model BASE --adapter DIR, and --model DIR where DIR
# is the adapter (its base_model_name_or_path the base, as PEFT's AutoPeftModel takes it). Greedy
# completions equal those of the merged model (zt export --merge) for PEFT's LoRA and DoRA adapters
# of tests/fixtures/lora, for a QLoRA adapter (the base quantized and dequantized as its
# zt_quantization.json says, which changes the completion) and for a LoRA run's final/ on an NF4
# base (its own tokenizer), and for a QLoRA adapter of a mixture of experts (tests/fixtures/lora/moe:
# its router and experts quantized and adapted); zt eval's eval.generate answers with an adapter as with its merged
# model; bad adapters exit 2 with one line naming the file.
. "$(dirname "$0")/lib.sh"
need_cmd spm_train sentencepiece

F=$ROOT/tests/fixtures/lora
story="the quick brown fox jumps over the lazy dog and then runs far away into the green forest"
for i in $(seq 1 50); do echo "$story number $i is here"; echo "a small cat sleeps on the warm mat $i"; done > corpus.txt
spm_train --input=corpus.txt --model_prefix=tok --vocab_size=64 --model_type=bpe --minloglevel=2 >/dev/null 2>&1 \
  || { fail "spm_train"; done_testing; }
cp -r "$F/base" base && cp tok.model base/tokenizer.model  # the fixture's base (64 tokens) with a tokenizer
cp -r "$F/adapter" qlora && printf '{"quantize_base": "nf4", "double_quant": true, "block_size": 64}\n' > qlora/zt_quantization.json

# gen NAME ARGS...: the greedy completion of a fixed prompt, into NAME.txt
gen() {
  local name=$1; shift
  "$ZT" generate "$@" --prompt "the quick brown fox" --max-new-tokens 24 >"$name.txt" 2>"$TMP/err" \
    || { fail "generate $name (exit $?)"; cat "$TMP/err" >&2; }
}
# same NAME [BASE]: the adapter's completion is the merged model's, and not the base's (plain)
same() {
  local base=${2:-plain}
  if cmp -s "$1.txt" "merged-$1.txt" && ! cmp -s "$1.txt" $base.txt; then say "ok - $1: $(cat "$1.txt")"
  else fail "$1: adapter '$(cat "$1.txt")', merged '$(cat "merged-$1.txt")', base '$(cat $base.txt)'"; fi
}
gen plain --model base
for a in adapter dora qlora; do
  src=$F/$a && [ $a = qlora ] && src=qlora
  expect_ok "export --merge of $a" "$ZT" export "$src" --merge --base base --out merged-$a
  cp tok.model merged-$a/tokenizer.model
  gen $a --model base --adapter "$src"
  gen merged-$a --model merged-$a
  same $a
done
# on a device (the CPU posing as one): DoRA's norms computed there for the decoder, trainable
# tokens' rows written over the lookups and the tied head's logits, the same completions
ZT_CPU_AS_DEVICE=1 gen dora-dev --model base --adapter "$F/dora"
cp -r "$F/saved/tied/base" tied && cp tok.model tied/tokenizer.model
gen tokens --model tied --adapter "$F/tokens/tied/adapter"
ZT_CPU_AS_DEVICE=1 gen tokens-dev --model tied --adapter "$F/tokens/tied/adapter"
expect_ok "export --merge of tokens" "$ZT" export "$F/tokens/tied/adapter" --merge --base tied --out merged-tokens
cp tok.model merged-tokens/tokenizer.model
gen merged-tokens --model merged-tokens
gen plain-tied --model tied
same tokens plain-tied
cmp -s dora.txt dora-dev.txt && cmp -s tokens.txt tokens-dev.txt && say "ok - DoRA and trainable tokens on a device: the CPU's completions" \
  || fail "as a device: dora '$(cat dora-dev.txt)' for '$(cat dora.txt)', tokens '$(cat tokens-dev.txt)' for '$(cat tokens.txt)'"
cmp -s qlora.txt adapter.txt && fail "the QLoRA adapter's completion is the unquantized base's" \
  || say "ok - the QLoRA adapter ran on the quantized base"
# a mixture of experts: the KV-cache decoder routes each token through the quantized router and experts
cp -r "$F/moe/qwen3_moe/base" moe && cp tok.model moe/tokenizer.model
cp -r "$F/moe/qwen3_moe/adapter" qlora-moe && cp qlora/zt_quantization.json qlora-moe/
gen plain-moe --model moe
expect_ok "export --merge of qlora-moe" "$ZT" export qlora-moe --merge --base moe --out merged-qlora-moe
cp tok.model merged-qlora-moe/tokenizer.model
gen qlora-moe --model moe --adapter qlora-moe
gen merged-qlora-moe --model merged-qlora-moe
same qlora-moe plain-moe

# --model ADAPTER: the base from base_model_name_or_path
cp -r "$F/adapter" own && $PY -c "
import json; p = 'own/adapter_config.json'; c = json.load(open(p)); c['base_model_name_or_path'] = 'base'; json.dump(c, open(p, 'w'))"
gen own --model own
cmp -s own.txt adapter.txt && say "ok - --model ADAPTER_DIR runs the adapter on its base" || fail "--model own: $(cat own.txt)"

# a LoRA run's final/ on an NF4 base: its own tokenizer, its zt_quantization.json
$PY -c "
import json
ids = [int(x) for x in open('/dev/stdin').read().split()]
open('data.jsonl', 'w').write(json.dumps({'input_ids': [1] + ids + [2]}) + '\n')" < <(echo "$story" | spm_encode --model=tok.model --output_format=id)
printf '[model]\npath = "base"\ndtype = "fp32"\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 32\n[train]\nmax_steps = 30\nmicro_batch_size = 1\nlearning_rate = 3e-2\nlr_scheduler_type = "constant"\n[lora]\nr = 8\nalpha = 16\ntarget_modules = "all-linear"\nquantize_base = "nf4"\n' > q.toml
expect_ok "QLoRA run" "$ZT" pretrain q.toml output.dir=run
expect_ok "export --merge of the run" "$ZT" export run --merge --out merged-run
gen run --model run/final
gen merged-run --model merged-run
same run

# eval.generate with an adapter (zt eval --checkpoint ADAPTER, lora.adapter): a LoRA run that
# memorised four answers gives them all (the base none), as its merged model does
$PY - <<'PY'
import json
with open("chat.jsonl", "w") as f, open("chat-corpus.txt", "w") as c:
    for a in ("abcd", "bead", "cafe", "dace"):
        f.write(json.dumps({"messages": [{"role": "user", "content": "reverse " + a}, {"role": "assistant", "content": a[::-1]}]}) + "\n")
        c.write("user reverse %s assistant %s\n" % (a, a[::-1]))
PY
spm_train --input=chat-corpus.txt --model_prefix=chat --vocab_size=30 --model_type=char --minloglevel=2 \
  --user_defined_symbols='<|im_start|>,<|im_end|>' --hard_vocab_limit=false >/dev/null 2>&1 || fail "spm_train"
make_tiny chatbase vocab_size=32 bos_token_id=1 eos_token_id=2 && $PY "$ROOT/tests/cli/llama_ref.py" perturb chatbase \
  && cp chat.model chatbase/tokenizer.model  # weights larger than init: a frozen head the adapters can steer
printf '[model]\npath = "chatbase"\ndtype = "fp32"\n[tokenizer]\nchat_template = "chatml"\n[data]\ntrain = "chat.jsonl"\nvalid = "chat.jsonl"\nformat = "chat"\nmax_length = 64\n[train]\nmax_steps = 100\nmicro_batch_size = 4\nlearning_rate = 1e-2\nlr_scheduler_type = "constant"\n[eval]\ngenerate = true\nmax_new_tokens = 8\n[lora]\nr = 8\nalpha = 16\ntarget_modules = "all-linear"\n' > chat.toml
expect_ok "LoRA sft on four answers" "$ZT" sft chat.toml output.dir=chatrun
expect_ok "export --merge" "$ZT" export chatrun --merge --out chatmerged
accuracy() { # accuracy WHAT ARGS...: zt eval's accuracy
  "$ZT" eval chat.toml "${@:2}" lora.r=0 > "$1.json" 2>"$TMP/err" || { fail "eval $1 (exit $?)"; cat "$TMP/err" >&2; }
  $PY -c "import json; r = json.load(open('$1.json')); assert r['answered'] == 4, r; print(r['accuracy'])"
}
got=$(accuracy adapter --checkpoint chatrun/final) && recipe=$(accuracy recipe lora.adapter=chatrun/final) \
  && merged=$(accuracy merged --checkpoint chatmerged) && plain=$(accuracy plain)
[ "$got" = 1 ] && [ "$recipe" = 1 ] && [ "$merged" = 1 ] && [ "$plain" = 0 ] \
  && say "ok - eval.generate with the adapter answers as the merged model: $got (the base $plain)" \
  || fail "accuracy: adapter $got, lora.adapter $recipe, merged $merged, base $plain"

# errors: one line, exit 2
"$ZT" init --arch llama --out wide --seed 1 hidden_size=48 intermediate_size=64 num_hidden_layers=2 \
  num_attention_heads=4 num_key_value_heads=2 vocab_size=64 max_position_embeddings=64 >/dev/null 2>&1
cp tok.model wide/tokenizer.model
one_line() { [ "$(wc -l < "$TMP/err")" = 1 ] || fail "$1: more than one line: $(cat "$TMP/err")"; }
expect_exit 2 "an adapter for another model's shape" \
  "adapter/adapter_model.safetensors': tensor 'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight': shape \[4, 32\] does not match the expected \[4, 48\]" \
  "$ZT" generate --model wide --adapter "$F/adapter" --prompt x
one_line "another shape"
expect_exit 2 "no adapter_config.json" "'base' is not a PEFT adapter directory \(it has no adapter_config.json\)" \
  "$ZT" generate --model base --adapter base --prompt x
one_line "no adapter_config.json"
expect_exit 2 "an adapter as the base of an adapter" "'own' is a PEFT adapter directory, not a base model for the adapter 'own'" \
  "$ZT" generate --model own --adapter own --prompt x
sed -i 's/"base_model_name_or_path": "base"/"base_model_name_or_path": "gone"/' own/adapter_config.json
expect_exit 2 "a base that is not there" "the base_model_name_or_path of 'own': .*'gone'" "$ZT" generate --model own --prompt x
one_line "a base that is not there"
$PY -c "
import json; p = 'own/adapter_config.json'; c = json.load(open(p)); del c['base_model_name_or_path']; json.dump(c, open(p, 'w'))"
expect_exit 2 "no base_model_name_or_path" "own/adapter_config.json': 'base_model_name_or_path' is missing" \
  "$ZT" generate --model own --prompt x
cp -r "$F/adapter" reward && $PY -c "
import json; p = 'reward/adapter_config.json'; c = json.load(open(p))
c.update(task_type='SEQ_CLS', modules_to_save=['classifier', 'score']); json.dump(c, open(p, 'w'))"
expect_exit 2 "a reward model's adapter" "the adapter trains a score head .* it is a reward model's adapter" \
  "$ZT" generate --model base --adapter reward --prompt x
one_line "a reward model's adapter"
done_testing
