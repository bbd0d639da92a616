#!/usr/bin/env bash
# Chat, instruct and text data through a real SentencePiece tokenizer and the chat
# template: the trained tokens are exactly the assistant turns with their end-of-turn
# token; zt sft and zt eval (with accuracy) run; bad lines and a tokenizer larger
# than the model stop with exit 2.
. "$(dirname "$0")/lib.sh"
need_cmd spm_train sentencepiece

$PY - <<'PY'
import json, random
r = random.Random(2)
w = lambda: "".join(r.choice("abcdefgh") for _ in range(r.randint(3, 5)))
with open("chat.jsonl", "w") as f, open("corpus.txt", "w") as c:
    for i in range(120):
        a = w()
        f.write(json.dumps({"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "reverse " + a},
                                         {"role": "assistant", "content": a[::-1]}]}) + "\n")
        c.write("be brief reverse %s %s\n" % (a, a[::-1]))
with open("share.jsonl", "w") as f:
    f.write(json.dumps({"conversations": [{"from": "human", "value": "reverse abc"}, {"from": "gpt", "value": "cba"}]}) + "\n")
with open("instruct.jsonl", "w") as f:
    f.write(json.dumps({"instruction": "reverse", "input": "abc", "output": "cba"}) + "\n")
with open("text.jsonl", "w") as f:
    f.write(json.dumps({"text": "abc def"}) + "\n")
PY
spm_train --input=corpus.txt --model_prefix=tok --vocab_size=30 --model_type=char --minloglevel=2 \
  --user_defined_symbols='<|im_start|>,<|im_end|>' --hard_vocab_limit=false >/dev/null 2>&1 || fail "spm_train"
make_tiny model vocab_size=32 bos_token_id=1 eos_token_id=2
cp tok.model model/tokenizer.model
cat > recipe.toml <<'TOML'
[model]
path = "model"
dtype = "fp32"
[tokenizer]
chat_template = "chatml"
[data]
train = "chat.jsonl"
valid = "chat.jsonl"
format = "chat"
max_length = 64
[train]
max_steps = 10
micro_batch_size = 4
learning_rate = 3e-3
[eval]
generate = true
max_new_tokens = 8
max_examples = 10
TOML

expect_ok "data inspect --json" "$ZT" data inspect recipe.toml --n 1 --json
$PY - "$TMP/out" <<'PY' && say "ok - only the assistant turn and its <|im_end|> carry loss" || fail "labels: $(cat "$TMP/out")"
import json, subprocess, sys
row = json.loads(open(sys.argv[1]).read())
trained = [i for i, l in zip(row["input_ids"], row["labels"]) if l != -100]
pieces = subprocess.run(["spm_decode", "--model=tok.model", "--input_format=id"], input=" ".join(map(str, trained)),
                        capture_output=True, text=True).stdout.strip()
end = 4  # <|im_end|>: the second user-defined symbol after <unk> <s> </s> <|im_start|>
assert trained[-1] == end, trained
with open("chat.jsonl") as f:
    answer = json.loads(f.readline())["messages"][2]["content"]
assert pieces.replace(" ", "") == answer + "<|im_end|>", (pieces, answer)
PY
expect_ok "data inspect (human)" "$ZT" data inspect recipe.toml --n 2 --packed
grep -q '\[\[' "$TMP/out" && say "ok - trained tokens marked" || fail "no marked tokens: $(head -c 300 "$TMP/out")"
expect_ok "sft" "$ZT" sft recipe.toml output.dir=run
expect_ok "eval with accuracy" "$ZT" eval recipe.toml --checkpoint run/final
$PY -c "import json; r=json.loads(open('$TMP/out').read()); assert 0 <= r['accuracy'] <= 1 and r['answered'] == 10, r" \
  && say "ok - eval reports accuracy: $(cat "$TMP/out")" || fail "eval: $(cat "$TMP/out")"
expect_ok "ShareGPT conversations" "$ZT" data inspect recipe.toml data.train=share.jsonl data.valid=[] --json
expect_ok "instruct" "$ZT" data inspect recipe.toml data.train=instruct.jsonl data.valid=[] data.format=instruct --json
cp "$TMP/out" instruct.out
# the same data as a JSON array, pretty-printed as alpaca_data.json is: the same rows
$PY -c "import json; json.dump([json.loads(l) for l in open('instruct.jsonl')], open('instruct.json', 'w'), indent=4)"
expect_ok "instruct as a JSON array" "$ZT" data inspect recipe.toml data.train=instruct.json data.valid=[] \
  data.format=instruct --json
