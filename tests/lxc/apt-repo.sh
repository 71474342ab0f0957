#!/usr/bin/env bash
# The package mirror of the template build tests: a flat apt repository in DIR, which the
# stack's internet serves as http://deb.test/ (StackOptions::egress, stack_egress.cc). A
# container reads it with
#   deb [trusted=yes] http://deb.test/ ./
#
#   apt-repo.sh DIR [DEBS]
#       the repository of pvs-hello 1.0 (installs /usr/bin/pvs-hello, which prints "hello from
#       a package") and of every .deb in DEBS
#   apt-repo.sh --fetch DEBS ROOTFS RECIPE
#       downloads into DEBS the packages of RECIPE's `packages:` list and what they depend on
#       that ROOTFS (a root file system of scripts/lxc-rootfs) does not hold, from the Debian
#       mirror this machine's apt uses (scripts/lib/apt-mirror.sh), checked with ROOTFS's
#       archive keys. On the host's network: the tests' namespaces reach no mirror. DEBS is a
#       cache: a second fetch of the same packages downloads nothing.
set -euo pipefail

fetch() {
  local debs=$1 rootfs=$2 recipe=$3 suite url arch work key
  suite=$(. "$rootfs/etc/os-release" && echo "${VERSION_CODENAME:-}")
  # shellcheck source=../../scripts/lib/apt-mirror.sh
  . "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/apt-mirror.sh"
  url=$(apt_mirror "$suite") || {
    echo "apt-repo.sh: no Debian mirror for $suite in this machine's apt sources" >&2
    return 1
  }
  mapfile -t packages < <(awk '/^packages:/ { on = 1; next } on && /^  - / { print $2; next }
    on && /^[^ #]/ { on = 0 }' "$recipe")
  ((${#packages[@]})) || {
    echo "apt-repo.sh: no packages in $recipe" >&2
    return 1
  }
  arch=$(dpkg --print-architecture)
  work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  mkdir -p "$debs/partial" "$work/state/lists/partial" "$work/cache" "$work/trusted" "$work/parts"
  for key in "$rootfs"/usr/share/keyrings/debian-archive-keyring.{pgp,gpg} \
    "$rootfs"/etc/apt/trusted.gpg.d/*; do
    [[ -f $key ]] && cp "$key" "$work/trusted/$(basename "${key%.*}").${key##*.}"
  done
  for key in "$work"/trusted/*.pgp; do [[ -f $key ]] && mv "$key" "${key%.pgp}.gpg"; done
  echo "deb $url $suite main" >"$work/sources.list"
  # Only this configuration (not the machine's apt.conf.d): the root file system's status, its
  # suite and keys, the cache in DEBS.
  cat >"$work/apt.conf" <<EOF
Dir::Etc::Main "/dev/null";
Dir::Etc::Parts "$work/parts";
Dir::Etc::SourceList "$work/sources.list";
Dir::Etc::SourceParts "$work/parts";
Dir::Etc::Preferences "/dev/null";
Dir::Etc::PreferencesParts "$work/parts";
Dir::Etc::TrustedParts "$work/trusted";
Dir::State "$work/state";
Dir::State::status "$rootfs/var/lib/dpkg/status";
Dir::Cache "$work/cache";
Dir::Cache::archives "$debs";
APT::Architecture "$arch";
APT::Architectures { "$arch"; };
APT::Install-Recommends "false";
Acquire::Retries "3";
Acquire::Languages "none";
APT::Sandbox::User "root";
EOF
  export APT_CONFIG=$work/apt.conf
  apt-get -qq update
  apt-get -qq --download-only -y install "${packages[@]}" >/dev/null
  echo "apt-repo.sh: $(find "$debs" -maxdepth 1 -name '*.deb' | wc -l) packages in $debs" >&2
}

if [[ ${1:-} == --fetch ]]; then
  fetch "${2:?usage: apt-repo.sh --fetch DEBS ROOTFS RECIPE}" "${3:?}" "${4:?}"
  exit
fi

dir=${1:?usage: apt-repo.sh DIR [DEBS]}
debs=${2:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/pkg/DEBIAN" "$work/pkg/usr/bin" "$dir"
cat >"$work/pkg/DEBIAN/control" <<EOF
Package: pvs-hello
Version: 1.0
Architecture: all
Maintainer: pve-sandbox tests <tests@invalid>
Description: what the template build test installs from its own mirror
EOF
printf '#!/bin/sh\necho hello from a package\n' >"$work/pkg/usr/bin/pvs-hello"
chmod 0755 "$work/pkg/usr/bin/pvs-hello"
dpkg-deb --root-owner-group -Zgzip --build "$work/pkg" "$dir/pvs-hello_1.0_all.deb" >/dev/null
if [[ -n $debs ]]; then
  # Plain file names: apt's own carry %3a for an epoch, and + and ~, which the internet's web
  # server and apt's URL quoting do not agree on.
  for deb in "$debs"/*.deb; do
    [[ -f $deb ]] || continue
    name=$(basename "$deb" | tr '%+~' '___')
    ln -f "$deb" "$dir/$name" 2>/dev/null || cp "$deb" "$dir/$name"
  done
fi
cd "$dir"
dpkg-scanpackages -m . 2>/dev/null >Packages
{
  echo "Origin: pve-sandbox tests"
  echo "Label: pve-sandbox tests"
  echo "Date: $(LC_ALL=C date -Ru)"
  echo "SHA256:"
  echo " $(sha256sum Packages | cut -d' ' -f1) $(stat -c %s Packages) Packages"
} >Release
