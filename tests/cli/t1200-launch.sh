#!/usr/bin/env bash
# zt launch on this machine: real Open MPI runs (ranks, per-rank logs, forwarded
# variables, .zt_env, exit codes), the exact --dry-run commands of the three
# backends, shell quoting of hostile words, and the one-line errors (exit 2).
# kernel levels: own only (what it checks does not depend on the CPU kernels)
. "$(dirname "$0")/lib.sh"

need_cmd mpirun "Open MPI"
root=$([ "$(id -u)" = 0 ] && echo "--allow-run-as-root ")
cores=$(nproc)
threads() { local t=$((cores / $1)); echo $((t > 0 ? t : 1)); }
# a controlled environment: only what a test names is forwarded
clean() { env -i PATH="$PATH" HOME="$HOME" "$@"; }

# --- real runs ---------------------------------------------------------------------------
expect_ok "3 ranks" "$ZT" launch --nproc-per-node 3 --oversubscribe -- \
  /bin/sh -c 'echo rank $OMPI_COMM_WORLD_RANK of $OMPI_COMM_WORLD_SIZE'
got=$(sort "$TMP/out" | tr '\n' '|')
[ "$got" = "rank 0 of 3|rank 1 of 3|rank 2 of 3|" ] && say "ok - ranks 0..2 of 3 each printed once" \
  || fail "3 ranks printed '$got'"

expect_ok "threads per rank and ranks per node" clean "$ZT" launch --nproc-per-node 3 --oversubscribe -- \
  /bin/sh -c 'echo "$OMP_NUM_THREADS $ZT_RANKS_PER_NODE"'
want="$(threads 3) 3"
[ "$(sort -u "$TMP/out")" = "$want" ] && say "ok - ranks see OMP_NUM_THREADS and ZT_RANKS_PER_NODE ($want)" \
  || fail "ranks saw '$(sort -u "$TMP/out" | tr '\n' '|')', wanted '$want'"
expect_ok "a user's OMP_NUM_THREADS wins" clean OMP_NUM_THREADS=7 "$ZT" launch --nproc-per-node 2 --oversubscribe -- \
  /bin/sh -c 'echo $OMP_NUM_THREADS'
[ "$(sort -u "$TMP/out")" = 7 ] && say "ok - OMP_NUM_THREADS=7 kept" || fail "OMP_NUM_THREADS became '$(cat "$TMP/out")'"

expect_ok "per-rank logs" "$ZT" launch --nproc-per-node 3 --oversubscribe --log-dir logs -- \
  /bin/sh -c 'echo out $OMPI_COMM_WORLD_RANK; echo err $OMPI_COMM_WORLD_RANK >&2'
for r in 0 1 2; do
  [ "$(cat logs/1/rank.$r/stdout 2>/dev/null)" = "out $r" ] && [ "$(cat logs/1/rank.$r/stderr 2>/dev/null)" = "err $r" ] \
    || fail "logs/1/rank.$r/{stdout,stderr} do not hold rank $r's output"
done
[ "$fails" = 0 ] && say "ok - logs/1/rank.N/stdout and stderr for ranks 0..2"

mkdir -p "$HOME" && printf 'ZT_FROM_HOME=home\nZT_BOTH=home\n' > "$HOME/.zt_env"
printf '# forwarded to every rank\n\nZT_FROM_FILE=hello world\nZT_BOTH=here\nPLAIN_VAR=$(not run)\n' > .zt_env
expect_ok "variables and .zt_env" clean ZT_FOO=1 NCCL_DEBUG=WARN "$ZT" launch --nproc-per-node 2 --oversubscribe -- \
  /bin/sh -c 'echo "$ZT_FOO|$NCCL_DEBUG|$ZT_FROM_FILE|$ZT_FROM_HOME|$ZT_BOTH|$PLAIN_VAR"'
want='1|WARN|hello world|home|here|$(not run)'
[ "$(sort -u "$TMP/out")" = "$want" ] && say "ok - ZT_FOO, NCCL_DEBUG and the .zt_env lines reach the ranks" \
  || fail "ranks saw '$(sort -u "$TMP/out" | tr '\n' '|')', wanted '$want'"
expect_ok "forwarded names in the command" clean ZT_FOO=1 OTHER=2 "$ZT" launch --dry-run -- /bin/true
grep -q -- "-x ZT_FOO " "$TMP/out" && ! grep -q OTHER "$TMP/out" && say "ok - -x ZT_FOO, no OTHER" \
  || fail "dry run: $(cat "$TMP/out")"
rm -f .zt_env "$HOME/.zt_env"

"$ZT" launch --nproc-per-node 3 --oversubscribe -- /bin/sh -c '[ $OMPI_COMM_WORLD_RANK = 1 ] && exit 3; exit 0' \
  >"$TMP/out" 2>"$TMP/err"
code=$?
[ "$code" != 0 ] && say "ok - a rank exiting 3 makes zt launch exit $code" || fail "a failed rank gave exit 0"