cmp -s instruct.out "$TMP/out" && say "ok - a JSON array file gives the JSONL file's rows" || fail "JSON array: $(cat "$TMP/out")"
expect_ok "text" "$ZT" data inspect recipe.toml data.train=text.jsonl data.valid=[] data.format=text --json
$PY -c "import json; r=json.loads(open('$TMP/out').read()); assert r['labels'] == r['input_ids'] and r['input_ids'][-1] == 2, r" \
  && say "ok - text: every token trained, EOS last" || fail "text: $(cat "$TMP/out")"

printf '{"messages": [{"role": "user", "content": "hi"}]}\n{"messages": "hello"}\n' > bad.jsonl
expect_exit 2 "a bad chat line" "bad.jsonl:2: \"messages\" is a string" "$ZT" sft recipe.toml data.train=bad.jsonl output.dir=r2
expect_ok "skip_bad_lines skips it" "$ZT" data inspect recipe.toml 'data.train=["bad.jsonl", "chat.jsonl"]' data.skip_bad_lines=true
grep -q "skipped 1 bad line" "$TMP/err" && say "ok - the skip is reported" || fail "no skip report: $(cat "$TMP/err")"
printf '{"messages": [{"role": "user", "content": "hi"}]}\n' > none.jsonl
expect_exit 2 "no trainable tokens at all" "none of the 1 examples" "$ZT" sft recipe.toml data.train=none.jsonl output.dir=r3
expect_exit 2 "unknown template" "chat template|template" "$ZT" sft recipe.toml tokenizer.chat_template=nosuch output.dir=r4
make_tiny small vocab_size=16
cp tok.model small/tokenizer.model
expect_exit 2 "tokenizer larger than the model" "has [0-9]+ tokens but the model's vocab_size is 16" "$ZT" sft recipe.toml model.path=small output.dir=r5

# the text of a row's trained tokens (zt data inspect --json), markers and spaces left out
cat > trained.py <<'PY'
import subprocess
def trained(r):
    ids = [i for i, l in zip(r["input_ids"], r["labels"]) if l != -100]
    out = subprocess.run(["spm_decode", "--model=tok.model", "--input_format=id"], input=" ".join(map(str, ids)),
                         capture_output=True, text=True).stdout
    return out.replace(" ", "").replace("</s>", "").replace("<|im_end|>", "").strip()
PY

# preference pairs (strings and messages) and prompts, as zt rlhf will read them
$PY - <<'PY'
import json
with open("pref.jsonl", "w") as f:
    f.write(json.dumps({"prompt": "reverse abc", "chosen": "cba", "rejected": "abc"}) + "\n")
    f.write(json.dumps({"prompt": [{"role": "user", "content": "reverse ab"}], "chosen": "ba", "rejected": "ab"}) + "\n")
with open("prompts.jsonl", "w") as f:
    f.write(json.dumps({"prompt": [{"role": "user", "content": "reverse abc"}], "answer": "cba"}) + "\n")
PY
expect_ok "preference pairs" "$ZT" data inspect recipe.toml data.train=pref.jsonl data.valid=[] data.format=preference --json --n 10
$PY - "$TMP/out" <<'PY' && say "ok - two sequences per pair, only the answers trained" || fail "preference: $(cat "$TMP/out")"
import json, sys
from trained import trained
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 4, len(rows)
assert [trained(r) for r in rows] == ["cba", "abc", "ba", "ab"], [trained(r) for r in rows]
assert rows[0]["input_ids"][:-4] == rows[1]["input_ids"][:-4]  # the same prompt on both sides
PY
# an implicit prompt (no "prompt", or a string beside conversations) is what "chosen" and
# "rejected" share, as TRL's extract_prompt takes it: the same rows as the explicit pairs
$PY - <<'PY'
import json
u = {"role": "user", "content": "reverse ab"}
ba, ab = {"role": "assistant", "content": "ba"}, {"role": "assistant", "content": "ab"}
rows = [({"prompt": "reverse abc", "chosen": " cba", "rejected": " abc"},
         {"chosen": "reverse abc cba", "rejected": "reverse abc abc"}),
        ({"prompt": [u], "chosen": [ba], "rejected": [ab]}, {"chosen": [u, ba], "rejected": [u, ab]}),
        ({"prompt": [u], "chosen": [ba], "rejected": [ab]}, {"prompt": "reverse ab", "chosen": [u, ba], "rejected": [u, ab]}),
        ({"prompt": "ab", "chosen": "c", "rejected": "cd"}, {"chosen": "abc", "rejected": "abcd"})]
