#!/usr/bin/env bash
# DESCRIPTION: lbscrypt reencrypt online holds only its hotzone: I/O elsewhere goes on, and a failure in a held hotzone gives EIO there, never a hang
# BOOT: lbscrypt
# KERNELS: none
#   tens of seconds of a 64K guest: make check-full runs it beside
#   reencrypt-online
# FULL-KERNELS: arm64-64k
# LIMIT: 240 three online runs of 64 MiB, each held in a hotzone by suspending its private mappings
# NEEDS: tool loop
# ORDER: 333
#
# reencrypt-online-failsafe.sh: while `lbscrypt reencrypt --active-name`
# converts a hotzone, only that hotzone's I/O waits (in the run's private
# lbscrypt-reenc-<id>-hotzone mapping); NAME itself is never left suspended.
# The volume has no filesystem here (direct I/O with dd at chosen offsets, so
# the test knows which bytes are in the hotzone; --force for the missing
# signature). No timing: the run is held where it must be by holding I/O it
# does, as reencrypt-online.sh does: it writes a hotzone only through its
# private mapping -new, so -new suspended holds it in that write.
# - I/O outside the hotzone during a hotzone: with hotzone 1 (16-32 MiB) held,
#   NAME is not suspended, the hotzone mapping is; a direct write and read in
#   hotzone 0 (converted) and in hotzone 3 (old) complete; a direct read in
#   hotzone 1 waits. Then -new resumed: the waiting read completes with the
#   data, the run finishes, the volume reads back what was written.
# - an I/O error in a held hotzone: -new gets an error table while the run
#   waits in it; the run's retry fails too: it exits non-zero in one line
#   naming the hotzone's bytes, EIO and --resume; NAME is live, the hotzone
#   mapping live on an error table; a direct read in the hotzone fails with
#   EIO at once, reads and writes elsewhere work; --resume --active-name then
#   finishes and the volume reads back what was written.
# - the state disk gone while a hotzone is held: the state filesystem is on a
#   dm-linear mapping over a loop device, reloaded to dm-error while the run
#   waits in -new: the completed record cannot be written, the retry cannot
#   read the journal: the same as above (EIO in the hotzone, NAME live).
#   The state disk put back, --resume finishes.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

dev=/dev/ram0
name="lbs-failsafe"
command -v lbscrypt >/dev/null || fail "no lbscrypt in the guest (build it: make -f tools/tools.mk tools-arm64)"
[ "$(target_version crypt)" = v1.30.0 ] || fail "crypt is $(target_version crypt), expected ours v1.30.0"
[ "$(page_size)" = 65536 ] || fail "this test needs a 64K-page kernel, the page is $(page_size)"
[ -e /dev/loop-control ] || modprobe loop || fail "the loop module does not load"
bytes=$((64 << 20))
hz=$((16 << 20))
[ "$(blockdev --getsize64 "$dev")" -ge "$bytes" ] || fail "$dev is smaller than $bytes bytes"
registry=/etc/lbscrypt/reencrypt

# The state filesystem on a dm-linear mapping of its own, so it can be made to fail.
state_img=/tmp/failsafe-state.img
truncate -s 160M "$state_img"
state_loop=$(losetup --find --show "$state_img") || fail "losetup of $state_img failed"
on_exit losetup -d "$state_loop"
state_sectors=$(blockdev --getsz "$state_loop")
dmsetup create lbs-failsafe-state --table "0 $state_sectors linear $state_loop 0" ||
	fail "cannot make the state disk's mapping"
on_exit dm_remove lbs-failsafe-state
mkfs.ext4 -q -F /dev/mapper/lbs-failsafe-state >/dev/null || fail "mkfs.ext4 of the state disk failed"
state_dir=/mnt/failsafe-state
mkdir -p "$state_dir"
mount /dev/mapper/lbs-failsafe-state "$state_dir" || fail "cannot mount the state disk"
on_exit umount -l "$state_dir"
on_exit rm -rf "$registry"
on_exit dm_remove "$name"

key_a=/tmp/failsafe-a.key
key_b=/tmp/failsafe-b.key
key_c=/tmp/failsafe-c.key
key_d=/tmp/failsafe-d.key
test_key_file "$key_a" 64
head -c 64 /dev/urandom >"$key_b"
head -c 64 /dev/urandom >"$key_c"
head -c 64 /dev/urandom >"$key_d"

lbscrypt -q open --cipher aes-xts-plain64 --key-size 512 --key-file "$key_a" \
	--sector-size 4096 --size $((bytes / 512)) "$dev" "$name" || fail "open failed"
vol=/dev/mapper/$name
expect=/tmp/failsafe.expect
head -c "$bytes" /dev/urandom >"$expect"
dd if="$expect" of="$vol" bs=1M oflag=direct status=none || fail "cannot fill the volume"

run_pid=""
cleanup_run() {
	local m
	[ -z "$run_pid" ] || kill -KILL "$run_pid" 2>/dev/null || true
	for m in $(dmsetup ls 2>/dev/null | awk '/^lbscrypt-reenc-/ { print $1 }'); do
		dmsetup resume "$m" 2>/dev/null || true
	done
	[ -z "$run_pid" ] || wait "$run_pid" 2>/dev/null || true
	dmsetup resume "$name" 2>/dev/null || true
}
on_exit cleanup_run

