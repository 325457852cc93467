#!/bin/bash
# verify_units.sh LBSCRYPT TAB: runs LBSCRYPT as the systemd generator (a link named
# lbscrypt-generator, as it is installed) on TAB, then `systemd-analyze verify` on every unit
# it wrote. Exit 77 (skipped) where the host has no systemd-analyze.
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: verify_units.sh LBSCRYPT TAB" >&2; exit 2; }
tool=$(realpath "$1") tab=$(realpath "$2")
command -v systemd-analyze >/dev/null || { echo "no systemd-analyze: skipped"; exit 77; }

work=$(mktemp -d)
cleanup() { rm -rf "$work"; }
trap cleanup EXIT

ln -s "$tool" "$work/lbscrypt-generator"
mkdir "$work/normal" "$work/early" "$work/late"
"$work/lbscrypt-generator" --tab "$tab" --tool "$tool" "$work/normal" "$work/early" "$work/late"

mapfile -t units < <(find "$work/normal" -maxdepth 1 -type f -name '*.service' | sort)
[ "${#units[@]}" -gt 0 ] || { echo "the generator wrote no unit" >&2; exit 1; }
# The drop-ins and .requires links are read from the unit path, as at boot. A warning is a
# failure too (systemd-analyze exits 0 on some).
if ! report=$(SYSTEMD_UNIT_PATH="$work/normal:" systemd-analyze verify --man=no "${units[@]}" 2>&1) ||
	[ -n "$report" ]; then
	echo "systemd-analyze verify:" >&2
	echo "$report" >&2
	exit 1
fi
echo "systemd-analyze verify: ${#units[@]} units clean"
