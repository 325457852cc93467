#!/usr/bin/env bash
# DESCRIPTION: what stacks on a large-sector volume, lbscrypt.rst's table, cell by cell
# BOOT: lbscrypt
# KERNELS: none
#   its mkfs, LVM and fsck runs take minutes: make harden's debug kernel runs it,
#   and make stacking, on the same kernel (arm64-64k has no btrfs and XFS)
# FULL-KERNELS: arm64-64k-debug
#   the table's cells are the 64K kernel's
# LIMIT: 600 30 cells of mkfs, LVM, fsck
# NEEDS: tool loop lvm btrfs xfs
# ORDER: 340
#
# stacking.sh: what stacks on a large-sector volume, the
# table "What stacks on a large-sector volume" of lbscrypt.rst. Needs ours, as
# `crypt` (`--module lbscrypt`) or as `crypt_lbs` (`--module both`), on a
# 64K-page kernel (arm64-64k: the table's cells are that kernel's).
#
# The cells are tests/guest/stacking.tsv: one "cell" line per stack and sector
# size, with the result the table claims and a text the case's output must
# contain (the kernel's or the tool's own words). This test runs exactly the
# cells listed there, each for real on a fresh mapping over a sparse loop
# device (XFS wants more than 300 MB and btrfs 1 GiB before it leaves its
# small-volume "mixed" layout; only what is written takes memory):
#   check      `lbscrypt check --sector-size N`: what the tool tells a user
#   ext4       mkfs.ext4 -b N, mount, files written, unmount, mapping reloaded,
#              e2fsck -fn clean, mounted again, checksums equal
#   ext4-4k    mkfs.ext4 -b 4096 (blocks smaller than the sector)
#   btrfs      the same with mkfs.btrfs -s N, btrfs check
#   xfs        the same with mkfs.xfs -s size=N -b size=N, xfs_repair -n
#   xfs-32k    mkfs.xfs -s size=32768 -b size=N (XFS's largest sector)
#   lvm        pvcreate, vgcreate, lvcreate on the mapping, ext4 -b N on the LV,
#              the round trip above with the VG deactivated and found again
#   odirect-*  O_DIRECT writes of 512 and 4096 bytes, of the sector size, and of
#              4096 bytes into a file on ext4 -b N: an error must be EINVAL, the
#              bytes must be unchanged after a refusal (not silent)
# Each case prints "STACK <row> <size> <result> <detail>" (tab-separated; device
# names written DEV) and is compared with its cell: another result, or the text
# missing, fails the test, as does a cell without a case or a case without a
# cell. tests/stacking-table makes the rst table from stacking.tsv, and
# tests/lint-docs checks that lbscrypt.rst holds that table.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

cells=$(dirname "$0")/stacking.tsv
[ -f "$cells" ] || fail "no $cells: the cells this test checks"
[ "$(page_size)" = 65536 ] ||
	fail "stacking.tsv states what a 64K-page kernel does; this one's page is $(page_size) bytes (run it on arm64-64k)"
if [ -n "$(target_version crypt_lbs)" ]; then
	tgt=crypt_lbs
elif [ "$(target_version crypt)" = v1.30.0 ]; then
	tgt=crypt
else
	fail "neither crypt_lbs nor crypt v1.30.0 is registered (dmsetup targets above): ours is not loaded"
fi
for tool in lbscrypt mkfs.ext4 e2fsck mkfs.btrfs btrfs mkfs.xfs xfs_repair lvm losetup; do
	command -v "$tool" >/dev/null || fail "the guest has no $tool (qemu/rootfs/packages: e2fsprogs, btrfs-progs, xfsprogs, lvm2, mount)"
done
for fs in ext4 btrfs xfs; do
	modprobe "$fs" 2>/dev/null || true
	grep -qw "$fs" /proc/filesystems || fail "the kernel has no $fs (qemu/configs/arm64-64k.config)"
done

key=$(test_key 64)
# the backing file's own tmpfs: btrfs's 1088 MiB is more than /tmp's default
# size (half the guest's memory) allows, sparse as it is
store=/tmp/stacking.d
mkdir -p "$store"
mount -t tmpfs -o size=2g tmpfs "$store" || fail "cannot mount a tmpfs for the backing file"
img=$store/stacking.img
mnt=/mnt/stacking
log=/tmp/stacking.out
name='lbs-stack'
vg=lbsvg
mkdir -p "$mnt"
loop=''
on_exit umount "$store"
on_exit rm -f "$img"
on_exit losetup -D
on_exit dm_remove "$name"
on_exit lvmc vgchange -an "$vg"
on_exit umount "$mnt"
# lvm without udev (the guests have none): libdevmapper makes the nodes itself
# (DM_DISABLE_UDEV=1, /init), no devices file, no monitoring daemon
lvmconf='devices { use_devicesfile = 0 obtain_device_list_from_udev = 0 }
activation { udev_sync = 0 udev_rules = 0 monitoring = 0 }
global { use_lvmpolld = 0 }'
export LVM_SUPPRESS_FD_WARNINGS=1
lvmc() {
	lvm "$@" --config "$lvmconf"
}

