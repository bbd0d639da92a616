#!/usr/bin/env bash
# CI's proof that README's first command works on a bare machine: makes a minimal Debian 12
# root with debootstrap (no make, no compiler, no Python), copies this tree in without its
# build outputs, and runs scripts/demo.sh there under chroot with nothing else installed.
# Passes when the demo exits 0 and printed its held-out accuracy. Needs root; the Debian
# mirror is the one this machine's apt already uses. About 10 minutes on 2 cores.
# usage: scripts/ci-bare.sh [WORK_DIR]   (default: a new directory under /var/tmp, removed after)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
say() { printf 'ci-bare: %s\n' "$*" >&2; }
[ "$(id -u)" = 0 ] || { say "needs root (debootstrap, chroot, mount)"; exit 1; }

# debian_mirror: the first archive URI that serves bookworm in this machine's apt sources
# (deb822 *.sources files, then one-line sources.list entries)
debian_mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk 'function flush() { if (uris != "" && enabled != "no" && (" " suites " ") ~ / bookworm /) { split(uris, u, " "); print u[1]; exit } uris = suites = enabled = "" }
         /^[ \t]*$/ { flush(); next }
         tolower($1) == "uris:"    { $1 = ""; uris = $0 }
         tolower($1) == "suites:"  { $1 = ""; suites = $0 }
         tolower($1) == "enabled:" { enabled = tolower($2) }
         END { flush() }' "$f"
  done
  if [ -f /etc/apt/sources.list ]; then
    sed -n 's/^deb[ \t]\+\(\[[^]]*\][ \t]\+\)\?\([^ \t]\+\)[ \t]\+bookworm[ \t].*/\2/p' /etc/apt/sources.list
  fi
}
mirror=$(debian_mirror | head -n 1 || true)
[ -n "$mirror" ] || { say "no Debian bookworm archive in /etc/apt/sources.list or /etc/apt/sources.list.d/*.sources"; exit 1; }

command -v debootstrap >/dev/null || {
  say "installing debootstrap"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
}

work=${1:-$(mktemp -d /var/tmp/zt-bare.XXXXXX)}
keep=${1:+1}
root=$work/root
mounts=()
# cleanup: unmounts what was mounted, newest first; removes the work directory only when
# nothing is mounted inside it any more
cleanup() {
  local i ok=1
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount "${mounts[i]}" || umount -l "${mounts[i]}" || ok=0; done
  if [ -z "$keep" ] && [ $ok = 1 ] && ! grep -q " $root/" /proc/mounts; then rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start=$(date +%s)
say "debootstrap --variant=minbase bookworm from $mirror into $root"
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
  { tail -n 20 "$work/debootstrap.log" >&2; say "debootstrap failed"; exit 1; }
for tool in make gcc pkg-config python3; do
  if chroot "$root" /bin/sh -c "command -v $tool" >/dev/null; then say "the bare root already has $tool"; exit 1; fi
done
say "bare root ready in $(( $(date +%s) - start )) s (no make, gcc, pkg-config or python3)"

# the tree as git knows it (tracked and new files, nothing that .gitignore names: no build/)
mkdir "$root/zt"
git -C "$repo" ls-files -z --cached --others --exclude-standard |
  (cd "$repo" && tar --null --ignore-failed-read -T - -cf -) | tar -xf - -C "$root/zt"

mount -t proc proc "$root/proc" && mounts+=("$root/proc")
mount -t sysfs sysfs "$root/sys" && mounts+=("$root/sys")
cp /etc/resolv.conf "$root/etc/resolv.conf"

say "running scripts/demo.sh in the bare root"
set +e
chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  LANG=C.UTF-8 ${http_proxy:+http_proxy=$http_proxy} ${https_proxy:+https_proxy=$https_proxy} \
  /bin/bash -c 'cd /zt && scripts/demo.sh' 2>&1 | tee "$work/demo.log"
code=${PIPESTATUS[0]}
set -e
took=$(( $(date +%s) - start ))
[ "$code" = 0 ] || { say "scripts/demo.sh exited $code in the bare root ($took s)"; exit 1; }
grep -q '"accuracy": ' "$work/demo.log" || { say "the demo printed no accuracy ($took s)"; exit 1; }
say "README's demo command ran on bare Debian 12: exit 0, $(grep -m1 -o '"accuracy": [0-9.e+-]*' "$work/demo.log") ($took s in all)"
