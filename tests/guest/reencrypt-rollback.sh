#!/usr/bin/env bash
# DESCRIPTION: lbscrypt reencrypt --resume refuses a state that went back in time
# BOOT: lbscrypt
# KERNELS: arm64-64k
#   loop devices, dm-flakey and the largest sector (65536): one 64K kernel shows all
# FULL-KERNELS: page=65536
#   the kernels whose configurations (qemu/configs) carry dm-flakey
# LIMIT: 240 two runs of 16 MiB on loop devices, each stopped, rolled back and resumed, under emulation
# NEEDS: tool
# ORDER: 333
#
# reencrypt-rollback.sh: the position of a run lives in the journal on the
# state disk; a journal older than the data (copies put back, a state disk
# that lost its last flushes) must be refused by --resume, never converted
# a second time. Random data on a loop device over a file in /tmp, the state
# on ext4.
# - copies put back: a run stopped with SIGTERM after a hotzone, its state
#   file and journal copied, resumed and stopped again some hotzones later,
#   the copies put back: --resume is refused ("the journal is older than the
#   device"), the device's sha256 unchanged; the files of the later stop put
#   back (the control): --resume finishes and the data reads back;
# - a state disk that loses its last flushes: the state filesystem on
#   dm-flakey; after a hotzone the state disk's table drops every write
#   (drop_writes: each write and flush "succeeds"), the run goes on and is
#   stopped with SIGTERM; the filesystem unmounted, the disk's table made
#   whole again and remounted (it shows the state of the switch): --resume is
#   refused, the device's sha256 unchanged.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

command -v lbscrypt >/dev/null || fail "no lbscrypt in the guest (build it: make -f tools/tools.mk tools-arm64)"
[ "$(target_version crypt)" = v1.30.0 ] || fail "crypt is $(target_version crypt), expected ours v1.30.0"
[ -e /dev/loop-control ] || modprobe loop || fail "the loop module does not load"
modprobe dm-flakey 2>/dev/null || true
grep -qw '^flakey' <(dmsetup targets) || fail "no flakey target (dm-flakey does not load: CONFIG_DM_FLAKEY)"
big=$(bound)
bytes=$((16 << 20))
registry=/etc/lbscrypt/reencrypt
on_exit rm -rf "$registry"
on_exit lbscrypt close lbs-rollback

key_a=/tmp/reenc-rb-a.key
key_b=/tmp/reenc-rb-b.key
test_key_file "$key_a" 64
head -c 64 /dev/urandom >"$key_b"

loop="" loop2="" sloop=""
open_as() {
	lbscrypt -q open --cipher aes-xts-plain64 --key-size 512 --key-file "$3" \
		--sector-size "$2" "$1" lbs-rollback >/dev/null
}
# fill DEVICE: random plaintext through key A at 512; prints its sha256.
fill() {
	plain_fill "$1" lbs-rollback "$key_a" "$bytes" /tmp/reenc-rb.data
}
# json_progress FILE: how many progress lines a run has printed so far
json_progress() {
	grep -c done_bytes "$1" 2>/dev/null || true
}
# stop_after PID JSON N: SIGTERM to PID once JSON has N progress lines; the run
# must exit 143 (stopped at a safe point)
stop_after() {
	local rc=0
	for _ in $(seq 600); do
		[ "$(json_progress "$2")" -lt "$3" ] || break
		sleep 0.1
	done
	kill -TERM "$1"
	wait "$1" || rc=$?
	[ "$rc" = 143 ] || fail "$what: exit $rc after SIGTERM, not 143 (stderr: $(cat /tmp/reenc-rb.err))"
}
start() {
	lbscrypt -q reencrypt --cipher aes-xts-plain64 --key-size 512 --key-file "$key_a" \
		--new-key-file "$key_b" --new-sector-size "$big" --force --json \
		--hotzone-size 1048576 --pbkdf-force-iterations 1000 --state "$2" "$1" \
		>/tmp/reenc-rb.json 2>/tmp/reenc-rb.err &
}
resume_bg() {
	lbscrypt -q reencrypt --resume --json --state "$1" --key-file "$key_a" --new-key-file "$key_b" \
		>/tmp/reenc-rb.json 2>/tmp/reenc-rb.err &
}
resume() {
	lbscrypt -q reencrypt --resume --state "$1" --key-file "$key_a" --new-key-file "$key_b" 2>&1
}
# refused DEVICE STATE: --resume refused as a journal older than the device, in
# one line, DEVICE unchanged
refused() {
	local before out
	before=$(sha_of "$1" "$bytes" 65536)
	if out=$(resume "$2"); then
		fail "$what: --resume accepted the older journal: $out"
	fi
	grep -q "the journal is older than the device" <<<"$out" || fail "$what: the refusal says: $out"
	[ "$(wc -l <<<"$out")" = 1 ] || fail "$what: the refusal is not one line: $out"
	[ "$(sha_of "$1" "$bytes" 65536)" = "$before" ] || fail "$what: the refusal changed $1"
	[ -e "$2" ] || fail "$what: the refusal removed the state"
	refusal=$out
}

