#!/usr/bin/env bash
# DESCRIPTION: lmk, tcw and elephant write what the in-tree target writes
# BOOT: both
# KERNELS: amd64-4k arm64-64k-7.3
#   lmk's MD5 through the shash state on 6.x (amd64-4k: a third of arm64-4k's
#   time under TCG); on 7.3 lmk's MD5 is a library
# FULL-KERNELS: all
# LIMIT: 600 13 tables written and read by both targets; elephant up to the page size
# NEEDS: none
# ORDER: 145
#
# ivlegacy.sh: the IV modes lmk (loop-AES), tcw (TrueCrypt CBC) and elephant
# (BitLocker's AES-CBC + diffuser) write what the in-tree target writes.
# Needs stock as crypt and ours as crypt_lbs (`--module both`). For each table:
# data written through stock reads back through ours, data written through ours
# reads back through stock, and the ciphertext on the ramdisk is byte for byte
# the same whichever wrote it (and not the plaintext); `dmsetup table --showkeys`
# of ours loads back as the same line. lmk and tcw are defined on 512-byte sectors
# only: sector_size:4096 is EINVAL with a message naming the mode, as on stock.
# elephant runs at 512 and 4096 against stock, and above 4096 (ours only) reads
# back what it wrote with ciphertext unlike aes-cbc-eboiv's: the diffuser ran.
# The tables: lmk with one key, 64 keys, 64 keys and a seed, AES-128 and
# AES-256, the capi: form (always 64 keys), 3DES (a 64-bit block); tcw with
# AES, Serpent, Twofish and TrueCrypt 1.x's 64-bit CAST5, 3DES and Blowfish;
# elephant with AES-128, -192 and -256 key pairs, with and without
# iv_large_sectors; keys that are not two AES keys are EINVAL. On a kernel
# without md5 (lmk) or crc32 (tcw) stock cannot load the table: the case is
# skipped (LBS-SKIP). reference.sh checks elephant's bytes at every size.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

dev=/dev/ram0
bytes=$((64 << 10))
len=$((bytes / 512))
on_exit dm_remove lbs-iv
on_exit dm_remove lbs-bad
head -c "$bytes" /dev/urandom >/tmp/iv.data
want=$(sha256sum </tmp/iv.data | cut -d' ' -f1)

# hexkey BYTES SALT: a key of BYTES bytes, different for each SALT
hexkey() {
	local i b out=""
	for ((i = 0; i < $1; i++)); do
		printf -v b '%02x' $(((i * 7 + $2 * 13 + i / 256) & 255))
		out+=$b
	done
	printf '%s\n' "$out"
}

# write_with TARGET SPEC KEY [OPTS]: the data through a fresh mapping; prints the raw sha256
write_with() {
	dmsetup create lbs-iv --table "0 $len $1 $2 $3 0 $dev 0${4:+ $4}" || fail "$1 refused $2 ${4:-}: $(ti_error)"
	put /tmp/iv.data "$(dm_blkdev lbs-iv)"
	dm_remove lbs-iv
	sha_of "$dev" "$bytes"
}

# read_with TARGET SPEC KEY [OPTS]: the sha256 of what the mapping reads
read_with() {
	local got
	dmsetup create lbs-iv --table "0 $len $1 $2 $3 0 $dev 0${4:+ $4}" || fail "$1 refused $2 ${4:-}: $(ti_error)"
	got=$(sha_of "$(dm_blkdev lbs-iv)" "$bytes")
	dm_remove lbs-iv
	printf '%s\n' "$got"
}

# reloads SPEC KEY [OPTS]: ours's own `dmsetup table --showkeys` loads back as the same line
reloads() {
	local table
	dmsetup create lbs-iv --table "0 $len crypt_lbs $1 $2 0 $dev 0${3:+ $3}"
	table=$(dmsetup table --showkeys lbs-iv | cut -d' ' -f4-)
	dm_remove lbs-iv
	dmsetup create lbs-iv --table "0 $len crypt_lbs $table" || fail "$1 ${3:-}: its own table does not load back: $table"
	[ "$(dmsetup table --showkeys lbs-iv | cut -d' ' -f4-)" = "$table" ] || fail "$1 ${3:-}: the table does not re-read the same"
	dm_remove lbs-iv
}

