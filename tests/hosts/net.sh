# Two hosts on one machine (sourced by tests/hosts/run.sh and bench/hosts.sh): network namespaces
# NS_A and NS_B joined by a veth pair, addresses $NET.1 and $NET.2, each with a host name of its own
# (a UTS namespace, entered per command), and an rsh agent through which Open MPI's mpirun, run on
# host a, starts its daemon on b, as ssh would. Everything runs as root.
#   hosts_up        make them (returns non-zero, with $hosts_why, where this machine cannot)
#   on_a CMD...     run CMD on host a
#   mpi_hosts ARGS  mpirun on host a across both hosts: mpi_hosts -np 2 ./model ... (ended after 120 s)
#   cut / mend      the link down / up again
#   left            the processes still running in either namespace (none: empty)
#   drain S         waits up to S seconds for both to be empty; prints what is left then
#   hosts_down      every process in them killed, the namespaces removed
# NET, NS_A, NS_B and the agent's file are this shell's own ($$), so that two runs never meet.
id=$$
NS_A="dpc$id-a"
NS_B="dpc$id-b"
NET="10.$((200 + id % 50)).$((id / 50 % 250)).0"
NET="${NET%.0}"
AGENT="$TEST_OUT/agent.$id.sh"
hosts_why=""

hosts_up() {
	if [ "$(id -u)" != 0 ]; then
		hosts_why="not root: network namespaces need it"
		return 1
	fi
	for tool in ip unshare mpirun; do
		if ! command -v $tool >/dev/null; then
			hosts_why="no $tool here"
			return 1
		fi
	done
	if ! ip netns add "$NS_A" 2>"$TEST_OUT/netns.$id.err"; then
		hosts_why="ip netns add failed: $(head -1 "$TEST_OUT/netns.$id.err")"
		return 1
	fi
	ip netns add "$NS_B" &&
		ip link add "dv${id}a" type veth peer name "dv${id}b" &&
		ip link set "dv${id}a" netns "$NS_A" && ip link set "dv${id}b" netns "$NS_B" &&
		ip -n "$NS_A" addr add "$NET.1/24" dev "dv${id}a" && ip -n "$NS_B" addr add "$NET.2/24" dev "dv${id}b" &&
		ip -n "$NS_A" link set lo up && ip -n "$NS_B" link set lo up &&
		ip -n "$NS_A" link set "dv${id}a" up && ip -n "$NS_B" link set "dv${id}b" up || {
		hosts_why="the veth pair between the namespaces could not be made"
		hosts_down
		return 1
	}
	# Open MPI's rsh agent: "AGENT HOST COMMAND..." runs COMMAND on HOST as ssh would (one shell line). A
	# host of neither namespace is tried as ssh would try it, from host a, and refused with ssh's words
	cat >"$AGENT" <<EOF
#!/bin/sh
host=\$1
shift
case \$host in
$NET.1) exec ip netns exec $NS_A unshare --uts sh -c "hostname hosta; \$*" ;;
$NET.2) exec ip netns exec $NS_B unshare --uts sh -c "hostname hostb; \$*" ;;
esac
ip netns exec $NS_A timeout 5 bash -c "exec 3<>/dev/tcp/\$host/22" 2>/dev/null
echo "ssh: connect to host \$host port 22: No route to host" >&2
exit 255
EOF
	chmod +x "$AGENT"
	# the link carries traffic both ways before anything runs over it
	for i in $(seq 1 50); do
		ip netns exec "$NS_A" bash -c "exec 3<>/dev/tcp/$NET.2/1" 2>&1 | grep -q refused && return 0
		sleep 0.1
	done
	hosts_why="the link between the namespaces carries nothing"
	hosts_down
	return 1
}

on_a() { ip netns exec "$NS_A" unshare --uts sh -c 'hostname hosta; exec "$@"' sh "$@"; }

# Open MPI sends its own traffic (oob) and the ranks' (btl tcp) over the veth pair alone
mpi_hosts() {
	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 ip netns exec "$NS_A" unshare --uts sh -c \
		'hostname hosta; exec "$@"' sh mpirun --mca plm_rsh_agent "$AGENT" \
		--mca oob_tcp_if_include "$NET.0/24" --mca btl_tcp_if_include "$NET.0/24" --mca btl tcp,self "$@"
}

cut() { ip -n "$NS_A" link set "dv${id}a" down; }
mend() {
	ip -n "$NS_A" link set "dv${id}a" up
	for i in $(seq 1 50); do
		ip netns exec "$NS_A" bash -c "exec 3<>/dev/tcp/$NET.2/1" 2>&1 | grep -q refused && return 0
		sleep 0.1
	done
	return 1
}

left() { { ip netns pids "$NS_A"; ip netns pids "$NS_B"; } 2>/dev/null | xargs -r ps -o pid=,args= -p 2>/dev/null; }

drain() {
	local rest
	for i in $(seq 1 $(($1 * 10))); do
		rest=$(left)
		[ -z "$rest" ] && return 0
		sleep 0.1
	done
	echo "$rest"
}

hosts_down() {
	for ns in "$NS_A" "$NS_B"; do
		ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
		ip netns del "$ns" 2>/dev/null
	done
	rm -f "$AGENT"
}
