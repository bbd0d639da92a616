#!/usr/bin/env bash
# The tokenized cache: the first run builds it, a second run maps it, the tokens are
# the same either way, and a changed template, tokenizer or data file builds anew.
. "$(dirname "$0")/lib.sh"
need_cmd spm_train sentencepiece
export ZT_LOG=info

$PY - <<'PY'
import json
with open("chat.jsonl", "w") as f, open("corpus.txt", "w") as c:
    for i in range(50):
        w = "abcdefgh"[i % 8] * (1 + i % 4) + "xyz"[i % 3]
        f.write(json.dumps({"messages": [{"role": "user", "content": "say " + w}, {"role": "assistant", "content": w}]}) + "\n")
        c.write("say %s\n" % w)
PY
spm_train --input=corpus.txt --model_prefix=tok --vocab_size=20 --model_type=char --minloglevel=2 \
  --user_defined_symbols='<|im_start|>,<|im_end|>' --hard_vocab_limit=false >/dev/null 2>&1 || fail "spm_train"
make_tiny model vocab_size=24
cp tok.model model/tokenizer.model
printf '[model]\npath = "model"\n[tokenizer]\nchat_template = "chatml"\n[data]\ntrain = "chat.jsonl"\nformat = "chat"\nmax_length = 64\ncache_dir = "cache"\n[train]\nmax_steps = 2\nmicro_batch_size = 2\n' > recipe.toml

expect_ok "first run" "$ZT" data inspect recipe.toml --json --n 50
cp "$TMP/out" first.jsonl
grep -q "cached the tokenized data" "$TMP/err" && say "ok - built the cache" || fail "no cache built: $(cat "$TMP/err")"
ls cache/tokens-*.bin >/dev/null 2>&1 || fail "no cache file"
expect_ok "second run" "$ZT" data inspect recipe.toml --json --n 50
grep -q "using the cached tokenized data" "$TMP/err" && say "ok - reused the cache" || fail "cache not reused: $(cat "$TMP/err")"
cmp -s first.jsonl "$TMP/out" && say "ok - same tokens from the cache" || fail "cached tokens differ"
expect_ok "no cache" "$ZT" data inspect recipe.toml --json --n 50 data.cache_dir=
cmp -s first.jsonl "$TMP/out" && say "ok - same tokens without a cache" || fail "tokens differ without the cache"

expect_ok "another template" "$ZT" data inspect recipe.toml --json --n 1 tokenizer.chat_template=zephyr
grep -q "cached the tokenized data" "$TMP/err" && say "ok - a changed template rebuilds" || fail "template change reused the cache"
echo '{"messages": [{"role": "user", "content": "say a"}, {"role": "assistant", "content": "a"}]}' >> chat.jsonl
expect_ok "changed data" "$ZT" data inspect recipe.toml --json --n 1
grep -q "cached the tokenized data: 51 examples" "$TMP/err" && say "ok - changed data rebuilds" || fail "data change: $(cat "$TMP/err")"
spm_train --input=corpus.txt --model_prefix=tok2 --vocab_size=20 --model_type=char --minloglevel=2 \
  --user_defined_symbols='<|im_start|>,<|im_end|>,<x>' --hard_vocab_limit=false >/dev/null 2>&1
cp tok2.model model/tokenizer.model
expect_ok "changed tokenizer" "$ZT" data inspect recipe.toml --json --n 1
grep -q "cached the tokenized data" "$TMP/err" && say "ok - a changed tokenizer rebuilds" || fail "tokenizer change reused the cache"
[ "$(ls cache/tokens-*.bin | wc -l)" -eq 4 ] && say "ok - four entries" || fail "entries: $(ls cache)"
expect_ok "sft from the cache" "$ZT" sft recipe.toml output.dir=run
done_testing
