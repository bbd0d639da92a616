#!/usr/bin/env bash
# zt generate: a model that memorised a text continues its first words with the
# rest (greedy); batch mode writes completions; stop strings cut the output.
. "$(dirname "$0")/lib.sh"
need_cmd spm_train sentencepiece

story="the quick brown fox jumps over the lazy dog and then runs far away into the green forest"
for i in $(seq 1 50); do echo "$story number $i is here"; echo "a small cat sleeps on the warm mat $i"; done > corpus.txt
spm_train --input=corpus.txt --model_prefix=tok --vocab_size=100 --model_type=bpe --minloglevel=2 >/dev/null 2>&1 \
  || { fail "spm_train"; done_testing; }
echo "$story" | spm_encode --model=tok.model --output_format=id > ids.txt
$PY -c "
import json
ids = [1] + [int(x) for x in open('ids.txt').read().split()] + [2]
open('data.jsonl', 'w').write(json.dumps({'input_ids': ids}) + '\n')
"
make_tiny model vocab_size=100 bos_token_id=1 eos_token_id=2
cp tok.model model/tokenizer.model
printf '[model]\npath = "model"\ndtype = "fp32"\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 64\n[train]\nmax_steps = 150\nmicro_batch_size = 1\nlearning_rate = 1e-2\nlr_scheduler_type = "constant"\n' > recipe.toml
expect_ok "memorise the story" "$ZT" pretrain recipe.toml output.dir=run
[ -f run/final/tokenizer.model ] && say "ok - final/ carries the tokenizer" || fail "final/ lacks tokenizer.model"

expect_ok "generate" "$ZT" generate --model run/final --prompt "the quick brown fox" --max-new-tokens 40
got=$(cat "$TMP/out")
[ "$(echo $got)" = "jumps over the lazy dog and then runs far away into the green forest" ] \
  && say "ok - greedy continuation: $got" || fail "continuation: '$got'"

# the decoder on a device (ZT_CPU_AS_DEVICE=1: the CPU backend poses as one): its cache in the
# device's memory, tokens and positions uploaded, logits downloaded; the same kernels, so the same
# sampled text as in host memory (at temperature 8: every logit matters)
for as_device in 0 1; do
  expect_ok "sampled, ZT_CPU_AS_DEVICE=$as_device" env ZT_CPU_AS_DEVICE=$as_device "$ZT" generate --model run/final \
    --prompt "the quick brown fox" --max-new-tokens 40 --temperature 8 --seed 3 --device cpu
  cp "$TMP/out" sampled-$as_device.txt
done
cmp -s sampled-0.txt sampled-1.txt && [ -s sampled-0.txt ] \
  && say "ok - the device decoder samples the host decoder's text: $(cat sampled-0.txt)" || fail "device decoder"
expect_exit 2 "--device gpu" "--device 'gpu': expected auto, cpu or cuda" \
  "$ZT" generate --model run/final --prompt "the quick brown fox" --device gpu

printf '{"prompt": "the quick brown fox", "id": 7}\n{"prompt": "jumps over the lazy"}\n' > prompts.jsonl
expect_ok "batch generation" "$ZT" generate --model run/final --input prompts.jsonl --output out.jsonl --stop forest
$PY - <<'PY' && say "ok - completions written" || fail "batch output: $(cat out.jsonl)"
import json
rows = [json.loads(l) for l in open("out.jsonl")]
assert len(rows) == 2 and rows[0]["id"] == 7
assert rows[0]["completion"].strip().startswith("jumps over the lazy dog")
assert rows[0]["completion"].rstrip().endswith("into the green"), rows[0]  # cut at the stop string
assert rows[1]["completion"].strip().startswith("dog and then")
PY
printf '[\n  {"prompt": "the quick brown fox",\n   "id": 7},\n  {"prompt": "jumps over the lazy"}\n]\n' > prompts.json
expect_ok "a JSON array of requests" "$ZT" generate --model run/final --input prompts.json --output array.jsonl --stop forest
cmp -s out.jsonl array.jsonl && say "ok - a JSON array of requests answers as the JSONL file" \
  || fail "array: $(diff out.jsonl array.jsonl | head -3)"
printf '{"prompt": "the quick"} {"prompt": "brown fox"}\n\n[1, 2]\n' > two.jsonl
expect_exit 2 "two objects on one line of --input" "two.jsonl:1: not JSON" \
  "$ZT" generate --model run/final --input two.jsonl
printf '{"prompt": "the quick"}\n\n[1, 2]\n' > array.jsonl
expect_exit 2 "an array as a line of --input" "array.jsonl:3: the line is an array, not a JSON object" \
  "$ZT" generate --model run/final --input array.jsonl
