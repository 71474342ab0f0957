# shellcheck shell=bash
# The Debian mirror this machine's apt already uses, read from apt's own configuration
# (/etc/apt/sources.list, sources.list.d/*.list and *.sources) at run time, so that no registry
# host name is ever written into the repository. Sourced by scripts/lxc-rootfs and
# scripts/build-root.
#
#   apt_mirror SUITE   prints the first http(s) URI of a "deb" source for SUITE; when apt has
#                      none for SUITE (a Debian 12 host asked for trixie), the one of the host's
#                      own suite: a Debian mirror carries every suite. Fails when there is none.

# The URIs of every "deb" source for suite $1, in apt's order.
apt_sources_for() {
  local suite=$1 f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f $f ]] || continue
    awk -v s="$suite" '$1 == "deb" { i = 2; if ($2 ~ /^\[/) while ($i !~ /\]$/) i++;
      if ($2 ~ /^\[/) i++; if ($(i + 1) == s) { print $i; exit } }' "$f"
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    awk -v s="$suite" 'BEGIN { RS = ""; FS = "\n" } {
      types = uris = suites = ""
      for (i = 1; i <= NF; i++) {
        if ($i ~ /^Types:/) types = $i; if ($i ~ /^URIs:/) uris = $i
        if ($i ~ /^Suites:/) suites = $i
      }
      if (types ~ /[ \t]deb([ \t]|$)/ && (suites " ") ~ ("[ \t]" s "[ \t]")) {
        sub(/^URIs:[ \t]*/, "", uris); split(uris, u, /[ \t]+/); print u[1]; exit
      } }' "$f"
  done
}

apt_mirror() {
  local suite=${1:?apt_mirror SUITE} own url
  url=$(apt_sources_for "$suite" | grep -m1 -E '^https?://' || true)
  if [[ -z $url ]]; then
    own=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    [[ -n $own && $own != "$suite" ]] &&
      url=$(apt_sources_for "$own" | grep -m1 -E '^https?://' || true)
  fi
  [[ -n $url ]] || {
    echo "no '$suite' deb source in /etc/apt (sources.list or sources.list.d)" >&2
    return 1
  }
  echo "$url"
}
