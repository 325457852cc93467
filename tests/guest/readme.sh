#!/usr/bin/env bash
# DESCRIPTION: README.md's quick start, run as written, so the README cannot drift from the tool
# BOOT: lbscrypt
# KERNELS: arm64-64k
# FULL-KERNELS: arm64-64k
# LIMIT: 120 about 20 s on arm64-64k
# NEEDS: tool readme
# ORDER: 350
#
# readme.sh: README.md's quick start on 64K pages, ours loaded as crypt
# (--module lbscrypt); README.md arrives in /lbs/files (the runner's "readme").
#
# Reads the console block between README's "BEGIN quick start" and "END quick
# start" lines: a line starting with "$ " is a command (a trailing backslash
# joins the next line), the lines after it are what it prints: its standard
# output, then its standard error (kept apart: a pipe orders them otherwise
# than a terminal). Every command runs with bash and must exit 0 and print
# exactly the lines shown, with these rules:
# - the guest runs as root: every "sudo " is dropped;
# - the README's disk, /dev/sdb1 of 1953521664 sectors, is a loop device with
#   4096-byte blocks over a sparse 256 MiB file on a tmpfs of its own (a disk
#   with a 4096-byte physical block and no atomic writes, as most SATA disks;
#   large enough for ext4's journal at 64 KiB blocks), and its size that of
#   the loop device;
#   the README's /dev/dm-0 is the node the mapping got;
# - what a guest cannot do is skipped by name (SKIP_RULES below) and must show
#   no output: installing the packages, the modprobe rule, the initramfs, the
#   reboot and the rule's module load (qemu/run has loaded ours as crypt, which
#   the transcript's `lbscrypt check` then shows).
# Fails when the block is missing, a command is neither run nor skipped by a
# rule, a command fails, or its output differs from the README's (a diff).
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

readme=/lbs/files/README.md
readme_disk=/dev/sdb1
readme_sectors=1953521664
readme_dm=/dev/dm-0
name=data	# the mapping the transcript opens
mnt=/srv/data

# pattern|why: commands (after "sudo " is dropped) the guest does not run
SKIP_RULES=(
	'^apt install |installs the packages: the guest has the tool package, qemu/run loaded our module'
	'^cp /usr/share/doc/dm-crypt-lbs-dkms/examples/dm-crypt-lbs\.conf /etc/modprobe\.d/$|the modprobe rule: the guest has no DKMS package'
	'^update-initramfs |the guest boots without an initramfs'
	'^reboot$|the guest boots once'
	'^modprobe dm_crypt$|the rule loads dm_crypt_lbs: qemu/run loaded ours as crypt already'
)

[ -f "$readme" ] || fail "no $readme: boot with qemu/run --file README.md (tests/run-guest-tests does)"
[ "$(target_version crypt)" = v1.30.0 ] || fail "crypt is $(target_version crypt), expected ours v1.30.0 (--module lbscrypt)"
[ "$(page_size)" = 65536 ] || fail "the quick start is for 64K pages; this kernel's page is $(page_size)"
if ! grep -q -- "$readme_disk" "$readme" || ! grep -q -- "$readme_sectors sectors" "$readme"; then
	fail "the quick start no longer shows the disk $readme_disk of $readme_sectors sectors: set readme_disk and readme_sectors here to what it shows"
fi

# the transcript: the console block between the markers, fences dropped
mapfile -t block < <(awk '/^<!-- BEGIN quick start/ { on = 1; next } /^<!-- END quick start/ { on = 0 } on && !/^```/' "$readme")
[ "${#block[@]}" -gt 0 ] || fail "no quick start block in README.md (the BEGIN/END quick start lines)"

# the disk: 4096-byte logical and physical blocks, no atomic writes
[ -e /dev/loop-control ] || modprobe loop || fail "the loop module does not load"
store=/tmp/readme-disk
mkdir -p "$store"
mount -t tmpfs -o size=512m tmpfs "$store" || fail "cannot mount a tmpfs for the disk's file"
on_exit umount "$store"
truncate -s 256M "$store/disk.img"
disk=$(losetup -f --show -b 4096 "$store/disk.img") || fail "losetup -b 4096 of a sparse 256 MiB file failed"
on_exit losetup -d "$disk"
sectors=$(blockdev --getsz "$disk")
[ "$(blockdev --getpbsz "$disk")" = 4096 ] || fail "the loop device's physical block is $(blockdev --getpbsz "$disk"), not the README disk's 4096"