# the output goes through a temporary file: a failed run leaves --output as it was, and
# --output may be the input file (it was emptied before its first line was read)
cp out.jsonl kept.jsonl
expect_exit 2 "a bad line after a good one" "array.jsonl:3: the line is an array" \
  "$ZT" generate --model run/final --input array.jsonl --output kept.jsonl --max-new-tokens 2
cmp -s out.jsonl kept.jsonl && [ -z "$(ls | grep '\.tmp\.')" ] \
  && say "ok - a failed run leaves --output as it was, no temporary file" || fail "--output after a failed run"
expect_exit 2 "a missing --input" "'nope.jsonl': cannot open: No such file" \
  "$ZT" generate --model run/final --input nope.jsonl --output kept.jsonl
cmp -s out.jsonl kept.jsonl && say "ok - a missing --input leaves --output as it was" || fail "--output emptied"
expect_exit 2 "--output in a missing directory" "--output: cannot create 'no/dir/out.jsonl" \
  "$ZT" generate --model run/final --input prompts.jsonl --output no/dir/out.jsonl
cp prompts.jsonl inplace.jsonl
expect_ok "--output the input itself" "$ZT" generate --model run/final --input inplace.jsonl --output inplace.jsonl \
  --max-new-tokens 2
$PY -c 'import json; r=[json.loads(l) for l in open("inplace.jsonl")]; assert len(r) == 2 and r[0]["id"] == 7 and "completion" in r[1]' \
  && say "ok - the input file gets its completions in place" || fail "in place: $(cat inplace.jsonl)"
expect_exit 2 "chat without a template" "chat template" "$ZT" generate --model run/final --input <(echo '{"messages": [{"role": "user", "content": "hi"}]}')
# a request's tools and tool calls reach the template, and text parts are joined (the template
# below refuses to render without tools, and echoes the joined content and the call's name)
cat > tools.jinja <<'J'
{% if tools is none %}{{ raise_exception('no tools') }}{% endif %}{% for m in messages %}{{ m.content or '' }}{% for c in m.tool_calls or [] %}[{{ c.function.name }}]{% endfor %}{% endfor %}
J
printf '%s\n' '{"tools": [{"type": "function", "function": {"name": "f"}}], "messages": [{"role": "user", "content": [{"type": "text", "text": "the "}, {"type": "text", "text": "forest"}]}, {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {}}}]}, {"role": "tool", "content": "ok"}]}' > tools.jsonl
expect_ok "tools and text parts" "$ZT" generate --model run/final --chat-template tools.jinja --input tools.jsonl \
  --output tools.out --max-new-tokens 2
sed 's/"tools": \[[^]]*\], //' tools.jsonl > notools.jsonl
expect_exit 2 "a request without the tools its template needs" "notools.jsonl:1: .*no tools" \
  "$ZT" generate --model run/final --chat-template tools.jinja --input notools.jsonl
printf '%s\n' '{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x.png"}}]}]}' > image.jsonl
expect_exit 2 "an image part" "image.jsonl:1: message 0: content part 0 is of type 'image_url'" \
  "$ZT" generate --model run/final --chat-template tools.jinja --input image.jsonl
# --chat-template-kwargs, and a request's own "chat_template_kwargs" over them
cat > think.jinja <<'J'
{% if enable_thinking is not defined or enable_thinking %}{{ raise_exception('thinking') }}{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}
J
echo '{"messages": [{"role": "user", "content": "the forest"}]}' > ask.jsonl
expect_ok "--chat-template-kwargs" "$ZT" generate --model run/final --chat-template think.jinja --input ask.jsonl \
  --chat-template-kwargs '{"enable_thinking": false}' --max-new-tokens 2
expect_exit 2 "a template variable not given" "ask.jsonl:1: .*thinking" \
  "$ZT" generate --model run/final --chat-template think.jinja --input ask.jsonl --max-new-tokens 2
echo '{"chat_template_kwargs": {"enable_thinking": true}, "prompt": [{"role": "user", "content": "x"}]}' > on.jsonl
expect_exit 2 "a request's kwargs over the command's" "on.jsonl:1: .*thinking" "$ZT" generate --model run/final \
  --chat-template think.jinja --input on.jsonl --chat-template-kwargs '{"enable_thinking": false}'
expect_exit 2 "kwargs that are no object" "chat_template_kwargs '\\[1\\]' is not a JSON object" \
  "$ZT" generate --model run/final --chat-template think.jinja --input ask.jsonl --chat-template-kwargs '[1]'
expect_exit 2 "no prompt" "needs --model and one of" "$ZT" generate --model run/final
expect_exit 2 "bad temperature" "temperature" "$ZT" generate --model run/final --prompt x --temperature -1
done_testing
