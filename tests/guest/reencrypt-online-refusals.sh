#!/usr/bin/env bash
# DESCRIPTION: lbscrypt reencrypt online refuses what it needs while NAME is suspended when it lives on NAME
# BOOT: lbscrypt
# KERNELS: none
#   six refused starts and one 32 MiB run under emulation, never timed on a
#   guest yet: make check-full runs it until a run shows it under 60 s
# FULL-KERNELS: arm64-64k
# LIMIT: 240 six refusals (a loop, swap, a copy of the tool) and one 32 MiB online run under emulation
# NEEDS: tool
# ORDER: 333
#
# reencrypt-online-refusals.sh: an online run suspends NAME while it converts
# a hotzone; anything the tool needs then that lives on NAME would wait for it
# forever. A mounted 64K-block ext4 on NAME (4096 -> 65536, a new key); each
# refusal below is one line naming the thing and how it is on NAME, and after
# each the table is the same, NAME is not suspended, no state file is left and
# the device's sha256 is unchanged:
# - the state file on ext4 over a loop device whose image file is on NAME
#   (the check follows loop/backing_file to the image's filesystem);
# - an active swap file on NAME (where the kernel has swap: the 64K
#   kernel's configuration has none, and the case says NOT RUN);
# - the new key file on NAME;
# - lbscrypttab on NAME (a file bind-mounted over /etc/lbscrypttab);
# - the program itself run from a copy on NAME (/proc/self/maps);
# - a process holding NAME open with O_DIRECT (dd iflag=direct, held in its
#   open of a FIFO nobody reads), refused naming its pid and "dd";
# then, the dd still there, --force goes on with a warning naming it, and the
# run finishes: one crypt line at 65536 with the new key, the files intact,
# e2fsck clean.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

dev=/dev/ram0
name="lbs-refuse"
mnt=/mnt/refuse
command -v lbscrypt >/dev/null || fail "no lbscrypt in the guest (build it: make -f tools/tools.mk tools-arm64)"
[ "$(target_version crypt)" = v1.30.0 ] || fail "crypt is $(target_version crypt), expected ours v1.30.0"
[ "$(page_size)" = 65536 ] || fail "this test needs a 64K-page kernel, the page is $(page_size)"
[ -e /dev/loop-control ] || modprobe loop || fail "the loop module does not load"
# The 64K kernel's configuration has no swap (no /proc/swaps): the swap case
# then is not run, and says so (the unit tests refuse a swap file on NAME)
have_swap=0
[ ! -e /proc/swaps ] || have_swap=1
bytes=$((32 << 20))
[ "$(blockdev --getsize64 "$dev")" -ge "$bytes" ] || fail "$dev is smaller than $bytes bytes"
registry=/etc/lbscrypt/reencrypt

state_dir=/mnt/refuse-state
state_fs "$state_dir" 64M
mkdir -p "$mnt"
on_exit rm -rf "$registry"
on_exit dm_remove "$name"
on_exit umount "$mnt"

key_a=/tmp/refuse-a.key
key_b=/tmp/refuse-b.key
test_key_file "$key_a" 64
head -c 64 /dev/urandom >"$key_b"

lbscrypt -q open --cipher aes-xts-plain64 --key-size 512 --key-file "$key_a" \
	--sector-size 4096 --size $((bytes / 512)) "$dev" "$name" || fail "open at 4096 failed"
mkfs.ext4 -q -F -b 65536 -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 "/dev/mapper/$name" >/dev/null ||
	fail "mkfs.ext4 -b 65536 failed"
mount -o noatime "/dev/mapper/$name" "$mnt" || fail "mount failed"
head -c $((4 << 20)) /dev/urandom >"$mnt/data"
files_sha=$(cd "$mnt" && sha256sum data)

table() {
	dmsetup table --showkeys "$name"
}
# online ARGS...: the run 4096 -> 65536 with the new key, state off NAME unless given.
online() {
	lbscrypt -q reencrypt --active-name "$name" --cipher aes-xts-plain64 --key-size 512 \
		--sector-size 4096 --key-file "$key_a" --new-sector-size 65536 "$@"
}
# refused WHAT TEXT CMD...: CMD fails with TEXT in its message, and nothing changed.
refused() {
	local what=$1 text=$2 out before sum
	shift 2
	sync
	before=$(table)
	sum=$(sha_of "$dev" "$bytes" 65536)
	if out=$("$@" 2>&1); then
		fail "$what: accepted"
	fi
	grep -qF -- "$text" <<<"$out" || fail "$what: the refusal says: $out (expected: $text)"
	[ "$(printf '%s\n' "$out" | grep -c .)" = 1 ] || fail "$what: not one line: $out"
	[ "$(table)" = "$before" ] || fail "$what: the table changed"
	! dmsetup info "$name" | grep -q SUSPENDED || fail "$what: $name left suspended"
	[ ! -e "$state_dir/run.state" ] || fail "$what: a state file was left"
	[ "$(sha_of "$dev" "$bytes" 65536)" = "$sum" ] || fail "$what: the device changed"
	ok "$what: refused ($out)"
}