suspended() {
	dmsetup info "$1" 2>/dev/null | grep -q SUSPENDED
}
# held_in_hotzone N: the run's hotzone mapping is suspended, NAME is not, and
# NAME's table routes hotzone N to it (its line at N's sector is on that mapping).
held_in_hotzone() {
	local hzmap mm
	hzmap=$(reenc_private hotzone)
	[ -n "$hzmap" ] && suspended "$hzmap" || return 1
	! suspended "$name" || return 1
	mm=$(dmsetup info -c --noheadings -o major,minor --separator : "$hzmap")
	dmsetup table "$name" | awk -v s=$(($1 * hz / 512)) -v mm="$mm" '$1 == s && $7 == mm { found = 1 } END { exit !found }'
}
# io_ok WHAT ARGS...: a direct dd that must complete within 10 s. (A dd held in
# a suspended mapping takes no signal until it resumes: then timeout cannot end
# it, and the test's LIMIT does.)
io_ok() {
	local what=$1 rc=0
	shift
	timeout 10 dd "$@" status=none 2>/tmp/failsafe-dd.err || rc=$?
	[ "$rc" != 124 ] || fail "$what: waited 10 s (I/O outside the hotzone must not wait)"
	[ "$rc" = 0 ] || fail "$what: failed: $(cat /tmp/failsafe-dd.err)"
}
# put_at MIB: 1 MiB of new data at MiB offset MIB, through NAME, recorded in $expect.
put_at() {
	head -c $((1 << 20)) /dev/urandom >/tmp/failsafe-put
	io_ok "a write at $1 MiB" if=/tmp/failsafe-put of="$vol" bs=1M seek="$1" oflag=direct conv=notrunc
	dd if=/tmp/failsafe-put of="$expect" bs=1M seek="$1" conv=notrunc status=none
}
# read_at MIB: 1 MiB at MiB offset MIB through NAME, compared with $expect.
read_at() {
	io_ok "a read at $1 MiB" if="$vol" of=/tmp/failsafe-got bs=1M skip="$1" count=1 iflag=direct
	cmp -s /tmp/failsafe-got <(dd if="$expect" bs=1M skip="$1" count=1 status=none) ||
		fail "a read at $1 MiB: other data"
}
check_all() {
	dd if="$vol" of=/tmp/failsafe-all bs=1M iflag=direct status=none || fail "$1: cannot read the volume"
	cmp -s /tmp/failsafe-all "$expect" || fail "$1: the volume reads other data: $(cmp /tmp/failsafe-all "$expect" | head -1)"
}
# start KEY NEWKEY STATE: a run in the background, hotzones of 16 MiB.
start() {
	lbscrypt -q reencrypt --active-name "$name" --cipher aes-xts-plain64 --key-size 512 \
		--sector-size 4096 --key-file "$1" --new-key-file "$2" --force \
		--hotzone-size "$hz" --state "$3" >/tmp/failsafe-run.log 2>&1 &
	run_pid=$!
	RUN_PID=$run_pid RUN_LOG=/tmp/failsafe-run.log
}
# hold_hotzone_1 WHAT: the run held in hotzone 1's write through -new; hotzone
# 0 done. -new suspended at once holds hotzone 0; -old suspended while -new
# resumes lets hotzone 0 finish and holds hotzone 1 in its read; then -new
# suspended and -old resumed holds it in its write.
hold_hotzone_1() {
	local what=$1
	run_wait_until "$what: the private mappings" reenc_both_private
	new_map=$(reenc_private new)
	old_map=$(reenc_private old)
	dmsetup suspend "$new_map" || fail "$what: dmsetup suspend $new_map"
	run_wait_until "$what: hotzone 0 in its write" run_in_io_on "$new_map"
	dmsetup suspend "$old_map" || fail "$what: dmsetup suspend $old_map"
	dmsetup resume "$new_map" || fail "$what: dmsetup resume $new_map"
	run_wait_until "$what: hotzone 1 in its read" run_in_io_on "$old_map"
	dmsetup suspend "$new_map" || fail "$what: dmsetup suspend $new_map"
	dmsetup resume "$old_map" || fail "$what: dmsetup resume $old_map"
	run_wait_until "$what: hotzone 1 in its write" run_in_io_on "$new_map"
	run_wait_until "$what: hotzone 1 held in the hotzone mapping" held_in_hotzone 1
}