# backing BYTES: a fresh sparse file of BYTES on tmpfs as $loop
backing() {
	[ -z "$loop" ] || losetup -d "$loop"
	rm -f "$img"
	truncate -s "$1" "$img"
	loop=$(losetup --find --show "$img") || fail "losetup of a $1-byte sparse file failed"
}

# map SS: the mapping over the whole of $loop with sector size SS; $dev is its node
map() {
	local sectors
	sectors=$(($(blockdev --getsz "$loop") / ($1 / 512) * ($1 / 512)))
	dmsetup create "$name" --table "0 $sectors $tgt aes-xts-plain64 $key 0 $loop 0 1 sector_size:$1" ||
		fail "the mapping at sector_size $1 was refused: $(ti_error)"
	dev=$(dm_blkdev "$name")
	[ "$(lbsize "$dev")" = "$1" ] || fail "the mapping at sector_size $1 has logical_block_size $(lbsize "$dev")"
}

# fresh SS BYTES: a new mapping of sector size SS over BYTES of new backing
fresh() {
	umount "$mnt" 2>/dev/null || true
	dm_remove "$name"
	backing "$2"
	map "$1"
	dmesg -c >/dev/null
}

# normalised: stdin with device names written DEV and kernel timestamps dropped
# (they change from boot to boot; the texts around them do not)
normalised() {
	sed -E -e 's/^\[ *[0-9]+\.[0-9]+\] //' \
		-e "s#/dev/mapper/$name|/dev/mapper/$vg-lv|/dev/$vg/lv#DEV#g" \
		-e 's#/dev/(dm-[0-9]+|loop[0-9]+)#DEV#g' -e 's/\b(dm-[0-9]+|loop[0-9]+)\b/DEV/g'
}

# step WHAT CMD...: run CMD with its output and the kernel's messages of its
# time appended to $log; true when CMD succeeded
step() {
	local what=$1 rc=0
	shift
	printf -- '--- step %s: %s\n' "$what" "$*" >>"$log"
	"$@" >>"$log.cmd" 2>&1 || rc=$?
	{ cat "$log.cmd"; dmesg -c | sed 's/^/kernel: /'; } | normalised >>"$log"
	rm -f "$log.cmd"
	[ "$rc" = 0 ] || printf -- '--- exit %s\n' "$rc" >>"$log"
	return "$rc"
}

# why: the line of $log that says why the last step failed: the kernel's error,
# else the command's, else its last line
why() {
	local last
	last=$(awk '/^--- step / { n = NR } END { print n }' "$log")
	tail -n +"$last" "$log" | awk '
		NR == 1 || /^--- exit/ { next }
		/^kernel: .*(error|invalid|unsupported|not supported|failed|cannot|can.t|mismatch|bad)/ && !k { k = $0 }
		/(rror|nvalid|llegal|not supported|too small|efus|ailed|annot|an.t|nable|must)/ && !c { c = $0 }
		{ l = $0 }
		END { print k ? k : c ? c : l }'
}

# --- the stacks
files=/tmp/stacking.files
mkdir -p "$files/sub/deep"
head -c $((1 << 20)) /dev/urandom >"$files/random"
pattern $((1 << 20)) >"$files/pattern"
printf 'abc' >"$files/small"
cp "$files/random" "$files/sub/deep/random"
sums() {	# sums DIR: the checksums of the test files under DIR
	(cd "$1" && sha256sum random pattern small sub/deep/random)
}
want_sums=$(sums "$files")

