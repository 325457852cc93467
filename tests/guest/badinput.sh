#!/usr/bin/env bash
# DESCRIPTION: bad tables and messages are refused, nothing is lost
# BOOT: both
# KERNELS: all -arm64-4k
#   arm64-4k in make check-full: arm64-4k-6.1 covers arm64's 4K pages,
#   arm64-16k Debian's 6.12 arm64 build
# FULL-KERNELS: all
# LIMIT: 180 many cases, many process starts
# NEEDS: none
# ORDER: 30
#
# badinput.sh: bad tables and messages are refused, nothing is lost. Needs ours as crypt_lbs (`--module
# both`). Each bad table: dmsetup fails with EINVAL, the kernel logs a non-empty
# ti->error, no device is left. `key wipe` / `key set` on an active mapping:
# refused, and the data still reads back afterwards; while suspended a bad key is
# refused, `key wipe` makes resume fail and `key set` restores the mapping.
# The bad tables: a key a byte short or long, an odd number of hex digits,
# non-hex digits, a key count that is not a power of two; an unknown cipher,
# chaining mode, IV mode or essiv hash; lmk at sector_size 4096 or over XTS, tcw
# with a key too short for its seeds, elephant with a key that is not two AES
# keys, random and integrity (not supported); an unknown option, an option
# count that lies or is not a number; a bad iv_offset or device offset; a
# sector_size above the bound or with trailing characters; a length that is
# not a multiple of sector_size.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

dev=/dev/ram0
len=2048	# 1 MiB
k64=$(test_key 64)
k32=$(test_key 32)
bnd=$(bound)
on_exit dm_remove lbs-bad
on_exit dm_remove lbs-good

bad() {	# bad WHAT TABLE-AFTER-TARGET: crypt_lbs must refuse it with EINVAL
	refuses_einval "$1" dmsetup create lbs-bad --table "0 $len crypt_lbs $2"
}

bad "key one byte short" "aes-xts-plain64 ${k64:2} 0 $dev 0"
bad "key one byte long" "aes-xts-plain64 ${k64}00 0 $dev 0"
bad "key with an odd number of hex digits" "aes-xts-plain64 ${k64}0 0 $dev 0"
bad "key with non-hex digits" "aes-cbc-essiv:sha256 zz${k32:2} 0 $dev 0"
bad "keycount not a power of two" "aes:3-cbc-plain64 ${k64:0:96} 0 $dev 0"
bad "unknown cipher" "nosuchcipher-xts-plain64 $k64 0 $dev 0"
bad "unknown chaining mode" "aes-nosuchmode-plain64 $k64 0 $dev 0"
bad "unknown IV mode" "aes-cbc-nosuchiv $k32 0 $dev 0"
bad "unknown essiv hash" "aes-cbc-essiv:nosuchhash $k32 0 $dev 0"
bad "IV mode lmk at sector_size 4096 (defined on 512 only)" "aes-cbc-lmk $k32 0 $dev 0 1 sector_size:4096"
bad "IV mode tcw with a key too short for its seeds" "aes-cbc-tcw $k32 0 $dev 0"
bad "IV mode lmk over XTS (loop-AES is CBC; stock writes what it cannot read)" "aes-xts-lmk $k64 0 $dev 0"
bad "unsupported IV mode random" "aes-cbc-random $k32 0 $dev 0"
bad "IV mode elephant with a key that is not two AES keys" "aes-cbc-elephant ${k32:0:40} 0 $dev 0"
bad "integrity (AEAD) option" "aes-xts-plain64 $k64 0 $dev 0 1 integrity:28:aead"
bad "unknown option" "aes-xts-plain64 $k64 0 $dev 0 1 no_such_option"
bad "option count larger than the options given" "aes-xts-plain64 $k64 0 $dev 0 2 sector_size:4096"
bad "option count smaller than the options given" "aes-xts-plain64 $k64 0 $dev 0 1 sector_size:4096 iv_large_sectors"
bad "option count not a number" "aes-xts-plain64 $k64 0 $dev 0 x sector_size:4096"
bad "missing device and offset" "aes-xts-plain64 $k64 0"
bad "iv_offset not a number" "aes-xts-plain64 $k64 12x $dev 0"
bad "iv_offset not a multiple of sector_size" "aes-xts-plain64 $k64 1 $dev 0 1 sector_size:4096"
bad "device offset not a number" "aes-xts-plain64 $k64 0 $dev -8"
bad "sector_size above the bound" "aes-xts-plain64 $k64 0 $dev 0 1 sector_size:$((bnd * 2))"
bad "sector_size with trailing junk" "aes-xts-plain64 $k64 0 $dev 0 1 sector_size:4096abc"
# dm-crypt matches a valued option's name exactly (a flag in any case: below)
bad "valued option name in capitals" "aes-xts-plain64 $k64 0 $dev 0 1 SECTOR_SIZE:4096"
if ! dmsetup create lbs-bad --table "0 $len crypt_lbs aes-xts-plain64 $k64 0 $dev 0 2 Same_CPU_Crypt sector_size:4096"; then
	fail "a flag in capitals (Same_CPU_Crypt) was refused: $(ti_error); dm-crypt takes it"
