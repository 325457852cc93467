#!/usr/bin/env bash
# DESCRIPTION: keys from the kernel keyring write what hex keys write, and never show
# BOOT: both
# KERNELS: all -arm64-4k
#   arm64-4k in make check-full: arm64-4k-6.1 covers arm64's 4K pages,
#   arm64-16k Debian's 6.12 arm64 build
# FULL-KERNELS: all
# LIMIT: 120 about four times the longest expected (5 to 25 s on arm64-64k, idle)
# NEEDS: keyutils
# ORDER: 40
#
# keyring.sh: keys from the kernel keyring, ":<key_size>:<logon|user>:<description>".
# Needs ours as crypt_lbs beside stock (`--module both`).
# For logon and user keys: ours, given the key by reference, writes the same
# ciphertext as stock given the same bytes in hex; the table shows the reference,
# never the key, with and without --showkeys; a reference to a key that does not
# exist, or of another size, is refused with a ti->error and leaves no device;
# the table line read while key set and key wipe race shows the reference or a
# wiped key, never a freed string.
# The keys are loaded with keyctl padd; the refused references: a key that does
# not exist (ENOKEY, as dm-crypt), one of another size, an unknown key type.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

command -v keyctl >/dev/null || fail "keyctl is missing from the guest (qemu/rootfs/packages: keyutils)"
dev=/dev/ram0
bytes=$((1 << 20))
len=$((bytes / 512))
hex=$(test_key 64)
test_key_file /tmp/keyring.key 64
pattern "$bytes" >/tmp/keyring.plain
on_exit dm_remove lbs-kr
on_exit dm_remove lbs-bad

# write_through TARGET KEY: the pattern through a fresh mapping; prints the raw sha256
write_through() {
	dd if=/dev/zero of="$dev" bs=1M count=1 oflag=direct status=none
	dmsetup create lbs-kr --table "0 $len $1 aes-xts-plain64 $2 0 $dev 0" ||
		fail "$1 refused key $2: $(ti_error)"
	put /tmp/keyring.plain "$(dm_blkdev lbs-kr)"
	dm_remove lbs-kr
	sha_of "$dev" "$bytes"
}

stock=$(write_through crypt "$hex")
for type in logon user; do
	desc=lbs:keyring-$type
	keyctl padd "$type" "$desc" @u </tmp/keyring.key >/dev/null || fail "keyctl padd $type $desc failed"
	ref=":64:$type:$desc"

	dmsetup create lbs-kr --table "0 $len crypt_lbs aes-xts-plain64 $ref 0 $dev 0" ||
		fail "$type key: ours refused $ref: $(ti_error)"
	for show in "" --showkeys; do
		# shellcheck disable=SC2086 # the empty option is meant to vanish
		line=$(dmsetup table $show lbs-kr)
		case $line in
		*" $ref 0 "*) ;;
		*) fail "$type key: 'dmsetup table $show' does not show the reference $ref: $line" ;;
		esac
		case $line in
		*"$hex"*) fail "$type key: 'dmsetup table $show' shows the key bytes: $line" ;;
		esac
	done
	dm_remove lbs-kr
	ours=$(write_through crypt_lbs "$ref")
	[ "$ours" = "$stock" ] ||
		fail "$type key: ciphertext through ours ($ours) differs from stock with the hex key ($stock)"
	ok "$type key $ref: table shows the reference only; ciphertext equals stock's with the same key in hex"
done

# the table line beside key messages: while a racer sets the keyring key and
# wipes it (the device suspended), every `dmsetup table --showkeys` shows the
# reference, or, wiped, no key string at all: never a freed one (status takes
# the key's lock; a KASAN kernel, make harden's, would report a read of one)
ref=":64:logon:lbs:keyring-logon"
dmsetup create lbs-kr --table "0 $len crypt_lbs aes-xts-plain64 $ref 0 $dev 0" ||
	fail "race: ours refused $ref: $(ti_error)"
dmsetup suspend lbs-kr
(
	for _ in $(seq 1 40); do
		dmsetup message lbs-kr 0 key wipe
		dmsetup message lbs-kr 0 key set "$ref"
	done
) &
racer=$!
lines=0 odd=''
while kill -0 "$racer" 2>/dev/null; do
	line=$(dmsetup table --showkeys lbs-kr) || fail "race: dmsetup table --showkeys failed"
	key=$(cut -d' ' -f5 <<<"$line")
	case $key in
	"$ref" | *[!0]*) [ "$key" = "$ref" ] || odd=$key ;;
	esac
	lines=$((lines + 1))
done
wait "$racer" || fail "race: a key message failed"
dmsetup resume lbs-kr
dm_remove lbs-kr
[ -z "$odd" ] || fail "race: dmsetup table --showkeys showed the key field '$odd', neither $ref nor a wiped key"
ok "key set/wipe racing dmsetup table --showkeys: $lines table lines, each the reference or a wiped key"

# refusals: the reason must be logged and nothing left behind
for bad in ":64:logon:lbs:no-such-key" ":32:logon:lbs:keyring-logon" ":64:nosuchtype:lbs:keyring-logon"; do
	dmesg -c >/dev/null 2>&1 || true
	if dmsetup create lbs-bad --table "0 $len crypt_lbs aes-xts-plain64 $bad 0 $dev 0" >/dev/null 2>&1; then
		fail "key $bad: accepted"
	fi
	err=$(ti_error)
	[ -n "$err" ] || fail "key $bad: refused without a ti->error"
	! dmsetup info lbs-bad >/dev/null 2>&1 || fail "key $bad: a device was left behind"
	ok "key $bad: refused, ti->error: $err"
done
