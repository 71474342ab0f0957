#!/bin/sh
# pvesim's DHCP client for CTs with net0 ip=dhcp (netns backend, --dhcp-client): what the
# container's own DHCP client does at boot. pvesim runs it inside the CT's namespace as
#   dhcp-client.sh run <ifname>
# and it asks once with busybox udhcpc (a real DHCP exchange with whatever server answers on
# the bridge, e.g. the node's dnsmasq), configuring the lease through this same script, which
# udhcpc calls with its event name (deconfig, bound, renew, leasefail, nak).
# Exit status 0 = the interface has its lease. POSIX sh on purpose: udhcpc runs this script for
# every event, and dash starts several times faster than bash (part of every simulated create).
set -eu
case "${1:-}" in
run)
	exec busybox udhcpc -f -q -n -t "${PVESIM_DHCP_TRIES:-5}" -T 1 -i "$2" -s "$0"
	;;
deconfig)
	ip -4 addr flush dev "${interface:?}"
	ip link set "$interface" up
	;;
bound | renew)
	ip -4 addr flush dev "${interface:?}"
	ip addr add "${ip:?}/${mask:?}" dev "$interface"
	if [ -n "${router:-}" ]; then
		ip route replace default via "${router%% *}" dev "$interface"
	fi
	;;
leasefail | nak)
	echo "dhcp-client: $1 on ${interface:-?}${message:+: $message}" >&2
	;;
*)
	echo "usage: $0 run <ifname>" >&2
	exit 2
	;;
esac