# roundtrip FSTYPE BDEV REOPEN FSCK...: mount BDEV, write the files, unmount,
# run REOPEN (the mapping removed and made again), FSCK (BDEV appended), mount,
# compare. Sets result and detail, and mounted_bs (the block size statfs gives).
roundtrip() {
	local fstype=$1 bdev=$2 reopen=$3 got
	shift 3
	mounted_bs=''
	if ! step mount mount -t "$fstype" "$bdev" "$mnt"; then
		result=mount-refuses detail=$(why)
		return 0
	fi
	mounted_bs=$(stat -f -c %S "$mnt")
	if ! step write cp -a "$files/." "$mnt/" || ! step sync sync -f "$mnt/small"; then
		result=EIO detail=$(why)
		return 0
	fi
	got=$(sums "$mnt") || got=unreadable
	step unmount umount "$mnt" || { result=umount-fails detail=$(why); return 0; }
	[ "$got" = "$want_sums" ] || { result=data-differs detail="the files read back differently before unmounting"; return 0; }
	"$reopen"
	if ! step fsck "$@" "$bdev"; then
		result=fsck-errors detail=$(why)
		return 0
	fi
	step remount mount -t "$fstype" "$bdev" "$mnt" || { result=remount-refuses detail=$(why); return 0; }
	got=$(sums "$mnt") || got=unreadable
	step unmount umount "$mnt" || { result=umount-fails detail=$(why); return 0; }
	[ "$got" = "$want_sums" ] || { result=data-differs detail="the files read back differently after the mapping was reloaded"; return 0; }
	result=ok
}

reopen_crypt() {
	dm_remove "$name"
	map "$ss"
}

# fs_case FSTYPE BYTES BS MKFS... -- FSCK...: mkfs on a fresh mapping of $ss
# over BYTES, then roundtrip; the mounted file system must have blocks of BS
fs_case() {
	local fstype=$1 bytes=$2 bs=$3 mkfs=()
	shift 3
	while [ "$1" != -- ]; do mkfs+=("$1"); shift; done
	shift
	fresh "$ss" "$bytes"
	if ! step mkfs "${mkfs[@]}" "$dev"; then
		result=mkfs-refuses detail=$(why)
		return 0
	fi
	roundtrip "$fstype" "$dev" reopen_crypt "$@"
	[ "$result" = ok ] || return 0
	detail="block size $mounted_bs; 4 files written, mapping reloaded, $1 clean, read back equal"
	[ "$mounted_bs" = "$bs" ] || result=wrong-block-size detail="the mounted file system has block size $mounted_bs, not $bs"
}

case_check() {
	local out rc=0
	out=$(lbscrypt check --target "$tgt" --sector-size "$ss" 2>&1) || rc=$?
	printf '%s\n' "$out" >>"$log"
	detail=$(printf '%s\n' "$out" | sed -n "s/^sector size $ss (plain): *//p")
	[ -n "$detail" ] || detail=$(printf '%s\n' "$out" | tail -n 1)
	case $rc:$detail in
	0:loads) result=loads ;;
	0:*) result=unclear ;;
	*:refused*) result=refused ;;
	*) result="exit-$rc" ;;
	esac
}

case_ext4() {
	fs_case ext4 $((64 << 20)) "$ss" mkfs.ext4 -q -F -b "$ss" -E nodiscard -- e2fsck -fn
}

case_ext4_4k() {
	fs_case ext4 $((64 << 20)) 4096 mkfs.ext4 -q -F -b 4096 -E nodiscard -- e2fsck -fn
}

case_btrfs() {
	fs_case btrfs $((1088 << 20)) "$ss" mkfs.btrfs -q -f -K -s "$ss" -- btrfs check --readonly
}

case_xfs() {
	fs_case xfs $((320 << 20)) "$ss" mkfs.xfs -q -f -K -s size="$ss" -b size="$ss" -- xfs_repair -n
}

case_xfs_32k() {
	fs_case xfs $((320 << 20)) "$ss" mkfs.xfs -q -f -K -s size=32768 -b size="$ss" -- xfs_repair -n
}

reopen_lvm() {
	step vg-off lvmc vgchange -an "$vg" || true
	dm_remove "$name"
	map "$ss"
	step vg-on lvmc vgchange -ay "$vg" || true
}

case_lvm() {
	local lv=/dev/mapper/$vg-lv pe lvbs
	fresh "$ss" $((96 << 20))
	if ! step pvcreate lvmc pvcreate -y -ff "$dev" || ! step vgcreate lvmc vgcreate "$vg" "$dev" ||
		! step lvcreate lvmc lvcreate -y -n lv -L 48m "$vg"; then
		result=lvm-refuses detail=$(why)
		return 0
	fi
	pe=$(lvmc pvs --noheadings --units b -o pe_start "$dev" 2>/dev/null | tr -d ' ')
	[ -b "$lv" ] || { result=no-lv detail="lvcreate made no $lv"; return 0; }
	lvbs=$(lbsize "$lv")
	if ! step mkfs mkfs.ext4 -q -F -b "$ss" -E nodiscard "$lv"; then
		result=mkfs-refuses detail=$(why)
	else
		roundtrip ext4 "$lv" reopen_lvm e2fsck -fn
		[ "$result" != ok ] || detail="PV data at $pe, LV logical block size $lvbs, ext4 -b $ss on the LV; found again after the mapping was reloaded"
	fi
	step vg-off lvmc vgchange -an "$vg" || true
	[ "$result" != ok ] || [ "$lvbs" = "$ss" ] || result=lv-block-size detail="the LV has logical block size $lvbs"
}

