#!/usr/bin/env bash
# kmod-smoke.sh: a quick round trip of dm-crypt-lbs against the stock dm_crypt
# in one boot.  Run with `qemu/run ID --module both -- bash /lbs/tests/guest/kmod-smoke.sh`
# (stock as `crypt`, ours as `crypt_lbs`).  For every sector size both accept:
# data written through one reads back through the other, and the raw device
# holds the same ciphertext whichever wrote it.  Above 4096 (where stock
# refuses) it checks our own round trip and that the raw device is not the
# plaintext.  Also: the bound, the ti->error texts, status round trip.
set -euo pipefail
# shellcheck source=tests/guest/lib.sh
. "$(dirname "$0")/lib.sh"
export DM_DISABLE_UDEV=1

dev=/dev/ram0
page=$(getconf PAGESIZE)
sectors=$(blockdev --getsz "$dev")
sectors=$((sectors / 128 * 128))	# a multiple of every sector size up to 64K
key=$(head -c 64 /dev/urandom | od -An -tx1 | tr -d ' \n')	# xts: 2 x 256 bits
data=/tmp/data
mb=2
head -c $((mb << 20)) /dev/urandom >"$data"
want=$(sha256sum <"$data" | cut -d' ' -f1)
on_exit dm_remove lbs
on_exit dm_remove stk

[ "$(target_version crypt_lbs)" = v1.30.0 ] || fail "crypt_lbs is not v1.30.0: $(dmsetup targets)"

# table TARGET SS CIPHER IV_OFFSET: a table line over the whole ramdisk
table() {
	local opt="" k=$key
	[ "$2" = 512 ] || opt=" 1 sector_size:$2"
	case $3 in *xts* | *:2-*) ;; *) k=${key:0:64} ;; esac	# one 256-bit key
	printf '0 %s %s %s %s %s %s 0%s' "$sectors" "$1" "$3" "$k" "$4" "$dev" "$opt"
}

put() { dd if="$data" of="$(dm_blkdev "$1")" bs=1M conv=fsync status=none; }
get() {
	blockdev --flushbufs "$(dm_blkdev "$1")"
	head -c $((mb << 20)) "$(dm_blkdev "$1")" | sha256sum | cut -d' ' -f1
}
raw() {
	blockdev --flushbufs "$dev"
	head -c $((mb << 20)) "$dev" | sha256sum | cut -d' ' -f1
}

# check_pair SS CIPHER IV_OFFSET [CIPHER_FOR_LBS]
check_pair() {
	local ss=$1 cipher=$2 ivo=$3 lcipher=${4:-$2} raw_stock raw_lbs
	dmsetup create stk --table "$(table crypt "$ss" "$cipher" "$ivo")"
	dmsetup create lbs --table "$(table crypt_lbs "$ss" "$lcipher" "$ivo")"
	[ "$cipher" != "$lcipher" ] ||
		[ "$(dmsetup table --showkeys stk | cut -d' ' -f4-)" = "$(dmsetup table --showkeys lbs | cut -d' ' -f4-)" ] ||
		fail "$cipher/$ss: status differs: $(dmsetup table stk) vs $(dmsetup table lbs)"
	put stk
	[ "$(get lbs)" = "$want" ] || fail "$cipher ss=$ss ivo=$ivo: written by stock, read by lbs differs"
	raw_stock=$(raw)
	dd if=/dev/zero of="$dev" bs=1M count="$mb" conv=fsync status=none
	put lbs
	raw_lbs=$(raw)
	[ "$raw_stock" = "$raw_lbs" ] || fail "$cipher ss=$ss ivo=$ivo: ciphertext differs between stock and lbs"
	[ "$(get stk)" = "$want" ] || fail "$cipher ss=$ss ivo=$ivo: written by lbs, read by stock differs"
	dm_remove lbs
	dm_remove stk
	printf 'ok   %-28s ss=%-5s iv_offset=%s\n' "$lcipher" "$ss" "$ivo"
}

