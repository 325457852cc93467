#!/usr/bin/env bash
# DESCRIPTION: authenticated encryption writes what the in-tree target writes, 32 LUKS2 formats
# BOOT: both
# KERNELS: none
#   make check runs integrity-core, 5 of its formats
# FULL-KERNELS: all
# LIMIT: 600 32 LUKS2 --integrity formats, each written and read by both targets
# NEEDS: dm-integrity engine
# ORDER: 160
#
# integrity.sh: authenticated encryption (integrity:<bytes>:<type>,
# integrity_key_size, AEAD ciphers, HMAC over XTS/CBC-ESSIV) and the IV mode
# random write what the in-tree target writes. Needs stock as
# crypt and ours as crypt_lbs (`--module both`), dm-integrity and the AEAD
# algorithms (Debian's kernel: modules, autoloaded).
# For every combination cryptsetup 2.6.1's luks2-integrity-test formats, at 512
# and 4096: cryptsetup (stock) formats LUKS2 --integrity over dm-integrity and
# opens it (the key in the table, not in cryptsetup's thread keyring); ours maps
# the same table over the same dm-integrity device.
#  - the table ours reads back is the line stock reads back;
#  - what stock writes, ours reads back identical, and the reverse;
#  - deterministic IVs: ours writes the same ciphertext as stock;
#  - a sector whose data changed under the tag fails the read on both, with
#    EILSEQ (BLK_STS_PROTECTION), ours logging the sector; its neighbour reads;
#  - a few cases also flip one byte of the tag itself on the ramdisk;
#  - an asynchronous AEAD: authenc() over the emulated engine's xts(aes)
#    (/lbs/kmod/lbs-engine.ko) with a queue of 2, so requests complete later
#    and some are backlogged: cross-read with stock's software table, fio
#    verification, a tag mismatch found in the engine's completion.
# Refusals (EINVAL, with a ti->error): sector_size above 4096 with integrity,
# random without integrity metadata, a tag the device has no room for, a tag
# size that leaves no tag after the IV, an interval that is not the sector
# size, integrity_key_size not smaller than the key, AEAD in the classic form,
# unknown types, out-of-range sizes. A page that changes while it is written
# with an AEAD that reads the plaintext twice (rfc4309(ccm(aes))) still reads
# back: every sector is sealed from the bounce page's copy.
# A format stock's cryptsetup cannot make on this kernel (not supported, not
# available, unknown) is skipped (LBS-SKIP) with cryptsetup's line.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

dev=/dev/ram0
name="lbs-luks"
bytes=$((256 << 10))
key=/tmp/int.key
head -c 32 /dev/urandom >"$key"
on_exit dm_remove lbs-bad
on_exit dm_remove lbs-int
on_exit cryptsetup close "$name"
on_exit dm_remove lbs-dif
modprobe dm-integrity 2>/dev/null || true

# format ALG INT KEYBITS SECTOR: LUKS2 with integrity through stock (cryptsetup's
# target is `crypt`); false when cryptsetup refuses (its output in /tmp/int.fmt)
format() {
	cryptsetup luksFormat --type luks2 -q -c "$1" --integrity "$2" -s "$3" --sector-size "$4" \
		--pbkdf pbkdf2 --pbkdf-force-iterations 1000 --integrity-no-wipe -d "$key" "$dev" \
		>/tmp/int.fmt 2>&1
}

# read_fails DEV SS BLOCK: reading block BLOCK of DEV fails with EILSEQ or EIO
read_fails() {
	local out
	if out=$(dd if="$1" of=/dev/null bs="$2" skip="$3" count=1 iflag=direct 2>&1); then
		return 1
	fi
	case $out in
	*"Invalid or incomplete multibyte"* | *"Illegal byte sequence"* | *"Input/output error"*) return 0 ;;
	esac
	printf '(unexpected error: %s) ' "$out"
	return 1
}

# flip_byte OFFSET: invert the byte at OFFSET of the ramdisk (O_DIRECT, whole block)
flip_byte() {
	local blk=$(($1 / 512)) off=$(($1 % 512)) v
	dd if="$dev" of=/tmp/int.blk bs=512 skip="$blk" count=1 iflag=direct status=none
	v=$(od -An -tu1 -j "$off" -N1 /tmp/int.blk | tr -d ' ')
	# shellcheck disable=SC2059 # the format is the escaped byte
	printf "$(printf '\\x%02x' $((v ^ 255)))" |
		dd of=/tmp/int.blk bs=1 seek="$off" conv=notrunc status=none
	dd if=/tmp/int.blk of="$dev" bs=512 seek="$blk" count=1 oflag=direct conv=notrunc status=none
}

