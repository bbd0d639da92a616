#!/usr/bin/env bash
# What a user can get wrong gives a one-line error naming the place and exit 2:
# commands, options, recipes, data lines, config keys, output directories.
# kernel levels: own only (what it checks does not depend on the CPU kernels)
. "$(dirname "$0")/lib.sh"

make_tiny model
printf '{"input_ids": [1, 2, 3, 4]}\n{"input_ids": [5, 6, 7]}\n' > data.jsonl
printf '[model]\npath = "model"\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 16\n[train]\nmax_steps = 1\nmicro_batch_size = 1\n' > recipe.toml

expect_exit 2 "unknown command" "'pretrian' is not a zt command \(did you mean 'pretrain'\?\)" "$ZT" pretrian recipe.toml
expect_exit 2 "unknown option" "unknown option '--chekpoint' \(did you mean '--checkpoint'\?\)" "$ZT" eval recipe.toml --chekpoint x
expect_exit 2 "bad number" "'--seed': 'x1' is not an integer" "$ZT" init --arch llama --out m2 --seed x1
expect_exit 2 "missing recipe" "missing RECIPE" "$ZT" pretrain
expect_exit 2 "no such recipe" "nosuch.toml" "$ZT" pretrain nosuch.toml
printf '[train]\nlearnig_rate = 1e-4\n' > typo.toml
expect_exit 2 "unknown recipe key" "typo.toml:2:1: unknown key 'learnig_rate' in \[train\] \(did you mean 'learning_rate'\?\)" "$ZT" pretrain typo.toml
expect_exit 2 "bad override" "override 'train.learning_rat=1'" "$ZT" pretrain recipe.toml train.learning_rat=1
expect_exit 2 "out-of-range override" "micro_batch_size" "$ZT" pretrain recipe.toml train.micro_batch_size=0
expect_exit 2 "chat data without a tokenizer" "no tokenizer.json or tokenizer.model" "$ZT" pretrain recipe.toml data.format=chat output.dir=r0
mkdir -p badtok
sed 's/\\\\p{N}{1,3}/(\\\\p{N}{1,3}/' "$ROOT/tests/fixtures/tokenizers/bpe_llama3/tokenizer.json" > badtok/tokenizer.json
expect_exit 2 "a tokenizer.json regex that does not compile" \
  "badtok/tokenizer.json': pre_tokenizer.pretokenizers\[0\].pattern.Regex: the regex .* does not compile: missing closing parenthesis" \
  "$ZT" pretrain recipe.toml data.format=text tokenizer.path=badtok output.dir=r0
[ "$(wc -l < "$TMP/err")" = 1 ] && say "ok - the regex error is one line" || fail "the regex error spans lines: $(cat "$TMP/err")"
sed 's/"type": "Fuse"/"type": "CTC"/' "$ROOT/tests/fixtures/tokenizers/bpe_mistral/tokenizer.json" > badtok/tokenizer.json
expect_exit 2 "a decoder zt does not implement, inside a Sequence" \
  "badtok/tokenizer.json': decoder.decoders\[2\].type 'CTC' is not a decoder zt implements" \
  "$ZT" pretrain recipe.toml data.format=text tokenizer.path=badtok output.dir=r0
[ "$(wc -l < "$TMP/err")" = 1 ] && say "ok - the decoder error is one line" || fail "the decoder error spans lines: $(cat "$TMP/err")"
expect_exit 2 "preference data in sft" "data.format 'preference' is for zt rlhf" "$ZT" sft recipe.toml data.format=preference output.dir=r0
printf '{"input_ids": [1, 2, 3]}\n{"input_ids": [1, 2, 999]}\n' > bad.jsonl
expect_exit 2 "token id outside the vocabulary" "bad.jsonl:2:" "$ZT" pretrain recipe.toml data.train=bad.jsonl output.dir=r1
printf '{"input_ids": [1, 2, 3]}\n{"input_ids": [1, 2,\n' > broken.jsonl
expect_exit 2 "line that is not JSON" "broken.jsonl:2:" "$ZT" eval recipe.toml data.train=broken.jsonl
expect_exit 2 "missing data file" "nodata.jsonl" "$ZT" eval recipe.toml data.train=nodata.jsonl
expect_exit 2 "unknown config key in zt init" "unknown config key 'hiden_size'" "$ZT" init --arch llama --out m3 hiden_size=8
expect_exit 2 "heads that do not divide" "num_key_value_heads" "$ZT" init --arch llama --out m4 num_attention_heads=4 num_key_value_heads=3
expect_exit 2 "a Granite multiplier on another family" "residual_multiplier.*for granite only" "$ZT" init --arch llama --out m5 residual_multiplier=0.5
expect_exit 2 "a Granite multiplier of 0" "logits_scaling.*positive" "$ZT" init --arch granite --out m6 logits_scaling=0
# attention_bias as each family's config.json means it: none in Qwen2's (its q, k, v always have biases);
# GLM's biases q, k and v alone (zt init's model loads as written)
expect_exit 2 "attention_bias for qwen2" "'attention_bias' is not read by qwen2" "$ZT" init --arch qwen2 --out m7 attention_bias=true
"$ZT" init --arch glm --out m8 attention_bias=true head_dim=16 >/dev/null 2>&1 &&
  printf '[model]\npath = "m8"\n[data]\ntrain = "t.jsonl"\nformat = "tokens"\n[train]\nmax_steps = 1\n' > m8.toml &&
  echo '{"input_ids": [1, 2, 3, 4]}' > t.jsonl
expect_ok "zt init --arch glm attention_bias=true trains" "$ZT" pretrain m8.toml output.dir=m8run
expect_exit 2 "fp16 on the CPU" "fp16" "$ZT" eval recipe.toml model.dtype=fp16
# a value with a newline or other control characters still gives one line, the characters escaped
expect_exit 2 "a newline in a quoted value" 'model directory .*a\\nb\\x1b. has no config.json' \
  "$ZT" eval recipe.toml "model.path=$(printf 'a\nb\033')"
[ "$(wc -l < "$TMP/err")" = 1 ] && say "ok - the error is one line" || fail "the error spans lines: $(cat "$TMP/err")"
printf '{"input_ids": [1, 2,\n{"input_ids": [999]}\n' > allbad.jsonl
expect_exit 2 "data files whose every line is skipped are named" "the data files \(.*allbad.jsonl\) hold no examples" \
  "$ZT" pretrain recipe.toml data.train=allbad.jsonl data.skip_bad_lines=true output.dir=r2
expect_ok "a first run" "$ZT" pretrain recipe.toml output.dir=run
expect_exit 2 "non-empty output directory" "output directory .*run.* is not empty" "$ZT" pretrain recipe.toml output.dir=run
expect_ok "overwrite replaces it" "$ZT" pretrain recipe.toml output.dir=run output.overwrite=true
done_testing
