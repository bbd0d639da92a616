#!/usr/bin/env bash
# zt launch across a real network: two "hosts" made of network namespaces on this
# machine, joined by a veth pair in a private /24. zt launch --launcher ssh runs in
# the first namespace with an `ip netns exec` script as the remote shell, so Open
# MPI's daemons and ranks start in both; Open MPI talks TCP over the veth only.
# Checks: each rank runs in the namespace its hostfile line says, an MPI_Allreduce
# across the link gives the right sum, and --include with a slot list places ranks
# and devices per host. docs/launch.md describes the testbed.
# Needs root and network namespaces; skips (exit 77) with a message where they are not allowed.
# kernel levels: own only (what it checks does not depend on the CPU kernels)
. "$(dirname "$0")/lib.sh"

need_cmd mpirun "Open MPI"
need_cmd mpicc libopenmpi-dev
need_cmd ip iproute2
[ "$(id -u)" = 0 ] || skip "network namespaces need root"

. "$ROOT/scripts/netns-testbed.sh"
cleanup() { testbed_down; rm -rf "$TMP"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
testbed_up "$TMP" || skip "$TB_ERR"
A=$TB_A B=$TB_B NET=$TB_NET VA=$TB_VA
ns_a=$(ip netns exec "$A" readlink /proc/self/ns/net) ns_b=$(ip netns exec "$B" readlink /proc/self/ns/net)
say "testbed: $A ($NET.1, $ns_a) <-veth-> $B ($NET.2, $ns_b)"

cat > allreduce.c <<'C'
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* every rank adds rank+1 into n doubles; prints its namespace, the sum and the time */
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, n = argc > 1 ? atoi(argv[1]) : 1 << 20, ok = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double *x = malloc((size_t)n * sizeof *x), want = size * (size + 1) / 2.0;
    for (int i = 0; i < n; i++) x[i] = rank + 1;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double ms = (MPI_Wtime() - t0) * 1e3;
    for (int i = 0; i < n; i++) ok &= x[i] == want;
    char ns[64] = "?";
    ssize_t len = readlink("/proc/self/ns/net", ns, sizeof ns - 1);
    ns[len > 0 ? len : 1] = 0;
    printf("rank %d of %d ns %s sum %.0f %s %.1f ms\n", rank, size, ns, x[0], ok ? "ok" : "WRONG", ms);
    free(x);
    MPI_Finalize();
    return !ok;
}
C
mpicc -O2 allreduce.c -o allreduce || { fail "mpicc"; done_testing; }

launch() { testbed_launch 60 "$@"; }

expect_ok "ranks start in both namespaces" launch -- \
  /bin/sh -c 'echo "rank $OMPI_COMM_WORLD_RANK $(readlink /proc/self/ns/net) $(ip -o -4 addr show scope global | awk "{print \$4}")"'
want="rank 0 $ns_a $NET.1/24|rank 1 $ns_a $NET.1/24|rank 2 $ns_b $NET.2/24|rank 3 $ns_b $NET.2/24|"
got=$(sort "$TMP/out" | tr '\n' '|')
[ "$got" = "$want" ] && say "ok - ranks 0,1 in $A and 2,3 in $B, each seeing its own veth address" \
  || fail "placement: got '$got', wanted '$want'"

tx0=$(ip netns exec "$A" cat "/sys/class/net/$VA/statistics/tx_bytes")
start=$(date +%s%N)
expect_ok "MPI_Allreduce across the link" launch --log-dir logs -- ./allreduce 1048576
ms=$(( ($(date +%s%N) - start) / 1000000 ))
tx1=$(ip netns exec "$A" cat "/sys/class/net/$VA/statistics/tx_bytes")
cat "$TMP/out" >&2
n_ok=$(grep -c "^rank [0-3] of 4 ns .* sum 10 ok " "$TMP/out")
[ "$n_ok" = 4 ] && say "ok - 4 ranks, 1M doubles each, all sums 10" || fail "allreduce: $n_ok of 4 ranks right"
grep -qF "rank 0 of 4 ns $ns_a " "$TMP/out" && grep -qF "rank 3 of 4 ns $ns_b " "$TMP/out" \
  || fail "allreduce ranks are not in the namespaces the hostfile says"
# B's ranks cannot hold the sum without at least half of A's 8 MiB partial sum crossing over
moved=$(( (tx1 - tx0) / 1024 ))
[ "$moved" -ge 4096 ] && say "ok - $moved KiB left $A over the veth (launch + allreduce: $ms ms)" \
  || fail "only $moved KiB crossed the veth; the allreduce did not use the link"
