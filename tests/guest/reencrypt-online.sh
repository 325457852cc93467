#!/usr/bin/env bash
# DESCRIPTION: lbscrypt reencrypt online: a mounted 64K-block ext4 with fio writing moves 4096 -> 65536 and a new key
# BOOT: lbscrypt
# KERNELS: none
#   65-95 s of a 64K guest's time: make check-full runs it, make check's
#   reencrypt share goes to reencrypt.sh and reencrypt-cuts
# FULL-KERNELS: arm64-64k
# LIMIT: 240 65-95 s under emulation: two conversions of 64 MiB with fio beside them, one killed
# NEEDS: tool
# ORDER: 331
#
# reencrypt-online.sh: `lbscrypt reencrypt --active-name` on a mounted volume,
# dm-crypt-lbs as `crypt`. It relies on what 6.12 and 7.3 do (dm.c, dm-table.c):
# a table with a larger logical block size loads under a mounted filesystem, and
# a suspend with lockfs freezes it. The state file lives on ext4 over a loop
# device.
# - refusals, nothing written and the mapping unchanged: ext4 with 4096-byte
#   blocks on the open 4096 volume cannot move to 65536 (both sizes named); an
#   old key other than the mapping's; a sector size other than the mapping's;
# - ext4 -b 65536 on a 4096 volume, mounted, fio writing beside the run in a
#   loop (buffered 16 KiB writes with fsyncs, and O_DIRECT 64 KiB writes; each
#   pass writes then verifies): moved to 65536 and key B without unmounting.
#   After it: every fio pass verified, one more verify-only pass of the last
#   one's files, the table is one crypt line with sector_size:65536 and key B,
#   the logical block size 65536, the files read back; umount, e2fsck -fn clean;
#   opened again by lbscrypt open with the new parameters it mounts and reads
#   the same;
# - kill -9 while a hotzone is held (the run's hotzone mapping suspended, NAME
#   live: a read outside the hotzone completes, a flush of the filesystem
#   waits, since a flush reaches every line of NAME's table), then --resume
#   --active-name: the waiting flush completes, the run finishes (key B -> key
#   C, sector size kept), e2fsck clean, files intact.
#   No timing: the run is held where the kill must land by holding I/O it does
#   (the state filesystem frozen, its private mappings suspended; see the case).
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

dev=/dev/ram0
name="lbs-online"
mnt=/mnt/online
command -v lbscrypt >/dev/null || fail "no lbscrypt in the guest (build it: make -f tools/tools.mk tools-arm64)"
command -v fio >/dev/null || fail "no fio in the guest"
[ "$(target_version crypt)" = v1.30.0 ] || fail "crypt is $(target_version crypt), expected ours v1.30.0"
[ "$(page_size)" = 65536 ] || fail "this test needs a 64K-page kernel, the page is $(page_size)"
[ -e /dev/loop-control ] || modprobe loop || fail "the loop module does not load: no loop device for the state filesystem"
bytes=$((64 << 20))
[ "$(blockdev --getsize64 "$dev")" -ge "$bytes" ] || fail "$dev is smaller than $bytes bytes"
registry=/etc/lbscrypt/reencrypt

state_dir=/mnt/reenc-online-state
state_fs "$state_dir" 160M
mkdir -p "$mnt"
on_exit rm -rf "$registry"
on_exit dm_remove "$name"
on_exit umount "$mnt"
on_exit stop_loop

key_a=/tmp/online-a.key
key_b=/tmp/online-b.key
key_c=/tmp/online-c.key
test_key_file "$key_a" 64
head -c 64 /dev/urandom >"$key_b"
head -c 64 /dev/urandom >"$key_c"