# dump START_BYTES LEN_BYTES FILE: the ramdisk region, as it is, into FILE
dump() {
	dd if="$dev" of="$3" bs=4096 skip=$(($1 / 4096)) count=$(($2 / 4096)) iflag=direct status=none
}

# tag_offset CHANGES BASE: from the changed bytes of a region at BASE (cmp -l:
# 1-based offsets, in order), the byte offset of the first changed byte in a
# 4 KiB block with few changes (a tag; the data sector changes hundreds), or
# nothing; the first block, dm-integrity's superblock, is not looked at. (A hex
# dump of the region through od and awk took half a minute a side under
# emulation.)
tag_offset() {
	awk -v base="$2" '
		{ o = $1 - 1; blk = int(o / 4096) }
		blk == 0 { next }
		!(blk in n) { first[blk] = o; order[++k] = blk }
		{ n[blk]++ }
		END { for (i = 1; i <= k; i++) if (n[order[i]] < 300) { printf "%d\n", base + first[order[i]]; exit } }' "$1"
}

# meta_flip SS: stock writes block 0 alone; one byte of its tag, found on the
# ramdisk as what changed beside the data, is flipped; both targets fail the read
meta_flip() {
	local ss=$1 dif start region=$((4 << 20)) off
	dif=$(dmsetup table "${name}_dif")
	start=$(($(awk '{ print $5 }' <<<"$dif") * 512))
	# dm-integrity writes its buffered metadata when suspended
	dmsetup suspend "${name}_dif" && dmsetup resume "${name}_dif"
	dump "$start" "$region" /tmp/int.before
	head -c "$ss" /dev/urandom >/tmp/int.one
	dd if=/tmp/int.one of="$(dm_blkdev "$name")" bs="$ss" count=1 oflag=direct conv=fsync status=none
	cryptsetup close "$name"
	dump "$start" "$region" /tmp/int.after
	# cmp: 0 the same, 1 different, 2 trouble
	cmp -l /tmp/int.before /tmp/int.after >/tmp/int.cmp || [ $? -eq 1 ] ||
		fail "$what: cmp -l of the ramdisk before and after the write failed"
	off=$(tag_offset /tmp/int.cmp "$start")
	[ -n "$off" ] || { soft_fail "$what: no tag found on the ramdisk beside the data"; cryptsetup open --disable-keyring -d "$key" "$dev" "$name"; return 0; }
	flip_byte "$off"
	cryptsetup open --disable-keyring -d "$key" "$dev" "$name" || fail "$what: cannot reopen"
	dmsetup create lbs-int --table "$(dmsetup table --showkeys "$name" | sed 's/ crypt / crypt_lbs /')" ||
		fail "$what: ours refused the reopened table: $(ti_error)"
	read_fails "$(dm_blkdev lbs-int)" "$ss" 0 || soft_fail "$what: ours read block 0 with a flipped tag byte (at $off)"
	read_fails "$(dm_blkdev "$name")" "$ss" 0 || soft_fail "$what: stock read block 0 with a flipped tag byte (at $off)"
	dm_remove lbs-int
	ok "$what: a flipped tag byte (ramdisk offset $off) fails the read on ours as on stock"
}

random_iv() { [ "${1##*-}" = random ]; }

