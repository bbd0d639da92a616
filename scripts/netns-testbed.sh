# scripts/netns-testbed.sh: two "hosts" on this machine (docs/launch.md): network
# namespaces joined by a veth pair in a free private /24, with names in /etc/hosts, an
# agent script that enters a namespace instead of ssh-ing, and a hostfile. Sourced by
# tests/cli/t1300-multinode.sh and bench/zeropp.sh; needs root and iproute2.
#
#     . scripts/netns-testbed.sh
#     testbed_up "$dir" || { echo "no testbed: $TB_ERR"; exit 0; }   # sets TB_A TB_B TB_NET ...
#     trap testbed_down EXIT
#     testbed_rate 1gbit                                             # optional: tc on both veth ends
#     testbed_launch 60 -- zt pretrain recipe.toml ...               # zt launch across both hosts
#
# Names carry this shell's pid, so concurrent testbeds do not meet; testbed_down deletes
# the namespaces (and with them the veth pair) and the /etc/hosts lines, also after a
# partial testbed_up.

# testbed_up DIR: the hosts TB_A (TB_NET.1) and TB_B (TB_NET.2), veth ends TB_VA, TB_VB;
# DIR/agent and DIR/hostfile (2 slots each). Returns 1 with the reason in TB_ERR.
testbed_up() {
  TB_DIR=$1 TB_A=zt-ha$$ TB_B=zt-hb$$ TB_VA=zt$$a TB_VB=zt$$b TB_MARK="# zt-testbed-$$" TB_NET= TB_ERR=
  ip netns add "$TB_A" 2>"$TB_DIR/tb.err" || { TB_ERR="network namespaces not permitted here ($(head -c 200 "$TB_DIR/tb.err"))"; return 1; }
  ip netns add "$TB_B" || { TB_ERR="network namespaces not permitted here"; return 1; }
  local x
  for x in $(seq 237 254) $(seq 200 236); do # a private /24 that nothing on this machine uses yet
    if ! ip -o addr | grep -q " 10\.237\.$x\." && ! ip route | grep -q "^10\.237\.$x\." && ! grep -q "^10\.237\.$x\." /etc/hosts; then
      TB_NET=10.237.$x; break
    fi
  done
  [ -n "$TB_NET" ] || { TB_ERR="no free 10.237.x.0/24 subnet"; return 1; }
  ip link add "$TB_VA" type veth peer name "$TB_VB" || { TB_ERR="veth pairs not permitted here"; return 1; }
  ip link set "$TB_VA" netns "$TB_A" && ip link set "$TB_VB" netns "$TB_B" \
    && ip -n "$TB_A" addr add "$TB_NET.1/24" dev "$TB_VA" && ip -n "$TB_B" addr add "$TB_NET.2/24" dev "$TB_VB" \
    && ip -n "$TB_A" link set lo up && ip -n "$TB_B" link set lo up \
    && ip -n "$TB_A" link set "$TB_VA" up && ip -n "$TB_B" link set "$TB_VB" up || { TB_ERR="building the veth link failed"; return 1; }
  printf '%s %s %s\n%s %s %s\n' "$TB_NET.1" "$TB_A" "$TB_MARK" "$TB_NET.2" "$TB_B" "$TB_MARK" >> /etc/hosts
  printf '#!/bin/sh\nh=$1; shift; exec ip netns exec "$h" sh -c "$*"\n' > "$TB_DIR/agent" && chmod +x "$TB_DIR/agent"
  printf '# two namespace hosts\n%s slots=2\n%s slots=2\n' "$TB_A" "$TB_B" > "$TB_DIR/hostfile"
}

testbed_down() {
  [ -n "${TB_A:-}" ] || return 0
  ip netns delete "$TB_A" 2>/dev/null
  ip netns delete "$TB_B" 2>/dev/null # deleting a namespace deletes its veth end, and the pair with it
  if grep -q -- "$TB_MARK" /etc/hosts; then # in place: /etc/hosts may be a mount
    grep -v -- "$TB_MARK" /etc/hosts > "$TB_DIR/tb.hosts" && cat "$TB_DIR/tb.hosts" > /etc/hosts
  fi
  TB_A=
}

# testbed_rate RATE: a token-bucket limit (tc tbf) on both directions of the link
testbed_rate() {
  ip netns exec "$TB_A" tc qdisc replace dev "$TB_VA" root tbf rate "$1" burst 256kb latency 50ms &&
    ip netns exec "$TB_B" tc qdisc replace dev "$TB_VB" root tbf rate "$1" burst 256kb latency 50ms
}

# testbed_launch TIMEOUT ARGS...: zt launch from the first host (Open MPI's daemons must
# reach it) over both, TCP over the veth only (no shared memory, even within a host);
# $ZT is the zt binary
testbed_launch() {
  local limit=$1; shift
  timeout "$limit" ip netns exec "$TB_A" "$ZT" launch --hostfile "$TB_DIR/hostfile" --launcher ssh \
    --remote-shell "$TB_DIR/agent" --launcher-args \
    "--mca btl tcp,self --mca btl_tcp_if_include $TB_NET.0/24 --mca oob_tcp_if_include $TB_NET.0/24" "$@"
}
