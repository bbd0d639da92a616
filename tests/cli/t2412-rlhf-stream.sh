#!/usr/bin/env bash
# GRPO and PPO on a streamed base (ZeRO stage 3 with offload.param = "nvme" or "cpu"):
# generation acquires the base unit by unit through ZeRO's hooks, every prompt's completions
# decoded together, instead of gathering it whole; 2 ranks in lockstep as 1 rank. LoRA on an NF4 base and on an fp32
# base with the MLP, the embedding and the head in tiles: the same completions, rewards, losses,
# KL and gradient norms, and the same adapters, bit for bit, as the base held whole (stage 0);
# PPO's completions and rewards alike; the gathered peak of a streamed run (summary.json) a few
# units, not the whole model.
. "$(dirname "$0")/lib.sh"
need_cmd spm_train sentencepiece
need_mpi
export ROOT # same.py reads safetensors with llama_ref.py's reader

printf 'abcdefghij\n%.0s' {1..20} > corpus.txt
spm_train --input=corpus.txt --model_prefix=tok --vocab_size=16 --model_type=char --minloglevel=2 \
  --hard_vocab_limit=false >/dev/null 2>&1 || fail "spm_train"
make_tiny m bos_token_id=1 eos_token_id=2 num_hidden_layers=6 && cp tok.model m/tokenizer.model || { fail "setup"; exit 1; }
# the prompts, the reward (the share of the completion's letters in a-e) and GRPO with LoRA;
# 2 micro-batches of 4 rows: 2 prompts × 4 completions a step (GRPO), 8 prompts (PPO)
letters_task 2 4 2 4 1
mkdir swap
NF4="lora.quantize_base=nf4 lora.double_quant=true"
NVME="zero.stage=3 offload.param=nvme offload.nvme_path=swap"
TILES="zero.mlp_tiles=2 zero.embedding_tiles=2 zero.head_tiles=2"

# same.py A B [WHOLE]: the metrics of every step and the adapters bit for bit; with WHOLE
# (the base's fp32 weights, bytes), B's gathered peak (summary.json) under a quarter of it (where the
# slices are in memory: the NVMe store counts its staging buffers there too)
cat > same.py <<'PY'
import json, os, sys
exec(open(os.environ["ROOT"] + "/tests/cli/llama_ref.py").read().split("def inv_freq")[0])
a, b = sys.argv[1], sys.argv[2]
rows = lambda d: [r for r in map(json.loads, open(d + "/metrics.jsonl")) if "split" not in r]
keys = ("loss", "kl", "reward_mean", "reward_std", "completion_length", "completions", "grad_norm")
ra, rb = rows(a), rows(b)
assert len(ra) == len(rb) == 2, (ra, rb)
for x, y in zip(ra, rb):
    assert all(x[k] == y[k] for k in keys), (x, y)
A, B = read_st(a + "/final/adapter_model.safetensors"), read_st(b + "/final/adapter_model.safetensors")
assert A.keys() == B.keys() and all(A[t].tobytes() == B[t].tobytes() for t in A), "adapters differ"
if len(sys.argv) > 3:
    peak = json.load(open(b + "/summary.json"))["model_state_bytes"]["gathered_peak"]
    print("gathered peak", peak, "bytes, the whole base", sys.argv[3], file=sys.stderr)
    assert 0 < peak < int(sys.argv[3]) / 4, (peak, sys.argv[3])
PY
same() { # same WHAT A B [WHOLE]
  local what=$1; shift
  $PY same.py "$@" 2>"$TMP/same" && say "ok - $what ($(cat "$TMP/same"))" || fail "$what: $(cat "$TMP/same")"
}
WHOLE=$(( $(test_tool layout m | sed -n 's/^numel //p') * 4 ))

expect_ok "GRPO, NF4 base held whole" "$ZT" rlhf grpo.toml $NF4 output.dir=nf4-whole
expect_ok "GRPO, NF4 base streamed from NVMe" "$ZT" rlhf grpo.toml $NF4 $NVME output.dir=nf4-nvme
same "GRPO: the streamed NF4 base generates and trains bitwise as held whole" nf4-whole nf4-nvme
# PPO: the actor's base streamed, the critic's frozen model held whole either way (its adapters
# replicated as the actor's: trained as a sharded model, they were left with no gradient)
expect_ok "PPO, NF4 base held whole" "$ZT" rlhf grpo.toml rlhf.algorithm=ppo $NF4 output.dir=ppo-whole
expect_ok "PPO, NF4 base streamed from NVMe" "$ZT" rlhf grpo.toml rlhf.algorithm=ppo $NF4 $NVME output.dir=ppo-nvme
$PY - > "$TMP/ppo" 2>&1 <<'PY'
import json, os
exec(open(os.environ["ROOT"] + "/tests/cli/llama_ref.py").read().split("def inv_freq")[0])
keys = ("loss", "kl", "reward_mean", "reward_std", "completion_length", "completions", "grad_norm", "value_loss",
        "clip_fraction", "value_clip_fraction", "critic_grad_norm")