# --- exact commands ------------------------------------------------------------------------
printf '# two nodes\nnode1 slots=4   # first\n\nnode2 slots=4\n' > hf
expect_ok "dry run, mpirun" clean "$ZT" launch --dry-run --hostfile hf -- ./train --steps 3
want="mpirun ${root}--bind-to none -np 8 --host node1:4,node2:4 -x OMP_NUM_THREADS=$(threads 4) -x ZT_RANKS_PER_NODE=4 ./train --steps 3"
[ "$(cat "$TMP/out")" = "$want" ] && say "ok - mpirun command" || fail "mpirun command: $(cat "$TMP/out"), wanted $want"
expect_ok "dry run, ssh" clean "$ZT" launch --dry-run --launcher ssh --hostfile hf --nproc-per-node 2 --exclude node2 \
  --log-dir logs -- ./train
want="mpirun ${root}--bind-to none --output-filename logs --mca plm rsh --mca plm_rsh_agent ssh -np 2 --host node1:2 -x OMP_NUM_THREADS=$(threads 2) -x ZT_RANKS_PER_NODE=2 ./train"
[ "$(cat "$TMP/out")" = "$want" ] && say "ok - ssh command" || fail "ssh command: $(cat "$TMP/out"), wanted $want"
expect_ok "dry run, srun" clean "$ZT" launch --dry-run --launcher srun --hostfile hf --include 'node1:0,1@node2:0,1' -- ./train
want="OMP_NUM_THREADS=$(threads 2) ZT_RANKS_PER_NODE=2 srun --mpi=pmix --nodes=2 --nodelist=node1,node2 --ntasks=4 --ntasks-per-node=2 --export=ALL ./train"
[ "$(cat "$TMP/out")" = "$want" ] && say "ok - srun command" || fail "srun command: $(cat "$TMP/out"), wanted $want"

# hostile words come back from the shell as the same single words
hostile=('a;rm -rf /' "it's" 'two words' '$(touch pwned)' '`touch pwned2`' '' 'x"y' '--z=$HOME')
expect_ok "dry run, hostile arguments" "$ZT" launch --dry-run --log-dir 'l o;g' -- /bin/echo "${hostile[@]}"
logdir=
eval "set -- $(cat "$TMP/out")"
while [ $# -gt 0 ] && [ "$1" != /bin/echo ]; do [ "$1" = --output-filename ] && logdir=$2; shift; done
shift
[ "$logdir" != "l o;g" ] && fail "log dir came back as '$logdir'"
same=1
for w in "${hostile[@]}"; do [ "$1" = "$w" ] || same=0; shift; done
[ $same = 1 ] && [ $# = 0 ] && [ ! -e pwned ] && [ ! -e pwned2 ] && say "ok - every hostile word is one literal word" \
  || fail "quoting: $(cat "$TMP/out")"
expect_ok "hostile arguments reach the ranks as they are" "$ZT" launch -- /bin/sh -c 'printf "[%s]" "$@"' sh "${hostile[@]}"
[ "$(cat "$TMP/out")" = "[a;rm -rf /][it's][two words][\$(touch pwned)][\`touch pwned2\`][][x\"y][--z=\$HOME]" ] && [ ! -e pwned ] \
  && say "ok - the rank saw the same words" || fail "the rank saw $(cat "$TMP/out")"

# --- what the user can get wrong -----------------------------------------------------------
printf 'node1 slots=2\nnode2\n' > bad1
printf 'node1 slots=2\nnode1 slots=2\n' > dup
printf 'node1 slots=0\n' > zero
printf 'a;reboot slots=1\n' > evil
expect_exit 2 "no PROGRAM" "missing PROGRAM" "$ZT" launch --nproc-per-node 2
expect_exit 2 "bad hostfile line" "bad1:2: expected 'HOST slots=N'" "$ZT" launch --hostfile bad1 -- /bin/true
expect_exit 2 "duplicate host" "dup:2: host 'node1' is listed twice \(first on line 1\)" "$ZT" launch --hostfile dup -- /bin/true
expect_exit 2 "slots=0" "zero:1: slots must be an integer in \[1, 4096\]" "$ZT" launch --hostfile zero -- /bin/true
expect_exit 2 "hostile host name" "evil:1: host name 'a;reboot' may only hold" "$ZT" launch --dry-run --hostfile evil -- /bin/true
expect_exit 2 "unknown host in --include" "--include: unknown host 'node3'" "$ZT" launch --hostfile hf --include node3 -- /bin/true
expect_exit 2 "bad slot in --exclude" "--exclude: host 'node1' has no slot 9" "$ZT" launch --hostfile hf --exclude node1:9 -- /bin/true
expect_exit 2 "unknown launcher" "unknown launcher 'pdsh'" "$ZT" launch --launcher pdsh -- /bin/true
expect_exit 2 "ssh without a hostfile" "--launcher ssh needs --hostfile" "$ZT" launch --launcher ssh -- /bin/true
expect_exit 2 "a word before --" "'prog': PROGRAM goes after '--'" "$ZT" launch prog -- /bin/true
expect_exit 2 "PROGRAM without --" "'/bin/true': PROGRAM goes after '--'" "$ZT" launch /bin/true
expect_exit 2 "missing hostfile" "cannot open 'nohf'" "$ZT" launch --hostfile nohf -- /bin/true
printf 'GOOD=1\nnot a line\n' > .zt_env
expect_exit 2 "bad .zt_env line" "\.zt_env:2: expected NAME=VALUE" "$ZT" launch -- /bin/true
rm .zt_env
if ! command -v srun >/dev/null; then
  expect_exit 1 "srun not installed" "cannot run 'srun'.*is Slurm installed" "$ZT" launch --launcher srun -- /bin/true
fi
done_testing
