#!/usr/bin/env bash
# DESCRIPTION: lbscrypt reencrypt offline: conversions, refusals, a stop and a kill -9 resumed
# BOOT: lbscrypt
# KERNELS: arm64-64k
#   the largest sector (65536) and ext4 both: one 64K kernel shows the conversion
# FULL-KERNELS: all
# LIMIT: 400 each conversion writes the ramdisk twice (journal and data), under emulation
# NEEDS: tool
# ORDER: 330
#
# reencrypt.sh: `lbscrypt reencrypt` on a closed plain volume, dm-crypt-lbs as
# `crypt`. The state file lives on ext4 over a loop device (not tmpfs, which
# the tool refuses: a reboot would lose it).
# - random data at 512 with key A becomes the largest sector size here with key
#   B: read through `lbscrypt open` with the new parameters it is the data
#   written; without a filesystem the tool first refuses without --force, and
#   the device is unchanged by the refusal;
# - ext4 (4096-byte blocks) at 512 becomes 4096 with a new key: its files
#   read back and e2fsck is clean; then 8192 is refused on a kernel that takes
#   it (ext4's BLOCK_SIZE 4096 is below it), naming both numbers;
# - SIGTERM after the first hotzone: exit 143, the state, its journal and the
#   registry entry kept; `lbscrypt open` of the device refuses and names the
#   state; --resume with a wrong new key is refused before a byte is written
#   (the raw device is unchanged); --resume with the right keys finishes and
#   the data reads back; the state and the registry entry are gone;
# - kill -9 in the middle, then --resume alone (no dmsetup remove of the
#   private mappings left): the data reads back, no mapping is left;
# - refusals with nothing written: the state file on tmpfs, a device held by
#   a mapping, a state file that exists without --resume, a volume
#   lbscrypttab lists (named with its line);
# - --update-tab: a listed volume (a key file) to the largest sector and a new
#   key file: its line has the new sector-size=, every other byte and the
#   file's mode kept, the new key file replaced the line's, the data reads
#   back through the line's parameters;
# - a run on a dm device stopped, the device made again under another name
#   (same uuid, as after a reboot): --resume finds it by its stable id and
#   finishes; the data reads back with the new key.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

dev=/dev/ram0
command -v lbscrypt >/dev/null || fail "no lbscrypt in the guest (build it: make -f tools/tools.mk tools-arm64)"
[ "$(target_version crypt)" = v1.30.0 ] || fail "crypt is $(target_version crypt), expected ours v1.30.0"
[ -e /dev/loop-control ] || modprobe loop || fail "the loop module does not load: no loop device for the state filesystem"
big=$(bound)
bytes=$((32 << 20))
[ "$(blockdev --getsize64 "$dev")" -ge "$bytes" ] || fail "$dev is smaller than $bytes bytes"
registry=/etc/lbscrypt/reencrypt

# The state filesystem: ext4 on a loop device over a file.
state_dir=/mnt/reenc-state
state_fs "$state_dir" 160M
on_exit lbscrypt close lbs-reenc
on_exit rm -rf "$registry"

key_a=/tmp/reenc-a.key
key_b=/tmp/reenc-b.key
key_c=/tmp/reenc-c.key
test_key_file "$key_a" 64
head -c 64 /dev/urandom >"$key_b"
head -c 64 /dev/urandom >"$key_c"

# open_old/open_new NAME SECTOR KEY: a plain mapping of the first $bytes.
open_as() {
	lbscrypt -q open --cipher aes-xts-plain64 --key-size 512 --key-file "$3" \
		--sector-size "$2" --size $((bytes / 512)) "$dev" "$1"
}
raw_sha() {
	sha_of "$dev" "$bytes" 65536
}
# The first conversion makes its key verifiers at the default 200000 PBKDF2
# iterations; the others at 1000, the fewest allowed: under emulation each
# verifier costs about 2.5 s at the default, and every start and --resume
# makes or checks two.
fast=(--pbkdf-force-iterations 1000)
# stop_after_first PID: SIGTERM to the run started in the background (its
# JSON in /tmp/reenc.json, its stderr in /tmp/reenc.err) once it has done a
# hotzone; it must exit 143
stop_after_first() {
	local pid=$1 rc=0
	for _ in $(seq 600); do
		grep -q done_bytes /tmp/reenc.json 2>/dev/null && break
		sleep 0.1
	done
	kill -TERM "$pid"
	wait "$pid" || rc=$?
	[ "$rc" = 143 ] || fail "$what: exit $rc after SIGTERM, not 143 (stderr: $(cat /tmp/reenc.err))"
}
# reenc ARGS...: lbscrypt reencrypt of the first $bytes of the device.
reenc() {
	lbscrypt -q reencrypt --cipher aes-xts-plain64 --key-size 512 --size $((bytes / 512)) "$@"
}

