#!/usr/bin/env bash
# The tokenized cache: the first run builds it, a second run maps it, the tokens are
# the same either way, and a changed template, tokenizer or data file builds anew; a
# corrupted entry (an offset, an id, a byte) is named in a warning and built again.
# kernel levels: own only (what it checks does not depend on the CPU kernels)
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

# A bad entry (zt's own data) is never used: a warning names it and it is built again.
# corrupt FILE WHAT: offset (offsets[1] = 1e12), id (ids[5] = 2^31-1), both with the checksum
# made right again so that only the checks of the contents can tell; byte (one id byte
# changed into another id of the vocabulary), where only the checksum can tell.
corrupt() {
  $PY - "$@" <<'PY'
import struct, sys
path, what = sys.argv[1], sys.argv[2]
b = bytearray(open(path, "rb").read())
n_examples, n_tokens = struct.unpack_from("<QQ", b, 16)
ids = 32 + (n_examples + 1) * 8
def crc32c(data):
    c = 0xFFFFFFFF
    for x in data:
        c ^= x
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF
if what == "byte":
    b[ids + 5 * 4] = 1 if b[ids + 5 * 4] != 1 else 2
else:
    if what == "offset":
        struct.pack_into("<q", b, 32 + 8, 10**12)
    else:
        struct.pack_into("<i", b, ids + 5 * 4, 2**31 - 1)
    struct.pack_into("<I", b, 8, crc32c(b[12:]))
open(path, "wb").write(b)
PY
}
rm -rf cache
expect_ok "a fresh entry" "$ZT" data inspect recipe.toml --json --n 50
cp "$TMP/out" fresh.jsonl
entry=$(ls cache/tokens-*.bin)
cp "$entry" good.bin
for case in "offset:ends at token 1000000000000" "id:has id 2147483647" "byte:checksum mismatch"; do
  what=${case%%:*} why=${case#*:}
  cp good.bin "$entry" && corrupt "$entry" "$what"
  cmp -s good.bin "$entry" && fail "$what: the corruption changed nothing"
  expect_ok "bad $what: inspect" "$ZT" data inspect recipe.toml --json --n 50
  grep -q "the tokenized cache '[^']*$entry' is bad (.*$why.*): building it again" "$TMP/err" &&
    say "ok - bad $what: named and rebuilt" ||
    fail "bad $what not noticed: $(cat "$TMP/err")"
  cmp -s fresh.jsonl "$TMP/out" && say "ok - bad $what: the right tokens" || fail "bad $what: other tokens"
  cmp -s good.bin "$entry" && say "ok - bad $what: the entry is whole again" || fail "bad $what: entry not rewritten"
  cp good.bin "$entry" && corrupt "$entry" "$what"
  expect_ok "bad $what: sft" "$ZT" sft recipe.toml output.dir=run-$what
  grep -q "the tokenized cache '[^']*$entry' is bad" "$TMP/err" || fail "sft used the bad $what"
done
done_testing
