# Helpers for the CLI tests (sourced). Each test script runs in its own
# temporary directory, exits non-zero on the first failure, and cleans up.
set -u
ZT=${ZT_BIN:?ZT_BIN must point at the zt binary}
# zt-test-tool (tests/tool/zt-test-tool.c), which make tests builds: ZT_TEST_TOOL, else the one of
# ZT_BIN's build (build/ beside zt, build-san/ beside zt-san); run it through test_tool
TEST_TOOL=${ZT_TEST_TOOL:-$(dirname "$ZT")/$(case "$ZT" in *-san) echo build-san ;; *) echo build ;; esac)/zt-test-tool}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TMP=$(mktemp -d)
trap '[ -n "${ZT_KEEP_TMP:-}" ] && say "kept $TMP" || rm -rf "$TMP"' EXIT
mkdir -p "$TMP/home" && export HOME="$TMP/home"  # ~/.cache/zt (the tokenized cache) stays inside the test
cd "$TMP"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
export ZT_LOG=${ZT_LOG:-warn}
fails=0
PY=/usr/bin/python3  # Debian's, with numpy (scripts/install-deps.sh)

say() { printf '%s\n' "$*" >&2; }
fail() { say "FAIL: $*"; fails=$((fails + 1)); }

# expect_ok "what" cmd...: the command must exit 0
expect_ok() {
  local what=$1; shift
  if "$@" >"$TMP/out" 2>"$TMP/err"; then say "ok - $what"; else fail "$what (exit $?)"; cat "$TMP/err" >&2; fi
}

# expect_exit CODE "what" "message pattern" cmd...: the command must exit with CODE
# (never a crash or a signal) and print a message on stderr matching the pattern
expect_exit() {
  local code=$1 what=$2 pattern=$3; shift 3
  "$@" >"$TMP/out" 2>"$TMP/err"
  local got=$?
  if [ "$got" != "$code" ]; then fail "$what: exit $got, wanted $code"; cat "$TMP/err" >&2; return; fi
  if ! grep -qE -- "$pattern" "$TMP/err"; then fail "$what: message does not match '$pattern'"; cat "$TMP/err" >&2; return; fi
  if grep -qE 'AddressSanitizer|runtime error|LeakSanitizer' "$TMP/err"; then fail "$what: sanitizer report"; cat "$TMP/err" >&2; return; fi
  say "ok - $what"
}

# test_tool SUBCOMMAND ARGS...: zt-test-tool; a test that needs it fails without it
test_tool() {
  [ -x "$TEST_TOOL" ] || { say "FAIL: no zt-test-tool at $TEST_TOOL (make tests builds it)"; exit 1; }
  "$TEST_TOOL" "$@"
}

# a tiny model and a recipe for it: make_tiny DIR [config_key=value ...]
make_tiny() {
  local dir=$1; shift
  "$ZT" init --arch llama --out "$dir" --seed 1 hidden_size=32 intermediate_size=64 num_hidden_layers=2 \
    num_attention_heads=4 num_key_value_heads=2 vocab_size=64 max_position_embeddings=64 "$@" >/dev/null 2>&1
}

# peft_losses RUN_DIR EXPECTED_JSON WHAT: the 10 losses RUN_DIR/metrics.jsonl logged against
# train_losses of a PEFT fixture's expected.json, within 1e-4 relative (t2440-lora-saved.sh argues it)
peft_losses() {
  sed -n '/"train_losses"/,/]/p' "$2" | sed 1d | grep -oE '[0-9][0-9.e+-]*' > want.txt
  grep -oE '"loss":[0-9.e+-]+' "$1/metrics.jsonl" | cut -d: -f2 > got.txt
  if [ "$(wc -l < want.txt)" = 10 ] && paste got.txt want.txt | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-4 * $2) bad = 1 }
      END { exit bad || NR != 10 }'; then say "ok - $3: the 10 losses are PEFT's"; else fail "$3: losses: $(paste got.txt want.txt | tr '\n\t' '; ')"; fi
}

