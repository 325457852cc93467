#!/bin/bash
# DESCRIPTION: the sector_size acceptance matrix in one guest, through lbscrypt matrix (the guest half of qemu/matrix: make matrix)
#
# matrix.sh [TARGET...]: the sector_size acceptance matrix, run by the tool: `lbscrypt matrix --json` loads
# one crypt table per sector_size spelling over a throwaway dm zero device, for each
# target named on the command line (default: crypt), and reports what the kernel did
# with it beside what lbscrypt's predict() says (Documentation/lbscrypt-matrix.rst).
# One record per cell (read by qemu/matrix and qemu/lib/matrix.py):
#   MATRIX <tab> <the tool's JSON record>
# and, first, the version each target reports in `dmsetup targets`, from which
# tests/expected/matrix_judge.py takes the stock target's expectations:
#   DMTARGET <tab> <target> <tab> <version>
# Cells where the kernel and predict() differ are reported here and kept in the
# records ("agrees": false); `make matrix-check` fails on them.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/../common/lib.sh"

targets=("$@")
[ $# -gt 0 ] || targets=(crypt)
command -v lbscrypt >/dev/null || fail "no lbscrypt in the guest (build it: make deb, or make -f tools/tools.mk tools tools-arm64)"
# The backing device is a dm zero target where the kernel has one (a module on
# Debian's kernels; the tool falls back to dm's built-in error target otherwise).
modprobe dm-zero 2>/dev/null || true
opts=()
for target in "${targets[@]}"; do
	opts+=(--target "$target")
	version=$(target_version "$target")
	[ -n "$version" ] || fail "dmsetup targets lists no '$target' target: $(dmsetup targets | tr '\n' ' ')"
	printf 'DMTARGET\t%s\t%s\n' "$target" "${version#v}"
done
rc=0
records=$(lbscrypt matrix --json "${opts[@]}") || rc=$?
# Exit 1 with records printed: every cell ran and some differ from predict().
if [ "$rc" -ne 0 ] && { [ "$rc" -ne 1 ] || [ -z "$records" ]; }; then
	fail "lbscrypt matrix ${opts[*]} exited $rc"
fi
printf '%s\n' "$records" | sed 's/^/MATRIX\t/'
if [ "$rc" -eq 1 ]; then
	printf '%s\n' "$records" | grep -F '"agrees":false' | sed 's/^/DIFFERS /' || true
fi
