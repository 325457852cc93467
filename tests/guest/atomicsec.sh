#!/usr/bin/env bash
# DESCRIPTION: ours writes whole sectors atomically where the disk can
# BOOT: both
# KERNELS: all -arm64-4k-6.1 -arm64-4k
#   every kernel with atomic writes (6.11 on): 6.12 and 7.3; arm64-4k in
#   make check-full: arm64-16k runs Debian's same 6.12 arm64 build, amd64-4k
#   6.12 with 4K pages
# FULL-KERNELS: all
# LIMIT: 120 about four times the longest expected (5 to 25 s on arm64-64k, idle)
# NEEDS: scsi_debug tool
# ORDER: 190
#
# atomicsec.sh: sectors that cannot tear. Where the kernel
# has atomic writes (6.11 on) and the disk writes a whole encryption sector
# atomically, ours sends every write down as atomic writes of whole sectors
# (kmod/atomic.c). Counted at the disk: scsi_debug (atomic_wr=1, 1 MiB atomic
# units on 512-byte blocks) logs each command it gets while its opts has NOISE
# set, and every write must be a WRITE ATOMIC(16) (0x9c) of whole sectors,
# none a plain WRITE(10)/(16), none refused. Cases, at the page size (65536 on a
# 64K-page kernel) and at 4096: a write of one sector; of three sectors starting
# one sector in (pieces of one and two sectors, each aligned to its size); of a
# whole request (128 KiB pieces, the request cap), and at 4096 the same with a
# request cap of three sectors (pieces of one and two); ext4 made on the mapping and a
# file written and synced through it. Then a 1 MiB write to a mapping that starts 8
# blocks into the disk (pieces aligned on the disk, not in the mapping), and a
# disk without atomic writes (plain WRITEs, the data reads back). Before 6.11,
# no write is atomic and the test says so. The tool agrees (lbscrypt check
# --device, status): no torn-sector warning over the disk with atomic writes at
# the largest size, the one-line warning with the disk's physical block and
# atomic unit over the disk without (and before 6.11 over both); and over a
# partition that starts off a sector boundary of the disk, whose writes are plain,
# the warning names the mapping's start. Needs `--module
# lbscrypt` or `both` (ours as crypt_lbs or crypt), scsi_debug and lbscrypt.
# Debian's arm64 kernels are built without scsi_debug: qemu/lib/scsi-debug
# builds it from the kernel's own source (cached), the runner hands it to the
# guest and tests/guest/common/scsi-debug-module.sh (run by suite.sh before the
# tests) puts it where modprobe finds it.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

key=$(test_key 64)
opts=/sys/bus/pseudo/drivers/scsi_debug/opts
caps=/sys/module/dm_crypt_lbs/parameters
target=crypt_lbs
grep -qw crypt_lbs <(dmsetup targets) || target=crypt
unload_sd() {
	[ ! -w "$opts" ] || echo 0 >"$opts"
	[ ! -d /sys/module/scsi_debug ] || rmmod scsi_debug
}
on_exit unload_sd
reset_cap() {
	[ ! -w "$caps/max_write_size" ] || echo 0 >"$caps/max_write_size"
}
on_exit reset_cap
on_exit umount /mnt 2>/dev/null
on_exit dm_remove lbs-at
command -v lbscrypt >/dev/null || fail "no lbscrypt in the guest (build it: make -f tools/tools.mk tools-arm64)"

if ! out=$(modprobe scsi_debug atomic_wr=1 dev_size_mb=48 atomic_wr_max_length=2048 \
	atomic_wr_max_length_bndry=2048 atomic_wr_max_bndry=2048 2>&1); then
	fail "modprobe scsi_debug atomic_wr=1 failed: $out (the rig's kernels need CONFIG_SCSI_DEBUG=m)"
fi
modprobe sd_mod 2>/dev/null || true
scsi_debug_disk
disk=$SD_DISK
dev=/dev/$disk
disk_unit=$(cat "/sys/block/$disk/queue/atomic_write_unit_max_bytes" 2>/dev/null || echo 0)
[ "$disk_unit" -ge 65536 ] ||
	fail "scsi_debug atomic_wr=1 announces an atomic unit of $disk_unit bytes, expected 1 MiB"