# a chat task whose ChatML template's two tokens the tokenizer lacks (t2440, t2445): chat.jsonl
# (reverse a word, 4 conversations), a character SentencePiece tokenizer chat.model of V tokens
chat_reverse_task() {
  need_cmd spm_train sentencepiece
  $PY - <<'PY'
import json
with open("chat.jsonl", "w") as f, open("corpus.txt", "w") as c:
    for a in ("abcd", "bead", "cafe", "dace"):
        f.write(json.dumps({"messages": [{"role": "user", "content": "reverse " + a}, {"role": "assistant", "content": a[::-1]}]}) + "\n")
        c.write("user reverse %s assistant %s\n" % (a, a[::-1]))
PY
  spm_train --input=corpus.txt --model_prefix=chat --vocab_size=30 --model_type=char --minloglevel=2 \
    --hard_vocab_limit=false >/dev/null 2>&1 || fail "spm_train"
  V=$(wc -l < chat.vocab)
}

# zt eval and zt generate of a chat_reverse_task run's adapter RUN/final on chat.toml against its
# merged export MERGED; ARGS: the overrides that leave the recipe's own adapters off. The same
# products, the adapters' merged into W (their logits within ~1e-6 of their size, under 30 here,
# t2400-lora.sh), trained rows the merged model's own. The loss of a confident model is small
# (about 2e-4) and so is its gradient: p - y sums to 2(1 - p_t), about 2L in absolute value, so a
# logit error e moves L by at most 2·L·e, 6e-5 relative; measured 0 (bitwise): 1e-4 relative, and
# every answer right; zt generate answers "reverse bead" as the merged model does
adapter_is_merge() { # RUN MERGED ARGS...
  local run=$1 merged=$2 a m; shift 2
  a=$("$ZT" eval chat.toml --checkpoint "$run/final" "$@") && m=$("$ZT" eval chat.toml --checkpoint "$merged" "$@") \
    && $PY -c "
import json; a, m = json.loads('$a'), json.loads('$m')
assert abs(a['loss'] - m['loss']) <= 1e-4 * a['loss'] and a['accuracy'] == m['accuracy'] == 1, (a, m)" \
    && say "ok - zt eval of the adapter is the merged model's: $a" || fail "eval: adapter $a, merged $m"
  echo '{"messages": [{"role": "user", "content": "reverse bead"}]}' > ask.jsonl
  expect_ok "generate with the adapter" "$ZT" generate --model "$run/final" --input ask.jsonl --output a.jsonl
  expect_ok "generate with the merged model" "$ZT" generate --model "$merged" --input ask.jsonl --output m.jsonl
  grep -q '"completion":"daeb"' a.jsonl && cmp -s a.jsonl m.jsonl \
    && say "ok - zt generate answers as the merged model: $(cat a.jsonl)" || fail "generate: adapter $(cat a.jsonl), merged $(cat m.jsonl)"
}

# zt rlhf's starting point (t2300, t2304): the demo task's data (reverse a word; scripts/demo_data.py
# and demo_rl_data.py, pref_small.jsonl its first 2000 pairs), a character SentencePiece tokenizer,
# a 4-layer model and sft.toml, which trains it 150 steps into sft/ (under-trained on purpose)
rlhf_demo_sft() {
  need_cmd spm_train sentencepiece
  $PY "$ROOT/scripts/demo_data.py" .
  $PY "$ROOT/scripts/demo_rl_data.py" .
  head -2000 pref_train.jsonl > pref_small.jsonl
  spm_train --input=corpus.txt --model_prefix=tok --vocab_size=60 --model_type=char --minloglevel=2 \
    --user_defined_symbols='<|im_start|>,<|im_end|>' --hard_vocab_limit=false >/dev/null 2>&1 || fail "spm_train"
  "$ZT" init --arch llama --out model --seed 1 vocab_size=40 hidden_size=128 intermediate_size=352 \
    num_hidden_layers=4 num_attention_heads=4 num_key_value_heads=2 max_position_embeddings=256 \
    bos_token_id=1 eos_token_id=2 >/dev/null 2>&1 || fail "zt init"
  cp tok.model model/tokenizer.model
  cat > sft.toml <<'TOML'
[model]
path = "model"
[tokenizer]
chat_template = "chatml"
[data]
train = "train.jsonl"
format = "chat"
max_length = 256
[train]
max_steps = 150
micro_batch_size = 8
learning_rate = 3e-3
lr_scheduler_type = "cosine"
warmup_steps = 20
weight_decay = 0.01
seed = 1
[output]
dir = "sft"
TOML
  # The SFT run is the same wherever this suite run repeats it (the same zt and kernel level, data,
  # tokenizer and model): the first test trains it, the others copy its final/ from
  # ZT_TEST_SHARED (scripts/run-tests.sh), keyed by those inputs.
  local key shared=""
  key=$({ cat tok.model train.jsonl sft.toml model/config.json model/model.safetensors; echo "${ZT_CPU:-}"; } |
    sha256sum | cut -c1-16)
  [ -n "${ZT_TEST_SHARED:-}" ] && shared=$ZT_TEST_SHARED/rlhf-demo-sft-$key
  if [ -n "$shared" ] && [ -d "$shared" ]; then
    mkdir -p sft && cp -r "$shared" sft/final && say "ok - the SFT model an earlier test of this suite run trained"
    return
  fi
  expect_ok "an under-trained SFT model (150 steps)" "$ZT" sft sft.toml
  [ -n "$shared" ] && [ -d sft/final ] && cp -r sft/final "$shared.$$" && mv "$shared.$$" "$shared"
}

