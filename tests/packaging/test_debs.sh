#!/usr/bin/env bash
# Packaging test: usage test_debs.sh <build-dir>
#   1. cpack makes the .debs of every component the build has;
#   2. lintian reports no error; every systemd unit passes `systemd-analyze verify` and every
#      service's `systemd-analyze security` exposure is at most 2.0;
#   3. in a fresh root of the Debian release the packages were built on (Debian 13 or 12, from
#      /etc/os-release; debootstrap, minbase + the packages' Depends): install a build with a
#      lower version, upgrade over it (a locally edited conffile and the state survive), remove
#      (configuration and users stay) and purge (nothing of ours is left).
# Prints PASS/FAIL per check; exits non-zero on any FAIL.
set -euo pipefail

build=$(cd "$1" && pwd)
work=$(mktemp -d /var/tmp/pvs-packaging.XXXXXX)
root=$work/root
failures=0

cleanup() {
  # Unmount anything still mounted under the root before deleting it.
  for m in "$root/proc" "$root/dev/pts" "$root/dev"; do
    mountpoint -q "$m" 2>/dev/null && umount -l "$m" || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
check() {
  local what=$1
  shift
  if "$@"; then pass "$what"; else fail "$what"; fi
}

for tool in cpack lintian debootstrap dpkg-deb systemd-analyze; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool is not installed (scripts/install-deps)"; exit 1; }
done

# ---- 1. build the packages --------------------------------------------------------------------
(cd "$build" && cpack -G DEB -B "$work/out" >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; exit 1; }
mapfile -t debs < <(find "$work/out" -maxdepth 1 -name '*.deb' | sort)
((${#debs[@]} > 0)) || { echo "FAIL: cpack made no .deb"; exit 1; }
for deb in "${debs[@]}"; do echo "built $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB)"; done
pkg_of() { dpkg-deb -f "$1" Package; }

# ---- 2. lintian and systemd-analyze -----------------------------------------------------------
for deb in "${debs[@]}"; do
  if lintian --fail-on error --no-tag-display-limit "$deb" >"$work/lintian.log" 2>&1; then
    pass "lintian $(pkg_of "$deb") (no errors; $(grep -c '^W:' "$work/lintian.log" || true) warnings)"
  else
    cat "$work/lintian.log"
    fail "lintian $(pkg_of "$deb")"
  fi
  grep '^W:' "$work/lintian.log" || true
done

for deb in "${debs[@]}"; do
  x=$work/x-$(pkg_of "$deb")
  dpkg-deb -x "$deb" "$x"
  mkdir -p "$x/units"
  for unit in "$x"/lib/systemd/system/* "$x"/usr/lib/systemd/system/*; do # Debian 12 / 13
    [[ -f "$unit" ]] || continue
    # Point ExecStart at the extracted binaries so verify can check they exist.
    sed "s|/usr/sbin/pve-sandbox|$x/usr/sbin/pve-sandbox|g; s|/usr/bin/pve-sandbox|$x/usr/bin/pve-sandbox|g" \
      "$unit" >"$x/units/$(basename "$unit")"
  done
  for unit in "$x"/units/*; do
    [[ -f "$unit" ]] || continue
    check "systemd-analyze verify $(basename "$unit")" systemd-analyze verify "$unit"
  done
done

# Both long-running services are bounded and sandboxed alike (a leak or a flood cannot take the
# node down; neither may gain privileges, see other users' files or write outside its dirs).
hardening=(NoNewPrivileges=yes ProtectSystem=strict ProtectHome=yes PrivateTmp=yes
  PrivateDevices=yes ProtectKernelTunables=yes ProtectKernelModules=yes ProtectControlGroups=yes
  ProtectProc=invisible RestrictNamespaces=yes RestrictSUIDSGID=yes MemoryDenyWriteExecute=yes
  SystemCallFilter=@system-service 'SystemCallFilter=~@privileged @resources' UMask=00[27]7
  'MemoryMax=[0-9]+[KMG]' 'TasksMax=[0-9]+' 'LimitNOFILE=[0-9]+')
for unit in "$work"/x-*/{,usr/}lib/systemd/system/pve-sandbox-agent.service \
  "$work"/x-*/{,usr/}lib/systemd/system/pve-sandbox-resolver.service \
  "$work"/x-*/{,usr/}lib/systemd/system/pve-sandbox-controller.service; do
  [[ -f "$unit" ]] || continue
  missing=()
  for directive in "${hardening[@]}"; do
    grep -Eqx "$directive" "$unit" || missing+=("$directive")
  done
  check "$(basename "$unit") bounded and sandboxed${missing:+ (missing: ${missing[*]})}" \
    test ${#missing[@]} -eq 0
done

# Every service's exposure as `systemd-analyze security` scores it (0 best, 10 worst; docs/install.md
# lists the figures): each at most 2.0 ("OK") with this release's systemd.
for unit in "$work"/x-*/units/*.service; do
  [[ -f "$unit" ]] || continue
  score=$(systemd-analyze security --offline=true "$unit" 2>/dev/null |
    sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' | tail -1)
  check "$(basename "$unit") exposure ${score:-unknown} <= 2.0 (systemd $(systemd-analyze --version | awk 'NR == 1 { print $2 }'))" \
    awk -v s="${score:-99}" 'BEGIN { exit !(s <= 2.0) }'
done

# ---- 3. install / upgrade / remove / purge in a root of this release --------------------------
# The release is the one the packages were built on (their ~debNN version says so too); the
# mirror is the one this machine's apt already uses (scripts/lib/apt-mirror.sh).
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[[ -n "$suite" ]] || { echo "FAIL: no VERSION_CODENAME in /etc/os-release"; exit 1; }
# shellcheck source=../../scripts/lib/apt-mirror.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/apt-mirror.sh"
mirror=$(apt_mirror "$suite") || { echo "FAIL: no Debian mirror found in the apt sources"; exit 1; }
for deb in "${debs[@]}"; do
  check "$(pkg_of "$deb") version names the release ($(dpkg-deb -f "$deb" Version))" \
    grep -q "~deb$(. /etc/os-release && echo "$VERSION_ID")\$" <<<"$(dpkg-deb -f "$deb" Version)"
done

# Every dependency of our packages, so that dpkg -i needs no network inside the root.
# debootstrap --include takes real packages only: a virtual one in Depends (Debian 13's RE2 ABI
# name libre2-11-absl20240722, provided by libre2-11) becomes its provider as apt sees it here.
real_package() {
  if apt-cache show "$1" 2>/dev/null | grep -q "^Package:"; then
    echo "$1"
    return
  fi
  local provider
  provider=$(apt-cache showpkg "$1" 2>/dev/null | awk '/^Reverse Provides:/ { f = 1; next }
    f && NF { print $1; exit }')
  echo "${provider:-$1}"
}
deps=$(for deb in "${debs[@]}"; do dpkg-deb -f "$deb" Depends | tr ',' '\n'; done |
  sed 's/|.*//; s/(.*)//; s/ //g' | grep -v '^$' | sort -u |
  while read -r p; do real_package "$p"; done | sort -u | paste -sd, -)
cache=${PVS_DEBOOTSTRAP_CACHE:-/var/cache/pve-sandbox-test}
tarball=$cache/$suite-minbase-$(echo "$deps" | sha256sum | cut -c1-12).tgz
mkdir -p "$cache"
if [[ ! -f "$tarball" ]]; then
  echo "debootstrap (minbase + $deps): first run downloads the packages"
  debootstrap --variant=minbase --include="$deps" --make-tarball="$tarball.tmp" "$suite" "$work/dl" "$mirror" \
    >"$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log"; exit 1; }
  mv "$tarball.tmp" "$tarball"
  rm -rf "$work/dl"
fi
debootstrap --variant=minbase --include="$deps" --unpack-tarball="$tarball" "$suite" "$root" "$mirror" \
  >"$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log"; exit 1; }
pass "debootstrap $suite root"
in_root() { chroot "$root" "$@"; }
# What a purge must return to: every path in the root before our packages arrive.
snapshot() {
  (cd "$root" && find . -xdev \( -path ./proc -o -path ./sys -o -path ./dev -o -path ./tmp \
    -o -path ./var/lib/dpkg -o -path ./var/log -o -path ./var/cache -o -path ./run \) -prune -o -print |
    grep -vE '^\./etc/(passwd|group|shadow|gshadow|subuid|subgid)-?$' | sort)
}
snapshot >"$work/before.txt"

# A "previous release": the same package with a lower version.
mkdir -p "$root/tmp/debs"
for deb in "${debs[@]}"; do
  pkg=$(pkg_of "$deb")
  cp "$deb" "$root/tmp/debs/$pkg-new.deb"
  dpkg-deb -R "$deb" "$work/old-$pkg"
  sed -i 's/^Version: .*/Version: 0.0.1-1/' "$work/old-$pkg/DEBIAN/control"
  dpkg-deb --root-owner-group -b "$work/old-$pkg" "$root/tmp/debs/$pkg-old.deb" >/dev/null
done
has_agent=0 has_controller=0
[[ -f "$root/tmp/debs/pve-sandbox-agent-new.deb" ]] && has_agent=1
[[ -f "$root/tmp/debs/pve-sandbox-controller-new.deb" ]] && has_controller=1

check "install the lower version" in_root sh -c 'dpkg -i /tmp/debs/*-old.deb'
user_exists() { in_root getent passwd "$1" >/dev/null; }
group_exists() { in_root getent group "$1" >/dev/null; }
check "group pve-sandbox created" group_exists pve-sandbox
if ((has_agent)); then
  check "agent user created" user_exists pve-sandbox-agent
  check "agent binary installed" test -x "$root/usr/sbin/pve-sandbox-agent"
  check "agent config installed" test -f "$root/etc/pve-sandbox/agent.yaml"
  # Names resolve inside the root, where the user lives.
  check "agent state directory owned by the agent" \
    test "$(in_root stat -c %U:%G /var/lib/pve-sandbox)" = pve-sandbox-agent:pve-sandbox
  check "agent socket enabled" test -L "$root/etc/systemd/system/sockets.target.wants/pve-sandbox-agent.socket"
  check "agent config passes check-config" in_root /usr/sbin/pve-sandbox-agent check-config --config /etc/pve-sandbox/agent.yaml
  check "resolver user created" user_exists pve-sandbox-resolver
  check "resolver example config passes check-config" in_root /usr/sbin/pve-sandbox-resolver check-config \
    --config /usr/share/doc/pve-sandbox-agent/examples/resolver.yaml
  check "agent config publishes DHCP reservations" grep -qx 'dhcp_hosts_dir: /run/pve-sandbox/dhcp-hosts' "$root/etc/pve-sandbox/agent.yaml"
  check "DHCP reservations directory created by postinst, owned by the agent" \
    test "$(in_root stat -c %U:%G:%a /run/pve-sandbox/dhcp-hosts)" = pve-sandbox-agent:pve-sandbox:755
  # The tmpfiles.d entry (what recreates it at boot) is valid and makes the same directory.
  rm -rf "$root/run/pve-sandbox"
  check "tmpfiles.d entry creates the DHCP reservations directory" \
    systemd-tmpfiles --root="$root" --create pve-sandbox-agent.conf
  check "tmpfiles.d directory: owner and mode" \
    test "$(in_root stat -c %U:%G:%a /run/pve-sandbox/dhcp-hosts)" = pve-sandbox-agent:pve-sandbox:755
  echo "# edited by the operator" >>"$root/etc/pve-sandbox/agent.yaml"
  echo "state from the old version" >"$root/var/lib/pve-sandbox/agent-state"
fi
if ((has_controller)); then
  check "controller user created" user_exists pve-sandbox-controller
  echo "# edited by the operator" >>"$root/etc/pve-sandbox/controller.yaml"
fi

check "upgrade to the new version" in_root sh -c 'dpkg -i /tmp/debs/*-new.deb'
for deb in "${debs[@]}"; do
  pkg=$(pkg_of "$deb")
  check "$pkg upgraded" test "$(in_root dpkg-query -W -f='${Version}' "$pkg")" = "$(dpkg-deb -f "$deb" Version)"
done
if ((has_agent)); then
  check "agent conffile edit kept across upgrade" grep -q 'edited by the operator' "$root/etc/pve-sandbox/agent.yaml"
  check "agent state kept across upgrade" grep -q 'state from the old version' "$root/var/lib/pve-sandbox/agent-state"
fi
if ((has_controller)); then
  check "controller conffile edit kept across upgrade" grep -q 'edited by the operator' "$root/etc/pve-sandbox/controller.yaml"
fi

pkgs=$(for deb in "${debs[@]}"; do pkg_of "$deb"; done | paste -sd' ' -)
# shellcheck disable=SC2086
check "remove" in_root dpkg -r $pkgs
if ((has_agent)); then
  check "agent binary gone after remove" test ! -e "$root/usr/sbin/pve-sandbox-agent"
  check "agent unit gone after remove" test ! -e "$root/lib/systemd/system/pve-sandbox-agent.service" \
    -a ! -e "$root/usr/lib/systemd/system/pve-sandbox-agent.service"
  check "agent config kept after remove" test -f "$root/etc/pve-sandbox/agent.yaml"
  check "agent user kept after remove" user_exists pve-sandbox-agent
fi

# shellcheck disable=SC2086
check "purge" in_root dpkg -P $pkgs
check "group gone after purge" bash -c "! chroot '$root' getent group pve-sandbox >/dev/null"
((has_agent)) && check "agent user gone after purge" bash -c "! chroot '$root' getent passwd pve-sandbox-agent >/dev/null"
((has_agent)) && check "resolver user gone after purge" bash -c "! chroot '$root' getent passwd pve-sandbox-resolver >/dev/null"
((has_controller)) && check "controller user gone after purge" bash -c "! chroot '$root' getent passwd pve-sandbox-controller >/dev/null"
snapshot >"$work/after.txt"
if diff "$work/before.txt" "$work/after.txt" >"$work/leftovers.txt"; then
  pass "purge leaves nothing behind"
else
  cat "$work/leftovers.txt"
  fail "purge leaves nothing behind"
fi

echo "packaging: $failures failure(s)"
((failures == 0))