# writes CMD...: run CMD with scsi_debug logging its commands; print one line per
# write command the disk got: "<opcode> <blocks> [<first block>]"
writes() {
	dmesg -c >/dev/null
	echo 1 >"$opts"
	"$@"
	echo 0 >"$opts"
	local c
	# WRITE ATOMIC(16): length in bytes 12-13; WRITE(16): 10-13; WRITE(10): 7-8
	dmesg | sed -n 's/.*scsi_debug: tag=[^,]*, cmd \(.*\)$/\1/p' | while read -r -a c; do
		case ${c[0]} in
		9c) echo "9c $((16#${c[12]}${c[13]})) $((16#${c[2]}${c[3]}${c[4]}${c[5]}${c[6]}${c[7]}${c[8]}${c[9]}))" ;;
		8a) echo "8a $((16#${c[10]}${c[11]}${c[12]}${c[13]}))" ;;
		2a) echo "2a $((16#${c[7]}${c[8]}))" ;;
		esac
	done
}

# check WHAT SS EXPECT LINES: EXPECT "atomic" (every write a 0x9c of whole
# sectors) or "plain" (none a 0x9c)
check() {
	local what=$1 ss=$2 expect=$3 lines=$4 n bad
	n=$(grep -c . <<<"$lines" || true)
	[ "$n" -gt 0 ] || fail "$what: the disk logged no write (scsi_debug opts NOISE)"
	if [ "$expect" = atomic ]; then
		# whole sectors: starting on a sector, whole sectors long (the block
		# layer may merge two adjacent atomic writes into one it validated)
		bad=$(awk -v b=$((ss / 512)) '$1 != "9c" || $2 % b || $3 % b' <<<"$lines" | head -n 3 | tr '\n' ' ')
		[ -z "$bad" ] || fail "$what: writes that were not atomic writes of whole $ss-byte sectors: $bad(opcode, blocks, first block)"
		ok "$what: $n writes, each a WRITE ATOMIC(16) of whole sectors ($(awk '{ print $2 }' <<<"$lines" | sort -n | uniq -c | awk '{ printf "%s%sx%s", s, $1, $2; s=", " }') blocks)"
	else
		bad=$(awk '$1 == "9c"' <<<"$lines" | head -n 3 | tr '\n' ' ')
		[ -z "$bad" ] || fail "$what: atomic writes where the mapping is not aligned: $bad"
		ok "$what: $n writes, none atomic"
	fi
}

# tool_says DISK SS WANT: lbscrypt's word on lbs-at (over /dev/DISK at SS) and on
# `check --device /dev/DISK --sector-size SS`. WANT "none": no warning; "tear":
# one line on stderr naming the sector, the disk, its physical block and its
# atomic unit (read here from sysfs; "no atomic writes" where there are
# none), and stdout as
# without --device
tool_says() {
	local disk=$1 ss=$2 want=$3 q=/sys/block/$1/queue unit atomic expect out err plain what
	unit=$(cat "$q/atomic_write_unit_max_bytes" 2>/dev/null || echo 0)
	[ "$(cat "$q/atomic_write_unit_min_bytes" 2>/dev/null || echo 0)" != 0 ] || unit=0
	atomic="it writes at most $unit bytes atomically"
	[ "$unit" != 0 ] || atomic="it has no atomic writes"
	expect="lbscrypt: warning: a power failure can tear a $ss-byte sector on /dev/$disk: its physical block is $(cat "$q/physical_block_size") bytes and $atomic (dm-crypt-lbs(4), \"Torn writes\")"
	[ "$want" = tear ] || expect=''
	plain=$(lbscrypt check --target "$target" --sector-size "$ss") ||
		fail "lbscrypt check --sector-size $ss failed: $plain"
	for what in check status; do
		if [ "$what" = check ]; then
			out=$(lbscrypt check --target "$target" --sector-size "$ss" --device "/dev/$disk" 2>/tmp/at.err) ||
				fail "lbscrypt check --device /dev/$disk --sector-size $ss failed: $(cat /tmp/at.err)"
			[ "$out" = "$plain" ] || fail "lbscrypt check --device changed standard output: $out"
		else
			out=$(lbscrypt status --target "$target" lbs-at 2>/tmp/at.err) ||
				fail "lbscrypt status lbs-at failed: $(cat /tmp/at.err)"
			! grep -q -e tear -e warning <<<"$out" || fail "lbscrypt status printed the warning on standard output: $out"
		fi
		err=$(cat /tmp/at.err)
		[ "$err" = "$expect" ] ||
			fail "lbscrypt $what over /dev/$disk at $ss: standard error is '$err', expected '${expect:-nothing}'"
	done
	if [ "$want" = tear ]; then
		ok "lbscrypt check --device and status over /dev/$disk at $ss warn: $err"
	else
		ok "lbscrypt check --device and status over /dev/$disk at $ss: no warning (it writes up to $unit bytes atomically)"
	fi
}

