#!/usr/bin/env bash
# Builds a flat apt repository of one package in DIR, which the stack's internet serves as
# http://deb.test/ (StackOptions::egress, stack_egress.cc): the package mirror of the template
# build test. A container reads it with
#   deb [trusted=yes] http://deb.test/ ./
# pvs-hello 1.0 installs /usr/bin/pvs-hello, which prints "hello from a package".
#
# Usage: tests/lxc/apt-repo.sh DIR
set -euo pipefail

dir=${1:?usage: apt-repo.sh DIR}
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
cd "$dir"
dpkg-scanpackages -m . 2>/dev/null >Packages
{
  echo "Origin: pve-sandbox tests"
  echo "Label: pve-sandbox tests"
  echo "Date: $(LC_ALL=C date -Ru)"
  echo "SHA256:"
  echo " $(sha256sum Packages | cut -d' ' -f1) $(stat -c %s Packages) Packages"
} >Release