# 1. random data, 512 -> the largest size, key A -> key B
head -c "$bytes" /dev/urandom >/tmp/reenc.data
want=$(sha256sum </tmp/reenc.data | cut -d' ' -f1)
open_as lbs-reenc 512 "$key_a" || fail "open at 512 failed"
put /tmp/reenc.data /dev/mapper/lbs-reenc 65536
lbscrypt close lbs-reenc
before=$(raw_sha)
state=$state_dir/one.state
what="reencrypt 512 -> $big without a filesystem"
if out=$(reenc --key-file "$key_a" --new-key-file "$key_b" --new-sector-size "$big" \
	--state "$state" "$dev" 2>&1); then
	fail "$what: accepted without --force"
fi
grep -q "nothing shows the old key" <<<"$out" || fail "$what: the refusal says: $out"
[ "$(raw_sha)" = "$before" ] || fail "$what: the refusal changed the device"
[ ! -e "$state" ] || fail "$what: the refusal left $state"
ok "$what: refused without --force, nothing written"
out=$(reenc --key-file "$key_a" --new-key-file "$key_b" --new-sector-size "$big" --force \
	--hotzone-size $((4 << 20)) --state "$state" "$dev" 2>&1) || fail "$what --force: $out"
{ [ ! -e "$state" ] && [ ! -e "$state.journal" ]; } || fail "$what: the state is left after the end"
[ -z "$(ls -A "$registry" 2>/dev/null)" ] || fail "$what: the registry keeps $(ls "$registry")"
open_as lbs-reenc "$big" "$key_b" || fail "$what: open with the new parameters failed"
[ "$(sha_of /dev/mapper/lbs-reenc "$bytes" 65536)" = "$want" ] || fail "$what: the data differs"
lbscrypt close lbs-reenc
ok "$what --force: the data reads back with the new key and sector size"

# 2. ext4 at 512 -> 4096 with a new key; then 8192 refused
open_as lbs-reenc 512 "$key_a" || fail "open at 512 failed"
mkfs.ext4 -q -F -b 4096 /dev/mapper/lbs-reenc >/dev/null || fail "mkfs.ext4 failed"
mkdir -p /mnt/reenc
mount /dev/mapper/lbs-reenc /mnt/reenc || fail "mount failed"
head -c $((8 << 20)) /tmp/reenc.data >/mnt/reenc/data
pattern $((1 << 20)) >/mnt/reenc/pattern
files=$(cd /mnt/reenc && sha256sum data pattern)
umount /mnt/reenc
lbscrypt close lbs-reenc
what="reencrypt ext4 512 -> 4096"
out=$(reenc --key-file "$key_a" --new-key-file "$key_c" --new-sector-size 4096 "${fast[@]}" \
	--state "$state_dir/two.state" "$dev" 2>&1) || fail "$what: $out"
open_as lbs-reenc 4096 "$key_c" || fail "$what: open with the new parameters failed"
e2fsck -fn /dev/mapper/lbs-reenc >/tmp/reenc.fsck 2>&1 || fail "$what: e2fsck: $(tail -3 /tmp/reenc.fsck)"
mount /dev/mapper/lbs-reenc /mnt/reenc || fail "$what: mount failed"
got=$(cd /mnt/reenc && sha256sum data pattern)
umount /mnt/reenc
lbscrypt close lbs-reenc
[ "$got" = "$files" ] || fail "$what: the files differ"
ok "$what: e2fsck clean, the files read back"
if [ "$big" -ge 8192 ]; then
	what="reencrypt ext4 4096 -> 8192"
	before=$(raw_sha)
	if out=$(lbscrypt -q reencrypt --cipher aes-xts-plain64 --key-size 512 --size $((bytes / 512)) \
		--sector-size 4096 --key-file "$key_c" --keep-key --new-sector-size 8192 \
		--state "$state_dir/three.state" "$dev" 2>&1); then
		fail "$what: accepted"
	fi
	grep -q "4096 bytes (blkid.s BLOCK_SIZE), below the new sector size 8192" <<<"$out" || fail "$what: the refusal says: $out"
	[ "$(raw_sha)" = "$before" ] || fail "$what: the refusal changed the device"
	ok "$what: refused (BLOCK_SIZE 4096), nothing written"
