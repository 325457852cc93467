#!/usr/bin/env bash
# DESCRIPTION: key set is all or nothing and holds no lock while a keyring key is built
# BOOT: both
# KERNELS: all -arm64-4k
#   arm64-4k in make check-full: arm64-4k-6.1 covers arm64's 4K pages,
#   arm64-16k Debian's 6.12 arm64 build
# FULL-KERNELS: all
# LIMIT: 120 about four times the longest expected (5 to 25 s on arm64-64k, idle)
# NEEDS: engine keyutils
# ORDER: 50
#
# keyset.sh: "key set" is all or nothing, and no lock of the device is held while
# the kernel looks a keyring key up. Needs ours as crypt_lbs
# (`--module both`), /lbs/kmod/lbs-engine.ko (its refuse_key_byte stands for a
# driver that refuses a weak key) and keyutils' request-key. Checks, on ours:
# - a key the cipher refuses: "key set" fails, the table still shows the old key,
#   resume succeeds and the data written before reads back (before the fix: the
#   key was marked invalid, resume refused, the refused key shown);
# - after "key wipe", a refused key leaves the key wiped (resume refused), and the
#   right key brings the device back;
# - a keyring key still under construction (its request-key helper resumes the
#   device before it instantiates the key): "key set" waits for the key without
#   holding the device's key lock, so the resume goes through; the message then
#   fails, as the device is no longer suspended, and nothing hangs (before the
#   fix: "key set" held the lock resume needs while it waited: a deadlock).
# The waiting "key set" is given 90 s (timeout): still waiting then fails the
# test as the deadlock.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

params=/sys/module/lbs_engine/parameters
dev=/dev/ram0
bytes=$((1 << 20))
len=$((bytes / 512))
key=$(test_key 64)
bad=ab${key:2}	# first byte 0xab: refused once refuse_key_byte=171
name="lbs-ks"
command -v keyctl >/dev/null || fail "keyctl is missing from the guest (qemu/rootfs/packages: keyutils)"

load_engine latency_us=0
on_exit dm_remove "$name"
on_exit rm -f /etc/request-key.d/lbs-keyset.conf

# shown_key: the key in the table, as dmsetup table --showkeys prints it
shown_key() {
	dmsetup table --showkeys "$name" | awk '{ print $5 }'
}
# read_back WHAT: the data written at the start reads back through the mapping
read_back() {
	local got
	got=$(sha_of "$(dm_blkdev "$name")" "$bytes")
	[ "$got" = "$want" ] || fail "$1: the data written before reads back as sha256 $got, not $want"
}

dmsetup create "$name" --table "0 $len crypt_lbs capi:lbs-engine-xts-aes-plain64 $key 0 $dev 0 1 sector_size:4096" ||
	fail "ours refused the engine table: $(ti_error)"
pattern "$bytes" >/tmp/keyset.plain
want=$(sha256sum </tmp/keyset.plain | cut -d' ' -f1)
put /tmp/keyset.plain "$(dm_blkdev "$name")"
read_back "before any key change"

# --- a refused key, the device keyed
echo 171 >"$params/refuse_key_byte"
dmsetup suspend "$name"
if dmsetup message "$name" 0 key set "$bad" 2>/dev/null; then
	fail "key set of a key the cipher refuses succeeded"
fi
[ "$(shown_key)" = "$key" ] ||
	fail "after a refused key set the table shows $(shown_key), not the previous key"
dmsetup resume "$name" ||
	fail "resume after a refused key set failed: the previous key was dropped ($(dmesg | tail -n 2 | tr '\n' ' '))"
read_back "after a refused key set"
ok "a key the cipher refuses: key set fails, the table keeps the old key, resume works, the data reads back"

# --- a refused key, the key wiped
# (the wipe sets a random key, whose first byte the engine would refuse one
# time in 256: refuse nothing while it wipes)
dmsetup suspend "$name"
echo -1 >"$params/refuse_key_byte"
dmsetup message "$name" 0 key wipe || fail "key wipe of a suspended device failed ($(dmesg | tail -n 1))"
echo 171 >"$params/refuse_key_byte"
if dmsetup message "$name" 0 key set "$bad" 2>/dev/null; then
	fail "key set of a refused key succeeded on a wiped device"
fi
if dmsetup resume "$name" 2>/dev/null; then
	fail "resume succeeded after a wipe and a refused key: the device would run on an unknown key"
fi
echo -1 >"$params/refuse_key_byte"
dmsetup message "$name" 0 key set "$key" || fail "key set of the right key failed after a refused one"
dmsetup resume "$name" || fail "resume after the right key failed"
read_back "after wipe, a refused key and the right key"
ok "wiped, then a refused key: still wiped (resume refused); the right key brings the data back"

# --- a keyring key under construction whose helper resumes the device
helper=/tmp/keyset-upcall.sh
test_key_file /tmp/keyset.key 64
cat >"$helper" <<EOF
#!/bin/bash
# request-key's helper: wait for the test, resume the device, then give the key
export DM_DISABLE_UDEV=1
while [ ! -e /tmp/keyset.go ]; do sleep 0.1; done
timeout 60 dmsetup resume $name; echo \$? >/tmp/keyset.resume
keyctl pinstantiate "\$1" "\$2" </tmp/keyset.key
EOF
chmod +x "$helper"
mkdir -p /etc/request-key.d
echo "create user lbs:upcall * $helper %k %S" >/etc/request-key.d/lbs-keyset.conf
rm -f /tmp/keyset.go /tmp/keyset.resume
[ -x /sbin/request-key ] || fail "the kernel calls /sbin/request-key, which is missing (keyutils)"

# the key is being constructed: its helper waits for /tmp/keyset.go
keyctl request2 user lbs:upcall callout @u >/tmp/keyset.request 2>&1 &
req_pid=$!
sleep 1
keyctl show @u | grep -q 'lbs:upcall' || fail "the key lbs:upcall is not in @u while its helper waits: $(cat /tmp/keyset.request)"
dmsetup suspend "$name"
timeout 90 dmsetup message "$name" 0 key set ":64:user:lbs:upcall" >/tmp/keyset.msg 2>&1 &
msg_pid=$!
sleep 2
touch /tmp/keyset.go
msg_rc=0
wait "$msg_pid" || msg_rc=$?
wait "$req_pid" || fail "keyctl request2 failed: $(cat /tmp/keyset.request)"
[ -f /tmp/keyset.resume ] || fail "the request-key helper did not run or did not finish its resume"
resume_rc=$(cat /tmp/keyset.resume)
[ "$msg_rc" != 124 ] || fail "key set still waited after 90 s: it holds what resume needs (resume: $resume_rc)"
[ "$resume_rc" = 0 ] || fail "the helper's resume failed with status $resume_rc while key set waited for the key"
[ "$msg_rc" != 0 ] || fail "key set succeeded although the device was resumed before the key arrived"
! dmsetup info "$name" | grep -q SUSPENDED || fail "the device is still suspended"
read_back "after key set raced with a resume"
ok "key set waits for a keyring key without the device's lock: the helper's resume went through, key set then refused"