# odirect_write BDEV BS SEEK: one O_DIRECT write of BS bytes at block SEEK of a
# block device or file, with GNU dd (which does not retry without O_DIRECT);
# sets result (ok, EINVAL, or the error) and checks that a refused write changed
# nothing
odirect_write() {
	local target=$1 bs=$2 seek=$3 before after rc=0
	before=$(sha256sum <"$target")
	head -c "$bs" /dev/urandom >/tmp/stacking.block
	step "O_DIRECT $bs" dd if=/tmp/stacking.block of="$target" bs="$bs" seek="$seek" count=1 \
		oflag=direct conv=notrunc,fsync status=none || rc=$?
	sync
	[ -b "$target" ] && blockdev --flushbufs "$target"
	after=$(sha256sum <"$target")
	if [ "$rc" = 0 ]; then
		result=ok detail="$bs bytes written with O_DIRECT"
		[ "$after" != "$before" ] || { result=silent detail="dd succeeded and the bytes did not change"; }
		return 0
	fi
	detail=$(why)
	case $detail in
	*"Invalid argument"*) result=EINVAL ;;
	*"Input/output error"*) result=EIO ;;
	*) result=error ;;
	esac
	[ "$after" = "$before" ] || { result=$result-changed detail="$detail; and the bytes changed"; }
}

odirect_case() {	# odirect_case BS
	fresh "$ss" $((8 << 20))
	head -c $((1 << 20)) /dev/urandom | dd of="$dev" bs=65536 iflag=fullblock oflag=direct status=none
	odirect_write "$dev" "$1" 1
}
case_odirect_512() { odirect_case 512; }
case_odirect_4k() { odirect_case 4096; }
case_odirect_ss() { odirect_case "$ss"; }

case_odirect_file() {
	fresh "$ss" $((64 << 20))
	step mkfs mkfs.ext4 -q -F -b "$ss" -E nodiscard "$dev" || { result=mkfs-refuses detail=$(why); return 0; }
	step mount mount -t ext4 "$dev" "$mnt" || { result=mount-refuses detail=$(why); return 0; }
	head -c $((4 * ss)) /dev/urandom >"$mnt/file"
	sync
	odirect_write "$mnt/file" 4096 1
	umount "$mnt"
}

# --- the cells
declare -A want_result=() want_text=() seen=()
order=()
while IFS=$'\t' read -r kind row size result text; do
	[ "$kind" = cell ] || continue
	[ -n "$text" ] || fail "stacking.tsv: $row $size has no text to find (write - for none)"
	want_result[$row:$size]=$result want_text[$row:$size]=$text
	order+=("$row:$size")
done <"$cells"
[ "${#order[@]}" -gt 0 ] || fail "stacking.tsv lists no cells"

for cell in "${order[@]}"; do
	row=${cell%%:*} ss=${cell#*:}
	fn=case_${row//-/_}
	declare -F "$fn" >/dev/null || { soft_fail "$row at $ss: stacking.tsv lists a row this test has no case for"; continue; }
	: >"$log"
	result='' detail=''
	start=$SECONDS
	"$fn"
	umount "$mnt" 2>/dev/null || true
	detail=$(printf '%s' "$detail" | tr '\t\n' '  ' | normalised)
	printf 'STACK\t%s\t%s\t%s\t%s\n' "$row" "$ss" "$result" "$detail"
	seen[$cell]=1
	text=${want_text[$cell]}
	if [ "$result" != "${want_result[$cell]}" ]; then
		soft_fail "$row at $ss: $result, stacking.tsv (lbscrypt.rst's table) says ${want_result[$cell]}: $detail"
		sed 's/^/     | /' "$log" | tail -n 25
	elif [ "$text" != - ] && ! grep -qF -- "$text" <(printf '%s\n' "$detail") "$log"; then
		soft_fail "$row at $ss: $result as stacking.tsv says, but the output lacks its text \"$text\" (detail: $detail)"
		sed 's/^/     | /' "$log" | tail -n 25
	else
		ok "$row at $ss: $result ($((SECONDS - start)) s): $detail"
	fi
done
for cell in "${order[@]}"; do
	[ -n "${seen[$cell]:-}" ] || soft_fail "${cell%%:*} at ${cell#*:}: stacking.tsv lists it, no case ran"
done