a, b = ([r for r in map(json.loads, open(d + "/metrics.jsonl")) if "split" not in r] for d in ("ppo-whole", "ppo-nvme"))
assert len(a) == len(b) == 2 and all(x["critic_grad_norm"] > 0 for x in a + b), (a, b)
assert all(x[k] == y[k] for x, y in zip(a, b) for k in keys), (a, b)
for f in ("final/adapter_model.safetensors", "critic/adapter_model.safetensors"):
    A, B = read_st("ppo-whole/" + f), read_st("ppo-nvme/" + f)
    assert A.keys() == B.keys() and all(A[t].tobytes() == B[t].tobytes() for t in A), f + " differs"
PY
[ $? = 0 ] && say "ok - PPO: the streamed NF4 base generates, and actor and critic train, bitwise as held whole" ||
  fail "PPO streamed trains otherwise: $(tail -3 "$TMP/ppo")"
expect_ok "GRPO, fp32 base streamed from NVMe" "$ZT" rlhf grpo.toml $NVME output.dir=fp32-nvme
expect_ok "GRPO, fp32 base held whole" "$ZT" rlhf grpo.toml output.dir=fp32-whole
same "GRPO: the streamed fp32 base generates and trains bitwise as held whole" fp32-whole fp32-nvme
expect_ok "GRPO, tiled fp32 base held whole" "$ZT" rlhf grpo.toml $TILES output.dir=tiles-whole
expect_ok "GRPO, tiled fp32 base, offload.param = cpu" "$ZT" rlhf grpo.toml $TILES zero.stage=3 offload.param=cpu \
  output.dir=tiles-cpu
same "GRPO: the tiled base streamed from memory, bitwise as held whole, a few tiles held" \
  tiles-whole tiles-cpu $WHOLE

# 2 ranks in lockstep (each unit's gather a collective; NF4 streamed from NVMe, the tiled fp32
# base from memory, its gathered peak a few units): 1 prompt × 4 completions a rank and
# micro-batch against 2 × 4 on one rank, the same completions (each prompt's drawn from its
# streams and decoded in a group of its own), so the same rewards and lengths (their means summed
# per rank first: 1e-12 relative); the losses, KL and adapters within the reach of the adapters'
# summation order across ranks (tests/cli/t2402-lora-rlhf.sh)
expect_ok "GRPO, NF4 base streamed from NVMe, 2 ranks" $MPI -np 2 "$ZT" rlhf grpo.toml $NF4 $NVME \
  train.micro_batch_size=2 output.dir=nf4-n2
expect_ok "GRPO, NF4 base held whole, 2 ranks" $MPI -np 2 "$ZT" rlhf grpo.toml $NF4 zero.stage=2 \
  train.micro_batch_size=2 output.dir=nf4-n2-whole
expect_ok "GRPO, tiled fp32 base, offload.param = cpu, 2 ranks" $MPI -np 2 "$ZT" rlhf grpo.toml $TILES zero.stage=3 \
  offload.param=cpu train.micro_batch_size=2 output.dir=tiles-n2
WHOLE=$WHOLE $PY - <<'PY' && say "ok - GRPO: 2 ranks streaming in lockstep generate as 1 rank, a few units held" \
  || fail "GRPO streamed on 2 ranks"
import json, os
rows = lambda d: [r for r in map(json.loads, open(d + "/metrics.jsonl")) if "split" not in r]
peak = json.load(open("tiles-n2/summary.json"))["model_state_bytes"]["gathered_peak"]
assert 0 < peak < int(os.environ["WHOLE"]) / 4, (peak, os.environ["WHOLE"])
pairs = (("nf4-whole", "nf4-n2"), ("nf4-n2-whole", "nf4-n2"), ("tiles-whole", "tiles-n2"))
for a, b in ((rows(x), rows(y)) for x, y in pairs):
    assert len(a) == len(b) == 2, (a, b)
    for x, y in zip(a, b):
        assert abs(x["reward_mean"] - y["reward_mean"]) <= 1e-12 * x["reward_mean"], (x, y)
        assert x["completion_length"] == y["completion_length"] and x["completions"] == y["completions"], (x, y)
        for k in ("loss", "kl"):
            assert abs(x[k] - y[k]) <= 1e-5 * max(abs(x[k]), abs(y[k])) + 1e-9, (x["step"], k, x[k], y[k])
PY
# PPO on 2 ranks in lockstep: 4 prompts, a completion each, a rank (whose completions all stop
# first, in some steps) running passes for the other's sake; step 1's completions as 1 rank's
expect_ok "PPO, NF4 base streamed from NVMe, 2 ranks" $MPI -np 2 "$ZT" rlhf grpo.toml rlhf.algorithm=ppo $NF4 $NVME \
  train.micro_batch_size=2 train.max_steps=4 output.dir=ppo-n2
$PY - <<'PY' && say "ok - PPO: 2 ranks streaming in lockstep generate as 1 rank" || fail "PPO streamed on 2 ranks"
import json
a, b = ([r for r in map(json.loads, open(d + "/metrics.jsonl")) if "split" not in r] for d in ("ppo-whole", "ppo-n2"))
assert len(b) == 4, b
assert abs(a[0]["reward_mean"] - b[0]["reward_mean"]) <= 1e-12 * a[0]["reward_mean"], (a[0], b[0])
assert all(a[0][k] == b[0][k] for k in ("completion_length", "completions")), (a[0], b[0])
PY
[ -z "$(ls swap)" ] && say "ok - the swap files are gone" || fail "swap files left: $(ls swap)"
done_testing