# case_of ALG INTEGRITY KEYBITS INTKEYBITS SECTOR [meta]
case_of() {
	local alg=$1 int=$2 ks=$3 iks=$4 ss=$5 line len rest ours mapped dif sa sb raw_s raw_o
	what="$alg --integrity $int -s $ks --sector-size $ss"
	if ! format "$alg" "$int" "$ks" "$ss"; then
		if grep -qiE 'not supported|not available|unknown|No such' /tmp/int.fmt; then
			printf 'LBS-SKIP integrity: %s: stock cannot format it on this kernel: %s\n' "$what" "$(head -n 1 /tmp/int.fmt)"
			return 0
		fi
		fail "$what: cryptsetup luksFormat (stock) failed: $(cat /tmp/int.fmt)"
	fi
	cryptsetup open --disable-keyring -d "$key" "$dev" "$name" || fail "$what: cryptsetup open (stock) failed: $(ti_error)"
	mapped=$(dm_blkdev "$name")
	dif=$(dm_blkdev "${name}_dif")
	line=$(dmsetup table --showkeys "$name")
	len=$(cut -d' ' -f2 <<<"$line")
	rest=$(cut -d' ' -f4- <<<"$line")
	case $rest in
	*" integrity:"*) ;;
	*) fail "$what: stock's table has no integrity option: $rest" ;;
	esac
	dmsetup create lbs-int --table "0 $len crypt_lbs $rest" || fail "$what: ours refused stock's table ($rest): $(ti_error)"
	ours=$(dm_blkdev lbs-int)
	[ "$(dmsetup table --showkeys lbs-int | cut -d' ' -f4-)" = "$rest" ] ||
		fail "$what: the table reads back differently: ours '$(dmsetup table --showkeys lbs-int | cut -d' ' -f4-)', stock '$rest'"

	head -c "$bytes" /dev/urandom >/tmp/int.a
	head -c "$bytes" /dev/urandom >/tmp/int.b
	sa=$(sha256sum </tmp/int.a | cut -d' ' -f1)
	sb=$(sha256sum </tmp/int.b | cut -d' ' -f1)
	put /tmp/int.a "$mapped"
	[ "$(sha_of "$ours" "$bytes")" = "$sa" ] || fail "$what: what stock wrote reads back differently through ours"
	put /tmp/int.b "$ours"
	[ "$(sha_of "$mapped" "$bytes")" = "$sb" ] || fail "$what: what ours wrote reads back differently through stock"
	if ! random_iv "$alg"; then
		put /tmp/int.a "$mapped"
		raw_s=$(sha_of "$dif" "$bytes")
		put /tmp/int.a "$ours"
		raw_o=$(sha_of "$dif" "$bytes")
		[ "$raw_s" = "$raw_o" ] || fail "$what: ours writes other ciphertext than stock"
		[ "$raw_o" != "$sa" ] || fail "$what: the device holds the plaintext"
	fi

	# block 1's data changes under its tag: both fail it, block 0 still reads
	dd if=/dev/urandom of="$dif" bs="$ss" seek=1 count=1 oflag=direct conv=notrunc status=none
	dmesg -c >/dev/null 2>&1 || true
	read_fails "$ours" "$ss" 1 || fail "$what: ours read a sector whose data changed under its tag"
	dmesg | grep -q "crypt-lbs: .*integrity tag mismatch at sector $((ss / 512))" ||
		fail "$what: ours failed the read without logging the sector ($(dmesg | tail -n 3))"
	read_fails "$mapped" "$ss" 1 || fail "$what: stock read a sector whose data changed under its tag"
	dd if="$ours" of=/dev/null bs="$ss" count=1 iflag=direct status=none || fail "$what: ours fails block 0 beside the bad one"
	dm_remove lbs-int
	ok "$what: table '${rest%% *} <key> ${rest#* * }' reloads as stock's; cross-read both ways$(random_iv "$alg" || printf '; same ciphertext'); a changed sector fails with EILSEQ on both"

	if [ "${6:-}" = meta ]; then
		meta_flip "$ss"
	fi
	cryptsetup close "$name"
}

# cryptsetup 2.6.1 tests/luks2-integrity-test: every intformat line
while read -r alg int ks iks ss meta; do
	# integrity-core.sh: only the cases that also flip a tag byte
	[ "${LBS_INTEGRITY_CASES:-all}" = all ] || [ "$meta" = meta ] || continue
	case_of "$alg" "$int" "$ks" "$iks" "$ss" "$meta"
done <<'CASES'
aes-cbc-essiv:sha256 hmac-sha256 128 256  512 meta
aes-xts-plain64      hmac-sha256 256 256  512 -
aes-xts-random       hmac-sha256 256 256  512 meta
aes-cbc-essiv:sha256 hmac-sha256 256 256  512 -
aes-xts-plain64      hmac-sha256 512 256  512 -
aes-xts-random       hmac-sha256 512 256  512 -
aes-cbc-essiv:sha256 hmac-sha256 128 256 4096 -
aes-xts-plain64      hmac-sha256 256 256 4096 -
aes-xts-random       hmac-sha256 256 256 4096 -
aes-cbc-essiv:sha256 hmac-sha256 256 256 4096 -
aes-xts-plain64      hmac-sha256 512 256 4096 -
aes-xts-random       hmac-sha256 512 256 4096 meta
aes-cbc-essiv:sha256 hmac-sha512 256 512 4096 -
aes-xts-essiv:sha256 hmac-sha512 512 512 4096 -
aes-xts-plain64      hmac-sha512 512 512 4096 -
aes-xts-random       hmac-sha512 512 512 4096 -
aes-xts-plain64      hmac-sha1   512 160 4096 -
aes-xts-random       hmac-sha1   512 160 4096 -
aes-gcm-random       aead        128   0  512 meta
aes-gcm-random       aead        128   0 4096 -
aes-gcm-random       aead        256   0  512 -
aes-gcm-random       aead        256   0 4096 -
aes-ccm-random       aead        152   0  512 -
aes-ccm-random       aead        152   0 4096 -
aes-ccm-random       aead        280   0  512 -
aes-ccm-random       aead        280   0 4096 -
chacha20-plain64     poly1305    256   0  512 -
chacha20-random      poly1305    256   0  512 meta
chacha20-plain64     poly1305    256   0 4096 -
chacha20-random      poly1305    256   0 4096 -
aegis128-random      aead        128   0  512 -
aegis128-random      aead        128   0 4096 -
CASES