fi

# 3. SIGTERM after the first hotzone, then --resume
state=$state_dir/stop.state
put /tmp/reenc.data "$dev" 65536 # raw: any bytes are a volume for --force
open_as lbs-reenc 512 "$key_a" || fail "open at 512 failed"
want=$(sha_of /dev/mapper/lbs-reenc "$bytes" 65536)
lbscrypt close lbs-reenc
what="SIGTERM, then --resume"
# lbscrypt itself in the background (not the reenc function: its subshell would take the signal)
lbscrypt -q reencrypt --cipher aes-xts-plain64 --key-size 512 --size $((bytes / 512)) \
	--key-file "$key_a" --new-key-file "$key_b" --new-sector-size "$big" --force --json \
	--hotzone-size 1048576 "${fast[@]}" --state "$state" "$dev" >/tmp/reenc.json 2>/tmp/reenc.err &
stop_after_first $!
{ [ -f "$state" ] && [ -f "$state.journal" ]; } || fail "$what: the state or its journal is gone"
[ -n "$(ls -A "$registry" 2>/dev/null)" ] || fail "$what: no registry entry"
! dmsetup ls | grep -q lbscrypt-reenc || fail "$what: a private mapping is left: $(dmsetup ls)"
ok "$what: stopped with 143, state, journal and registry kept, no mapping left"
if out=$(open_as lbs-reenc 512 "$key_a" 2>&1); then
	lbscrypt close lbs-reenc
	fail "$what: open of a device mid-run was accepted"
fi
grep -qF "$state" <<<"$out" || fail "$what: open's refusal does not name the state: $out"
ok "$what: open refuses, naming $state"
before=$(raw_sha)
if out=$(lbscrypt -q reencrypt --resume --state "$state" --key-file "$key_a" \
	--new-key-file "$key_c" 2>&1); then
	fail "$what: --resume with a wrong new key accepted"
fi
grep -q "new key" <<<"$out" || fail "$what: the wrong-key refusal says: $out"
[ "$(raw_sha)" = "$before" ] || fail "$what: the wrong-key refusal changed the device"
ok "$what: a wrong new key is refused, nothing written"
out=$(lbscrypt -q reencrypt --resume --state "$state" --key-file "$key_a" \
	--new-key-file "$key_b" 2>&1) || fail "$what: --resume failed: $out"
{ [ ! -e "$state" ] && [ -z "$(ls -A "$registry" 2>/dev/null)" ]; } || fail "$what: state or registry left"
open_as lbs-reenc "$big" "$key_b" || fail "$what: open with the new parameters failed"
[ "$(sha_of /dev/mapper/lbs-reenc "$bytes" 65536)" = "$want" ] || fail "$what: the data differs"
lbscrypt close lbs-reenc
ok "$what: --resume finished, the data reads back"

# 4. kill -9 in the middle, then --resume
state=$state_dir/kill.state
what="kill -9, then --resume"
lbscrypt -q reencrypt --cipher aes-xts-plain64 --key-size 512 --size $((bytes / 512)) \
	--sector-size "$big" --key-file "$key_b" --new-key-file "$key_a" --new-sector-size 4096 \
	--force --json --hotzone-size 1048576 "${fast[@]}" --state "$state" "$dev" >/tmp/reenc.json 2>&1 &
pid=$!
for _ in $(seq 600); do
	[ "$(grep -c done_bytes /tmp/reenc.json 2>/dev/null)" -ge 3 ] && break
	sleep 0.1
