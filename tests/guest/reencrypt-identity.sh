#!/usr/bin/env bash
# DESCRIPTION: lbscrypt reencrypt --resume binds a run to its device and cleans up after kill -9
# BOOT: lbscrypt
# KERNELS: arm64-64k
#   loop devices and the largest sector (65536): one 64K kernel shows both
# FULL-KERNELS: all
# LIMIT: 300 three runs of 16 MiB on loop devices, each started and resumed, under emulation
# NEEDS: tool
# ORDER: 332
#
# reencrypt-identity.sh: a run's state file records what its device is made
# of (a loop device's file, by device and inode), and --resume checks it
# before a byte is written. Random data on loop devices over files in /tmp,
# the state on ext4 over another loop device (the tool refuses tmpfs).
# - a run on a loop device over file A, stopped with SIGTERM after a hotzone;
#   the same loop device detached and attached to file B: --resume is refused
#   in one line ("now reads another file", both inodes), and B's sha256 (and
#   the loop device's) is unchanged;
# - file A attached again, under another loop number (the old one still
#   holds B): --resume finds it by its file and finishes; the data reads back
#   with the new key and sector size, the state and the registry entry are
#   gone;
# - a run killed with kill -9 leaves its private mappings: with one of them
#   held open, --resume is refused naming it, the device unchanged; closed,
#   --resume removes them itself (no dmsetup remove) and finishes; no
#   lbscrypt-reenc mapping is left and the data reads back.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

command -v lbscrypt >/dev/null || fail "no lbscrypt in the guest (build it: make -f tools/tools.mk tools-arm64)"
[ "$(target_version crypt)" = v1.30.0 ] || fail "crypt is $(target_version crypt), expected ours v1.30.0"
[ -e /dev/loop-control ] || modprobe loop || fail "the loop module does not load"
big=$(bound)
bytes=$((16 << 20))
registry=/etc/lbscrypt/reencrypt

state_dir=/mnt/reenc-ident-state
state_fs "$state_dir" 64M
on_exit rm -rf "$registry"
on_exit lbscrypt close lbs-ident

key_a=/tmp/reenc-ident-a.key
key_b=/tmp/reenc-ident-b.key
test_key_file "$key_a" 64
head -c 64 /dev/urandom >"$key_b"
fast=(--pbkdf-force-iterations 1000)

file_a=/tmp/reenc-ident-a.img
file_b=/tmp/reenc-ident-b.img
file_c=/tmp/reenc-ident-c.img
for f in "$file_a" "$file_b" "$file_c"; do
	head -c "$bytes" /dev/urandom >"$f"
	on_exit rm -f "$f"
done

loop="" loop2="" loop3=""
# open_as DEVICE SECTOR KEY: lbs-ident over DEVICE.
open_as() {
	lbscrypt -q open --cipher aes-xts-plain64 --key-size 512 --key-file "$3" \
		--sector-size "$2" "$1" lbs-ident
}
# fill DEVICE: random plaintext through key A at 512; prints its sha256.
fill() {
	plain_fill "$1" lbs-ident "$key_a" "$bytes" /tmp/reenc-ident.data
}
# reads_back DEVICE SHA: the device read with key B at the largest sector is SHA.
reads_back() {
	open_as "$1" "$big" "$key_b" >/dev/null || fail "$what: open of $1 with the new parameters failed"
	[ "$(sha_of /dev/mapper/lbs-ident "$bytes" 65536)" = "$2" ] || fail "$what: the data differs"
	lbscrypt close lbs-ident
}
# stop_run DEVICE STATE N SIGNAL STATUS: a run 512 -> the largest sector, key A
# -> key B, in the background (its JSON in /tmp/reenc-ident.json, stderr in
# /tmp/reenc-ident.err), sent SIGNAL once it has done N hotzones; it must exit
# with STATUS and leave STATE.
stop_run() {
	local pid rc=0
	lbscrypt -q reencrypt --cipher aes-xts-plain64 --key-size 512 --key-file "$key_a" \
		--new-key-file "$key_b" --new-sector-size "$big" --force --json \
		--hotzone-size 1048576 "${fast[@]}" --state "$2" "$1" \
		>/tmp/reenc-ident.json 2>/tmp/reenc-ident.err &
	pid=$!
	for _ in $(seq 600); do
		[ "$(grep -c done_bytes /tmp/reenc-ident.json 2>/dev/null)" -ge "$3" ] && break
		sleep 0.1
	done
	kill -"$4" "$pid"
	wait "$pid" || rc=$?
	[ "$rc" = "$5" ] || fail "$what: exit $rc after SIG$4, not $5 (stderr: $(cat /tmp/reenc-ident.err))"
	[ -f "$2" ] || fail "$what: no state after SIG$4"
}
resume() {
	lbscrypt -q reencrypt --resume --state "$1" --key-file "$key_a" --new-key-file "$key_b" 2>&1
}

