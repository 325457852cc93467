#!/usr/bin/env bash
# keyring.sh: keys from the kernel keyring, ":<key_size>:<logon|user>:<description>"
# (issue 3, "The table"). Needs ours as crypt_lbs beside stock (`--module both`).
# For logon and user keys: ours, given the key by reference, writes the same
# ciphertext as stock given the same bytes in hex; the table shows the reference,
# never the key, with and without --showkeys; a reference to a key that does not
# exist, or of another size, is refused with a ti->error and leaves no device.
set -euo pipefail
# shellcheck source=tests/guest/lib.sh
. "$(dirname "$0")/lib.sh"

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
