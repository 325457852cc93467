#!/bin/bash
# DESCRIPTION: the guest half of tests/systemd-check's sealed keys: seal, reencrypt, refuse on a changed PCR, ask instead
#
# systemd-tpm.sh TOKEN: the guest half of tests/systemd-check's sealed keys, run
# after systemd-boot.sh in its first boot. The guest has a TPM 2.0 (qemu/run
# --tpm: swtpm, tpm-tis-device) and two volumes whose keys the host sealed to it
# (systemd-creds through swtpm, --with-key=tpm2, PCR 7: zero on a direct kernel
# boot without firmware, here as on the host): lbssealed, a 64-byte key, sector
# size 65536, and lbssealpass, a passphrase (x-lbscrypt.sealed=passphrase),
# both opened at boot by the generator's units and mounted, which
# systemd-boot.sh checked. Here:
#   - the TPM is there (/dev/tpmrm0, version 2) and the generator's unit loads
#     lbssealed's credential (LoadCredentialEncrypted=NAME:PATH), not
#     lbssealpass's (systemd would fail that unit on a refusal before attach
#     could ask); what systemd handed lbscrypt@lbssealed, where it is still
#     there, is on a ramfs, not a disk;
#   - lbscrypt seal seals a fresh random 64-byte key for lbsnew (a third disk,
#     sector size 65536) to PCR 7, warning that PCR 7 was never extended; its
#     line added to /etc/lbscrypttab and the units made again, lbsnew opens; a
#     token written through it reads back after a close and an open (the key
#     unsealed again is the same); the credential goes to lbssealed's
#     filesystem, where the host finds it after the shutdown, unseals it with
#     the same TPM state and searches the disks for the key;
#   - lbscrypt reencrypt --tpm2-credential --new-tpm2-credential --update-tab
#     moves lbsnew to a second fresh key sealed with seal --name lbsnew: the
#     run ends (its state file and journal on lbssealed's filesystem gone),
#     the new credential is renamed over the line's, the unit opens lbsnew
#     with it and the token reads back; the first credential goes to
#     lbssealed's filesystem too, for the host, which unseals both, reads the
#     disk with the new key and searches lbssealed's decrypted filesystem
#     (where the state file and journal were) for both keys and the token;
#   - PCR 7 extended (tpm2_pcrextend): lbssealed and lbsnew no longer open,
#     their units failed with a line on the TPM's refusal, no mapping made;
#   - lbssealpass after the same: the TPM refuses, the passphrase is asked for
#     through systemd-ask-password instead and an agent (askagent) answers; the
#     volume opens and mounts with the host's token.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/../common/lib.sh"