[ "$(ls logs/1 2>/dev/null | tr '\n' ' ')" = "rank.0 rank.1 rank.2 rank.3 " ] && grep -q "sum 10 ok" logs/1/rank.3/stdout \
  && say "ok - per-rank logs of both hosts under logs/1/rank.N" || fail "logs: $(find logs -type f 2>/dev/null | tr '\n' ' ')"

expect_ok "zt itself as PROGRAM on both hosts" launch -- "$ZT" version
[ "$(grep -c '^zt ' "$TMP/out")" = 4 ] && say "ok - 4 ranks of '$ZT version'" || fail "zt version: $(cat "$TMP/out")"

# a slot list: one rank on A using slot 1, both slots of B; ZT_RANKS_PER_NODE is not set (uneven)
expect_ok "--include $A:1@$B" launch --include "$A:1@$B" -- \
  /bin/sh -c 'echo "rank $OMPI_COMM_WORLD_RANK of $OMPI_COMM_WORLD_SIZE $(readlink /proc/self/ns/net) dev=${CUDA_VISIBLE_DEVICES-all} rpn=${ZT_RANKS_PER_NODE-unset}"'
want="rank 0 of 3 $ns_a dev=1 rpn=unset|rank 1 of 3 $ns_b dev=all rpn=unset|rank 2 of 3 $ns_b dev=all rpn=unset|"
got=$(sort "$TMP/out" | tr '\n' '|')
[ "$got" = "$want" ] && say "ok - rank 0 on $A with CUDA_VISIBLE_DEVICES=1, ranks 1,2 on $B" \
  || fail "--include: got '$got', wanted '$want'"

# a rank failing on the far host fails the job
launch -- /bin/sh -c '[ $OMPI_COMM_WORLD_RANK = 3 ] && exit 5; exit 0' >"$TMP/out" 2>"$TMP/err"
code=$?
[ "$code" != 0 ] && [ "$code" != 124 ] && say "ok - rank 3 (on $B) exiting 5 makes zt launch exit $code" \
  || fail "a rank failing on $B gave exit $code"

# ZeRO training across the link: 4 ranks on the two hosts train like one rank at stages 2
# and 3, and the gradient reduce-scatter (and stage 3's gathers) cross between the hosts
make_tiny "$TMP/model"
$PY - <<'PY'
import json, random
r = random.Random(5)
with open("data.jsonl", "w") as f:
    for i in range(40):
        f.write(json.dumps({"input_ids": [r.randrange(64) for _ in range(r.randrange(5, 30))]}) + "\n")
PY
printf '[model]\npath = "model"\ndtype = "fp32"\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 32\npacking = false\n[train]\nmax_steps = 3\nmicro_batch_size = 1\nlogging_steps = 1\n' > "$TMP/recipe.toml"
# micro-batches of 1 on both: the same products, only the gradients summed in another grouping;
# 1e-5 on the losses for the reasons (and measurements) in t1500-zero.sh
expect_ok "one rank, accumulation 4" env OMP_NUM_THREADS=1 "$ZT" pretrain "$TMP/recipe.toml" output.dir="$TMP/one" \
  train.gradient_accumulation_steps=4
for stage in 2 3; do
  expect_ok "ZeRO-$stage training on 4 ranks over the two hosts" launch -- "$ZT" pretrain "$TMP/recipe.toml" \
    output.dir="$TMP/multi$stage" zero.stage=$stage train.gradient_accumulation_steps=1
  $PY - "$TMP" $stage <<'PY' && say "ok - stage $stage: the same losses as one rank; bytes crossed between the hosts" \
    || fail "multi-host training at stage $stage differs"
import json, sys
t, stage = sys.argv[1], sys.argv[2]
a = [json.loads(l) for l in open(t + "/one/metrics.jsonl")]
b = [json.loads(l) for l in open(t + "/multi" + stage + "/metrics.jsonl")]
assert len(a) == len(b) == 3
for x, y in zip(a, b):
    assert abs(x["loss"] - y["loss"]) <= 1e-5 * x["loss"], (x["loss"], y["loss"])
    assert y["comm_bytes_inter"] > 0 and y["comm_bytes_intra"] > 0, y
    assert stage == "2" or y["comm_bytes_fwd_gather"] > 0 and y["comm_bytes_bwd_gather"] > 0, y
PY
done
done_testing