plain=$(sha256sum </tmp/iv.data | cut -d' ' -f1)
case_of() {	# case_of SPEC KEY [OPTS]: stock and ours cross-read, same ciphertext
	local spec=$1 key=$2 opts=${3:-} raw_s raw_o
	if ! dmsetup create lbs-iv --table "0 $len crypt $spec $key 0 $dev 0${opts:+ $opts}" 2>/dev/null; then
		err=$(ti_error)
		case $err in
		*hash* | *"Error initializing"* | *crypto* | *"Error creating IV (-2)"*)
			printf 'LBS-SKIP ivlegacy: %s: stock cannot load it on this kernel (%s): the kernel lacks the hash (md5 for lmk, crc32 for tcw)\n' "$spec" "$err"
			return 0 ;;
		esac
		fail "stock refused $spec $opts: $err"
	fi
	dm_remove lbs-iv
	raw_s=$(write_with crypt "$spec" "$key" "$opts")
	[ "$(read_with crypt_lbs "$spec" "$key" "$opts")" = "$want" ] || fail "$spec $opts: what stock wrote reads back differently through ours"
	raw_o=$(write_with crypt_lbs "$spec" "$key" "$opts")
	[ "$raw_o" = "$raw_s" ] || fail "$spec $opts: ours writes other ciphertext than stock"
	[ "$raw_o" != "$plain" ] || fail "$spec $opts: the ramdisk holds the plaintext"
	[ "$(read_with crypt "$spec" "$key" "$opts")" = "$want" ] || fail "$spec $opts: what ours wrote reads back differently through stock"
	reloads "$spec" "$key" "$opts"
	ok "$spec ${opts:+($opts) }(key ${#key} hex digits): stock and ours write the same ciphertext and read each other's; the table reloads"
}

# ours_only SPEC KEY OPTS OTHER OTHER_KEY: a size stock cannot take; ours reads back
# what it wrote, the ramdisk holds neither the plaintext nor what OTHER (the same
# cipher with another IV mode, keyed with OTHER_KEY) writes
ours_only() {
	local raw raw_other
	raw=$(write_with crypt_lbs "$1" "$2" "$3")
	[ "$(read_with crypt_lbs "$1" "$2" "$3")" = "$want" ] || fail "$1 ($3): ours does not read back what it wrote"
	[ "$raw" != "$plain" ] || fail "$1 ($3): the ramdisk holds the plaintext"
	raw_other=$(write_with crypt_lbs "$4" "$5" "$3")
	[ "$raw" != "$raw_other" ] || fail "$1 ($3): the same ciphertext as $4: the mode changed nothing"
	reloads "$1" "$2" "$3"
	ok "$1 ($3, ours only): reads back what it wrote, unlike $4's ciphertext; the table reloads"
}

for spec_key in "aes-cbc-lmk $(hexkey 32 1)" \
	"aes:64-cbc-lmk $(hexkey $((64 * 32)) 2)" \
	"aes:64-cbc-lmk $(hexkey $((65 * 32)) 3)" \
	"aes:64-cbc-lmk $(hexkey $((65 * 16)) 4)" \
	"capi:cbc(aes)-lmk $(hexkey $((64 * 32)) 15)" \
	"capi:cbc(aes)-lmk $(hexkey $((65 * 32)) 16)" \
	"aes-cbc-tcw $(hexkey $((32 + 16 + 16)) 5)" \
	"serpent-cbc-tcw $(hexkey $((32 + 16 + 16)) 6)" \
	"twofish-cbc-tcw $(hexkey $((16 + 16 + 16)) 7)" \
	"cast5-cbc-tcw $(hexkey $((16 + 8 + 16)) 17)" \
	"des3_ede-cbc-tcw $(hexkey $((24 + 8 + 16)) 18)" \
	"blowfish-cbc-tcw $(hexkey $((56 + 8 + 16)) 19)" \
	"des3_ede-cbc-lmk $(hexkey 24 20)"; do
	# lmk: one key, no seed (loop-AES v1); 64 keys (v2); 64 keys and the seed (v3);
	# AES-128 with seed; the capi: form (always 64 keys), without and with the
	# seed; 3DES (a 64-bit block: the IV is half of MD5's state). tcw: key, IV
	# seed, whitening, with 128-bit and 64-bit (CAST5, 3DES, Blowfish) blocks.
	read -r spec key <<<"$spec_key"
	case_of "$spec" "$key"
	refuses_einval "$spec at sector_size:4096" \
		dmsetup create lbs-bad --table "0 $len crypt_lbs $spec $key 0 $dev 0 1 sector_size:4096"
done
refuses_einval "tcw with a key no longer than its seeds" \
	dmsetup create lbs-bad --table "0 $len crypt_lbs aes-cbc-tcw $(hexkey 32 8) 0 $dev 0"

# elephant: AES-128 and AES-256 (CBC key + sector-key key), 512 and 4096 bytes
case_of aes-cbc-elephant "$(hexkey 32 9)"
case_of aes-cbc-elephant "$(hexkey 64 10)"
case_of aes-cbc-elephant "$(hexkey 48 11)" "1 sector_size:4096"
case_of aes-cbc-elephant "$(hexkey 64 12)" "2 sector_size:4096 iv_large_sectors"
ps=$(getconf PAGESIZE)
for ((ss = 8192; ss <= ps; ss *= 2)); do
	key=$(hexkey 64 13)
	ours_only aes-cbc-elephant "$key" "2 sector_size:$ss iv_large_sectors" aes-cbc-eboiv "${key:0:64}"
done
for bad in 40 30 96; do
	refuses_einval "elephant with a key of $bad bytes (not two AES keys)" \
		dmsetup create lbs-bad --table "0 $len crypt_lbs aes-cbc-elephant $(hexkey $bad 14) 0 $dev 0"
done
