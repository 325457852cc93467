#!/bin/bash
# DESCRIPTION: the second boot of tests/handover-check: the v2 reference as the kernel's own dm_crypt (1.30.0) reads them
#
# handover-boot.sh TOKEN SUMS: the second boot of tests/handover-check: Debian's
# systemd as PID 1 (qemu/run --init systemd --module none), dm-crypt-lbs not
# installed, the kernel's dm-crypt.ko replaced by the v2 reference built as
# crypt (1.30.0; target crypt, module dm_crypt). /etc/lbscrypttab names lbsone (the disk
# virtio-lbsone, sector size 65536), /etc/fstab mounts it on /srv/one; lbstwo
# is left for `lbscrypt open` by hand. Both were written by dm-crypt-lbs in the
# first boot (handover-write.sh, which printed SUMS). Checks, one line each:
# what is installed and loaded, that lbscrypt check --kernel reads 1.30.0 from
# the kernel's own module file and says it is enough to hand over (the answer
# the initramfs hook, DKMS and the modprobe rule go by), the unit and the mount
# of lbsone, the data of both volumes; then writes /handed-over to lbsone for
# the host to read back.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/../common/lib.sh"

[ $# -eq 2 ] || fail "usage: handover-boot.sh TOKEN SUMS"
token=$1 sum_one=${2%%,*} sum_two=${2#*,}

check() {
	local what=$1
	shift
	if "$@"; then ok "$what"; else soft_fail "$what"; fi
}

pid1=$(readlink /proc/1/exe)
[[ $pid1 == */systemd ]] || fail "PID 1 is $pid1, not systemd: this test needs qemu/run --init systemd"
state=$(timeout 180 systemctl is-system-running --wait || true)
failed_units=$(systemctl list-units --failed --plain --no-legend | awk '{ print $1 }' | tr '\n' ' ' || true)
check "the boot finished with no failed unit (state '$state', failed: ${failed_units:-none})" [ "$state" = running ]

# --- the package is gone; the kernel's own dm_crypt is 1.30.0
where=$(modinfo -n dm_crypt_lbs 2>&1 || true)
check "dm_crypt_lbs is not installed (modinfo: $where)" [ "$where" != "/lib/modules/$(uname -r)/updates/dkms/dm-crypt-lbs.ko" ]
check "no dm-crypt-lbs source under /usr/src ($(echo /usr/src/*))" [ -z "$(compgen -G '/usr/src/dm-crypt-lbs-*' || true)" ]
check "dm_crypt_lbs is not loaded" [ ! -d /sys/module/dm_crypt_lbs ]
check "dm_crypt, the kernel's own module, is loaded ($(modinfo -n dm_crypt 2>&1))" [ -d /sys/module/dm_crypt ]
check "the crypt target is 1.30.0 ($(target_version crypt))" [ "$(target_version crypt)" = v1.30.0 ]
rc=0
said=$(lbscrypt check --kernel "$(uname -r)" 2>&1) || rc=$?
want="kernel $(uname -r): its own dm_crypt is crypt v1.30.0 ($(modinfo -n dm_crypt)): enough to hand over, it serves crypt there and dm_crypt_lbs is not needed"
check "lbscrypt check --kernel reads 1.30.0 from the kernel's own module and says hand over (exit $rc: $said)" [ "$rc:$said" = "0:$want" ]
log=$(journalctl -b -o cat -u lbscrypt@lbsone.service 2>&1 || true)
while IFS= read -r line; do echo "   lbscrypt@lbsone| $line"; done <<<"$log"
probe=$(journalctl -b -o cat -u modprobe@dm_crypt_lbs.service 2>&1 || true)
echo "   modprobe@dm_crypt_lbs: $(systemctl is-active modprobe@dm_crypt_lbs.service || true); $(tr '\n' ' ' <<<"$probe")"
# the rule handover-check leaves in /etc/modprobe.d: the kernel's request for
# dm-crypt went through it, and it chose the kernel's own module by its version
# (a line written to /dev/kmsg from user space keeps its "dm-crypt-lbs:" as the
# journal's identifier, so it is not among journalctl -k's: read both)
klog=$({
	journalctl -k -b -o cat
	journalctl -b -t dm-crypt-lbs -o cat | sed 's/^/dm-crypt-lbs: /'
} 2>/dev/null || true)
said=$(grep -F 'dm-crypt-lbs: ' <<<"$klog" | tr '\n' ' ' || true)
want="dm-crypt-lbs: kernel $(uname -r): its own dm_crypt is crypt v1.30.0 ("
chose=$(grep -cF "$want" <<<"$klog" || true)
fell=$(grep -c 'dm_crypt_lbs did not load' <<<"$klog" || true)
check "the modprobe rule loaded the kernel's own dm_crypt by its version, no fallback (kernel log: ${said:-none})" \
	[ "$((chose >= 1 && fell == 0))" = 1 ]

# --- lbsone: opened by its unit through the in-tree target, mounted at boot
unit=lbscrypt@lbsone.service
check "$unit is active ($(systemctl is-active "$unit" || true))" [ "$(systemctl is-active "$unit" || true)" = active ]
table=$(dmsetup table lbsone 2>&1 || true)
rc=1
if [[ $table == *" crypt aes-xts-plain64 "*" sector_size:65536"* ]]; then rc=0; fi
if [ "$rc" = 0 ]; then ok "lbsone's table is crypt at sector_size:65536 ($table)"; else soft_fail "lbsone's table: $table"; fi
got=$(blockdev --getss /dev/mapper/lbsone 2>&1 || true)
check "/dev/mapper/lbsone's logical block size is 65536 ($got)" [ "$got" = 65536 ]
source=$(findmnt -n -o SOURCE,FSTYPE /srv/one 2>&1 || true)
check "/srv/one is mounted from /dev/mapper/lbsone as ext4 ($source)" [ "$source" = "/dev/mapper/lbsone ext4" ]
got=$(cat /srv/one/token 2>&1 || true)
check "lbsone's /token reads as written ('$got')" [ "$got" = "one $token" ]
got=$(sha256sum </srv/one/data 2>&1 | cut -d' ' -f1)
check "lbsone's /data reads as written (sha256 $got)" [ "$got" = "$sum_one" ]

# --- lbstwo: lbscrypt open by hand, through the same target
out=$(lbscrypt check 2>&1 || true)
echo "   lbscrypt check: $(tr '\n' ' ' <<<"$out")"
out=$(lbscrypt open --type plain --cipher aes-xts-plain64 --key-size 512 --key-file /etc/keys/ho.key \
	--sector-size 65536 /dev/disk/by-id/virtio-lbstwo lbstwo 2>&1) && rc=0 || rc=$?
check "lbscrypt open of lbstwo at 65536 through the in-tree target (exit $rc: ${out:-no output})" [ "$rc" = 0 ]
mkdir -p /srv/two
if [ "$rc" = 0 ] && mount -o ro /dev/mapper/lbstwo /srv/two; then
	got=$(sha256sum </srv/two/data 2>&1 | cut -d' ' -f1)
	check "lbstwo's /data reads as written (sha256 $got)" [ "$got" = "$sum_two" ]
	umount /srv/two
	check "lbscrypt close lbstwo" lbscrypt close lbstwo
else
	soft_fail "lbstwo could not be mounted"
fi

# --- a write through the in-tree target, for the host to read back
echo "written by the in-tree dm_crypt $token" >/srv/one/handed-over
sync
ok "wrote /handed-over to lbsone; the shutdown unmounts and closes it"
