#!/usr/bin/env bash
# DESCRIPTION: Debian's cryptsetup drives ours loaded as crypt
# BOOT: lbscrypt
# KERNELS: all -arm64-4k
#   arm64-4k in make check-full: arm64-4k-6.1 covers arm64's 4K pages,
#   arm64-16k Debian's 6.12 arm64 build
# FULL-KERNELS: all
# LIMIT: 120 about four times the longest expected (5 to 25 s on arm64-64k, idle)
# NEEDS: none
# ORDER: 300
#
# cryptsetup.sh: Debian's cryptsetup drives dm-crypt-lbs loaded as `crypt`.
# Needs `--module lbscrypt`.
# `dmsetup targets` shows crypt v1.30.0. `cryptsetup open --type plain` (key file,
# sector size 512 and 4096, iv_large_sectors at 4096) works, `cryptsetup status`
# reports the mapping (type, cipher, key size, sector size, size), the data reads back,
# and `cryptsetup close` removes it. Readable through stock: the raw bytes are
# printed as REFERENCE lines; the host checks them against the reference model,
# which reference.sh checks against the stock target's own ciphertext.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

dev=/dev/ram0
bytes=$((256 << 10))
v=$(target_version crypt)
[ "$v" = v1.30.0 ] || fail "dmsetup targets shows crypt $v, expected v1.30.0 (ours loaded as crypt)"
lsmod | grep -q '^dm_crypt_lbs ' || fail "crypt v1.30.0 is registered, but dm_crypt_lbs is not loaded"
! lsmod | grep -q '^dm_crypt ' || fail "the stock dm_crypt is loaded too"
ok "dmsetup targets: crypt $v, from dm_crypt_lbs"
on_exit cryptsetup close lbs-cs

key=/tmp/cs.key
test_key_file "$key" 64
pattern "$bytes" >/tmp/cs.plain
want=$(sha256sum </tmp/cs.plain | cut -d' ' -f1)

for args in "512 0" "4096 0" "4096 1"; do
	read -r ss ivls <<<"$args"
	extra=()
	[ "$ivls" = 0 ] || extra=(--iv-large-sectors)
	dd if=/dev/zero of="$dev" bs=64k count=$((bytes / 65536)) oflag=direct status=none
	what="cryptsetup open --type plain --sector-size $ss${extra[*]:+ ${extra[*]}}"
	cryptsetup open --type plain --cipher aes-xts-plain64 --key-size 512 --key-file "$key" \
		--sector-size "$ss" "${extra[@]}" --size $((bytes / 512)) "$dev" lbs-cs ||
		fail "$what: failed ($(ti_error))"
	st=$(cryptsetup status lbs-cs) || fail "$what: cryptsetup status failed"
	for want_line in "type: *PLAIN" "cipher: *aes-xts-plain64" "keysize: *512 bits" \
		"sector size: *$ss" "size: *$((bytes / 512)) sectors"; do
		grep -qE "$want_line" <<<"$st" || fail "$what: cryptsetup status lacks '$want_line':$(printf '\n%s' "$st")"
	done
	tab=$(dmsetup table lbs-cs)
	case $ss in 512) ;; *) grep -q "sector_size:$ss" <<<"$tab" || fail "$what: table $tab" ;; esac
	put /tmp/cs.plain /dev/mapper/lbs-cs
	[ "$(sha_of /dev/mapper/lbs-cs "$bytes")" = "$want" ] || fail "$what: the data does not read back"
	raw=$(sha_of "$dev" "$bytes")
	printf 'REFERENCE cryptsetup crypt aes-xts-plain64 %s %s 0 %s %s\n' "$ss" "$ivls" "$bytes" "$raw"
	cryptsetup close lbs-cs || fail "$what: cryptsetup close failed"
	! dmsetup info lbs-cs >/dev/null 2>&1 || fail "$what: the mapping is still there after close"
	ok "$what: status reports it, data round trip, close; raw bytes sent to the host"
done
