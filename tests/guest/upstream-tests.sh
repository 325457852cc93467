#!/usr/bin/env bash
# DESCRIPTION: cryptsetup's fvault2 and luks1 compat tests pass with ours as crypt
# BOOT: lbscrypt
# KERNELS: none
#   out of make check for its budget; make cryptsetup-tests runs the whole list
# FULL-KERNELS: page=65536
# LIMIT: 300 cryptsetup's fvault2 and luks1 tests, ~40 s on arm64-64k
# NEEDS: cryptsetup-src
# ORDER: 330
#
# upstream-tests.sh: the fast ones of cryptsetup's own tests, with ours
# as `crypt`: fvault2-compat-test (a FileVault2
# image, AES-XTS, opened and its data checked) and luks1-compat-test (LUKS1 images
# of AES, Serpent and Twofish in XTS, LRW and CBC-ESSIV, each opened and its data
# checked against the image's recorded checksum). Needs `--module lbscrypt` and the
# tests tarball of qemu/lib/cryptsetup-src in /lbs/files (qemu/run --file).
# Each must pass with no "[SKIPPED]" or "[N/A]" mark: stock passes both without
# any on every rig kernel (make cryptsetup-tests shows it side by side), so a
# mark on ours is a table ours refused. The whole list, stock beside ours, is
# `make cryptsetup-tests`.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

tests=(fvault2-compat-test luks1-compat-test)
v=$(target_version crypt)
[ "$v" = v1.30.0 ] || fail "dmsetup targets shows crypt $v, expected v1.30.0 (ours loaded as crypt)"
lsmod | grep -q '^dm_crypt_lbs ' || fail "crypt v1.30.0 is registered, but dm_crypt_lbs is not loaded"
shopt -s nullglob
tarballs=(/lbs/files/tests-*.tar)
[ "${#tarballs[@]}" -eq 1 ] ||
	fail "expected one cryptsetup tests tarball in /lbs/files (qemu/lib/cryptsetup-src), found ${#tarballs[@]}"

out=/tmp/upstream-tests.out
bash "$(dirname "$0")/halves/cryptsetup-upstream.sh" "${tarballs[0]}" "${tests[@]}" >"$out" 2>&1 ||
	{ cat "$out"; fail "cryptsetup-upstream.sh ended with an error (its output above)"; }
cat "$out"
for t in "${tests[@]}"; do
	line=$(grep "^CSTEST $t " "$out" || true)
	[ -n "$line" ] || { soft_fail "$t: no CSTEST line (output above)"; continue; }
	read -r _ _ verdict rc skipped na secs <<<"$line"
	if [ "$verdict $skipped $na" = "PASS skipped=0 na=0" ]; then
		ok "$t: passed with no skipped case ($rc, $secs)"
	else
		soft_fail "$t: $verdict, $rc, $skipped, $na (expected PASS with none skipped; its last lines above)"
	fi
done