# open_at SECTOR KEY: the volume, the first $bytes of the device.
open_at() {
	lbscrypt -q open --cipher aes-xts-plain64 --key-size 512 --key-file "$2" \
		--sector-size "$1" --size $((bytes / 512)) "$dev" "$name"
}
# online SECTOR KEY ARGS...: lbscrypt reencrypt of the open volume.
online() {
	local sector=$1 key=$2
	shift 2
	lbscrypt -q reencrypt --active-name "$name" --cipher aes-xts-plain64 --key-size 512 \
		--sector-size "$sector" --key-file "$key" "$@"
}
table() {
	dmsetup table --showkeys "$name"
}
hex_of() {
	od -An -tx1 -v "$1" | tr -d ' \n'
}
suspended() {
	dmsetup info "$name" | grep -q SUSPENDED
}
files_sha() {
	(cd "$mnt" && sha256sum data pattern)
}

# fio's passes: each writes both files then verifies them; the loop runs until
# /tmp/online.stop exists, and counts its passes and failures.
fio_args=(--ioengine=psync --randrepeat=1 --verify=crc32c --verify_fatal=1 --size=4m
	--name=buffered --filename="$mnt/fio-buffered" --rw=randwrite --bs=16k --fsync=16
	--name=direct --filename="$mnt/fio-direct" --rw=randwrite --bs=64k --direct=1)
loop_pid=""
start_loop() {
	rm -f /tmp/online.stop /tmp/online.passes /tmp/online.failed
	(
		n=0
		while [ ! -e /tmp/online.stop ]; do
			n=$((n + 1))
			if ! fio_ok "/tmp/online-fio.$n.log" "${fio_args[@]}"; then
				cp "/tmp/online-fio.$n.log" /tmp/online.failed
				break
			fi
			echo "$n" >/tmp/online.passes
		done
	) &
	loop_pid=$!
}
stop_loop() {
	[ -n "$loop_pid" ] || return 0
	touch /tmp/online.stop
	wait "$loop_pid" || true
	loop_pid=""
}
# wait_passes N: until fio's loop has finished N passes (or failed).
wait_passes() {
	for _ in $(seq 1200); do
		[ ! -e /tmp/online.failed ] || return 0
		[ "$(cat /tmp/online.passes 2>/dev/null || echo 0)" -lt "$1" ] || return 0
		sleep 0.1
	done
	fail "fio's loop did not reach $1 passes in 120 s"
}

# 1. refusals on a mounted ext4 with 4096-byte blocks
open_at 4096 "$key_a" || fail "open at 4096 failed"
mkfs.ext4 -q -F -b 4096 -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 "/dev/mapper/$name" >/dev/null ||
	fail "mkfs.ext4 -b 4096 failed"
mount "/dev/mapper/$name" "$mnt" || fail "mount failed"
before=$(table)
what="online 4096 -> 65536 under ext4 with 4096-byte blocks"
if out=$(online 4096 "$key_a" --new-key-file "$key_b" --new-sector-size 65536 \
	--state "$state_dir/small.state" 2>&1); then
	fail "$what: accepted"
fi
grep -q "4096 bytes (blkid.s BLOCK_SIZE), below the new sector size 65536" <<<"$out" || fail "$what: the refusal says: $out"
[ "$(table)" = "$before" ] || fail "$what: the table changed"
[ ! -e "$state_dir/small.state" ] || fail "$what: a state file was left"
ok "$what: refused, naming 4096 and 65536"
umount "$mnt"

# 2. ext4 -b 65536, mounted, fio writing: 4096 -> 65536, key A -> key B
mkfs.ext4 -q -F -b 65536 -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 "/dev/mapper/$name" >/dev/null ||
	fail "mkfs.ext4 -b 65536 failed"
mount "/dev/mapper/$name" "$mnt" || fail "mount of the 64K-block ext4 failed"
head -c $((8 << 20)) /dev/urandom >"$mnt/data"
pattern $((1 << 20)) >"$mnt/pattern"
sync
files=$(files_sha)
before=$(table)
what="refusals on the mounted volume"
if out=$(online 4096 "$key_c" --new-key-file "$key_b" --new-sector-size 65536 \
	--state "$state_dir/wrongkey.state" 2>&1); then
	fail "$what: a wrong old key accepted"