# 1. the state file on a loop image stored on NAME
truncate -s 16M "$mnt/state.img"
state_loop=$(losetup --find --show "$mnt/state.img") || fail "losetup of $mnt/state.img failed"
on_exit losetup -d "$state_loop"
# no lazy init: its background writes would change NAME under the check
mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$state_loop" >/dev/null || fail "mkfs.ext4 on $state_loop failed"
mkdir -p /mnt/refuse-onname
mount -o noatime "$state_loop" /mnt/refuse-onname || fail "mount of $state_loop failed"
on_exit umount /mnt/refuse-onname
refused "the state file on a loop image on NAME" \
	"the state file /mnt/refuse-onname/run.state is on $name (ext4 on ${state_loop#/dev/}, whose backing file $mnt/state.img is on ext4 on $name)" \
	online --new-key-file "$key_b" --state /mnt/refuse-onname/run.state
[ ! -e /mnt/refuse-onname/run.state ] || fail "a state file was left on the loop image"
umount /mnt/refuse-onname
losetup -d "$state_loop"

# 2. an active swap file on NAME
if [ "$have_swap" = 1 ]; then
	dd if=/dev/zero of="$mnt/swapfile" bs=1M count=8 status=none || fail "cannot write $mnt/swapfile"
	chmod 600 "$mnt/swapfile"
	mkswap "$mnt/swapfile" >/dev/null || fail "mkswap $mnt/swapfile failed"
	swapon "$mnt/swapfile" || fail "swapon $mnt/swapfile failed"
	on_exit swapoff "$mnt/swapfile"
	refused "swap on NAME" "swap $mnt/swapfile is on $name (ext4 on $name)" \
		online --new-key-file "$key_b" --state "$state_dir/run.state"
	swapoff "$mnt/swapfile"
	rm -f "$mnt/swapfile"
else
	printf "NOT RUN swap on NAME: this kernel has no swap (no /proc/swaps)\n"
fi

# 3. the new key file on NAME
cp "$key_b" "$mnt/new.key"
refused "a key file on NAME" "the key file $mnt/new.key is on $name (ext4 on $name)" \
	online --new-key-file "$mnt/new.key" --state "$state_dir/run.state"
rm -f "$mnt/new.key"

# 4. lbscrypttab on NAME
[ -e /etc/lbscrypttab ] || { : >/etc/lbscrypttab && on_exit rm -f /etc/lbscrypttab; }
: >"$mnt/lbscrypttab"
mount --bind "$mnt/lbscrypttab" /etc/lbscrypttab || fail "cannot bind-mount over /etc/lbscrypttab"
on_exit umount /etc/lbscrypttab
refused "lbscrypttab on NAME" "/etc/lbscrypttab is on $name (ext4 on $name)" \
	online --new-key-file "$key_b" --state "$state_dir/run.state"
umount /etc/lbscrypttab

# 5. the program run from NAME
cp "$(command -v lbscrypt)" "$mnt/lbscrypt"
refused "the program on NAME" "$mnt/lbscrypt, which lbscrypt runs from (the program or a library), is on $name" \
	"$mnt/lbscrypt" -q reencrypt --active-name "$name" --cipher aes-xts-plain64 --key-size 512 \
	--sector-size 4096 --key-file "$key_a" --new-sector-size 65536 --new-key-file "$key_b" \
	--state "$state_dir/run.state"
rm -f "$mnt/lbscrypt"

# 6. an O_DIRECT opener of NAME: dd holds it open while it waits to open a FIFO
# for writing that nobody reads.
rm -f /tmp/refuse.fifo
mkfifo /tmp/refuse.fifo
node=$(dm_blkdev "$name")
dd if="$node" iflag=direct bs=64k of=/tmp/refuse.fifo status=none 2>/dev/null &
dd_pid=$!
on_exit kill "$dd_pid"
for _ in $(seq 100); do
	[ "$(readlink "/proc/$dd_pid/fd/0" 2>/dev/null)" != "$node" ] || break
	sleep 0.1
done
[ "$(readlink "/proc/$dd_pid/fd/0" 2>/dev/null)" = "$node" ] || fail "dd did not open $node in 10 s"
refused "an O_DIRECT opener of NAME" "$name or a file on it is open with O_DIRECT by $dd_pid (dd)" \
	online --new-key-file "$key_b" --state "$state_dir/run.state"

# 7. --force: a warning naming dd, and the run finishes.
what="online 4096 -> 65536 with --force beside the O_DIRECT dd"
out=$(lbscrypt reencrypt --active-name "$name" --cipher aes-xts-plain64 --key-size 512 \
	--sector-size 4096 --key-file "$key_a" --new-sector-size 65536 --new-key-file "$key_b" \
	--hotzone-size $((4 << 20)) --state "$state_dir/run.state" --force 2>&1) || fail "$what: failed: $out"
grep -qF -- "--force: $name or a file on it is open with O_DIRECT by $dd_pid (dd)" <<<"$out" ||
	fail "$what: no warning naming dd: $out"
kill "$dd_pid" 2>/dev/null || true
wait "$dd_pid" 2>/dev/null || true
table | grep -q "sector_size:65536" || fail "$what: the table is $(table | cut -c1-120)"
[ "$(cd "$mnt" && sha256sum data)" = "$files_sha" ] || fail "$what: the file changed"
[ ! -e "$state_dir/run.state" ] || fail "$what: the state file was left"
umount "$mnt"
e2fsck -fn "/dev/mapper/$name" >/dev/null 2>&1 || fail "$what: e2fsck -fn is not clean"
ok "$what: finished, the warning names dd, the file intact, e2fsck clean"