# put_at SS OFFSET COUNT: one write of COUNT encryption sectors at sector OFFSET
put_at() {
	dd if=/tmp/at.data of=/dev/mapper/lbs-at bs=$(($1 * $3)) seek=$(($1 * $2)) count=1 \
		oflag=direct,seek_bytes conv=fsync status=none
}

len=$(($(blockdev --getsz "$dev") / 128 * 128))
IFS=. read -r major minor _ <<<"$(uname -r)"
has_atomic=$((major > 6 || (major == 6 && minor >= 11)))
pattern $((2 << 20)) >/tmp/at.data
sizes=$(bound)
[ "$sizes" = 4096 ] || sizes+=" 4096"
for ss in $sizes; do
	dmsetup create lbs-at --table "0 $len $target aes-xts-plain64 $key 0 $dev 0 1 sector_size:$ss" ||
		fail "$target at $ss over $dev refused: $(ti_error)"
	lines=$(writes put_at "$ss" 0 1)
	if [ "$has_atomic" = 0 ]; then
		check "$(uname -r), no REQ_ATOMIC: one sector at $ss" "$ss" plain "$lines"
		[ "$ss" -le "$(cat "/sys/block/$disk/queue/physical_block_size")" ] ||
			tool_says "$disk" "$ss" tear
		dmsetup remove lbs-at
		ok "the kernel has no atomic writes (before 6.11): every write goes down as a plain write"
		exit 0
	fi
	check "one sector at $ss" "$ss" atomic "$lines"
	[ "$ss" != "$(bound)" ] || tool_says "$disk" "$ss" none
	check "three sectors at $ss, one sector in" "$ss" atomic "$(writes put_at "$ss" 1 3)"
	check "a whole request at $ss (1 MiB)" "$ss" atomic "$(writes dd if=/tmp/at.data of=/dev/mapper/lbs-at bs=1M count=1 oflag=direct conv=fsync status=none)"
	# a request cap that is not a power of two: the pieces still are (the block
	# layer fails an atomic write of any other size)
	if [ "$ss" = 4096 ]; then
		echo $((3 * ss)) >"$caps/max_write_size"
		lines=$(writes sh -c 'dd if=/tmp/at.data of=/dev/mapper/lbs-at bs=1M count=1 oflag=direct conv=fsync status=none 2>/tmp/at.dd || echo "dd-failed"')
		echo 0 >"$caps/max_write_size"
		! grep -q dd-failed <<<"$lines" ||
			fail "1 MiB at $ss with max_write_size $((3 * ss)) (not a power of two) failed: $(cat /tmp/at.dd)"
		check "1 MiB at $ss with max_write_size $((3 * ss)), not a power of two" "$ss" atomic "$lines"
	fi
	if [ "$ss" = "$(bound)" ]; then
		mkfs.ext4 -q -F -b "$ss" /dev/mapper/lbs-at 2>/dev/null || mkfs.ext4 -q -F /dev/mapper/lbs-at
		mount /dev/mapper/lbs-at /mnt
		check "ext4 on the mapping at $ss: a file written and synced" "$ss" atomic \
			"$(writes bash -c 'head -c 1048576 /tmp/at.data >/mnt/f && sync /mnt/f && sync')"
		umount /mnt
	fi
	# every sector written reads back
	blockdev --flushbufs /dev/mapper/lbs-at
	dmsetup remove lbs-at
done

