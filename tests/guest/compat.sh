#!/usr/bin/env bash
# DESCRIPTION: byte compatibility with the stock dm_crypt, every cipher, both ways
# BOOT: both
# KERNELS: all -arm64-4k
#   arm64-4k in make check-full: arm64-4k-6.1 covers arm64's 4K pages,
#   arm64-16k Debian's 6.12 arm64 build
# FULL-KERNELS: all
# LIMIT: 180 many cases, many process starts
# NEEDS: cryptd
# MAY-LACK: cryptd arm64-16k arm64-4k arm64-4k-6.1
#   Debian's arm64 kernels are built without CONFIG_CRYPTO_CRYPTD: the
#   asynchronous case is skipped there
# ORDER: 10
#
# compat.sh: dm-crypt-lbs is byte-compatible with the stock dm_crypt. Needs `--module both` (stock as crypt, ours as
# crypt_lbs).
#
# Cases: each cipher x sector_size {512, 4096} x {with, without iv_large_sectors}
# x iv_offset {0, 2^40+8}, plus a keycount-2 cipher and, where the kernel has
# cryptd, an asynchronous one (cryptd queues and backlogs requests; ours must wait
# for completions). Each sector size is one device of many segments, one case per
# segment over its own 32 KiB of the ramdisk (dm-crypt counts IVs from each
# target's start, so a segment is exactly a mapping of its own): one device for
# stock, one for ours, the same table but for the target name. Checked: both
# targets print the table back alike; data written through ours reads back through
# stock; stock writing the same data over it leaves every segment's raw bytes
# exactly as ours wrote them; read through ours: the data; no segment holds the
# plaintext (except cipher_null's, which must).
# The ciphers: aes-xts-plain64, aes-xts-plain64be, aes-cbc-essiv:sha256,
# aes-cbc-plain, aes-cbc-benbi, aes-cbc-null, aes-cbc-eboiv, capi:xts(aes)-plain64,
# serpent-xts-plain64, twofish-cbc-essiv:sha256 and cipher_null-ecb. The
# asynchronous one is capi:cryptd(xts(ecb(DRIVER)))-plain64 (lib.sh: cryptd_spec
# tries aes-generic, 6.x's name, and aes-lib, 7.x's; cryptd must be named by its
# driver). Debian's arm64 kernels are built without CONFIG_CRYPTO_CRYPTD: there
# that case is skipped (LBS-SKIP, listed by the runner); it runs on amd64-4k
# (cryptd a module) and on arm64-64k, whose fragment enables cryptd so that the
# asynchronous path meets 64 KiB sectors.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

dev=/dev/ram0
seg=$((32 << 10))
seglen=$((seg / 512))
big_ivo=$(((1 << 40) + 8))	# above 32 bits, a multiple of 4096/512
on_exit dmsetup remove_all

[ "$(target_version crypt_lbs)" = v1.30.0 ] || fail "crypt_lbs is not v1.30.0: $(dmsetup targets | tr '\n' ' ')"
[ -n "$(target_version crypt)" ] || fail "no stock crypt target"

key32=$(test_key 32)
key64=$(test_key 64)
key_for() {	# key_for CIPHER: the test key of the right length, in $key
	case $1 in
	cipher_null-*) key=- ;;
	*xts* | *:2-*) key=$key64 ;;
	*) key=$key32 ;;
	esac
}

ciphers=(aes-xts-plain64 aes-xts-plain64be aes-cbc-essiv:sha256 aes-cbc-plain aes-cbc-benbi
	aes-cbc-null aes-cbc-eboiv "capi:xts(aes)-plain64" serpent-xts-plain64
	twofish-cbc-essiv:sha256 cipher_null-ecb)

# The asynchronous case needs cryptd: it runs where the stock target can load it.
async_spec=$(cryptd_spec crypt "$dev" "$key64")
cryptd=1
if [ -z "$async_spec" ]; then
	cryptd=0
	skip_lacking cryptd "the asynchronous case" "the stock target cannot load cryptd(xts)"
fi

