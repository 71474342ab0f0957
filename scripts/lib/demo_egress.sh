# scripts/demo's egress by domain: the internet's DNS server, the node's pve-sandbox-resolver,
# and the walkthrough step that shows an allowlist at work (as tests/support/stack_egress.cc
# builds the same rig for the tests). The sourcing script sets: root, tmp, ns_node, ns_inet,
# inet_ip, resolver_bin, and sources lib/demo.sh first (start, wait_for, say, ctl, ...).
# shellcheck shell=bash
# shellcheck disable=SC2154  # variables of the sourcing script

egress_dns=203.0.113.53   # the internet's authoritative DNS server for the zone "test"
allowed_name=allowed.test # -> $inet_ip, the internet's web server
other_name=other.test     # -> $other_ip, the same web server on another address
other_ip=203.0.113.11
egress_tool=$root/tests/egress/egress_tool.py

# In the internet namespace: the second web address and dnsmasq answering both names.
egress_internet() {
  ip -n "$ns_inet" addr add "$other_ip/32" dev lo
  ip -n "$ns_inet" addr add "$egress_dns/32" dev lo
  start "$ns_inet" "$tmp/internet-dns.log" dnsmasq --keep-in-foreground --conf-file=/dev/null \
    --pid-file= --no-resolv --no-hosts --user=root --listen-address="$egress_dns" \
    --bind-interfaces --local=/test/ --log-facility="$tmp/internet-dns-queries.log" \
    --host-record="$allowed_name,$inet_ip,300" --host-record="$other_name,$other_ip,300"
  wait_for "the internet's DNS server" in_node python3 "$egress_tool" dns "$egress_dns" "$allowed_name"
  say "the internet's DNS server $egress_dns: $allowed_name -> $inet_ip, $other_name -> $other_ip"
}

# On the node, as pve-sandbox-setup resolver configures it: the resolver as nobody on the
# gateway's port 5353 (the ruleset sends the sandboxes' DNS there), asking the agent first.
egress_resolver() {
  cat >"$tmp/resolver.yaml" <<YAML
listen: 10.99.0.1
port: 5353
sandbox_cidr: 10.99.0.0/16
upstreams: ["$egress_dns"]
agent_socket: $tmp/agent.sock
YAML
  chmod 644 "$tmp/resolver.yaml"
  start "$ns_node" "$tmp/resolver.log" setpriv --reuid=65534 --regid=65534 --clear-groups \
    "$resolver_bin" --config "$tmp/resolver.yaml"
  wait_for "pve-sandbox-resolver" in_node bash -c "ss -Hlun 'sport = :5353' | grep -q 10.99.0.1"
  say "pve-sandbox-resolver as nobody on 10.99.0.1:5353, upstream $egress_dns"
}

# The walkthrough: the sandbox may reach $allowed_name only; it resolves it with its own
# /etc/resolv.conf. $other_name does not resolve, and a bare address is refused.
egress_walkthrough() {
  local sb=$1
  ctl_ok internet "$sb" allow "$allowed_name" --ports 80
  ctl_ok exec "$sb" -- "cat /etc/resolv.conf; getent ahostsv4 $allowed_name | head -n1; curl -sS -m 3 http://$allowed_name/"
  [[ $ctl_out == *"hello from the internet"* ]] || die "$allowed_name is not reachable by name"
  ctl exec "$sb" -- "curl -sS -m 3 http://$other_name/"
  [[ $ctl_rc -eq 6 ]] || die "$other_name resolved (curl exit $ctl_rc)"
  say "$other_name is not on the list: the resolver refuses it (curl exit $ctl_rc)"
  ctl exec "$sb" -- "curl -sS -m 3 http://$other_ip/"
  [[ $ctl_rc -eq 7 ]] || die "the bare address $other_ip was not refused (curl exit $ctl_rc)"
  say "a bare address is refused at once (curl exit $ctl_rc); from the node it answers HTTP $(in_node curl -sS -m 2 -o /dev/null -w '%{http_code}' "http://$other_ip/")"
  ctl_ok internet "$sb" off
}