for ss in 512 4096; do
	for cipher in aes-xts-plain64 aes-cbc-essiv:sha256 aes-cbc-eboiv aes-xts-plain64be \
		aes-cbc-benbi aes-cbc-plain aes-cbc-null "capi:xts(aes)-plain64" aes:2-cbc-plain64; do
		check_pair "$ss" "$cipher" 0
	done
	check_pair "$ss" aes-xts-plain64 $((1 << 30))
	# an asynchronous cipher (cryptd queues up to 1000 requests, then backlogs);
	# named by its driver name: the crypto API fails (EEXIST) on other spellings
	if modprobe -q cryptd 2>/dev/null || [ -d /sys/module/cryptd ]; then
		check_pair "$ss" aes-xts-plain64 0 "capi:cryptd(xts(ecb(aes-generic)))-plain64"
	else
		printf 'SKIP cryptd: this kernel has no cryptd (CONFIG_CRYPTO_CRYPTD)\n'
	fi
done

# sector sizes above 4096 where the page allows: our own round trip
ss=8192
while [ "$ss" -le "$page" ]; do
	dmsetup create lbs --table "$(table crypt_lbs "$ss" aes-xts-plain64 0)"
	lbsz=$(cat "/sys/block/$(basename "$(dm_blkdev lbs)")/queue/logical_block_size")
	[ "$lbsz" = "$ss" ] || fail "ss=$ss: logical_block_size $lbsz"
	put lbs
	[ "$(get lbs)" = "$want" ] || fail "ss=$ss: round trip differs"
	[ "$(raw)" != "$want" ] || fail "ss=$ss: the raw device holds the plaintext"
	dm_remove lbs
	printf 'ok   %-28s ss=%-5s round trip, logical_block_size %s\n' aes-xts-plain64 "$ss" "$lbsz"
	ss=$((ss * 2))
done

# refusals: each EINVAL with a ti->error
for arg in $((page * 2)) 69632 3000 0 61440 -4096 4096abc +4096; do
	if dmsetup create lbs --table "$(table crypt_lbs "$arg" aes-xts-plain64 0)" 2>/dev/null; then
		fail "sector_size:$arg was accepted: $(dmsetup table lbs)"
	fi
	err=$(ti_error)
	[ -n "$err" ] || fail "sector_size:$arg refused without a ti->error"
	printf 'ok   sector_size:%-10s refused: %s\n' "$arg" "$err"
done
for t in "0 $sectors crypt_lbs aes-cbc-lmk $key 0 $dev 0" \
	"0 $sectors crypt_lbs aes-xts-plain64 ${key}0 0 $dev 0" \
	"0 $sectors crypt_lbs aes-xts-plain64 $key 0 $dev 0 2 sector_size:4096" \
	"0 $sectors crypt_lbs aes-xts-plain64 $key 3 $dev 0 1 sector_size:4096" \
	"0 $((sectors - 1)) crypt_lbs aes-xts-plain64 $key 0 $dev 0 1 sector_size:4096" \
	"0 $sectors crypt_lbs aes-xts-plain64 $key 0 $dev 0 1 integrity:28:aead"; do
	if dmsetup create lbs --table "$t" 2>/dev/null; then
		fail "accepted: $t"
	fi
	printf 'ok   refused: %s\n' "$(ti_error)"
done

# key messages: refused while active, wipe blocks resume, set restores it
dmsetup create lbs --table "$(table crypt_lbs 4096 aes-xts-plain64 0)"
put lbs
if dmsetup message lbs 0 key wipe 2>/dev/null; then fail "key wipe accepted while active"; fi
dmsetup suspend lbs
dmsetup message lbs 0 key wipe
if dmsetup resume lbs 2>/dev/null; then fail "resume accepted with a wiped key"; fi
dmsetup message lbs 0 key set "$key"
dmsetup resume lbs
[ "$(get lbs)" = "$want" ] || fail "data differs after key wipe + key set"
dm_remove lbs
printf 'ok   key wipe / key set / resume\n'
printf 'PASS %s\n' "$LBS_TEST"