[ $# -eq 1 ] || fail "usage: systemd-tpm.sh TOKEN"
token=$1
# lbscrypt seal, its options spelled here alone: PCR 7, a fresh random key of
# 64 bytes (size=512 of aes-xts-plain64), the credential's path last
SEAL=(lbscrypt seal --tpm2-pcrs=7 --random 64)
creds=/etc/lbscrypt/creds
export TPM2TOOLS_TCTI=device:/dev/tpmrm0

# result WHAT STATUS: ok when STATUS is 0, else a soft failure naming WHAT
result() {
	if [ "$2" = 0 ]; then ok "$1"; else soft_fail "$1"; fi
}
# is WHAT WANT GOT: ok when GOT is WANT
is() {
	local rc=1
	[ "$3" != "$2" ] || rc=0
	result "$1 ($3)" "$rc"
}
# journal_since SECONDS UNIT: the unit's journal since that time (epoch)
journal_since() {
	journalctl -b -o cat --since "@$1" -u "$2" 2>&1 || true
}
# show PREFIX TEXT: TEXT for the log, each line after PREFIX
show() {
	local line
	while IFS= read -r line; do echo "   $1| $line"; done <<<"$2"
}
# mapped NAME: there is a device-mapper device NAME
mapped() {
	dmsetup info "$1" >/dev/null 2>&1
}

pid1=$(readlink /proc/1/exe)
[[ $pid1 == */systemd ]] || fail "PID 1 is $pid1, not systemd: this test needs qemu/run --init systemd"

# --- the TPM and the units the generator wrote for the sealed keys
is "the guest has a TPM: /dev/tpmrm0 is a character device" yes "$([ -c /dev/tpmrm0 ] && echo yes || echo no)"
is "a TPM 2.0 (tpm_version_major)" 2 "$(cat /sys/class/tpm/tpm0/tpm_version_major 2>&1 || true)"
echo "   systemd-creds has-tpm2: $(systemd-creds has-tpm2 2>&1 | tr '\n' ' ' || true)"
for name in lbssealed lbssealpass; do
	unit=lbscrypt@$name.service
	file=$(systemctl show -P FragmentPath "$unit")
	line=$(grep '^LoadCredentialEncrypted=' "$file" 2>&1 || true)
	if [ "$name" = lbssealed ]; then
		is "$unit ($file) loads its credential" "LoadCredentialEncrypted=$name:$creds/$name.cred" "$line"
	else
		# a refused credential fails the unit before attach could ask: attach unseals it
		is "$unit ($file) loads no credential (attach unseals the passphrase, and asks when the TPM refuses)" "" "$line"
	fi
done
dir=/run/credentials/lbscrypt@lbssealed.service
if [ -d "$dir" ]; then
	is "what systemd handed lbscrypt@lbssealed ($dir) is on a ramfs" ramfs "$(findmnt -n -o FSTYPE "$dir" 2>&1 || true)"
else
	echo "   $dir is gone (attach is done): nothing of the key left there"
fi

# --- lbscrypt seal: a fresh key for lbsnew, opened by the unit the generator makes
rc=0
said=$("${SEAL[@]}" "$creds/lbsnew.cred" 2>&1) || rc=$?
echo "   ${SEAL[*]} $creds/lbsnew.cred: exit $rc: $said"
result "lbscrypt seal made $creds/lbsnew.cred (exit $rc)" "$([ "$rc" = 0 ] && [ -s "$creds/lbsnew.cred" ] && echo 0 || echo 1)"
is "... a credential sealed to the TPM2 alone (systemd's id 0c7cc07b... at its head)" DHzAexF2RZGcSwvqCLwg/ \
	"$(head -c 21 "$creds/lbsnew.cred" 2>&1 || true)"
# (the tool's own warning, or systemd-creds 252's "... PCR policy effectively
# unenforced!" passed on)
rc=1
if grep -q 'PCR' <<<"$said" && grep -qiE 'warning|unenforced|never extended|all zero' <<<"$said"; then rc=0; fi
result "... warning that the PCR it seals to was never extended (all zero here): '$said'" "$rc"
printf 'lbsnew /dev/disk/by-id/virtio-lbsnew %s cipher=aes-xts-plain64,size=512,sector-size=65536,tpm2-device=auto,noauto\n' \
	"$creds/lbsnew.cred" >>/etc/lbscrypttab
systemctl daemon-reload
rc=0
systemctl start lbscrypt@lbsnew.service || rc=$?
is "lbscrypt@lbsnew.service, the generator's unit for the new line, starts" 0 "$rc"
table=$(dmsetup table lbsnew 2>&1 || true)
rc=1
if [[ $table == *" crypt aes-xts-plain64 "*" sector_size:65536"* ]]; then rc=0; fi
result "lbsnew's table is crypt aes-xts-plain64 with sector_size:65536 ($table)" "$rc"
printf 'new %s\n' "$token" | dd of=/dev/mapper/lbsnew bs=65536 count=1 conv=sync oflag=direct status=none ||
	soft_fail "writing a token through lbsnew failed"
systemctl stop lbscrypt@lbsnew.service || soft_fail "systemctl stop lbscrypt@lbsnew.service failed"
is "stopping its unit closes lbsnew" no "$(mapped lbsnew && echo yes || echo no)"
systemctl start lbscrypt@lbsnew.service || soft_fail "systemctl start lbscrypt@lbsnew.service failed the second time"
got=$(dd if=/dev/mapper/lbsnew bs=65536 count=1 iflag=direct status=none 2>/dev/null | head -n 1 | tr -d '\0' || true)
is "opened again (its key unsealed again), lbsnew reads back the token written before" "new $token" "$got"
systemctl stop lbscrypt@lbsnew.service || soft_fail "systemctl stop lbscrypt@lbsnew.service failed"

# --- reencrypt lbsnew to a fresh key sealed before the run (lbscrypt seal
# --name lbsnew), the new credential renamed over the line's at the switch; the
# state file and its journal on lbssealed's filesystem, which the host searches
# for both clear keys and the token after the shutdown
if ! cp "$creds/lbsnew.cred" /srv/sealed/lbsnew.old.cred; then
	soft_fail "copying lbsnew's first credential to /srv/sealed failed"
fi
rc=0
said=$("${SEAL[@]}" --name lbsnew "$creds/lbsnew.new.cred" 2>&1) || rc=$?
echo "   ${SEAL[*]} --name lbsnew $creds/lbsnew.new.cred: exit $rc: $said"
result "lbscrypt seal --name lbsnew sealed the new key beside the line's credential (exit $rc)" \
	"$([ "$rc" = 0 ] && [ -s "$creds/lbsnew.new.cred" ] && echo 0 || echo 1)"
state=/srv/sealed/lbsnew.state
rc=0
lbscrypt reencrypt --tpm2-credential "$creds/lbsnew.cred" --new-tpm2-credential "$creds/lbsnew.new.cred" \
	--update-tab --force -c aes-xts-plain64 -s 512 --sector-size 65536 --hotzone-size 1048576 \
	--pbkdf-force-iterations 1000 --state "$state" /dev/disk/by-id/virtio-lbsnew >/tmp/reencrypt-lbsnew.log 2>&1 || rc=$?
show reencrypt "$(cat /tmp/reencrypt-lbsnew.log)"
is "lbscrypt reencrypt of lbsnew from its sealed key to the new sealed one, --update-tab (exit)" 0 "$rc"
is "... the new credential is renamed over the line's: $creds/lbsnew.new.cred is gone" no \
	"$([ -e "$creds/lbsnew.new.cred" ] && echo yes || echo no)"
is "... $creds/lbsnew.cred is no longer the first credential" differ \
	"$(cmp -s "$creds/lbsnew.cred" /srv/sealed/lbsnew.old.cred && echo same || echo differ)"
is "... the state file and its journal are gone at the end" "no no" \
	"$([ -e "$state" ] && echo yes || echo no) $([ -e "$state.journal" ] && echo yes || echo no)"
is "... the line still names $creds/lbsnew.cred with tpm2-device=auto" 1 \
	"$(grep -c "^lbsnew [^ ]* $creds/lbsnew.cred [^ ]*tpm2-device=auto" /etc/lbscrypttab || true)"
systemctl daemon-reload
rc=0
systemctl start lbscrypt@lbsnew.service || rc=$?
is "lbscrypt@lbsnew.service starts with the line's credential, now the new key" 0 "$rc"
got=$(dd if=/dev/mapper/lbsnew bs=65536 count=1 iflag=direct status=none 2>/dev/null | head -n 1 | tr -d '\0' || true)
is "lbsnew reencrypted reads back the token written under the first key" "new $token" "$got"
systemctl stop lbscrypt@lbsnew.service || soft_fail "systemctl stop lbscrypt@lbsnew.service failed"
# for the host: lbsnew's credential, sealed, on lbssealed's filesystem
if ! cp "$creds/lbsnew.cred" /srv/sealed/lbsnew.cred || ! sync; then
	soft_fail "copying lbsnew's credential to /srv/sealed failed"
fi

# --- PCR 7 changed: the TPM no longer unseals what was sealed to it
before=$(tpm2_pcrread sha256:7 2>&1 | tr -d ' \n' || true)
tpm2_pcrextend "7:sha256=$(printf '%063d1' 0)" || soft_fail "tpm2_pcrextend 7 failed"
after=$(tpm2_pcrread sha256:7 2>&1 | tr -d ' \n' || true)
echo "   PCR 7 before: $before; after: $after"
rc=1
if [ -n "$after" ] && [ "$before" != "$after" ] && [[ $after == *0x* ]]; then rc=0; fi
result "tpm2_pcrextend changed PCR 7" "$rc"
systemctl stop srv-sealed.mount || soft_fail "systemctl stop srv-sealed.mount failed"
systemctl stop lbscrypt@lbssealed.service || soft_fail "systemctl stop lbscrypt@lbssealed.service failed"
for name in lbssealed lbsnew; do
	unit=lbscrypt@$name.service
	since=$(date +%s)
	sleep 1
	rc=0
	systemctl start "$unit" 2>/dev/null || rc=$?
	result "$unit does not start with PCR 7 changed (systemctl start exits $rc)" "$([ "$rc" != 0 ] && echo 0 || echo 1)"
	is "$unit failed" failed "$(systemctl is-failed "$unit" || true)"
	is "$name made no mapping" no "$(mapped "$name" && echo yes || echo no)"
	journal=$(journal_since "$since" "$unit")
	show journal "$journal"
	why=$(grep -iE 'tpm|pcr|policy' <<<"$journal" || true)
	rc=1
	[ -z "$why" ] || rc=0
	result "$unit's journal says the TPM refused, and why: ${why:-nothing of the TPM}" "$rc"
done

# --- the sealed passphrase: the TPM refuses, the passphrase is asked for instead
systemctl stop srv-sealpass.mount lbscrypt@lbssealpass.service ||
	soft_fail "systemctl stop srv-sealpass.mount lbscrypt@lbssealpass.service failed"
systemd-run --quiet --unit=lbs-sealagent /lbs/bin/askagent lbscrypt:lbssealpass /etc/lbs-test/sealpass ||
	soft_fail "starting the password agent for lbssealpass failed"
since=$(date +%s)
sleep 1
rc=0
timeout 120 systemctl start lbscrypt@lbssealpass.service || rc=$?
is "lbscrypt@lbssealpass.service, its TPM refusing, starts with the passphrase asked for" 0 "$rc"
agent=$(journalctl -b -o cat -u lbs-sealagent.service 2>&1 || true)
show agent "$agent"
rc=1
if grep -q "^askagent: answered '.*lbssealpass.*' (Id=lbscrypt:lbssealpass)$" <<<"$agent"; then rc=0; fi
result "the passphrase was asked for through systemd-ask-password (Id=lbscrypt:lbssealpass) and the agent answered" "$rc"
journal=$(journal_since "$since" lbscrypt@lbssealpass.service)
show journal "$journal"
rc=1
if grep -qiE 'tpm|pcr|policy' <<<"$journal"; then rc=0; fi
result "lbscrypt@lbssealpass's journal says the TPM refused before it asked" "$rc"
systemctl start srv-sealpass.mount || soft_fail "systemctl start srv-sealpass.mount failed"
is "/srv/sealpass is lbssealpass's ext4 with the host's token" "sealpass $token" "$(cat /srv/sealpass/token 2>&1 || true)"
systemctl stop lbs-sealagent.service 2>/dev/null || true
exit 0