# --- an asynchronous AEAD: authenc() over the emulated engine's xts(aes) ---
# The engine (tests/engine) completes each request from its own threads after a
# latency and, with a queue of 2, answers -EBUSY and backlogs: ours then starts
# AEAD requests that complete later, in the engine's context, tag checks included.
# Stock's table (software xts(aes)) reads what ours writes through the engine,
# and the reverse; fio verifies with many I/Os in flight; a changed sector fails.
load_engine channels=2 queue_depth=2 latency_us=200
engine_counter() { awk -v n="$1" '$1 == n { print $2 }' /sys/kernel/lbs_engine/stats; }
what="authenc(hmac(sha256),<engine xts(aes)>)-random, 4096"
format aes-xts-random hmac-sha256 512 4096 || fail "$what: cryptsetup luksFormat (stock) failed: $(cat /tmp/int.fmt)"
cryptsetup open --disable-keyring -d "$key" "$dev" "$name" || fail "$what: cryptsetup open (stock) failed: $(ti_error)"
mapped=$(dm_blkdev "$name")
line=$(dmsetup table --showkeys "$name")
rest=$(cut -d' ' -f4- <<<"$line")
case $rest in
"capi:authenc(hmac(sha256),xts(aes))-random "*) ;;
*) fail "$what: stock's table is not the expected authenc cipher: ${rest%% *}" ;;
esac
# A template instance answers to its driver name, made of its parts' driver
# names: the hmac is named by the driver stock's table instantiated (a template's
# hmac(sha256-...) on 6.x, 7.2's library-backed hmac-sha256-lib).
hmac=$(awk -F' *: ' '$1 == "name" { n = $2 } $1 == "driver" && n == "hmac(sha256)" { print $2; exit }' /proc/crypto)
[ -n "$hmac" ] || fail "$what: no hmac(sha256) driver in /proc/crypto after stock's table loaded"
rest=${rest/authenc(hmac(sha256),xts(aes))-random /authenc($hmac,lbs-engine-xts-aes)-random }
dmsetup create lbs-int --table "0 $(cut -d' ' -f2 <<<"$line") crypt_lbs $rest" ||
	fail "$what: ours refused the table over the engine: $(ti_error)"
ours=$(dm_blkdev lbs-int)
[ "$(dmsetup table --showkeys lbs-int | cut -d' ' -f4-)" = "$rest" ] || fail "$what: the table reads back differently"
n0=$(engine_counter completed)
head -c "$bytes" /dev/urandom >/tmp/int.a
head -c "$bytes" /dev/urandom >/tmp/int.b
put /tmp/int.a "$mapped"
[ "$(sha_of "$ours" "$bytes")" = "$(sha256sum </tmp/int.a | cut -d' ' -f1)" ] ||
	fail "$what: what stock wrote reads back differently through ours"
put /tmp/int.b "$ours"
[ "$(sha_of "$mapped" "$bytes")" = "$(sha256sum </tmp/int.b | cut -d' ' -f1)" ] ||
	fail "$what: what ours wrote reads back differently through stock"
n1=$(engine_counter completed)
[ "$((n1 - n0))" -ge $((2 * bytes / 4096)) ] ||
	fail "$what: the engine completed $((n1 - n0)) requests for $((2 * bytes / 4096)) sectors: ours did not use it"