# 1. the state file and journal put back from a copy
what="--resume of a state and journal put back from a copy"
state_dir=/mnt/reenc-rb-state
state_fs "$state_dir" 64M
file=/tmp/reenc-rb-a.img
head -c "$bytes" /dev/urandom >"$file"
on_exit rm -f "$file"
loop_attach loop "$file"
want=$(fill "$loop")
state=$state_dir/run.state
start "$loop" "$state"
stop_after $! /tmp/reenc-rb.json 1
cp -a "$state" "$state.journal" /tmp/ || fail "$what: cannot copy the state"
resume_bg "$state"
stop_after $! /tmp/reenc-rb.json 4
mkdir -p /tmp/reenc-rb-later
cp -a "$state" "$state.journal" /tmp/reenc-rb-later/ || fail "$what: cannot copy the later state"
cp -a /tmp/run.state /tmp/run.state.journal "$state_dir"/ || fail "$what: cannot put the copies back"
sync
refused "$loop" "$state"
ok "$what: refused ($refusal), $loop unchanged"
what="--resume with the files of the later stop (the control)"
cp -a /tmp/reenc-rb-later/run.state /tmp/reenc-rb-later/run.state.journal "$state_dir"/
out=$(resume "$state") || fail "$what: --resume failed: $out"
[ ! -e "$state" ] || fail "$what: the state is left"
open_as "$loop" "$big" "$key_b" || fail "$what: open with the new parameters failed"
[ "$(sha_of /dev/mapper/lbs-rollback "$bytes" 65536)" = "$want" ] || fail "$what: the data differs"
lbscrypt close lbs-rollback
ok "$what: finished, the data reads back"

# 2. the state disk loses its last flushes
what="--resume after the state disk lost its last flushes"
file=/tmp/reenc-rb-b.img
head -c "$bytes" /dev/urandom >"$file"
on_exit rm -f "$file"
loop_attach loop2 "$file"
want=$(fill "$loop2")
truncate -s 64M /tmp/reenc-rb-flakey.img
on_exit rm -f /tmp/reenc-rb-flakey.img
loop_attach sloop /tmp/reenc-rb-flakey.img
mkfs.ext4 -q -F "$sloop" >/dev/null || fail "mkfs.ext4 of the state filesystem failed"
ssec=$(blockdev --getsz "$sloop")
dmsetup create lbs-rb-state --table "0 $ssec linear $sloop 0" || fail "$what: the state disk's mapping was refused"
on_exit dm_remove lbs-rb-state
fdir=/mnt/reenc-rb-flakey
mkdir -p "$fdir"
mount /dev/mapper/lbs-rb-state "$fdir" || fail "$what: the state filesystem does not mount"
on_exit umount "$fdir"
state=$fdir/run.state
start "$loop2" "$state"
pid=$!
for _ in $(seq 600); do
	[ "$(json_progress /tmp/reenc-rb.json)" -lt 1 ] || break
	sleep 0.1
done
# from here the state disk acknowledges every write and flush and keeps none
# (the suspend freezes the filesystem: what came before is on the disk)
{ dmsetup load lbs-rb-state --table "0 $ssec flakey $sloop 0 0 1 1 drop_writes" &&
	dmsetup suspend lbs-rb-state && dmsetup resume lbs-rb-state; } ||
	fail "$what: drop_writes did not go under the state filesystem: $(dmesg | tail -n 3)"
at_switch=$(json_progress /tmp/reenc-rb.json)
stop_after "$pid" /tmp/reenc-rb.json $((at_switch + 3))
[ "$(json_progress /tmp/reenc-rb.json)" -ge $((at_switch + 2)) ] ||
	fail "$what: the run did not go on after the switch ($(json_progress /tmp/reenc-rb.json) progress lines, $at_switch at the switch)"
umount "$fdir"
{ dmsetup load lbs-rb-state --table "0 $ssec linear $sloop 0" &&
	dmsetup suspend lbs-rb-state && dmsetup resume lbs-rb-state; } ||
	fail "$what: the state disk's table did not come back"
echo 3 >/proc/sys/vm/drop_caches
mount /dev/mapper/lbs-rb-state "$fdir" || fail "$what: the state filesystem does not mount again: $(dmesg | tail -n 3)"
[ -e "$state" ] || fail "$what: no state file on the state disk as it was at the switch"
refused "$loop2" "$state"
ok "$what: refused ($refusal), $loop2 unchanged"