fi
grep -q "not the key of the active mapping $name" <<<"$out" || fail "$what: the wrong-key refusal says: $out"
if out=$(online 512 "$key_a" --new-key-file "$key_b" --new-sector-size 65536 \
	--state "$state_dir/wrongsize.state" 2>&1); then
	fail "$what: a wrong sector size accepted"
fi
grep -q "has sector size 4096, not the 512 given" <<<"$out" || fail "$what: the sector-size refusal says: $out"
[ "$(table)" = "$before" ] || fail "$what: the table changed"
[ -z "$(ls -A "$registry" 2>/dev/null)" ] || fail "$what: a registry entry was left"
ok "$what: a wrong old key and a wrong sector size refused, naming the field; table unchanged"

what="online 4096 -> 65536, key A -> key B, fio writing"
start_loop
wait_passes 1
# fio's direct job writes 64 KiB at 64 KiB boundaries, aligned to the new
# sector; whether it holds its file open at the run's check depends on the
# moment (between passes it does not), so --force is given: the refusal itself
# is reencrypt-online-refusals' (a dd held open)
start=$(date +%s)
out=$(online 4096 "$key_a" --new-key-file "$key_b" --new-sector-size 65536 --force \
	--hotzone-size $((4 << 20)) --state "$state_dir/run.state" 2>&1) || fail "$what: $out"
took=$(($(date +%s) - start))
passes=$(cat /tmp/online.passes 2>/dev/null || echo 0)
wait_passes $((passes + 1)) # one pass more, wholly on the new table
stop_loop
[ ! -e /tmp/online.failed ] || { cat /tmp/online.failed; fail "$what: a fio pass failed"; }
passes=$(cat /tmp/online.passes)
{ [ ! -e "$state_dir/run.state" ] && [ -z "$(ls -A "$registry" 2>/dev/null)" ]; } || fail "$what: the state or registry entry is left"
! dmsetup ls | grep -q lbscrypt-reenc || fail "$what: a private mapping is left: $(dmsetup ls)"
lines=$(table | wc -l)
[ "$lines" = 1 ] || fail "$what: the table has $lines lines: $(table | sed 's/ [0-9a-f]\{128\} / KEY /')"
read -r t_start t_len t_type t_cipher t_key t_iv t_dev t_off t_rest <<<"$(table)"
[ "$t_start $t_len $t_type $t_cipher $t_iv $t_off" = "0 $((bytes / 512)) crypt aes-xts-plain64 0 0" ] ||
	fail "$what: the table is: $t_start $t_len $t_type $t_cipher KEY $t_iv $t_dev $t_off $t_rest"
[ "$t_key" = "$(hex_of "$key_b")" ] || fail "$what: the table's key is not key B"
grep -q "sector_size:65536" <<<"$t_rest" || fail "$what: the table's options: $t_rest"
lbs_now=$(blockdev --getss "/dev/mapper/$name") # BLKSSZGET: the logical block size (no udev here: /dev/mapper holds nodes, not links)
[ "$lbs_now" = 65536 ] || fail "$what: logical block size $lbs_now"
ok "$what: done in ${took} s beside $passes fio passes; one line, sector_size:65536, key B"
fio_ok /tmp/online-verify.log "${fio_args[@]}" --verify_only || { cat /tmp/online-verify.log; fail "$what: fio's verify-only pass failed"; }
[ "$(files_sha)" = "$files" ] || fail "$what: the files differ"
umount "$mnt"
e2fsck -fn "/dev/mapper/$name" >/tmp/online.fsck 2>&1 || fail "$what: e2fsck: $(tail -3 /tmp/online.fsck)"
lbscrypt close "$name"
open_at 65536 "$key_b" || fail "$what: lbscrypt open with the new parameters failed"
mount "/dev/mapper/$name" "$mnt" || fail "$what: mount with the new parameters failed"
[ "$(files_sha)" = "$files" ] || fail "$what: the files differ after reopening"
ok "$what: fio verified, e2fsck clean, the files read back, also after reopening"

