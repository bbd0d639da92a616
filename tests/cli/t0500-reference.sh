#!/usr/bin/env bash
# zt's forward pass against an independent NumPy implementation of the Hugging Face
# models (tests/cli/llama_ref.py), on small models with every feature zt reads from
# config.json; and packed sequences give the same loss as one sequence per row.
. "$(dirname "$0")/lib.sh"

$PY - <<'PY'
import json, random
r = random.Random(11)
with open("data.jsonl", "w") as f:
    for n in (5, 17, 9, 30, 2, 12):
        f.write(json.dumps({"input_ids": [r.randrange(64) for _ in range(n)]}) + "\n")
PY
printf '[model]\npath = "m"\ndtype = "fp32"\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 32\nshuffle = false\n[train]\nmicro_batch_size = 2\nmax_steps = 1\n' > recipe.toml

check() { # check NAME [config_key=value ...] (rope_scaling=llama3|linear is written into config.json)
  local name=$1; shift
  local args=() scaling=""
  for a in "$@"; do case $a in rope_scaling=*) scaling=${a#*=} ;; *) args+=("$a") ;; esac; done
  rm -rf m && make_tiny m "${args[@]}" && $PY "$ROOT/tests/cli/llama_ref.py" perturb m || { fail "$name: setup"; return; }
  if [ -n "$scaling" ]; then
    $PY - "$scaling" <<'PY'
import json, sys
c = json.load(open("m/config.json"))
c["rope_scaling"] = {"rope_type": "linear", "factor": 4.0} if sys.argv[1] == "linear" else \
    {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 16}
json.dump(c, open("m/config.json", "w"))
PY
  fi
  local ref zt_packed zt_rows
  ref=$($PY "$ROOT/tests/cli/llama_ref.py" loss m data.jsonl)
  zt_rows=$("$ZT" eval recipe.toml data.packing=false) || { fail "$name: zt eval"; return; }
  zt_packed=$("$ZT" eval recipe.toml data.packing=true) || { fail "$name: zt eval (packed)"; return; }
  # zt in fp32 against float64: every dot product has at most 64 terms (hidden 32, intermediate
  # and vocabulary 64), so it is within 64·2^-24 ≈ 4e-6 of the sum of its terms' magnitudes
  # whatever order the BLAS kernels and target clones sum in; the norms renormalise what the
  # residual stream carries, and the loss (≈ 8 with these weights) is within twice the largest
  # logit error of exact. With sums of magnitude below 10 through about three products in series
  # that is 3e-5 relative if every rounding went one way, under 2e-6 for roundings of random
  # sign (sqrt(64)·2^-24 a product): 1e-5 sits between. Measured with OpenBLAS's Prescott,
  # Haswell and Cooperlake kernels: at most 1.4e-7.
  $PY - "$ref" "$zt_rows" "$zt_packed" <<'PY' && say "ok - $name: $ref" || fail "$name: reference $ref, zt $zt_rows, packed $zt_packed"
import json, sys
ref, rows, packed = (json.loads(a) for a in sys.argv[1:])
assert ref["tokens"] == rows["target_tokens"] == packed["target_tokens"]
assert abs(ref["loss"] - rows["loss"]) < 1e-5 * ref["loss"]
assert abs(ref["loss"] - packed["loss"]) < 1e-5 * ref["loss"]
PY
}

check "llama, GQA"
check "llama, tied head, attention_bias" tie_word_embeddings=true attention_bias=true
check "qwen2 (q/k/v bias)" model_type=qwen2
check "mistral with a sliding window of 4" model_type=mistral sliding_window=4
check "qwen3 (q/k norms, head_dim 16, attention_bias)" model_type=qwen3 head_dim=16 attention_bias=true
# rope scaling: zt init writes none, so edit config.json
check "llama3 rope scaling" rope_theta=500000 rope_scaling=llama3
check "linear rope scaling" rope_scaling=linear
done_testing
