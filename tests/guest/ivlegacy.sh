#!/usr/bin/env bash
# ivlegacy.sh: the IV modes lmk (loop-AES) and tcw (TrueCrypt CBC) write what the
# in-tree target writes (issue 8, first part). Needs stock as crypt and ours as
# crypt_lbs (`--module both`). For each table: data written through stock reads
# back through ours, data written through ours reads back through stock, and the
# ciphertext on the ramdisk is byte for byte the same whichever wrote it (and not
# the plaintext); `dmsetup table --showkeys` of ours loads back as the same line.
# Both modes are defined on 512-byte sectors: sector_size:4096 is EINVAL with a
# message naming the mode, as on stock.
set -euo pipefail
# shellcheck source=tests/guest/lib.sh
. "$(dirname "$0")/lib.sh"

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

# write_with TARGET SPEC KEY: the data through a fresh mapping; prints the raw sha256
write_with() {
	dmsetup create lbs-iv --table "0 $len $1 $2 $3 0 $dev 0" || fail "$1 refused $2: $(ti_error)"
	put /tmp/iv.data "$(dm_blkdev lbs-iv)"
	dm_remove lbs-iv
	sha_of "$dev" "$bytes"
}

# read_with TARGET SPEC KEY: the sha256 of what the mapping reads
read_with() {
	local got
	dmsetup create lbs-iv --table "0 $len $1 $2 $3 0 $dev 0" || fail "$1 refused $2: $(ti_error)"
	got=$(sha_of "$(dm_blkdev lbs-iv)" "$bytes")
	dm_remove lbs-iv
	printf '%s\n' "$got"
}

plain=$(sha256sum </tmp/iv.data | cut -d' ' -f1)
case_of() {	# case_of SPEC KEY: stock and ours cross-read, same ciphertext
	local spec=$1 key=$2 raw_s raw_o table
	if ! dmsetup create lbs-iv --table "0 $len crypt $spec $key 0 $dev 0" 2>/dev/null; then
		err=$(ti_error)
		case $err in
		*hash* | *"Error initializing"* | *crypto*)
			printf 'LBS-SKIP ivlegacy: %s: stock cannot load it on this kernel (%s): the kernel lacks the hash (md5 for lmk, crc32 for tcw)\n' "$spec" "$err"
			return 0 ;;
		esac
		fail "stock refused $spec: $err"
	fi
	dm_remove lbs-iv
	raw_s=$(write_with crypt "$spec" "$key")
	[ "$(read_with crypt_lbs "$spec" "$key")" = "$want" ] || fail "$spec: what stock wrote reads back differently through ours"
	raw_o=$(write_with crypt_lbs "$spec" "$key")
	[ "$raw_o" = "$raw_s" ] || fail "$spec: ours writes other ciphertext than stock"
	[ "$raw_o" != "$plain" ] || fail "$spec: the ramdisk holds the plaintext"
	[ "$(read_with crypt "$spec" "$key")" = "$want" ] || fail "$spec: what ours wrote reads back differently through stock"
	dmsetup create lbs-iv --table "0 $len crypt_lbs $spec $key 0 $dev 0"
	table=$(dmsetup table --showkeys lbs-iv | cut -d' ' -f4-)
	dm_remove lbs-iv
	dmsetup create lbs-iv --table "0 $len crypt_lbs $table" || fail "$spec: its own table does not load back: $table"
	[ "$(dmsetup table --showkeys lbs-iv | cut -d' ' -f4-)" = "$table" ] || fail "$spec: the table does not re-read the same"
	dm_remove lbs-iv
	ok "$spec (key ${#key} hex digits): stock and ours write the same ciphertext and read each other's; the table reloads"
	refuses_einval "$spec at sector_size:4096" \
		dmsetup create lbs-bad --table "0 $len crypt_lbs $spec $key 0 $dev 0 1 sector_size:4096"
}

case_of aes-cbc-lmk "$(hexkey 32 1)"                 # one key, no seed (loop-AES v1)
case_of aes:64-cbc-lmk "$(hexkey $((64 * 32)) 2)"    # 64 keys (v2)
case_of aes:64-cbc-lmk "$(hexkey $((65 * 32)) 3)"    # 64 keys and the seed (v3)
case_of aes:64-cbc-lmk "$(hexkey $((65 * 16)) 4)"    # AES-128, with seed
case_of aes-cbc-tcw "$(hexkey $((32 + 16 + 16)) 5)"  # key, IV seed, whitening
case_of serpent-cbc-tcw "$(hexkey $((32 + 16 + 16)) 6)"
case_of twofish-cbc-tcw "$(hexkey $((16 + 16 + 16)) 7)"
refuses_einval "tcw with a key no longer than its seeds" \
	dmsetup create lbs-bad --table "0 $len crypt_lbs aes-cbc-tcw $(hexkey 32 8) 0 $dev 0"