# rlhf_demo_pairs ALGORITHM DIR: a recipe that trains sft/final 200 steps with ALGORITHM on the demo's
# preference pairs (pref_small.jsonl, held out: pref_valid.jsonl), output in DIR
rlhf_demo_pairs() {
  cat <<TOML
[model]
path = "sft/final"
[tokenizer]
chat_template = "chatml"
[data]
train = "pref_small.jsonl"
valid = "pref_valid.jsonl"
format = "preference"
max_length = 64
[train]
max_steps = 200
micro_batch_size = 8
learning_rate = 3e-4
lr_scheduler_type = "constant"
logging_steps = 10
eval_steps = 200
seed = 1
[rlhf]
algorithm = "$1"
beta = 0.1
[output]
dir = "$2"
overwrite = true
TOML
}

# skip REASON: this test cannot run here; exit 77, which scripts/run-tests.sh counts as a skip
# (and CI=true counts as a failure: scripts/install-deps.sh has installed everything there)
skip() { say "skip: $*"; exit 77; }

# need_cmd COMMAND WHAT: skips unless COMMAND is installed
need_cmd() { command -v "$1" >/dev/null || skip "$1 ($2) is not installed (scripts/install-deps.sh installs it)"; }

# for tests of several ranks: skips without mpirun, else sets $MPI (one thread per rank)
need_mpi() {
  need_cmd mpirun "Open MPI"
  export OMP_NUM_THREADS=1
  MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none"
}

# random token documents for tests: random_tokens FILE SEED N [VOCAB [MIN MAX]] (ids below VOCAB,
# 64 by default; MIN to MAX - 1 tokens each, 5 to 29 by default)
random_tokens() {
  $PY - "$@" <<'PY'
import json, random, sys
path, seed, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
vocab = int(sys.argv[4]) if len(sys.argv) > 4 else 64
lo, hi = (int(sys.argv[5]), int(sys.argv[6])) if len(sys.argv) > 6 else (5, 30)
r = random.Random(seed)
with open(path, "w") as f:
    for i in range(n):
        f.write(json.dumps({"input_ids": [r.randrange(vocab) for _ in range(r.randrange(lo, hi))]}) + "\n")
PY
}

# a letters task for zt rlhf: prompts.jsonl, 16 prompts of 4 letters a-j and a space,
# reward.py, a reward program scoring a completion by its share of letters a-e, and grpo.toml, GRPO
# with LoRA on the model in m: letters_task STEPS MICRO_BATCH ACCUMULATION LORA_R ADAM_EPSILON
letters_task() {
  printf 'import json, sys\nfor l in sys.stdin:\n    c = json.loads(l)["completion"]\n    print(sum(x in "abcde" for x in c) / max(len(c), 1), flush=True)\n' > reward.py
  $PY -c "
import json, random
r = random.Random(7)
with open('prompts.jsonl', 'w') as f:
    for _ in range(16):
        f.write(json.dumps({'prompt': ''.join(r.choice('abcdefghij') for _ in range(4)) + ' '}) + '\n')"
  printf '%s\n' '[model]' 'path = "m"' 'dtype = "fp32"' '[data]' 'train = "prompts.jsonl"' 'format = "prompt"' \
    'max_length = 16' 'shuffle = false' '[train]' "max_steps = $1" "micro_batch_size = $2" \
    "gradient_accumulation_steps = $3" 'learning_rate = 1e-2' 'lr_scheduler_type = "constant"' "adam_epsilon = $5" \
    'logging_steps = 1' 'seed = 1' '[rlhf]' 'algorithm = "grpo"' 'num_generations = 4' 'max_new_tokens = 8' \
    'beta = 0.05' "reward_command = \"$PY reward.py\"" '[lora]' "r = $4" 'alpha = 16' 'target_modules = "all-linear"' \
    > grpo.toml
}

