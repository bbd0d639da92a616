#!/usr/bin/env bash
# A bad data line after good ones, in every format, through zt data inspect, sft and eval,
# with the tokenized cache and without: a one-line error naming the line, exit 2, and
# (under the sanitizer) nothing leaked, so the exit code stays 2. Also a valid_split that
# leaves nothing to hold out, prompt lines for zt rlhf that are not all prompts, and chat
# templates that refuse or run away.
# kernel levels: own only (what it checks does not depend on the CPU kernels)
. "$(dirname "$0")/lib.sh"
command -v spm_train >/dev/null || { say "skip: spm_train not installed (scripts/install-deps.sh installs it)"; exit 0; }

$PY - <<'PY'
import json
chat = lambda w: {"messages": [{"role": "user", "content": "say " + w}, {"role": "assistant", "content": w}]}
lines = {
    "text": [{"text": "say abc"}, {"text": 7}],
    "chat": [chat("abc"), {"messages": [{"role": "user"}]}],
    "instruct": [{"instruction": "say", "input": "abc", "output": "abc"}, {"instruction": "say"}],
    "tokens": [{"input_ids": [1, 2, 3]}, {"input_ids": [1, 99]}],
}
for fmt, (good, bad) in lines.items():
    with open(fmt + "-bad.jsonl", "w") as f:
        for _ in range(40):
            f.write(json.dumps(good) + "\n")
        f.write(json.dumps(bad) + "\n")
    with open(fmt + "-good.jsonl", "w") as f:
        for _ in range(4):
            f.write(json.dumps(good) + "\n")
with open("corpus.txt", "w") as c:
    c.write("say abc\nabc say\n")
PY
spm_train --input=corpus.txt --model_prefix=tok --vocab_size=12 --model_type=char --minloglevel=2 \
  --user_defined_symbols='<|im_start|>,<|im_end|>' --hard_vocab_limit=false >/dev/null 2>&1 || fail "spm_train"
make_tiny model vocab_size=16
cp tok.model model/tokenizer.model
printf '[model]\npath = "model"\n[tokenizer]\nchat_template = "chatml"\n[data]\nmax_length = 64\n[train]\nmax_steps = 1\nmicro_batch_size = 1\n' > recipe.toml

for fmt in text chat instruct tokens; do
  for cache in cache ""; do
    on="data.format=$fmt data.cache_dir=$cache"
    expect_exit 2 "$fmt, cache '$cache': inspect" "$fmt-bad.jsonl:41: " "$ZT" data inspect recipe.toml $on data.train=$fmt-bad.jsonl
    expect_exit 2 "$fmt, cache '$cache': sft" "$fmt-bad.jsonl:41: " \
      "$ZT" sft recipe.toml $on data.train=$fmt-bad.jsonl output.dir=run-$fmt
    expect_exit 2 "$fmt, cache '$cache': bad valid file in eval" "$fmt-bad.jsonl:41: " \
      "$ZT" eval recipe.toml $on data.train=$fmt-good.jsonl data.valid=$fmt-bad.jsonl
  done
  expect_exit 2 "$fmt: nothing to hold out" "leaves an empty split" \
    "$ZT" data inspect recipe.toml data.format=$fmt data.train=$fmt-good.jsonl data.valid_split=0.01
done

# chat templates that refuse the conversation, run without end or build a huge text: a one-line
# error naming the template file, exit 2 (the limits are those of lib/jinja/jinja.h)
printf "%s" "{{ raise_exception('Conversation roles must alternate, said the template') }}" > refuse.jinja
printf "%s" "{% set xs = range(100000) | list %}{% for i in xs %}{% for j in xs %}{% endfor %}{% endfor %}" > loop.jinja
printf "%s" "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}" > huge.jinja
printf "%s" "{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}" > recurse.jinja
for case in "refuse:refuse.jinja:1:19: Conversation roles must alternate, said the template" \
            "loop:loop.jinja:1:53: the template ran for more than 100000000 steps" \
            "huge:huge.jinja:1:75: the template needs more than 256 MiB of memory" \
            "recurse:recurse.jinja:1:21: macro calls nested deeper than 64"; do
  name=${case%%:*}
  expect_exit 2 "chat template $name" "${case#*:}" "$ZT" data inspect recipe.toml data.format=chat \
    data.train=chat-good.jsonl "tokenizer.chat_template=$PWD/$name.jinja"
  [ "$(wc -l < "$TMP/err")" = 1 ] || fail "chat template $name: the error is not one line"
done

# real templates with macros (llama.cpp's fixtures): Qwen3 drops an earlier turn's reasoning, so its
# spans are closing spans; each trained turn is the answer and its <|im_end|> and newline
printf '%s\n' '{"messages": [{"role": "user", "content": "say abc"}, {"role": "assistant", "content": "abc"}, {"role": "user", "content": "say cba"}, {"role": "assistant", "content": "cba"}]}' > two-turns.jsonl
for tpl in Qwen-Qwen3-0.6B Qwen3-Coder; do
  "$ZT" data inspect recipe.toml data.format=chat data.train=two-turns.jsonl data.max_length=200 \
    "tokenizer.chat_template=$ROOT/tests/fixtures/templates/llamacpp/$tpl.jinja" >"$tpl.out" 2>"$TMP/err" \
    || { fail "inspect with $tpl.jinja"; cat "$TMP/err" >&2; }
  grep -qF '[[▁]] [[a]] [[b]] [[c]] [[<|im_end|>]] ▁ <|im_start|>' "$tpl.out" \
    && say "ok - $tpl.jinja: the first turn trains its answer and <|im_end|>" \
    || { fail "$tpl.jinja: the first turn's trained tokens"; cat "$tpl.out" >&2; }
done

# zt rlhf keeps each prompt line for the reward program: a line that is JSON but not a
# prompt is skipped as a prompt (data.skip_bad_lines) yet read as a line, which is an error
printf '{"prompt": "say abc", "answer": "abc"}\n{"prompt": 5}\n{"prompt": "say cba", "answer": "cba"}\n' > prompts.jsonl
expect_exit 2 "rlhf: prompt lines that are not all prompts" "prompts.jsonl: 3 prompt lines but 2 usable prompts" \
  "$ZT" rlhf recipe.toml data.format=prompt data.train=prompts.jsonl data.skip_bad_lines=true rlhf.algorithm=grpo \
  rlhf.num_generations=1 rlhf.max_new_tokens=4 "rlhf.reward_command=$PY $ROOT/scripts/demo_reward.py" output.dir=run-rlhf
done_testing
