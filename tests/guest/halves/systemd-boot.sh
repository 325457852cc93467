#!/bin/bash
# DESCRIPTION: the guest half of tests/systemd-check: what lbscrypttab's units opened
#
# systemd-boot.sh TOKEN LONG-NAME: the guest half of tests/systemd-check, run by the
# systemd rootfs's lbs-command.service once multi-user.target is reached
# (qemu/run --init systemd). The host made seven disks and this guest's
# /etc/lbscrypttab, /etc/fstab, key files and password agent (see
# tests/systemd-check); each volume's filesystem holds /token, "VOLUME TOKEN",
# but lbsmidway's disk, mid-way through lbscrypt reencrypt (its registry entry
# filed by lbs-midway.service), which must be refused; lbssealed's and
# lbssealpass's keys are sealed to the guest's TPM (tests/guest/halves/systemd-tpm.sh,
# run after this one, goes on with them).
# Checks what the boot left, one line per check; then writes /written to lbsdata
# (the host reads it back after the shutdown) and stops lbspass by hand.
#
# systemd-boot.sh --late TOKEN: the guest half of the late disk's boot (also
# tests/systemd-check): lbslate, its key on lbskeys, a disk the host hot-plugged
# when lbs-wantdisk.service asked for it; checks that lbscrypt@lbslate waited for
# the disk and opened the volume once it came, and writes /written to lbslate.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/../common/lib.sh"

