#!/usr/bin/env bash
# ZeRO stage 3: the model state a rank holds is 1/N of one rank's (within 5%, plus
# padding) at N = 1, 2 and 4; a step moves the ZeRO paper's 3M, per micro-step (forward
# gather, backward gather, gradient reduce-scatter, each (N-1)/N·M received per rank);
# prefetching changes no bit of the result; a tied embedding and bf16 train as at stage
# 0; checkpoints re-shard between stage 3 and the other stages, and a job killed with
# SIGKILL resumes bitwise. A model computed in tiles (memory-centric tiling) trains like
# one in whole units.
. "$(dirname "$0")/lib.sh"
need_mpi

make_tiny model num_hidden_layers=4
random_tokens data.jsonl 3 60
printf '[model]\npath = "model"\ndtype = "fp32"\nactivation_checkpointing = false\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 32\npacking = false\n[train]\nmax_steps = 4\nmicro_batch_size = 1\nlearning_rate = 1e-3\nlogging_steps = 1\n[zero]\nstage = 3\n' > recipe.toml

expect_ok "one rank, accumulation 4" "$ZT" pretrain recipe.toml output.dir=n1 train.gradient_accumulation_steps=4
expect_ok "2 ranks, accumulation 2" $MPI -np 2 "$ZT" pretrain recipe.toml output.dir=n2 train.gradient_accumulation_steps=2
expect_ok "4 ranks, accumulation 1" $MPI -np 4 "$ZT" pretrain recipe.toml output.dir=n4 train.gradient_accumulation_steps=1

# the model's units and each rank's slices of them, as zt lays them out (zt-test-tool layout)
for n in 1 2 4; do test_tool layout model --world $n --stage 3 > layout-$n.txt || fail "zt-test-tool layout, $n ranks"; done
cat > layout.py <<'PY'
def layout(n):
    """The flat array's elements, the units as (kind, elements) and each rank's elements at stage 3 on n ranks."""
    numel, units, ranks = 0, [], {}
    for f in (line.split() for line in open(f"layout-{n}.txt")):
        if f[0] == "numel": numel = int(f[1])
        elif f[0] == "unit": units.append((f[2], int(f[4])))
        elif f[0] == "rank": ranks[int(f[1])] = int(f[2])
    return numel, units, ranks
PY

$PY - <<'PY' && say "ok - model state per rank is 1/N of one rank's" || fail "stage 3 memory"
import json
from layout import layout
numel, units, _ = layout(1)
one = json.load(open("n1/summary.json"))["model_state_bytes"]
total1 = one["params"] + one["grads"] + one["optimizer"]
assert total1 == 16 * numel, (total1, numel)
for n in (2, 4):
    s = json.load(open(f"n{n}/summary.json"))
    assert s["zero_stage"] == 3, s
    b = s["model_state_bytes"]
    got = b["params"] + b["grads"] + b["optimizer"]
    # rank 0 reports its slices: fp32 weights, gradient and AdamW's m and v of each element
    assert got == 16 * layout(n)[2][0], (n, got, layout(n)[2][0])
    padding = 16 * len(units)  # rank 0 holds ceil(unit / N) of each unit
    assert abs(got - total1 / n) <= 0.05 * total1 / n + padding, (n, got, total1 / n)
    # the gathered units: the current one and the prefetched (prefetch_layers = 1), with the gradient in backward
    assert 0 < b["gathered_peak"] <= 4 * 3 * max(k for _, k in units), b
    print(f"N={n}: {got} bytes of model state per rank, 1-rank/N = {total1 / n:.0f}; gathered at most {b['gathered_peak']}")
PY

$PY - <<'PY' && say "ok - a step moves 3M per micro-step: forward gather, backward gather, reduce-scatter" || fail "stage 3 communication"
import json
from layout import layout
numel, units, _ = layout(1)
M = 4 * numel  # fp32 bytes of the model
# the embedding's backward reads no weights; the head's runs with its forward: the layers are gathered again
layers = 4 * sum(k for kind, k in units if kind.startswith("layer."))
assert 0 < layers < M, (layers, M)
for n, A in ((2, 2), (4, 1)):
    for row in map(json.loads, open(f"n{n}/metrics.jsonl")):
        # metrics sum the bytes every rank received: N × (N-1)/N × M per gather of the whole model
        want = {"fwd_gather": A * (n - 1) * M, "bwd_gather": A * (n - 1) * layers, "grad_reduce": A * (n - 1) * M}
        for k, v in want.items():
            assert row["comm_bytes_" + k] == v, (n, k, row["comm_bytes_" + k], v)
        got = sum(row["comm_bytes_" + k] for k in want)
        assert abs(got - 3 * A * (n - 1) * M) <= 0.05 * 3 * A * (n - 1) * M, (n, got, 3 * A * (n - 1) * M)
        assert row["comm_bytes_inter"] == 0 and row["comm_bytes_intra"] >= got, row
    print(f"N={n}, A={A}: {got} bytes a step, 3·A·(N-1)·M = {3 * A * (n - 1) * M}")