# a mapping 8 blocks (4096 bytes) into the disk, at 4096: a 1 MiB write goes
# down in pieces aligned on the disk, not in the mapping (a piece at 4096 first)
dmsetup create lbs-at --table "0 $((len - 256)) $target aes-xts-plain64 $key 0 $dev 8 1 sector_size:4096" ||
	fail "$target at 4096, 8 blocks in, refused: $(ti_error)"
check "a 1 MiB write to a mapping 8 blocks into the disk at 4096" 4096 atomic "$(writes put_at 4096 0 256)"
dmsetup remove lbs-at

# a partition that starts 1 MiB + 4 KiB into the disk, at the largest size: the
# mapping's start on the disk is off a sector boundary (dm itself refuses a
# table offset that is), so no atomic writes, and lbscrypt check --device and
# status say a sector can tear there, and why. The MBR is written here (the
# guest has no sfdisk).
le32() {
	printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 & 255)) $(($1 >> 8 & 255)) $(($1 >> 16 & 255)) $(($1 >> 24 & 255))
}
ss=$(bound)
if [ "$ss" -gt 4096 ]; then
	part_start=2056
	part_len=$(((len - part_start) / 128 * 128))
	dd if=/dev/zero of="$dev" bs=512 count=1 conv=fsync status=none
	printf '%b' "\\x00\\x00\\x02\\x00\\x83\\x00\\x00\\x00$(le32 "$part_start")$(le32 "$part_len")" |
		dd of="$dev" bs=1 seek=446 conv=notrunc,fsync status=none
	printf '%b' '\x55\xaa' | dd of="$dev" bs=1 seek=510 conv=notrunc,fsync status=none
	blockdev --rereadpt "$dev"
	for _ in $(seq 50); do [ -b "${dev}1" ] || sleep 0.1; done
	[ -b "${dev}1" ] || fail "no ${dev}1 after writing a partition table"
	[ "$(cat "/sys/block/$disk/${disk}1/start")" = "$part_start" ] ||
		fail "${dev}1 starts at sector $(cat "/sys/block/$disk/${disk}1/start"), not $part_start"
	dmsetup create lbs-at --table "0 $part_len $target aes-xts-plain64 $key 0 ${dev}1 0 1 sector_size:$ss" ||
		fail "$target at $ss over ${dev}1 refused: $(ti_error)"
	check "one sector over a partition $part_start sectors into the disk at $ss (off a sector boundary)" "$ss" plain "$(writes put_at "$ss" 0 1)"
	for what in "check --sector-size $ss --device ${dev}1" "status lbs-at"; do
		# shellcheck disable=SC2086 # $what is the command's words
		err=$(lbscrypt $what --target "$target" 2>&1 >/dev/null) || fail "lbscrypt $what failed: $err"
		case $err in
		*"can tear a $ss-byte sector on ${dev}1: "*", but the mapping starts at byte $((part_start * 512)) of the disk, not a multiple of $ss ("*) ;;
		*) fail "lbscrypt $what: no warning naming the mapping's start on the disk: '$err'" ;;
		esac
	done
	ok "lbscrypt check --device and status over a partition $part_start sectors in at $ss warn: $err"
	dmsetup remove lbs-at
fi

# a disk without atomic writes: plain writes, and the data reads back
rmmod scsi_debug
modprobe scsi_debug dev_size_mb=48 || fail "modprobe scsi_debug (no atomic writes) failed"
scsi_debug_disk
disk=$SD_DISK
ss=$(bound)
dmsetup create lbs-at --table "0 $len $target aes-xts-plain64 $key 0 /dev/$disk 0 1 sector_size:$ss" ||
	fail "$target at $ss over a disk without atomic writes refused: $(ti_error)"
check "three sectors at $ss on a disk without atomic writes" "$ss" plain "$(writes put_at "$ss" 0 3)"
tool_says "$disk" "$ss" tear
got=$(dd if=/dev/mapper/lbs-at bs="$ss" count=3 iflag=direct status=none | sha256sum | cut -d' ' -f1)
want=$(head -c $((3 * ss)) /tmp/at.data | sha256sum | cut -d' ' -f1)
[ "$got" = "$want" ] || fail "the mapping over a disk without atomic writes does not read back what was written"
ok "the mapping over a disk without atomic writes reads back what was written"