b0=$(engine_counter backlogged)
# written, then verified (a read of a block never written since the format fails
# its tag: --integrity-no-wipe)
if ! fio_ok /tmp/int.fio --name=lbs --filename="$ours" --rw=randwrite --bs=16k --direct=1 \
	--ioengine=libaio --iodepth=16 --numjobs=2 --size=256k --offset_increment=256k \
	--verify=crc32c --verify_fatal=1 --randrepeat=1; then
	cat /tmp/int.fio
	fail "$what: fio with 32 I/Os in flight through a queue of 2 failed"
fi
backlogged=$(($(engine_counter backlogged) - b0))
[ "$backlogged" -gt 0 ] || fail "$what: no request was backlogged (-EBUSY) under fio"
[ "$(engine_counter rejected)" = 0 ] || fail "$what: the engine refused requests with -ENOSPC: the backlog flag was not set"
dd if=/dev/urandom of="$(dm_blkdev "${name}_dif")" bs=4096 seek=1 count=1 oflag=direct conv=notrunc status=none
dmesg -c >/dev/null 2>&1 || true
read_fails "$ours" 4096 1 || fail "$what: ours read a sector whose data changed under its tag"
dmesg | grep -q "crypt-lbs: .*integrity tag mismatch at sector 8" ||
	fail "$what: ours failed the read without logging the sector ($(dmesg | tail -n 3))"
dd if="$ours" of=/dev/null bs=4096 count=1 iflag=direct status=none || fail "$what: ours fails block 0 beside the bad one"
dm_remove lbs-int
cryptsetup close "$name"
unload_engine
ok "$what: cross-read with stock's software table both ways; fio verified, $backlogged requests backlogged; a changed sector fails with EILSEQ and is logged"

# --- refusals: EINVAL with a ti->error on ours ---
# A dm-integrity device of our own (no internal hash, 32-byte tags, 512-byte blocks)
# for the profile checks: integritysetup as cryptsetup sets it up for LUKS2.
dd if=/dev/zero of="$dev" bs=1M count=20 oflag=direct status=none
integritysetup format -q --no-wipe --integrity sha256 --tag-size 32 --sector-size 512 "$dev" >/dev/null ||
	fail "integritysetup format --tag-size 32 failed"
# LUKS2's dm-integrity has no internal hash (the tags are dm-crypt's); integritysetup
# open always sets one, so the table is made here, over the superblock it wrote
dif_sectors=$(integritysetup dump "$dev" | sed -n 's/.*provided_data_sectors *//p')
[ -n "$dif_sectors" ] || fail "integritysetup dump shows no provided_data_sectors"
dmsetup create lbs-dif --table "0 $dif_sectors integrity $dev 0 32 D 0" ||
	fail "cannot map the dm-integrity device without internal hash: $(dmesg | tail -n 2)"