# 3. kill -9 while suspended, then --resume. No timing: the run is stopped at
# chosen points by holding I/O it must do. The tool makes its private mappings
# lbscrypt-reenc-<id>-old (read only in a hotzone's read_old) and -new (written
# only in write_new) before it creates its journal on the state filesystem, and
# a hotzone's order is: NAME's table routes the hotzone through the run's
# hotzone mapping, which is suspended (NAME only for the table swap), journal
# the old ciphertext (state fs), read_old, write_new, flush, the completed
# record (state fs), the hotzone mapping resumed, the journal's copy wiped
# (state fs). So: the state filesystem frozen before the run starts holds it
# before its first hotzone, after both mappings exist; -new suspended then
# holds hotzone 0 in write_new; -old suspended, -new resumed, it finishes
# hotzone 0 and stops in hotzone 1's read_old, NAME live with three lines
# (hotzone 0 new, hotzone 1 through the held hotzone mapping, the rest old).
# It cannot leave that read until -old resumes: the kill -9 comes there, and
# takes effect then.
what="kill -9 while suspended, then --resume"
state=$state_dir/kill.state
kill_pid=""
# kill_cleanup: after a failure, nothing left held (a held mapping or a frozen
# filesystem would hang the other cleanups). Safe to run twice.
kill_cleanup() {
	local m
	[ -z "$kill_pid" ] || kill -KILL "$kill_pid" 2>/dev/null || true
	for m in $(dmsetup ls 2>/dev/null | awk '/^lbscrypt-reenc-/ { print $1 }'); do
		dmsetup resume "$m" 2>/dev/null || true
	done
	fsfreeze -u "$state_dir" 2>/dev/null || true
	[ -z "$kill_pid" ] || wait "$kill_pid" 2>/dev/null || true
	! suspended || dmsetup resume "$name" 2>/dev/null || true
}
on_exit kill_cleanup
table_lines() {
	table | wc -l
}

fsfreeze -f "$state_dir" || fail "$what: fsfreeze -f $state_dir failed"
lbscrypt -q reencrypt --active-name "$name" --cipher aes-xts-plain64 --key-size 512 \
	--sector-size 65536 --key-file "$key_b" --new-key-file "$key_c" \
	--hotzone-size $((16 << 20)) --state "$state" >/tmp/online-kill.log 2>&1 &
kill_pid=$!
RUN_PID=$kill_pid RUN_LOG=/tmp/online-kill.log
run_wait_until "$what: the private mappings while the state filesystem is frozen" reenc_both_private
old_map=$(reenc_private old)
new_map=$(reenc_private new)
[ ! -e "$state" ] || fail "$what: the state file was written on the frozen filesystem"
! suspended || fail "$what: $name is suspended before the run's first journal write"
# hotzone_held: the run's hotzone mapping exists and is suspended.
hotzone_held() {
	local m
	m=$(reenc_private hotzone)
	[ -n "$m" ] && dmsetup info "$m" 2>/dev/null | grep -q SUSPENDED
}
dmsetup suspend "$new_map" || fail "$what: dmsetup suspend $new_map failed"
fsfreeze -u "$state_dir" || fail "$what: fsfreeze -u $state_dir failed"
ok "$what: the run made $old_map and $new_map and waited on the frozen state filesystem; $new_map suspended, the filesystem thawed"
run_wait_until "$what: hotzone 0 waiting to write through $new_map" run_in_io_on "$new_map"
! suspended || fail "$what: hotzone 0 writes through $new_map and $name is suspended"
hotzone_held || fail "$what: hotzone 0 writes through $new_map but the hotzone mapping is not held"
[ "$(table_lines)" = 2 ] || fail "$what: in hotzone 0 the table has $(table_lines) lines, not 2 (hotzone 0 routed, the rest old)"
dmsetup suspend "$old_map" || fail "$what: dmsetup suspend $old_map failed"
dmsetup resume "$new_map" || fail "$what: dmsetup resume $new_map failed"
ok "$what: hotzone 0 held in its write through $new_map, the hotzone mapping held, $name live; $old_map suspended, $new_map resumed"
run_wait_until "$what: hotzone 1 waiting to read through $old_map" run_in_io_on "$old_map"
! suspended || fail "$what: hotzone 1 reads through $old_map and $name is suspended"
hotzone_held || fail "$what: hotzone 1 reads through $old_map but the hotzone mapping is not held"
[ "$(table_lines)" = 3 ] || fail "$what: in hotzone 1 the table has $(table_lines) lines, not 3 (hotzone 0 done, hotzone 1 routed, the rest old)"
ok "$what: hotzone 1 held in its read through $old_map, $name live with the three-line table of position $((16 << 20))"
kill -KILL "$kill_pid"
st=$(awk '{ print $3 }' "/proc/$kill_pid/stat" 2>/dev/null || echo gone)
dmsetup resume "$old_map" || fail "$what: dmsetup resume $old_map failed"
rc=0
wait "$kill_pid" || rc=$?
kill_pid=""
[ "$rc" = 137 ] || fail "$what: the run exited $rc, not 137 (killed): $(cat /tmp/online-kill.log)"
[ -e "$state" ] || fail "$what: no state file after the kill"
! suspended || fail "$what: the mapping is suspended after the kill"
hotzone_held || fail "$what: the hotzone mapping is not held after the kill"
[ "$(table_lines)" = 3 ] || fail "$what: the table has $(table_lines) lines after the kill"
ok "$what: killed in hotzone 1 (process state $st when the signal came; it ended, status 137, once $old_map resumed); the hotzone mapping stays held, $name live"
timeout 10 dd if="/dev/mapper/$name" of=/dev/null bs=64k count=16 iflag=direct status=none ||
	fail "$what: a read of hotzone 0 did not complete"