for name, k in (("explicit.jsonl", 0), ("implicit.jsonl", 1)):
    with open(name, "w") as f:
        f.writelines(json.dumps(r[k]) + "\n" for r in rows)
PY
expect_ok "explicit pairs" "$ZT" data inspect recipe.toml data.train=explicit.jsonl data.valid=[] data.format=preference --json --n 10
cp "$TMP/out" explicit.out
expect_ok "implicit prompts" "$ZT" data inspect recipe.toml data.train=implicit.jsonl data.valid=[] data.format=preference --json --n 10
[ "$(wc -l < explicit.out)" = 8 ] && cmp -s explicit.out "$TMP/out" \
  && say "ok - implicit prompts give the explicit pairs' rows" || fail "implicit: $(diff explicit.out "$TMP/out" | head -5)"
printf '{"chosen": [{"role": "user", "content": "a"}], "rejected": "b"}\n' > mixed.jsonl
expect_exit 2 "an implicit prompt from a string and a conversation" "mixed.jsonl:1: \"chosen\" and \"rejected\" must both be" \
  "$ZT" data inspect recipe.toml data.train=mixed.jsonl data.valid=[] data.format=preference
# prompt-completion lines (TRL's), text and messages: only the completion and its end trained
printf '%s\n' '{"prompt": "reverse abc:", "completion": " cba"}' \
  '{"prompt": [{"role": "user", "content": "reverse ab"}], "completion": [{"role": "assistant", "content": "ba"}]}' \
  > completion.jsonl
expect_ok "prompt-completion lines" "$ZT" data inspect recipe.toml data.train=completion.jsonl data.valid=[] \
  data.format=completion --json --n 10
$PY - "$TMP/out" <<'PY' && say "ok - the completions are what is trained" || fail "completion: $(cat "$TMP/out")"
import json, sys
from trained import trained
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [trained(r) for r in rows] == ["cba", "ba"], [trained(r) for r in rows]
assert rows[0]["labels"][-1] == rows[0]["input_ids"][-1] == 2, rows[0]  # EOS, trained
PY
# the recipe's tokenizer.chat_template_kwargs reach the template, and a line's own go over them:
# this template refuses to render without `who` and writes it into the user turn
cat > kw.jinja <<'J'
{% if who is not defined %}{{ raise_exception('who?') }}{% endif %}{% for m in messages %}<|im_start|>{{ m.role }}
{{ who if m.role == 'user' else '' }}{{ m.content }}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}
J
printf '%s\n' '{"messages": [{"role": "user", "content": "b"}, {"role": "assistant", "content": "ba"}]}' \
  '{"chat_template_kwargs": {"who": "c"}, "messages": [{"role": "user", "content": "b"}, {"role": "assistant", "content": "ba"}]}' \
  > kw.jsonl
expect_exit 2 "a template variable the recipe does not give" "kw.jsonl:1: .*who\\?" \
  "$ZT" data inspect recipe.toml data.train=kw.jsonl data.valid=[] tokenizer.chat_template=kw.jinja
expect_ok "tokenizer.chat_template_kwargs" "$ZT" data inspect recipe.toml data.train=kw.jsonl data.valid=[] \
  tokenizer.chat_template=kw.jinja 'tokenizer.chat_template_kwargs={who = "a"}' --json --n 10
$PY - "$TMP/out" <<'PY' && say "ok - the recipe's kwargs and a line's own reach the template" || fail "kwargs: $(cat "$TMP/out")"
import json, subprocess, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def text(r):
    return subprocess.run(["spm_decode", "--model=tok.model", "--input_format=id"], input=" ".join(map(str, r["input_ids"])),
                          capture_output=True, text=True).stdout.replace(" ", "")
assert "serab<" in text(rows[0]) and "sercb<" in text(rows[1]), [text(r) for r in rows]  # (no "u" in the vocabulary)
PY
expect_ok "prompts" "$ZT" data inspect recipe.toml data.train=prompts.jsonl data.valid=[] data.format=prompt --json
$PY -c "import json; r=json.loads(open('$TMP/out').read()); assert set(r['labels']) == {-100}, r" \
  && say "ok - a prompt has nothing to train" || fail "prompt: $(cat "$TMP/out")"