difdev=$(dm_blkdev lbs-dif)
k32=$(head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n')
k64=$k32$k32
t() { printf '0 %s crypt_lbs %s %s 0 %s 0 %s\n' "$((dif_sectors / 8 * 8))" "$1" "$2" "$difdev" "$3"; }

# both_refuse WHAT TABLE: ours refuses TABLE with EINVAL (refuses_einval) and
# stock (the same table as crypt) refuses it too, with whatever errno it gives
stock_refusals=0
both_refuse() {
	refuses_einval "$1" dmsetup create lbs-bad --table "$2"
	if dmsetup create lbs-bad --table "${2/ crypt_lbs / crypt }" >/dev/null 2>&1; then
		dm_remove lbs-bad
		soft_fail "$1: stock loads the table ours refuses"
	else
		stock_refusals=$((stock_refusals + 1))
	fi
}

# first, what loads: a tag smaller than the device's tuple (the rest written zero)
dmsetup create lbs-int --table "$(t 'capi:gcm(aes)-random' "$k32" '1 integrity:28:aead')" ||
	fail "capi:gcm(aes)-random integrity:28:aead over 32-byte tags refused: $(ti_error)"
dm_remove lbs-int
ok "capi:gcm(aes)-random integrity:28:aead loads over 32-byte tags (4 bytes left zero)"

both_refuse "integrity at sector_size:8192 (above dm-integrity's 4096)" \
	"$(t 'capi:gcm(aes)-random' "$k32" '2 integrity:28:aead sector_size:8192')"
both_refuse "IV mode random without integrity metadata (plain ramdisk)" \
	"0 2048 crypt_lbs aes-xts-random $k64 0 $dev 0"
both_refuse "a tag larger than the device keeps (integrity:48 on 32-byte tags)" \
	"$(t 'capi:authenc(hmac(sha256),xts(aes))-plain64' "$k64$k32" '1 integrity:48:aead')"
refuses_einval "a tag no larger than the random IV (integrity:16 with a 16-byte IV)" \
	dmsetup create lbs-bad --table "$(t 'capi:authenc(hmac(sha256),xts(aes))-random' "$k64$k32" '1 integrity:16:aead')"
both_refuse "a tag the AEAD cannot make (gcm, integrity:13: a 1-byte tag)" \
	"$(t 'capi:gcm(aes)-random' "$k32" '1 integrity:13:aead')"
both_refuse "sector_size:4096 over 512-byte dm-integrity blocks" \
	"$(t 'capi:gcm(aes)-random' "$k32" '2 integrity:28:aead sector_size:4096')"
both_refuse "integrity_key_size as large as the key" \
	"$(t 'capi:authenc(hmac(sha256),xts(aes))-plain64' "$k32" '2 integrity:32:aead integrity_key_size:32')"
refuses_einval "integrity_key_size with an AEAD that has no MAC key (gcm)" \
	dmsetup create lbs-bad --table "$(t 'capi:gcm(aes)-random' "$k32" '2 integrity:28:aead integrity_key_size:16')"
both_refuse "AEAD in the classic cipher form (aes-gcm-random)" \
	"$(t 'aes-gcm-random' "$k32" '1 integrity:28:aead')"
both_refuse "an authenc() cipher without integrity:<n>:aead" \
	"$(t 'capi:authenc(hmac(sha256),xts(aes))-plain64' "$k64$k32" '')"
both_refuse "integrity type hmac(sha256) (dm-crypt knows aead and none)" \
	"$(t 'aes-xts-plain64' "$k64" '1 integrity:32:hmac(sha256)')"
for bad in 0 481 99999999999999999999 -1 32x ''; do
	tab=$(t 'capi:gcm(aes)-random' "$k32" "1 integrity:$bad:aead")
	# stock reads 32x as 32 (sscanf): a documented strictness of ours
	if [ "$bad" = 32x ]; then
		refuses_einval "integrity:$bad:aead" dmsetup create lbs-bad --table "$tab"
	else
		both_refuse "integrity:$bad:aead" "$tab"
	fi
done
both_refuse "integrity_key_size:0" \
	"$(t 'capi:authenc(hmac(sha256),xts(aes))-plain64' "$k64$k32" '2 integrity:32:aead integrity_key_size:0')"
both_refuse "IV mode eboiv with an AEAD cipher" \
	"$(t 'capi:authenc(hmac(sha256),cbc(aes))-eboiv' "$k32$k32" '1 integrity:32:aead')"
both_refuse "ecb (no IV) with integrity:32:aead" \
	"$(t 'aes-ecb' "$k32" '1 integrity:32:aead')"
ps=$(page_size)
if [ "$ps" -gt 4096 ]; then
	refuses_einval "IV mode random at sector_size:$ps (above 4096)" \
		dmsetup create lbs-bad --table "0 $((ps * 16 / 512)) crypt_lbs aes-xts-random $k64 0 $dev 0 1 sector_size:$ps"
fi
ok "stock refuses the $stock_refusals tables above that dm-crypt refuses too"

# --- a page that changes while it is written ---
# rfc4309(ccm(aes)) reads each sector's plaintext twice, for the CBC-MAC and for
# the CTR pass. Written with O_DIRECT from a buffer a second thread keeps
# changing (unstable_write), a sector sealed from the submitter's page can carry
# a tag over other bytes than it encrypted; sealed from the bounce page's copy,
# every sector reads back (what it reads is one of the states the page had).
what="rfc4309(ccm(aes))-random, a page changing while it is written"
k19=$(head -c 19 /dev/urandom | od -An -v -tx1 | tr -d ' \n')
dmsetup create lbs-int --table "$(t 'capi:rfc4309(ccm(aes))-random' "$k19" '1 integrity:24:aead')" ||
	fail "$what: ours refused the table: $(ti_error)"
ours=$(dm_blkdev lbs-int)
/lbs/bin/unstable_write "$ours" 65536 300 || fail "$what: the writes failed"
dd if="$ours" of=/dev/null bs=65536 count=1 iflag=direct status=none 2>/tmp/int.unstable ||
	fail "$what: the 64 KiB written 300 times from a changing page does not read back: $(cat /tmp/int.unstable)"
dm_remove lbs-int
ok "$what: 300 writes of 64 KiB from a page another thread changes read back, every tag verified"