# I/O into the held hotzone waits (a read: the filesystem is mounted). A flush
# need not: on a device without a write cache (brd) the block layer drops it.
touch "$mnt/after-kill"
timeout 60 dd if="/dev/mapper/$name" of=/dev/null bs=64k count=1 skip=$(((16 << 20) / 65536)) \
	iflag=direct status=none &
writer=$!
sleep 1
kill -0 "$writer" 2>/dev/null || fail "$what: a read of the held hotzone did not wait"
ok "$what: a read outside the hotzone completes, a read of the held hotzone waits"
# the waiting read is an O_DIRECT opener of NAME (aligned to 64 KiB): --force
out=$(lbscrypt -q reencrypt --resume --active-name "$name" --state "$state" --force \
	--key-file "$key_b" --new-key-file "$key_c" 2>&1) || fail "$what: --resume failed: $out"
for _ in $(seq 50); do
	kill -0 "$writer" 2>/dev/null || break
	sleep 0.1
done
! kill -0 "$writer" 2>/dev/null || fail "$what: the waiting read did not complete after --resume"
wait "$writer" || fail "$what: the waiting read failed"
! suspended || fail "$what: $name is suspended after --resume"
[ "$(table_lines)" = 1 ] || fail "$what: the table has $(table_lines) lines after --resume"
read -r _ _ _ _ t_key _ <<<"$(table)"
[ "$t_key" = "$(hex_of "$key_c")" ] || fail "$what: the table's key is not key C"
[ ! -e "$state" ] || fail "$what: the state is left"
[ -z "$(ls -A "$registry" 2>/dev/null)" ] || fail "$what: a registry entry is left"
! dmsetup ls | grep -q lbscrypt-reenc || fail "$what: a private mapping is left: $(dmsetup ls)"
[ -e "$mnt/after-kill" ] || fail "$what: the file made while the hotzone was held is missing"
[ "$(files_sha)" = "$files" ] || fail "$what: the files differ"
umount "$mnt"
e2fsck -fn "/dev/mapper/$name" >/tmp/online.fsck 2>&1 || fail "$what: e2fsck: $(tail -3 /tmp/online.fsck)"
lbscrypt close "$name"
ok "$what: the waiting read completed, the run finished with key C (one line, no private mapping, no state or registry entry), e2fsck clean, files intact"