expect_exit 2 "preference data in zt sft" "is for zt rlhf" "$ZT" sft recipe.toml data.train=pref.jsonl data.valid=[] data.format=preference output.dir=r6

# a base tokenizer without ChatML's tokens: they are added, the vocabulary grows, and
# final/ carries the tokens and the template, so generation uses them with no extra flags
spm_train --input=corpus.txt --model_prefix=base --vocab_size=30 --model_type=char --minloglevel=2 \
  --hard_vocab_limit=false >/dev/null 2>&1 || fail "spm_train (base)"
make_tiny basemodel vocab_size=16 bos_token_id=1 eos_token_id=2
cp base.model basemodel/tokenizer.model
expect_ok "sft with chatml on a base tokenizer" env ZT_LOG=info "$ZT" sft recipe.toml model.path=basemodel output.dir=grown train.max_steps=3
grep -q "added the special token <|im_start|>" "$TMP/err" && say "ok - the template's tokens were added" || fail "no tokens added: $(cat "$TMP/err")"
$PY - <<'PY' && say "ok - final/ has the grown vocabulary, its tokens and the chat template" || fail "final/ of the grown model"
import json
cfg = json.load(open("grown/final/config.json"))
tc = json.load(open("grown/final/tokenizer_config.json"))
assert cfg["vocab_size"] == 18, cfg["vocab_size"]
contents = sorted(v["content"] for v in tc["added_tokens_decoder"].values())
assert contents == ["<|im_end|>", "<|im_start|>"], contents
assert "<|im_start|>" in tc["chat_template"]
PY
echo '{"messages": [{"role": "user", "content": "reverse abc"}]}' > ask.jsonl
expect_ok "generate with the saved template" "$ZT" generate --model grown/final --input ask.jsonl --max-new-tokens 4
# Hugging Face files are carried over: generation_config.json only gains the end-of-turn id
# (no id lost or doubled, sampling settings kept), config.json keeps the source's keys and
# number types, tokenizer_config.json its model_max_length; in final/, checkpoints and export
cp -r model carried
$PY - <<'PY'
import json
cfg = json.load(open("carried/config.json"))
cfg.update({"transformers_version": "4.51.3", "custom_key": {"ratio": 1.5, "n": 3}, "initializer_range": 0.02,
            "rms_norm_eps": "@1e-06@", "rope_scaling": {"rope_type": "linear", "factor": "@8.0@"}})
text = json.dumps(cfg, indent=2).replace('"@1e-06@"', "1e-06").replace('"@8.0@"', "8.0")  # as Hugging Face writes them
open("carried/config.json", "w").write(text)
open("carried/generation_config.json", "w").write('{"bos_token_id": 1, "eos_token_id": [2, 7], "pad_token_id": 0, '
    '"do_sample": true, "temperature": 0.6, "top_p": 0.9, "transformers_version": "4.51.3"}')
open("carried/tokenizer_config.json", "w").write('{"model_max_length": 1000000000000000019884624838656, "clean_up_tokenization_spaces": false}')
PY
expect_ok "sft from a model with its own HF files" "$ZT" sft recipe.toml model.path=carried output.dir=carry train.max_steps=3 train.save_steps=2
expect_ok "export of the run" "$ZT" export carry/checkpoints/step-000002 --out carry-x
for d in carry/final carry/checkpoints/step-000002 carry-x; do
  $PY - "$d" <<'PY' && say "ok - $d keeps the source's HF files" || fail "$d: HF files not carried"
import json, re, sys
d = sys.argv[1]
gen, cfg = json.load(open(d + "/generation_config.json")), json.load(open(d + "/config.json"))
assert gen["eos_token_id"] == [2, 7, 4], gen  # 4: <|im_end|>, appended once
assert (gen["pad_token_id"], gen["do_sample"], gen["temperature"], gen["top_p"]) == (0, True, 0.6, 0.9), gen
assert gen["transformers_version"] == "4.51.3" and cfg["transformers_version"] == "4.51.3", (gen, cfg)
assert cfg["custom_key"] == {"ratio": 1.5, "n": 3} and cfg["initializer_range"] == 0.02, cfg
assert "zt_version" in cfg, cfg
text = open(d + "/config.json").read()
assert re.search(r'"factor":\s*8\.0\s*[,}]', text) and re.search(r'"rms_norm_eps":\s*1e-06\s*[,}]', text), text
tc = open(d + "/tokenizer_config.json").read()
assert re.search(r'"model_max_length":\s*1000000000000000019884624838656\s*[,}]', tc), tc
PY
done
done_testing