# 1. the loop device attached to another file: refused, B untouched
what="--resume of a loop device attached to another file"
loop_attach loop "$file_a"
want=$(fill "$loop")
state=$state_dir/loop.state
stop_run "$loop" "$state" 1 TERM 143
losetup -d "$loop" || fail "$what: cannot detach $loop"
losetup "$loop" "$file_b" || fail "$what: cannot attach $loop to $file_b"
b_before=$(sha256sum <"$file_b")
raw_before=$(sha_of "$loop" "$bytes" 65536)
if out=$(resume "$state"); then
	fail "$what: accepted: $out"
fi
grep -q "$loop now reads another file" <<<"$out" || fail "$what: the refusal says: $out"
[ "$(wc -l <<<"$out")" = 1 ] || fail "$what: the refusal is not one line: $out"
[ "$(sha_of "$loop" "$bytes" 65536)" = "$raw_before" ] || fail "$what: $loop changed"
sync
[ "$(sha256sum <"$file_b")" = "$b_before" ] || fail "$what: $file_b changed"
ok "$what: refused ($out), $file_b unchanged"

# 2. file A under another loop number: the run's device
what="--resume of the run's file under another loop number"
loop_attach loop2 "$file_a"
[ "$loop2" != "$loop" ] || fail "$what: $file_a came back as $loop, which still holds $file_b"
out=$(resume "$state") || fail "$what: --resume failed: $out"
{ [ ! -e "$state" ] && [ -z "$(ls -A "$registry" 2>/dev/null)" ]; } ||
	fail "$what: state or registry left: $(ls -A "$registry" 2>/dev/null)"
reads_back "$loop2" "$want"
[ "$(sha256sum <"$file_b")" = "$b_before" ] || fail "$what: $file_b changed"
ok "$what: $loop2 found by its file, --resume finished, the data reads back"

# 3. kill -9: the private mappings left are --resume's to remove, unless open
what="--resume after kill -9"
loop_attach loop3 "$file_c"
want=$(fill "$loop3")
state=$state_dir/kill.state
stop_run "$loop3" "$state" 3 KILL 137
left=$(dmsetup ls | awk '/^lbscrypt-reenc-/ {print $1}' | sort)
[ -n "$left" ] || fail "$what: kill -9 left no private mapping (dmsetup ls: $(dmsetup ls))"
for map in $left; do
	on_exit dm_remove "$map"
done
old_map=$(grep -- '-old$' <<<"$left") || fail "$what: no -old mapping among: $left"
raw_before=$(sha_of "$loop3" "$bytes" 65536)
exec 9<"$(dm_blkdev "$old_map")"
if out=$(resume "$state"); then
	exec 9<&-
	fail "$what: accepted while $old_map is open: $out"
fi
exec 9<&-
grep -q "private mapping $old_map .* is open" <<<"$out" || fail "$what: the refusal says: $out"
[ "$(sha_of "$loop3" "$bytes" 65536)" = "$raw_before" ] || fail "$what: the refusal changed $loop3"
[ "$(dmsetup ls | awk '/^lbscrypt-reenc-/ {print $1}' | sort)" = "$left" ] ||
	fail "$what: the refusal removed a mapping: $(dmsetup ls)"
ok "$what: refused while $old_map is open ($out), nothing removed or written"
out=$(resume "$state") || fail "$what: --resume failed: $out"
! dmsetup ls | grep -q '^lbscrypt-reenc-' || fail "$what: a private mapping is left: $(dmsetup ls)"
{ [ ! -e "$state" ] && [ -z "$(ls -A "$registry" 2>/dev/null)" ]; } || fail "$what: state or registry left"
reads_back "$loop3" "$want"
ok "$what: the leftover mappings removed by --resume itself, the data reads back"