PY

# same_run.py A B [TOL]: final weights within TOL of each tensor's largest, losses within TOL
# relative. 1e-5 by default: micro-batches of 1 everywhere, the same products with the
# gradients summed in another grouping (the reasons and measurements are in t1500-zero.sh)
same() { $PY "$ROOT/tests/cli/same_run.py" "$@" >/dev/null; }
same n1 n2 && same n1 n4 && say "ok - 2 and 4 ranks at stage 3 train like one" || fail "stage 3 differs from one rank"

for k in 0 3; do
  expect_ok "2 ranks, prefetch_layers = $k" $MPI -np 2 "$ZT" pretrain recipe.toml output.dir=p$k \
    train.gradient_accumulation_steps=2 zero.prefetch_layers=$k
  cmp -s n2/final/model.safetensors p$k/final/model.safetensors && say "ok - prefetch_layers = $k: the same bits" \
    || fail "prefetch_layers = $k changed the result"
done

make_tiny tied num_hidden_layers=3 tie_word_embeddings=true
expect_ok "tied embedding, one rank" "$ZT" pretrain recipe.toml model.path=tied output.dir=t1 train.gradient_accumulation_steps=6
expect_ok "tied embedding, 3 ranks" $MPI -np 3 "$ZT" pretrain recipe.toml model.path=tied output.dir=t3 \
  train.gradient_accumulation_steps=2
same t1 t3 && say "ok - a tied embedding at stage 3 trains like one rank" || fail "tied embedding at stage 3"

expect_ok "bf16, 2 ranks, stage 0" $MPI -np 2 "$ZT" pretrain recipe.toml model.dtype=bf16 output.dir=b0 zero.stage=0 \
  train.gradient_accumulation_steps=2
expect_ok "bf16, 2 ranks, stage 3" $MPI -np 2 "$ZT" pretrain recipe.toml model.dtype=bf16 output.dir=b3 \
  train.gradient_accumulation_steps=2
# bf16 weights: a last-bit difference of the fp32 masters may round to the next bf16 value,
# one bf16 ulp, at most 2^-7 ≈ 7.8e-3 of the value and so of the tensor's largest: 1e-2; the
# losses are computed on those bf16 copies, a few weights one ulp apart moving them less
same b0 b3 1e-2 && say "ok - bf16 at stage 3 trains like stage 0" || fail "bf16 at stage 3"

# checkpoints: a job killed after step 2's checkpoint resumes bitwise; stage 3's shards
# resume at stage 1 on 4 ranks and on one rank
expect_ok "2 ranks with checkpoints" $MPI -np 2 "$ZT" pretrain recipe.toml output.dir=full train.save_steps=2 \
  train.gradient_accumulation_steps=2
cp -r full cut && rm -rf cut/final cut/summary.json cut/checkpoints/step-000004
expect_ok "resume = auto at stage 3" $MPI -np 2 "$ZT" pretrain recipe.toml output.dir=cut train.gradient_accumulation_steps=2
cmp -s full/final/model.safetensors cut/final/model.safetensors && say "ok - stage 3 resumes bitwise" \
  || fail "stage 3 resume differs"
cp -r cut stage1 && rm -rf stage1/final stage1/summary.json
expect_ok "resume at stage 1 on 4 ranks" $MPI -np 4 "$ZT" pretrain recipe.toml output.dir=stage1 zero.stage=1 \
  train.gradient_accumulation_steps=1
cp -r cut single && rm -rf single/final single/summary.json
expect_ok "resume on one rank" "$ZT" pretrain recipe.toml output.dir=single train.gradient_accumulation_steps=4
same full stage1 && same full single && say "ok - stage 3 checkpoints re-shard" || fail "re-sharded resume"
# kill -9 of the whole job (mpirun and every rank) after its first checkpoint, then resume = auto
expect_ok "uninterrupted, 600 steps" $MPI -np 2 "$ZT" pretrain recipe.toml output.dir=long train.max_steps=600 \
  train.save_steps=20 train.gradient_accumulation_steps=2
$MPI -np 2 "$ZT" pretrain recipe.toml output.dir=killed train.max_steps=600 train.save_steps=20 \
  train.gradient_accumulation_steps=2 >killed.out 2>&1 &
pid=$!
for i in $(seq 1 400); do ls killed/checkpoints/*/DONE >/dev/null 2>&1 && break; sleep 0.05; done
pkill -9 -P $pid; kill -9 $pid; wait $pid 2>/dev/null
at=$(ls -d killed/checkpoints/*/DONE 2>/dev/null | tail -1)
if [ -e killed/final ] || [ -z "$at" ]; then
  fail "the job was not killed between its first checkpoint and its end (${at:-no checkpoint})"