late=0
if [ "${1:-}" = --late ]; then
	late=1
	shift
	[ $# -eq 1 ] || fail "usage: systemd-boot.sh --late TOKEN"
	token=$1
else
	[ $# -eq 2 ] || fail "usage: systemd-boot.sh TOKEN LONG-NAME | --late TOKEN"
	token=$1 long_name=$2
fi

# check WHAT COMMAND...: ok when COMMAND succeeds, else a soft failure naming
# what was checked; verdict WHAT STATUS: the same for a status found before
check() {
	local what=$1
	shift
	if "$@"; then ok "$what"; else soft_fail "$what"; fi
}
verdict() {
	if [ "$2" = 0 ]; then ok "$1"; else soft_fail "$1"; fi
}
# prop UNIT PROPERTY: one property of a unit, as systemctl show prints it
prop() {
	systemctl show -P "$2" "$1"
}

# --- PID 1 and the boot
pid1=$(readlink /proc/1/exe)
[[ $pid1 == */systemd ]] || fail "PID 1 is $pid1, not systemd: this test needs qemu/run --init systemd"
ok "PID 1 is $pid1 ($(systemctl --version | sed -n 1p))"
check "multi-user.target is active" [ "$(systemctl is-active multi-user.target)" = active ]
multi=$(prop multi-user.target ActiveEnterTimestampMonotonic)

# modules: ours, loaded by the units (modprobe@dm_crypt_lbs), never stock
modules() {
	check "dm_crypt_lbs is loaded (modprobe@dm_crypt_lbs.service: $(systemctl is-active modprobe@dm_crypt_lbs.service || true))" \
		[ -d /sys/module/dm_crypt_lbs ]
	check "the in-tree dm_crypt is not loaded" [ ! -d /sys/module/dm_crypt ]
	check "the crypt target is 1.30.0 ($(target_version crypt))" [ "$(target_version crypt)" = v1.30.0 ]
	check "dm_crypt_lbs is where DKMS installs it ($(modinfo -n dm_crypt_lbs 2>&1))" \
		[ "$(modinfo -n dm_crypt_lbs 2>&1)" = "/lib/modules/$(uname -r)/updates/dkms/dm-crypt-lbs.ko" ]
}

# volume NAME SECTOR MOUNTPOINT: the volume is open through ours at SECTOR, its
# unit the generator's, its filesystem mounted with the host's token, all before
# multi-user.target was reached
volume() {
	local name=$1 sector=$2 mnt=$3 unit mount table got source rc
	unit="lbscrypt@$(systemd-escape "$name").service"
	mount=$(systemd-escape -p --suffix=mount "$mnt")
	check "$unit is active ($(systemctl is-active "$unit" || true))" [ "$(systemctl is-active "$unit" || true)" = active ]
	check "$unit was made by the generator ($(prop "$unit" FragmentPath))" \
		[ "$(prop "$unit" FragmentPath)" = "/run/systemd/generator/$unit" ]
	table=$(dmsetup table "$name" 2>&1 || true)
	rc=1
	if [[ $table == *" crypt aes-xts-plain64 "*" sector_size:$sector"* ]]; then rc=0; fi
	verdict "$name's table is crypt aes-xts-plain64 with sector_size:$sector ($table)" "$rc"
	check "/dev/mapper/$name is a link udev made to $(dm_blkdev "$name")" \
		[ "$(readlink -f "/dev/mapper/$name")" = "$(dm_blkdev "$name")" ]
	got=$(blockdev --getss "/dev/mapper/$name" 2>&1 || true)
	check "/dev/mapper/$name's logical block size is $sector ($got)" [ "$got" = "$sector" ]
	source=$(findmnt -n -o SOURCE,FSTYPE "$mnt" 2>&1 || true)
	check "$mnt is mounted from /dev/mapper/$name as ext4 ($source)" [ "$source" = "/dev/mapper/$name ext4" ]
	got=$(cat "$mnt/token" 2>&1 || true)
	check "$mnt/token is the host's ('$got')" [ "$got" = "${name#lbs} $token" ]
	local opened mounted
	opened=$(prop "$unit" ActiveEnterTimestampMonotonic)
	mounted=$(prop "$mount" ActiveEnterTimestampMonotonic)
	rc=1
	if [ "$opened" -gt 0 ] && [ "$opened" -le "$mounted" ] && [ "$mounted" -le "$multi" ]; then rc=0; fi
	verdict "$name was open (at ${opened} us) and $mount mounted (at ${mounted} us) before multi-user.target was reached (at ${multi} us)" "$rc"
}

if [ "$late" = 1 ]; then
	# --- the late disk: the boot waited for lbslate, nothing failed
	state=$(timeout 180 systemctl is-system-running --wait || true)
	failed_units=$(systemctl list-units --failed --plain --no-legend | awk '{ print $1 }' | tr '\n' ' ' || true)
	check "no unit failed and the system is 'running' (failed: ${failed_units:-none}; is-system-running: $state)" \
		[ "${failed_units:-none}/$state" = none/running ]
	modules
	want=$(journalctl -b -o cat -u lbs-wantdisk.service 2>&1 || true)
	while IFS= read -r line; do echo "   wantdisk| $line"; done <<<"$want"
	asked=$(cat /run/lbs-test/asked 2>/dev/null || echo 0)
	check "lbs-wantdisk saw lbscrypt@lbslate's start job wait for the key's device job, no disk there, and asked the host (at ${asked} us)" \
		[ "$asked" -gt 0 ]
	keys=$(readlink -f /dev/disk/by-id/virtio-lbskeys 2>&1 || true)
	sys=$(readlink -f "/sys/class/block/${keys#/dev/}" 2>&1 || true)
	echo "   /dev/disk/by-id/virtio-lbskeys: $keys ($sys)"
	rc=1
	if [[ $sys == /sys/devices/*/pci*/virtio*/block/* ]]; then rc=0; fi
	verdict "lbskeys is a PCI virtio disk, the one the host hot-plugged (lbslate's is on virtio-mmio: $(readlink -f "/sys/class/block/$(basename "$(readlink -f /dev/disk/by-id/virtio-lbslate)")"))" "$rc"
	keydev='dev-disk-by\x2did-virtio\x2dlbskeys.device'
	came=$(prop "$keydev" ActiveEnterTimestampMonotonic)
	check "$keydev came after the guest asked for it (at $came us, $(((came - asked) / 1000)) ms after; the host waits 10 s)" \
		[ "$came" -ge $((asked + 10000000)) ]
	unit=lbscrypt@lbslate.service
	began=$(prop "$unit" InactiveExitTimestampMonotonic)
	rc=1
	if [ "$came" -gt 0 ] && [ "$began" -ge "$came" ]; then rc=0; fi
	verdict "$unit's start ran only once the key disk was there (at $began us, after $came us)" "$rc"
	journal=$(journalctl -b -o cat -u "$unit" 2>&1 || true)
	result=$(prop "$unit" Result)
	rc=1
	# (attach warns, as open does, where a power failure can tear a sector: not a failure)
	failures=$(grep -v -F 'a power failure can tear' <<<"$journal" | grep -iE 'fail|timed out' || true)
	if [ "$result" = success ] && [ -z "$failures" ]; then rc=0; fi
	verdict "$unit waited and did not fail: its result is $result, no failure or time-out in its journal${failures:+: $failures}" "$rc"
	# the host made lbslate at this kernel's page size (65536 at most)
	late_ss=$(getconf PAGESIZE)
	[ "$late_ss" -le 65536 ] || late_ss=65536
	volume lbslate "$late_ss" /srv/late
	echo "written through lbslate $token" >/srv/late/written
	sync
	echo "   $(systemd-analyze time 2>&1 | sed -n 1p)"
	journalctl -b -o short-monotonic --no-hostname -u "$unit" -u "$keydev" -u lbs-wantdisk.service -u srv-late.mount 2>&1 |
		tail -n 30 | sed 's/^/   journal| /'
	exit 0
fi

# a nofail volume is not waited for by multi-user.target: wait for the boot's
# last job (lbswrong's) before judging what failed
state=$(timeout 180 systemctl is-system-running --wait || true)
failed_units=$(systemctl list-units --failed --plain --no-legend | awk '{ print $1 }' | tr '\n' ' ' || true)
echo "   system state '$state'; failed units: ${failed_units:-none}"
check "the failed units are lbscrypt@lbsmidway.service and lbscrypt@lbswrong.service (failed: ${failed_units:-none})" \
	[ "$failed_units" = "lbscrypt@lbsmidway.service lbscrypt@lbswrong.service " ]
check "the system is 'degraded' by those failures alone (is-system-running: $state)" [ "$state" = degraded ]
modules

volume lbsdata 65536 /srv/data
volume lbspass 16384 /srv/pass
volume lbsforever 4096 /srv/forever
volume "$long_name" 4096 /srv/long
volume lbsroot 4096 /srv/root
volume lbsesc 4096 /srv/esc
# keys sealed to the TPM (the units load the credentials; systemd-tpm.sh, run
# after this, checks the rest)
volume lbssealed 65536 /srv/sealed
volume lbssealpass 4096 /srv/sealpass

# --- udev's escaped names, swap and tmp from random keys, allow-discards
esc_dev='dev-disk-by\x2dpartlabel-lbsesc\x5cx281\x5cx29.device'
# systemctl show quotes a name with backslashes and doubles them: undone here
esc_bound=$(prop lbscrypt@lbsesc.service BindsTo)
esc_bound=${esc_bound#\"}
esc_bound=${esc_bound%\"}
esc_bound=${esc_bound//\\\\/\\}
check "lbscrypt@lbsesc.service is bound to $esc_dev ($esc_bound)" [ "$esc_bound" = "$esc_dev" ]
check "udev made /dev/disk/by-partlabel/lbsesc\\x281\\x29" [ -b '/dev/disk/by-partlabel/lbsesc\x281\x29' ]
for name in lbsswap lbstmp; do
	check "lbscrypt@$name.service is active ($(systemctl is-active "lbscrypt@$name.service" || true))" \
		[ "$(systemctl is-active "lbscrypt@$name.service" || true)" = active ]
	check "lbscrypt@$name.service formats with systemd-makefs ($(prop "lbscrypt@$name.service" ExecStartPost))" \
		grep -q 'systemd-makefs' <<<"$(prop "lbscrypt@$name.service" ExecStartPost)"
done
swap_table=$(dmsetup table lbsswap 2>&1 || true)
rc=1
if [[ $swap_table == *" allow_discards"* ]]; then rc=0; fi
verdict "lbsswap's table has allow_discards, from allow-discards ($swap_table)" "$rc"
swap_node=$(dm_blkdev lbsswap)
check "lbsswap holds a swap area made at boot ($(blkid -o value -s TYPE "$swap_node" 2>&1 || true))" \
	[ "$(blkid -o value -s TYPE "$swap_node" 2>/dev/null || true)" = swap ]
check "/srv/tmp is lbstmp's ext4, made at boot ($(findmnt -n -o SOURCE,FSTYPE /srv/tmp 2>&1 || true))" \
	[ "$(findmnt -n -o FSTYPE /srv/tmp 2>/dev/null || true)" = ext4 ]
check "/srv/tmp is writable" touch /srv/tmp/written

# --- the units as the generator wrote them
slice_deps=$(prop system-lbscrypt.slice DefaultDependencies)
check "system-lbscrypt.slice has no default dependencies ($slice_deps; $(prop system-lbscrypt.slice FragmentPath))" \
	[ "$slice_deps" = no ]
check "lbscrypt@lbsroot.service runs in system-lbscrypt.slice ($(prop lbscrypt@lbsroot.service Slice))" \
	[ "$(prop lbscrypt@lbsroot.service Slice)" = system-lbscrypt.slice ]
check "lbscrypt@lbsforever.service has no time limit ($(prop lbscrypt@lbsforever.service TimeoutStartUSec))" \
	[ "$(prop lbscrypt@lbsforever.service TimeoutStartUSec)" = infinity ]
check "lbscrypt@lbsforever.service shares the kernel keyring ($(prop lbscrypt@lbsforever.service KeyringMode))" \
	[ "$(prop lbscrypt@lbsforever.service KeyringMode)" = shared ]

# --- timeout=0: the passphrase answered 40 s after it was asked for
late=$(journalctl -b -o cat -u lbs-lateagent.service 2>&1 || true)
while IFS= read -r line; do echo "   lateagent| $line"; done <<<"$late"
check "the late agent answered lbsforever's question" grep -q "askagent: answered 'Passphrase for lbscrypt volume lbsforever" <<<"$late"
started=$(prop lbscrypt@lbsforever.service InactiveExitTimestampMonotonic)
opened=$(prop lbscrypt@lbsforever.service ActiveEnterTimestampMonotonic)
waited=$(((opened - started) / 1000000))
check "lbscrypt@lbsforever waited ${waited} s for its passphrase (at least 40) and did not time out" [ "$waited" -ge 40 ]

# --- the passphrase: asked through systemd-ask-password, answered by the agent
agent=$(journalctl -b -o cat -u lbs-askagent.service 2>&1 || true)
want="askagent: answered 'Passphrase for lbscrypt volume lbspass (/dev/disk/by-id/virtio-lbspass):' (Id=lbscrypt:lbspass)"
check "the agent answered lbspass's question: $(grep -F "answered" <<<"$agent" || echo "no answer in its journal: $agent")" \
	grep -qxF "$want" <<<"$agent"
check "the agent answered once (the first answer was right)" [ "$(grep -c 'askagent: answered' <<<"$agent")" = 1 ]

# --- the wrong key: the unit fails with the check's message, the boot goes on
unit=lbscrypt@lbswrong.service
check "$unit failed ($(systemctl is-failed "$unit" || true))" [ "$(systemctl is-failed "$unit" || true)" = failed ]
msg=$(journalctl -b -o cat -u "$unit" 2>&1 | grep 'lbswrong: check' || true)
echo "   $unit's journal: $msg"
want='^lbscrypt: lbswrong: check blkid found no known content on /dev/dm-[0-9]+ [(]exit status [0-9]+[)]: a wrong key or passphrase[?] The mapping was closed[.]$'
rc=1
if [[ $msg =~ $want ]]; then rc=0; fi
verdict "its message says the check found nothing, a wrong key, and the mapping closed" "$rc"
rc=0
dmsetup info lbswrong >/dev/null 2>&1 || rc=1
check "its mapping is gone" [ "$rc" = 1 ]
rc=0
findmnt /srv/wrong >/dev/null || rc=1
check "/srv/wrong (nofail) is not mounted (srv-wrong.mount: $(systemctl is-active srv-wrong.mount || true))" [ "$rc" = 1 ]

# --- a volume mid-way through lbscrypt reencrypt: the generator makes its
# unit, attach refuses it naming the run, the boot goes on (the other volumes
# were checked above)
unit=lbscrypt@lbsmidway.service
midway_state=/var/lib/lbscrypt/lbsmidway.state
filed=$(journalctl -b -o cat -u lbs-midway.service 2>&1 | grep '^lbs-midway: filed' || true)
echo "   lbs-midway.service: ${filed:-nothing filed}"
entered=$(prop lbs-midway.service ActiveEnterTimestampMonotonic)
started=$(prop "$unit" InactiveExitTimestampMonotonic)
rc=1
if [ -n "$filed" ] && [ "$entered" -gt 0 ] && [ "$entered" -le "$started" ]; then rc=0; fi
verdict "lbs-midway.service filed the registry entry (at $entered us) before $unit started (at $started us)" "$rc"
check "$unit was made by the generator ($(prop "$unit" FragmentPath))" \
	[ "$(prop "$unit" FragmentPath)" = "/run/systemd/generator/$unit" ]
check "$unit failed ($(systemctl is-failed "$unit" || true))" [ "$(systemctl is-failed "$unit" || true)" = failed ]
msg=$(journalctl -b -o cat -u "$unit" 2>&1 | grep 'is being reencrypted' || true)
echo "   $unit's journal: $msg"
want="lbscrypt: /dev/disk/by-id/virtio-lbsmidway is being reencrypted (state $midway_state): finish with 'lbscrypt reencrypt --resume --state $midway_state ...' before opening it"
check "its journal has attach's refusal, naming the state file and the command to finish" [ "$msg" = "$want" ]
rc=0
dmsetup info lbsmidway >/dev/null 2>&1 || rc=1
check "it made no mapping" [ "$rc" = 1 ]
# the entry was filed after the generator ran: run it again with the entry in
# place, as after a reboot mid-way; it writes the same unit
gen=$(mktemp -d)
rc=0
/usr/lib/systemd/system-generators/lbscrypt-generator "$gen" "$gen" "$gen" 2>"$gen.err" || rc=$?
check "the generator run again with the entry in place exits 0 ($rc: $(cat "$gen.err"))" [ "$rc" = 0 ]
check "and writes the same $unit as at boot" cmp -s "$gen/$unit" "/run/systemd/generator/$unit"
rm -rf "$gen" "$gen.err"

# --- a write for the host to read back after the shutdown, and a stop by hand
echo "written through lbsdata $token" >/srv/data/written
sync
systemctl stop srv-pass.mount lbscrypt@lbspass.service || soft_fail "systemctl stop srv-pass.mount lbscrypt@lbspass.service failed"
rc=1
if ! dmsetup info lbspass >/dev/null 2>&1 && [ ! -e /dev/mapper/lbspass ]; then rc=0; fi
verdict "systemctl stop closes lbspass (its unit $(systemctl is-active lbscrypt@lbspass.service || true), no mapping, no /dev/mapper/lbspass)" "$rc"
echo "   lbsdata is left open: the shutdown closes it"

# --- for the log: the boot's time and what the volumes' units said
echo "   $(systemd-analyze time 2>&1 | sed -n 1p)"
journalctl -b -o short-monotonic --no-hostname -u 'lbscrypt@*' -u lbs-askagent.service 2>&1 |
	tail -n 40 | sed 's/^/   journal| /'