done
kill -KILL "$pid"
wait "$pid" || true
[ -f "$state" ] || fail "$what: no state after kill -9"
# the private mappings kill -9 left are --resume's to remove (reencrypt-identity.sh
# checks that one held open is refused)
out=$(lbscrypt -q reencrypt --resume --state "$state" --key-file "$key_b" \
	--new-key-file "$key_a" 2>&1) || fail "$what: --resume failed: $out"
! dmsetup ls | grep -q '^lbscrypt-reenc-' || fail "$what: a private mapping is left: $(dmsetup ls)"
open_as lbs-reenc 4096 "$key_a" || fail "$what: open with the new parameters failed"
[ "$(sha_of /dev/mapper/lbs-reenc "$bytes" 65536)" = "$want" ] || fail "$what: the data differs"
lbscrypt close lbs-reenc
ok "$what: the data reads back"

# 5. refusals with nothing written
before=$(raw_sha)
mkdir -p /tmp/reenc-tmpfs
mount -t tmpfs tmpfs /tmp/reenc-tmpfs || fail "cannot mount a tmpfs"
on_exit umount /tmp/reenc-tmpfs
what="the state file on tmpfs"
if out=$(reenc --sector-size 4096 --key-file "$key_a" --new-key-file "$key_b" --force \
	--state /tmp/reenc-tmpfs/s.state "$dev" 2>&1); then
	fail "$what: accepted"
fi
grep -qi "tmpfs" <<<"$out" || fail "$what: the refusal says: $out"
ok "$what: refused: $out"
open_as lbs-reenc 4096 "$key_a" || fail "open at 4096 failed"
what="a device held by a mapping"
if out=$(reenc --sector-size 4096 --key-file "$key_a" --new-key-file "$key_b" --force \
	--state "$state_dir/held.state" "$dev" 2>&1); then
	fail "$what: accepted"
fi
grep -q "lbs-reenc" <<<"$out" || fail "$what: the refusal does not name the holder: $out"
lbscrypt close lbs-reenc
ok "$what: refused, naming the holder"
what="a state file that exists, without --resume"
: >"$state_dir/exists.state"
if out=$(reenc --sector-size 4096 --key-file "$key_a" --new-key-file "$key_b" --force \
	--state "$state_dir/exists.state" "$dev" 2>&1); then
	fail "$what: accepted"
fi
grep -q -- "--resume" <<<"$out" || fail "$what: the refusal says: $out"
ok "$what: refused"
[ "$(raw_sha)" = "$before" ] || fail "the refusals changed the device"
ok "the refusals wrote nothing"
what="a volume lbscrypttab lists"
[ ! -e /etc/lbscrypttab ] || fail "$what: the guest already has an /etc/lbscrypttab"
on_exit rm -f /etc/lbscrypttab
printf 'lbs-listed %s %s cipher=aes-xts-plain64,size=512,sector-size=4096\n' "$dev" "$key_a" >/etc/lbscrypttab
if out=$(reenc --sector-size 4096 --key-file "$key_a" --new-key-file "$key_b" --force \
	--state "$state_dir/listed.state" "$dev" 2>&1); then
	fail "$what: accepted"
fi
grep -q "lbs-listed (line 1)" <<<"$out" || fail "$what: the refusal says: $out"
rm -f /etc/lbscrypttab
[ "$(raw_sha)" = "$before" ] || fail "$what: the refusal changed the device"
ok "$what: refused, naming the line; nothing written"

# 6. --update-tab: the listed volume's line gets the new sector size, the new key
# file replaces the line's, the file's mode and other lines are kept
what="reencrypt --update-tab"
keys=/etc/lbs-reenc-keys
mkdir -p "$keys"
on_exit rm -rf "$keys"
cp "$key_a" "$keys/vol.key"
cp "$key_b" "$keys/vol.key.new"
line="lbs-listed $dev $keys/vol.key cipher=aes-xts-plain64,size=512,sector-size"
printf '# kept\n%s=4096  # the volume\nother /dev/vdz none cipher=aes-xts-plain64,size=256,hash=sha256\n' \
	"$line" >/etc/lbscrypttab