# 1. I/O outside the hotzone goes on during a hotzone
what="I/O beside a held hotzone"
start "$key_a" "$key_b" "$state_dir/one.state"
hold_hotzone_1 "$what"
put_at 2   # hotzone 0, converted
read_at 2
put_at 60  # hotzone 3, old parameters
read_at 60
# (no timeout around it: a read waiting in a suspended mapping is in D state and
# takes no signal until the mapping resumes)
dd if="$vol" of=/tmp/failsafe-held bs=1M skip=20 count=1 iflag=direct status=none &
waiter=$!
sleep 1
kill -0 "$waiter" 2>/dev/null || fail "$what: a read in the held hotzone did not wait"
ok "$what: writes and reads in hotzones 0 and 3 completed, a read in hotzone 1 waits; $name not suspended"
dmsetup resume "$new_map" || fail "$what: dmsetup resume $new_map"
wait "$waiter" || fail "$what: the held read failed once the hotzone was done"
cmp -s /tmp/failsafe-held <(dd if="$expect" bs=1M skip=20 count=1 status=none) || fail "$what: the held read returned other data"
rc=0
wait "$run_pid" || rc=$?
run_pid=""
[ "$rc" = 0 ] || fail "$what: the run failed: $(cat /tmp/failsafe-run.log)"
[ -z "$(reenc_private hotzone)" ] || fail "$what: the hotzone mapping is left"
check_all "$what"
ok "$what: the held read completed with its data, the run finished, the volume reads back"

# fail_held KEY NEWKEY STATE HOW: hold hotzone 1, make HOW fail, then check the
# fail-safe: the run ended in one line, EIO in the hotzone, the rest usable.
fail_held() {
	local what=$5 rc=0 out hzmap
	start "$1" "$2" "$3"
	hold_hotzone_1 "$what"
	"$4"
	dmsetup resume "$new_map" 2>/dev/null || true
	wait "$run_pid" || rc=$?
	run_pid=""
	out=$(cat /tmp/failsafe-run.log)
	[ "$rc" != 0 ] || fail "$what: the run succeeded"
	grep -q "bytes $hz to $((2 * hz)) (the hotzone) fail with EIO" <<<"$out" || fail "$what: the error says: $out"
	grep -q -- "--resume" <<<"$out" || fail "$what: the error does not say how to finish: $out"
	[ "$(wc -l <<<"$out")" = 1 ] || fail "$what: the error is not one line: $out"
	! suspended "$name" || fail "$what: $name is left suspended"
	hzmap=$(reenc_private hotzone)
	[ -n "$hzmap" ] || fail "$what: no hotzone mapping"
	! suspended "$hzmap" || fail "$what: the hotzone mapping is left suspended"
	[ "$(dmsetup table "$hzmap" | awk '{ print $3 }')" = error ] || fail "$what: the hotzone mapping's table: $(dmsetup table "$hzmap")"
	rc=0
	timeout 10 dd if="$vol" of=/dev/null bs=1M skip=20 count=1 iflag=direct status=none 2>/tmp/failsafe-dd.err || rc=$?
	[ "$rc" != 124 ] || fail "$what: a read in the failed hotzone hangs"
	[ "$rc" != 0 ] || fail "$what: a read in the failed hotzone succeeded"
	grep -q "Input/output error" /tmp/failsafe-dd.err || fail "$what: the read in the hotzone: $(cat /tmp/failsafe-dd.err)"
	put_at 4
	read_at 4
	put_at 50
	read_at 50
	ok "$what: the run ended in one line naming the hotzone and --resume; $name live; EIO in the hotzone at once; reads and writes elsewhere work"
}

# 2. an I/O error while the hotzone is held
what="an I/O error in a held hotzone"
error_new() {
	dmsetup reload "$new_map" --table "0 $((bytes / 512)) error" || fail "$what: cannot reload $new_map"
}
fail_held "$key_b" "$key_c" "$state_dir/two.state" error_new "$what"
out=$(lbscrypt -q reencrypt --resume --active-name "$name" --state "$state_dir/two.state" \
	--key-file "$key_b" --new-key-file "$key_c" 2>&1) || fail "$what: --resume failed: $out"
[ -z "$(reenc_private hotzone)" ] || fail "$what: the hotzone mapping is left after --resume"
check_all "$what"
ok "$what: --resume finished, the volume reads back"

# 3. the state disk gone while the hotzone is held
what="the state disk gone in a held hotzone"
error_state() {
	dmsetup suspend --noflush --nolockfs lbs-failsafe-state || fail "$what: cannot suspend the state disk"
	dmsetup reload lbs-failsafe-state --table "0 $state_sectors error" || fail "$what: cannot reload the state disk"
	dmsetup resume lbs-failsafe-state || fail "$what: cannot resume the state disk"
}
fail_held "$key_c" "$key_d" "$state_dir/three.state" error_state "$what"
umount -l "$state_dir"
dmsetup suspend lbs-failsafe-state
dmsetup reload lbs-failsafe-state --table "0 $state_sectors linear $state_loop 0"
dmsetup resume lbs-failsafe-state
mount /dev/mapper/lbs-failsafe-state "$state_dir" || fail "$what: the state disk does not mount again"
out=$(lbscrypt -q reencrypt --resume --active-name "$name" --state "$state_dir/three.state" \
	--key-file "$key_c" --new-key-file "$key_d" 2>&1) || fail "$what: --resume failed: $out"
[ -z "$(reenc_private hotzone)" ] || fail "$what: the hotzone mapping is left after --resume"
check_all "$what"
lbscrypt close "$name"
ok "$what: the state disk back, --resume finished, the volume reads back"
