#!/usr/bin/env bash
# two_hosts.sh BIN_DIR: two "hosts" on one machine — two network namespaces joined by a veth
# pair, each with its own host name and a private address — and one rank in each, started by
# Open MPI over TCP (mpirun runs in the first; its rsh agent is a script that runs
# `ip netns exec` instead of ssh). Runs the distributed test suite and makemore across them.
# Everything is created here and removed on exit; no traffic leaves the namespaces. Exits 77
# (CTest's SKIP_RETURN_CODE) with the reason where namespaces cannot be made (not root, no
# CAP_NET_ADMIN, no `ip`, no `unshare`).
set -u
bin="${1:?usage: two_hosts.sh BIN_DIR}"
skip() { echo "SKIPPED: $*"; exit 77; }
command -v ip >/dev/null || skip "no ip(8) (iproute2)"
command -v unshare >/dev/null || skip "no unshare(1)"
command -v mpirun >/dev/null || skip "no mpirun"
[ "$(id -u)" = 0 ] || skip "network namespaces need root (CAP_NET_ADMIN)"

tag="rv$$"
a="${tag}a"; b="${tag}b"
net="10.231.$(( $$ % 200 + 20 ))"
work="$(mktemp -d)"
cleanup() {
  ip netns del "$a" 2>/dev/null
  ip netns del "$b" 2>/dev/null  # deleting a namespace deletes its end of the veth pair
  rm -rf "/etc/netns/$a" "/etc/netns/$b" "$work"
}
trap cleanup EXIT
ip netns add "$a" 2>"$work/err" || skip "cannot create a network namespace: $(cat "$work/err")"
ip netns add "$b" || skip "cannot create a second network namespace"
ip link add "${tag}x" type veth peer name "${tag}y" || skip "cannot create a veth pair"
ip link set "${tag}x" netns "$a" && ip link set "${tag}y" netns "$b" || skip "cannot move the veth ends"
for ns in "$a:${tag}x:1" "$b:${tag}y:2"; do
  IFS=: read -r name dev host <<<"$ns"
  ip -n "$name" addr add "$net.$host/24" dev "$dev"
  ip -n "$name" link set "$dev" up
  ip -n "$name" link set lo up
  # `ip netns exec` mounts /etc/netns/NAME/hosts over /etc/hosts inside the namespace.
  mkdir -p "/etc/netns/$name"
  printf '127.0.0.1 localhost\n%s.1 %s\n%s.2 %s\n' "$net" "$a" "$net" "$b" >"/etc/netns/$name/hosts"
done

# The rsh agent: "agent [options] HOST COMMAND..." -> the command in HOST's namespace, under its
# own host name (a UTS namespace), as ssh would run it remotely.
cat >"$work/agent" <<EOF
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
host="\$1"; shift
exec ip netns exec "\$host" unshare --uts sh -c 'hostname "\$0"; eval "\$*"' "\$host" "\$*"
EOF
chmod +x "$work/agent"
printf '%s slots=1\n%s slots=1\n' "$a" "$b" >"$work/hosts"
run() {  # mpirun inside the first namespace, named like its host
  ip netns exec "$a" unshare --uts sh -c 'hostname "$0"; exec "$@"' "$a" \
    timeout -k 5 100 mpirun --hostfile "$work/hosts" -np 2 --map-by node \
    --mca plm_rsh_agent "$work/agent" --mca btl tcp,self --mca btl_tcp_if_include "$net.0/24" \
    --mca oob_tcp_if_include "$net.0/24" -x RAVEL_DIST_TIMEOUT_S=30 -x RAVEL_CONFIG= -x RAVEL_PLUGIN_PATH= "$@"
}

echo "-- distributed test suite, one rank on each host"
run sh -c 'echo "rank $OMPI_COMM_WORLD_RANK on $(hostname)"; exec "$0" --report_level=short' "$bin/distributed_tests" \
  >"$work/suite.txt" 2>&1
status=$?
cat "$work/suite.txt"
[ $status = 0 ] || { echo "FAILED: the suite across two hosts (status $status)"; exit 1; }
grep -q "rank 0 on $a" "$work/suite.txt" && grep -q "rank 1 on $b" "$work/suite.txt" ||
  { echo "FAILED: the ranks did not run on the two hosts"; exit 1; }

echo "-- makemore across the hosts against one process"
env -u OMPI_COMM_WORLD_SIZE "$bin/makemore" --steps 300 --out "$work/one" >"$work/one.txt" 2>&1
run "$bin/makemore" --steps 300 --out "$work/two" >"$work/two.txt" 2>&1 || { cat "$work/two.txt"; echo "FAILED: makemore"; exit 1; }
one="$(grep '^final loss' "$work/one.txt")"; two="$(grep '^final loss' "$work/two.txt")"
head -1 "$work/two.txt"
[ -n "$one" ] && [ "$one" = "$two" ] || { cat "$work/two.txt"; echo "FAILED: '$two' differs from one process's '$one'"; exit 1; }
echo "two hosts: $two (the same as one process)"
