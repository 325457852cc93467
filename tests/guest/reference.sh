#!/usr/bin/env bash
# DESCRIPTION: the on-disk format at every sector size against the host's reference model
# BOOT: both
# KERNELS: all -arm64-4k
#   arm64-4k in make check-full: arm64-4k-6.1 covers arm64's 4K pages,
#   arm64-16k Debian's 6.12 arm64 build
# FULL-KERNELS: all
# LIMIT: 120 about four times the longest expected (5 to 25 s on arm64-64k, idle)
# NEEDS: none
# ORDER: 20
#
# reference.sh: the on-disk format for every sector size, checked against an
# independent implementation on the host.
# Needs `--module both`. Writes the reference plaintext (lib.sh: pattern) with the
# suite's fixed key (lib.sh: test_key) through a target and prints one line per case
#   REFERENCE <test> <target> <cipher> <sector_size> <iv_large_sectors> <iv_offset> <bytes> <sha256 of the raw bytes>
# tests/run-guest-tests hands them to tests/reference/dmcrypt_ref.py, which computes
# the expected ciphertext with python3-cryptography and compares. The stock target's
# cases (512 and 4096) show that the reference itself is dm-crypt's format; ours
# cover 512, 4096 and every size above up to this kernel's bound (8192..65536 on
# a 64K-page kernel). All cases of a target are segments of one device, each over
# its own 256 KiB of the ramdisk, read back through linear views.
# The cases, at 512, 4096 and every size above up to the bound (1024 and 2048
# are compat.sh's): aes-xts-plain64 with and without iv_large_sectors, at
# iv_offset 0 and 2^40+128; aes-cbc-essiv:sha256 with iv_large_sectors at
# 2^40+128; aes-cbc-elephant (BitLocker's diffuser, modelled from its paper) at
# iv_offset 0 and, with iv_large_sectors, 2^40+128. The model: one XTS data unit
# or CBC chain per encryption sector, the IV counting 512-byte sectors (or
# sector_size units with iv_large_sectors), iv_offset included.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

dev=/dev/ram0
seg=$((256 << 10))
seglen=$((seg / 512))
big_ivo=$(((1 << 40) + 128))	# a multiple of every sector size up to 64K
plain=/tmp/ref.plain
pattern "$seg" >"$plain"
[ "$(stat -c %s "$plain")" = "$seg" ] || fail "the plaintext pattern is not $seg bytes"
plain_sum=$(sha256sum <"$plain" | cut -d' ' -f1)
on_exit dmsetup remove_all
key32=$(test_key 32)
key64=$(test_key 64)

for target in crypt crypt_lbs; do
	max=4096
	[ "$target" = crypt ] || max=$(bound)
	tab=/tmp/ref.$target
	: >"$tab"
	cases=()
	n=0
	for ss in $(sizes_upto "$max"); do
		case $ss in 1024 | 2048) continue ;; esac	# compat.sh covers these against stock
		for c in "aes-xts-plain64 0 0" "aes-xts-plain64 0 $big_ivo" "aes-xts-plain64 1 0" \
			"aes-xts-plain64 1 $big_ivo" "aes-cbc-essiv:sha256 1 $big_ivo" \
			"aes-cbc-elephant 0 0" "aes-cbc-elephant 1 $big_ivo"; do
			read -r cipher ivls ivo <<<"$c"
			key=$key64
			[ "$cipher" != aes-cbc-essiv:sha256 ] || key=$key32
			opts=()
			[ "$ss" = 512 ] || opts+=("sector_size:$ss")
			[ "$ivls" = 0 ] || opts+=(iv_large_sectors)
			line="$((n * seglen)) $seglen $target $cipher $key $ivo $dev $((n * seglen))"
			[ "${#opts[@]}" = 0 ] || line+=" ${#opts[@]} ${opts[*]}"
			printf '%s\n' "$line" >>"$tab"
			cases+=("$target $cipher $ss $ivls $ivo")
			n=$((n + 1))
		done
	done
	dd if=/dev/zero of="$dev" bs=1M count="$((n * seg >> 20))" oflag=direct status=none
	dmsetup create lbs-ref <"$tab" || fail "$target refused the reference table: $(ti_error)"
	raw_views "$n" "$seglen"
	for ((i = 0; i < n; i++)); do printf '%s\n' "$plain"; done | xargs cat >/tmp/ref.data
	put /tmp/ref.data /dev/mapper/lbs-ref 65536
	mapfile -t raw < <(seg_sums raw "$n")
	[ "${#raw[@]}" = "$n" ] || fail "$target: read ${#raw[@]} segments, expected $n"
	for ((i = 0; i < n; i++)); do
		printf 'REFERENCE reference %s %s %s\n' "${cases[$i]}" "$seg" "${raw[$i]}"
	done
	# every segment reads back through the target (the raw bytes are checked on the host)
	blockdev --flushbufs /dev/mapper/lbs-ref
	got=$(dd if=/dev/mapper/lbs-ref bs=64k iflag=direct status=none | sha256sum | cut -d' ' -f1)
	want=$(sha256sum </tmp/ref.data | cut -d' ' -f1)
	[ "$got" = "$want" ] || fail "$target: the plaintext does not read back through the target"
	[ "${raw[0]}" != "$plain_sum" ] || fail "$target: the raw device holds the plaintext"
	ok "$target: $n cases written, read back; raw checksums printed for the host to check"
	dmsetup remove_all
done