# kill_resume RUN FILE ARGS...: the job `RUN output.dir=killed ARGS...` (RUN a command or shell
# function, mpirun included) killed with kill -9, the whole job, between its first checkpoint and
# its end, then run again (train.resume = auto): its final/FILE must be bitwise that of the same
# job run uninterrupted into `long`. The swap files the killed job left in swap/ are removed.
kill_resume() {
  local run=$1 file=$2 pid at
  shift 2
  expect_ok "uninterrupted" $run output.dir=long "$@"
  $run output.dir=killed "$@" >killed.out 2>&1 &
  pid=$!
  for i in $(seq 1 400); do ls killed/checkpoints/*/DONE >/dev/null 2>&1 && break; sleep 0.05; done
  pkill -9 -P $pid; kill -9 $pid; wait $pid 2>/dev/null
  rm -f swap/*
  at=$(ls -d killed/checkpoints/*/DONE 2>/dev/null | tail -1)
  if [ -e killed/final ] || [ -z "$at" ]; then
    fail "the job was not killed between its first checkpoint and its end (${at:-no checkpoint})"
    return
  fi
  say "ok - killed after ${at%/DONE}"
  expect_ok "resume = auto after kill -9" $run output.dir=killed "$@"
  cmp -s long/final/$file killed/final/$file && say "ok - the resumed $file is bitwise the uninterrupted run's" \
    || fail "the resumed run's $file differs"
}

# peft_steps NAME BASE ADAPTER KEY [STEPS [LORA_LINE [EXPECTED]]]: STEPS (10) AdamW steps from the PEFT
# adapter ADAPTER on BASE with the settings of tests/fixtures/lora/make_fixture.py (LORA_LINE: one
# more key of [lora]) log the first STEPS losses of KEY in that fixture's expected.json (or in
# EXPECTED), each within 1e-4 relative (the tests that call it say why that bound)
peft_steps() {
  local name=$1 base=$2 adapter=$3 key=$4 steps=${5:-10} extra=${6:-} F=$ROOT/tests/fixtures/lora
  local expected=${7:-$ROOT/tests/fixtures/lora/expected.json}
  printf '[model]\npath = "%s"\ndtype = "fp32"\n[data]\ntrain = "%s/data.jsonl"\nformat = "tokens"\nmax_length = 32\npacking = false\nshuffle = false\n[train]\nmax_steps = %s\nmicro_batch_size = 2\nlogging_steps = 1\nlearning_rate = 1e-2\nlr_scheduler_type = "constant"\nweight_decay = 0.01\nadam_beta1 = 0.9\nadam_beta2 = 0.999\nadam_epsilon = 1e-8\nmax_grad_norm = 1.0\n[lora]\nadapter = "%s"\n%s\n' \
    "$base" "$F" "$steps" "$adapter" "$extra" > peft.toml
  expect_ok "$name: $steps steps from PEFT's adapter" "$ZT" pretrain peft.toml output.dir=peft-$name
  sed -n "/\"$key\"/,/]/p" "$expected" | sed 1d | grep -oE '[0-9][0-9.e+-]*' | head -n "$steps" > want.txt
  grep -oE '"loss":[0-9.e+-]+' peft-$name/metrics.jsonl | cut -d: -f2 > got.txt
  if [ "$(wc -l < want.txt)" = "$steps" ] && paste got.txt want.txt | awk -v n="$steps" '
      { d = $1 - $2; if (d < 0) d = -d; if (d > 1e-4 * $2) bad = 1 } END { exit bad || NR != n }'; then
    say "ok - $name: the $steps losses are PEFT's"
  else
    fail "$name: losses: $(paste got.txt want.txt | tr '\n\t' '; ')"
  fi
}

done_testing() {
  if [ "$fails" -gt 0 ]; then say "$fails check(s) failed"; exit 1; fi
  say "all checks passed"
}