else
  say "ok - killed after ${at%/DONE}, at step $($PY -c "import json; print(json.loads(open('killed/metrics.jsonl').readlines()[-1])['step'])")"
  expect_ok "resume = auto after kill -9" $MPI -np 2 "$ZT" pretrain recipe.toml output.dir=killed train.max_steps=600 \
    train.save_steps=20 train.gradient_accumulation_steps=2
  cmp -s long/final/model.safetensors killed/final/model.safetensors && say "ok - bitwise identical to the uninterrupted run" \
    || fail "the resumed run differs from the uninterrupted one"
fi
expect_ok "zt export of a stage 3 checkpoint" "$ZT" export full/checkpoints/step-000002 --out exported
expect_ok "eval of the export" "$ZT" eval recipe.toml --checkpoint exported

# memory-centric tiling: a vocabulary of 2048 and an intermediate size of 1024 make the
# embedding and the LM head 7x, and each MLP 10x, the rest of a layer. In 4 tiles each
# (zero.embedding_tiles, zero.mlp_tiles, zero.head_tiles), each tile gathered, used and
# reduced on its own, the model trains like in whole units (the same products, summed in
# another order) on 1 and 2 ranks, with and without checkpointing (which gathers an MLP's
# tiles twice in backward), at less than 0.3x the peak of gathered state; with the slices
# in a swap file it is bitwise the same
make_tiny wide num_hidden_layers=2 vocab_size=2048 intermediate_size=1024
T="zero.embedding_tiles=4 zero.mlp_tiles=4 zero.head_tiles=4"
tiles() { "$ZT" pretrain recipe.toml model.path=wide "$@"; }
mtiles() { $MPI -np 2 "$ZT" pretrain recipe.toml model.path=wide "$@"; }
expect_ok "whole units, 1 rank" tiles output.dir=h1 offload.param=cpu zero.prefetch_layers=0
expect_ok "tiles, 1 rank" tiles output.dir=h4 offload.param=cpu zero.prefetch_layers=0 $T
expect_ok "tiles, 1 rank, checkpointing" tiles output.dir=h4c offload.param=cpu model.activation_checkpointing=true $T
expect_ok "tiles, 1 rank, checkpointing, offload.param = nvme, prefetch 2" tiles output.dir=h4n offload.param=nvme \
  offload.optimizer=nvme offload.nvme_path=swap model.activation_checkpointing=true zero.prefetch_layers=2 $T
expect_ok "whole units, 2 ranks" mtiles output.dir=h1m zero.prefetch_layers=0
expect_ok "tiles, 2 ranks" mtiles output.dir=h4m zero.prefetch_layers=0 $T
expect_ok "tiles, 2 ranks, checkpointing, prefetch 2" mtiles output.dir=h4mc model.activation_checkpointing=true \
  zero.prefetch_layers=2 $T
# tiles split the head's and the MLPs' sums over the vocabulary / intermediate size (up to 2048
# terms) into 4 partial sums added up: fp32 sums regrouped, within 2048·2^-24 ≈ 1.2e-4 of the
# sum of their magnitudes worst case, about sqrt(2048)·2^-24 ≈ 3e-6 for terms of random sign;
# the loss, a mean over tokens of log-softmaxes of those sums, moves less, and 4 steps of AdamW
# pass the gradients' difference on at about its size (t1500-zero.sh): 1e-5 relative
$PY - <<'PY' && say "ok - the tiled model trains like whole units and holds less at once" || fail "tiles"
import json
def run(d):
    return [r["loss"] for r in map(json.loads, open(d + "/metrics.jsonl"))], json.load(open(d + "/summary.json"))
for one, four in (("h1", "h4"), ("h1", "h4c"), ("h1m", "h4m"), ("h1m", "h4mc")):
    (a, sa), (b, sb) = run(one), run(four)
    assert len(a) == len(b) == 4 and all(abs(x - y) <= 1e-5 * abs(x) for x, y in zip(a, b)), (one, four, a, b)
    if four in ("h4", "h4m"):
        assert sb["model_state_bytes"]["gathered_peak"] < 0.3 * sa["model_state_bytes"]["gathered_peak"], (sa, sb)
PY
cmp -s h4c/final/model.safetensors h4n/final/model.safetensors && say "ok - ...bitwise with the slices in a swap file" \
  || fail "tiles with offload.param = nvme differ"
for key in embedding_tiles mlp_tiles head_tiles; do
  expect_exit 2 "$key below stage 3" "zero.$key .* needs zero.stage = 3" \
    "$ZT" pretrain recipe.toml model.path=wide output.dir=bad zero.stage=2 zero.$key=4
done
expect_exit 2 "head tiles of a tied head" "zero.head_tiles = 4: the model's head is tied to the embedding" \
  "$ZT" pretrain recipe.toml model.path=tied output.dir=bad zero.head_tiles=4
expect_exit 2 "embedding tiles of a tied embedding" "zero.embedding_tiles = 4: the model's embedding is tied" \
  "$ZT" pretrain recipe.toml model.path=tied output.dir=bad zero.embedding_tiles=4
done_testing
