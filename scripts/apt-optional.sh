#!/usr/bin/env bash
# Installs one optional Debian package some tests need; never fails the caller.
# Usage: scripts/apt-optional.sh PACKAGE "what is skipped without it"
# apt may be busy (another apt or unattended-upgrades holds the dpkg lock): apt-get waits up to 5 min for
# the lock (DPkg::Lock::Timeout); if it still cannot install, this says why and those tests are skipped.
set -uo pipefail
package="$1"
without="$2"
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "$package is missing: $without will be skipped (sudo apt-get install $package)." >&2
  exit 0
fi
echo "Installing $package (Debian)..." >&2
apt_get() { apt-get -o DPkg::Lock::Timeout=300 "$@"; }
if ! output=$( { apt_get update -qq && apt_get install -y -qq --no-install-recommends "$package"; } 2>&1 >/dev/null); then
  reason=$(printf '%s\n' "$output" | grep -E '^E:' | head -1)
  echo "Could not install $package (${reason:-apt-get failed}): $without will be skipped." >&2
fi
exit 0