chmod 0640 /etc/lbscrypttab
out=$(reenc --sector-size 4096 --key-file "$keys/vol.key" --new-key-file "$keys/vol.key.new" \
	--new-sector-size "$big" --force --update-tab "${fast[@]}" --state "$state_dir/tab.state" "$dev" 2>&1) ||
	fail "$what: $out"
printf '# kept\n%s=%s  # the volume\nother /dev/vdz none cipher=aes-xts-plain64,size=256,hash=sha256\n' \
	"$line" "$big" >/tmp/reenc.tab
cmp -s /etc/lbscrypttab /tmp/reenc.tab || fail "$what: the file is now: $(cat /etc/lbscrypttab)"
[ "$(stat -c %a /etc/lbscrypttab)" = 640 ] || fail "$what: mode $(stat -c %a /etc/lbscrypttab), not 640"
cmp -s "$keys/vol.key" "$key_b" || fail "$what: $keys/vol.key does not hold the new key"
[ ! -e "$keys/vol.key.new" ] || fail "$what: the new key file is left beside it"
{ [ ! -e "$state_dir/tab.state" ] && [ -z "$(ls -A "$registry" 2>/dev/null)" ]; } || fail "$what: state or registry left"
grep -q "lbs-listed (line 2) now has the new parameters" <<<"$out" || fail "$what: the summary says: $out"
open_as lbs-reenc "$big" "$keys/vol.key" || fail "$what: open with the line's parameters failed"
[ "$(sha_of /dev/mapper/lbs-reenc "$bytes" 65536)" = "$want" ] || fail "$what: the data differs"
lbscrypt close lbs-reenc
ok "$what: the line has sector-size=$big, its key file the new key, mode 640; the data reads back"
rm -f /etc/lbscrypttab

# 7. after a "reboot" the run's device has another name: --resume finds it by
# its stable id (a dm device's uuid), not by the path the run recorded. The
# device holds what section 6 left: read with key A at 512 it is some
# plaintext, which key B at 512 must read the same after the run.
what="--resume of a device that came back under another name"
on_exit dm_remove lbs-reloc-chk
on_exit dm_remove lbs-reloc-b
on_exit dm_remove lbs-reloc-a
# plain512_sha KEYFILE: the sha256 of the first $bytes read with KEYFILE at 512
plain512_sha() {
	dmsetup create lbs-reloc-chk --table "0 $((bytes / 512)) crypt aes-xts-plain64 $(od -An -v -tx1 "$1" | tr -d ' \n') 0 $dev 0" ||
		fail "$what: a table over $dev was refused: $(ti_error)"
	sha_of /dev/mapper/lbs-reloc-chk "$bytes" 65536
	dm_remove lbs-reloc-chk
}
want=$(plain512_sha "$key_a")
dmsetup create lbs-reloc-a --uuid LBS-RELOC --table "0 $((bytes / 512)) linear $dev 0" ||
	fail "$what: the linear device was refused: $(ti_error)"
state=$state_dir/reloc.state
lbscrypt -q reencrypt --cipher aes-xts-plain64 --key-size 512 --size $((bytes / 512)) \
	--key-file "$key_a" --new-key-file "$key_b" --force --json --hotzone-size 1048576 "${fast[@]}" \
	--state "$state" /dev/mapper/lbs-reloc-a >/tmp/reenc.json 2>/tmp/reenc.err &
stop_after_first $!
[ -f "$state" ] || fail "$what: no state after the stop"
dmsetup remove lbs-reloc-a || fail "$what: lbs-reloc-a did not go"
dmsetup create lbs-reloc-b --uuid LBS-RELOC --table "0 $((bytes / 512)) linear $dev 0" ||
	fail "$what: the linear device under its new name was refused: $(ti_error)"
out=$(lbscrypt -q reencrypt --resume --state "$state" --key-file "$key_a" \
	--new-key-file "$key_b" 2>&1) || fail "$what: --resume failed: $out"
{ [ ! -e "$state" ] && [ -z "$(ls -A "$registry" 2>/dev/null)" ]; } || fail "$what: state or registry left"
dm_remove lbs-reloc-b
[ "$(plain512_sha "$key_b")" = "$want" ] || fail "$what: the data read with key B differs"
ok "$what: found again by its uuid (lbs-reloc-a gone, lbs-reloc-b made), --resume finished, the data reads back"