fi
case $(dmsetup table lbs-bad) in
*" 2 same_cpu_crypt sector_size:4096") dm_remove lbs-bad ;;
*) fail "a flag in capitals: the table reads back as $(dmsetup table lbs-bad)" ;;
esac
ok "a flag in capitals (Same_CPU_Crypt) loads and reads back in lower case"
refuses_einval "length not a multiple of sector_size 4096" \
	dmsetup create lbs-bad --table "0 $((len - 1)) crypt_lbs aes-xts-plain64 $k64 0 $dev 0 1 sector_size:4096"
refuses_einval "length not a multiple of sector_size $bnd" \
	dmsetup create lbs-bad --table "0 $((len - bnd / 1024)) crypt_lbs aes-xts-plain64 $k64 0 $dev 0 1 sector_size:$bnd"

# key messages on an active mapping: refused; nothing lost
dmsetup create lbs-good --table "0 $len crypt_lbs aes-xts-plain64 $k64 0 $dev 0 1 sector_size:$bnd"
head -c $((len * 512)) /dev/urandom >/tmp/bad.data
put /tmp/bad.data /dev/mapper/lbs-good 65536
want=$(sha256sum </tmp/bad.data | cut -d' ' -f1)
for msg in "key wipe" "key set $k64"; do
	dmesg -c >/dev/null
	# shellcheck disable=SC2086 # the message is words
	if out=$(dmsetup message lbs-good 0 $msg 2>&1); then
		fail "'${msg%% *} ${msg#* }' accepted on an active mapping"
	fi
	case $out in *"Invalid argument"*) ;; *) fail "'${msg:0:8}' on an active mapping: not EINVAL: $out" ;; esac
	why=$(dmesg -c | sed -n 's/.*device-mapper: [a-z_-]*: //p' | tail -n 1)
	[ -n "$why" ] || fail "'${msg:0:8}' on an active mapping refused without a kernel message"
	ok "'${msg:0:8}' on an active mapping: EINVAL: $why"
done
dmsetup status lbs-good >/dev/null
[ "$(sha_of /dev/mapper/lbs-good $((len * 512)) 65536)" = "$want" ] || fail "the data changed after the refused key messages"
# suspended: a bad key is refused and the old one stays in use
dmsetup suspend lbs-good
if dmsetup message lbs-good 0 key set "${k64:2}" 2>/dev/null; then fail "key set with a short key accepted"; fi
dmsetup resume lbs-good || fail "resume after a refused key set failed"
[ "$(sha_of /dev/mapper/lbs-good $((len * 512)) 65536)" = "$want" ] || fail "the data changed after a refused key set"
ok "key set with a short key while suspended: refused, the mapping resumes with its key, data intact"
# suspended: key wipe is allowed, resume then refuses, key set restores the mapping
dmsetup suspend lbs-good
dmsetup message lbs-good 0 key wipe || fail "key wipe refused while suspended"
if dmsetup resume lbs-good 2>/dev/null; then fail "resume accepted with a wiped key"; fi
dmsetup message lbs-good 0 key set "$k64" || fail "key set refused while suspended"
dmsetup resume lbs-good || fail "resume after key set failed"
[ "$(sha_of /dev/mapper/lbs-good $((len * 512)) 65536)" = "$want" ] || fail "the data differs after key wipe + key set"
ok "suspended: key wipe, resume refused, key set, resume, data intact"
dm_remove lbs-good