chunk=/tmp/compat.chunk
head -c "$seg" /dev/urandom >"$chunk"
want=$(sha256sum <"$chunk" | cut -d' ' -f1)
total=0
for ss in 512 4096; do
	stock_tab=/tmp/compat.stock.$ss ours_tab=/tmp/compat.ours.$ss
	: >"$stock_tab"
	: >"$ours_tab"
	names=()
	n=0
	add() {	# add CIPHER IVLS IVO [CIPHER_FOR_OURS]
		local opts=() tail
		[ "$ss" = 512 ] || opts+=("sector_size:$ss")
		[ "$2" = 0 ] || opts+=(iv_large_sectors)
		tail="$3 $dev $((n * seglen))"
		[ "${#opts[@]}" = 0 ] || tail+=" ${#opts[@]} ${opts[*]}"
		key_for "$1"
		printf '%s %s crypt %s %s %s\n' "$((n * seglen))" "$seglen" "$1" "$key" "$tail" >>"$stock_tab"
		key_for "${4:-$1}"
		printf '%s %s crypt_lbs %s %s %s\n' "$((n * seglen))" "$seglen" "${4:-$1}" "$key" "$tail" >>"$ours_tab"
		names+=("${4:-$1} ss=$ss iv_large_sectors=$2 iv_offset=$3")
		n=$((n + 1))
	}
	for ivls in 0 1; do
		for ivo in 0 "$big_ivo"; do
			for c in "${ciphers[@]}"; do add "$c" "$ivls" "$ivo"; done
		done
	done
	add aes:2-cbc-plain64 0 "$big_ivo"
	[ "$cryptd" = 0 ] || add aes-xts-plain64 1 0 "$async_spec"
	bytes=$((n * seg))

	dmsetup create stk-compat <"$stock_tab" || fail "ss=$ss: stock refused the table:$(printf '\n%s' "$(cat "$stock_tab")")"
	dmsetup create lbs-compat <"$ours_tab" || fail "ss=$ss: crypt_lbs refused a table stock accepts: $(ti_error)"
	raw_views "$n" "$seglen"
	# the tables as the targets print them back, target names and cryptd aside
	s=$(dmsetup table --showkeys stk-compat | sed 's/ crypt / T /')
	l=$(dmsetup table --showkeys lbs-compat | sed 's/ crypt_lbs / T /; s/capi:cryptd(xts(ecb(aes-[a-z]*)))-plain64/aes-xts-plain64/')
	[ "$s" = "$l" ] || fail "ss=$ss: the tables print back differently:$(diff <(echo "$s") <(echo "$l") || true)"

	data=/tmp/compat.data
	for ((i = 0; i < n; i++)); do printf '%s\n' "$chunk"; done | xargs cat >"$data"
	data_sum=$(sha256sum <"$data" | cut -d' ' -f1)
	dd if=/dev/zero of="$dev" bs=64k count="$((bytes / 65536))" oflag=direct status=none
	put "$data" /dev/mapper/lbs-compat
	mapfile -t raw_ours < <(seg_sums raw "$n")
	read_stock=$(sha_of /dev/mapper/stk-compat "$bytes")
	put "$data" /dev/mapper/stk-compat
	mapfile -t raw_stock < <(seg_sums raw "$n")
	read_ours=$(sha_of /dev/mapper/lbs-compat "$bytes")
	[ "${#raw_ours[@]}" = "$n" ] || fail "ss=$ss: read ${#raw_ours[@]} segments, expected $n"
	bad=0
	for ((i = 0; i < n; i++)); do
		what=${names[$i]}
		why=()
		[ "${raw_ours[$i]}" = "${raw_stock[$i]}" ] || why+=("ciphertext differs (ours ${raw_ours[$i]:0:12}, stock ${raw_stock[$i]:0:12})")
		case $what in
		cipher_null-*) [ "${raw_ours[$i]}" = "$want" ] || why+=("cipher_null changed the data") ;;
		*) [ "${raw_ours[$i]}" != "$want" ] || why+=("the raw device holds the plaintext") ;;
		esac
		if [ "${#why[@]}" -gt 0 ]; then
			printf 'FAIL %s: %s\n' "$what" "${why[*]}"
			bad=$((bad + 1))
		else
			ok "$what: same ciphertext as stock"
		fi
	done
	[ "$bad" = 0 ] || fail "ss=$ss: $bad of $n cases differ from stock"
	[ "$read_stock" = "$data_sum" ] || fail "ss=$ss: written through ours, read through stock: the data differs"
	[ "$read_ours" = "$data_sum" ] || fail "ss=$ss: written through stock, read through ours: the data differs"
	ok "ss=$ss: all $n cases: written through ours read back through stock, and the reverse"
	dmsetup remove_all
	total=$((total + n))
done
ok "$total cipher/sector_size/IV cases byte-identical with stock crypt $(target_version crypt)"