# what the transcript changes in the guest, undone at the end; it starts
# with no lbscrypttab, as a new install does
tab=/etc/lbscrypttab saved=/tmp/readme.lbscrypttab
rm -f "$saved"
[ ! -e "$tab" ] || mv "$tab" "$saved"
restore_tab() {
	rm -f "$tab"
	[ ! -e "$saved" ] || mv "$saved" "$tab"
}
[ -e /etc/keys ] || on_exit rm -rf /etc/keys
on_exit restore_tab
on_exit lbscrypt close "$name"
on_exit umount "$mnt"

# subst LINE: a README line as it reads in this guest
subst() {
	local s=$1 dm
	s=${s//$readme_disk/$disk}
	s=${s//"$readme_sectors sectors"/"$sectors sectors"}
	if dmsetup info "$name" >/dev/null 2>&1; then
		dm=$(dm_blkdev "$name")
		s=${s//$readme_dm/$dm}
	fi
	printf '%s\n' "$s"
}

# skip_rule CMD: the reason a command is skipped, or nothing
skip_rule() {
	local r
	for r in "${SKIP_RULES[@]}"; do
		if [[ $1 =~ ${r%%|*} ]]; then
			printf '%s\n' "${r#*|}"
			return 0
		fi
	done
}

ran=0 skipped=0 cmd='' expect=()
# finish the command collected so far: run or skip it, compare its output
flush() {
	local why rc=0 l
	[ -n "$cmd" ] || return 0
	why=$(skip_rule "$cmd")
	if [ -n "$why" ]; then
		[ "${#expect[@]}" = 0 ] || fail "'$cmd' is skipped ($why) but the README shows output for it that nothing checks"
		printf 'skip %s  (%s)\n' "$cmd" "$why"
		skipped=$((skipped + 1))
	else
		cmd=$(subst "$cmd")
		bash -c "$cmd" >/tmp/readme.out 2>/tmp/readme.err || rc=$?
		[ "$rc" = 0 ] || fail "'$cmd' exited $rc: $(cat /tmp/readme.out /tmp/readme.err)"
		# the shown lines as they read here, against standard output, then
		# standard error
		: >/tmp/readme.want
		for l in "${expect[@]}"; do subst "$l" >>/tmp/readme.want; done
		cat /tmp/readme.out /tmp/readme.err >/tmp/readme.got
		if ! cmp -s /tmp/readme.want /tmp/readme.got; then
			printf 'README shows (-) and the guest printed (+, standard output, then standard error) for: %s\n' "$cmd"
			diff /tmp/readme.want /tmp/readme.got | sed 's/^/  /' || true
			fail "'$cmd' printed other lines than README.md's quick start shows"
		fi
		ok "ran: $cmd (${#expect[@]} lines as shown)"
		ran=$((ran + 1))
	fi
	cmd='' expect=()
}

cont=0
for line in "${block[@]}"; do
	if [ "$cont" = 1 ]; then
		cmd+=" ${line#"${line%%[![:space:]]*}"}"
	elif [[ $line == '$ '* ]]; then
		flush
		cmd=${line#'$ '}
	else
		[ -n "$cmd" ] || fail "README.md's quick start starts with output, not a command: $line"
		expect+=("$line")
		continue
	fi
	cont=0
	if [[ $cmd == *\\ ]]; then
		cmd=${cmd%\\}
		cmd=${cmd%"${cmd##*[![:space:]]}"}
		cont=1
	fi
	cmd=${cmd//sudo /}
done
flush

# what the quick start promises: checked beyond its shown output
printf '%s\n' "${block[@]}" | grep -q '^\$ sudo lbscrypt open ' || fail "the quick start has no lbscrypt open"
[ "$(stat -f -c %S "$mnt")" = 65536 ] || fail "$mnt is not a file system of 65536-byte blocks: $(stat -f -c %S "$mnt")"
[ "$(blockdev --getss "$(dm_blkdev "$name")")" = 65536 ] || fail "the mapping's logical block is not 65536"
ok "README.md's quick start: $ran commands run as shown, $skipped skipped by rule"
