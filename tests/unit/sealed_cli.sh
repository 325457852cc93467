#!/bin/bash
# sealed_cli.sh LBSCRYPT KEYFILE: the binary's seal and --tpm2-credential with a fake
# systemd-creds first in PATH, the real fork, exec and pipes: the secret reaches systemd-creds
# on its standard input (never a file the tool wrote), the argv is the documented one, the PCR
# warning is given from a fake sysfs, and an unsealed key comes back through the pipe (table
# prints it). The fake keeps what it read in its own directory, as a TPM would keep nothing.
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: sealed_cli.sh LBSCRYPT KEYFILE" >&2; exit 2; }
tool=$(realpath "$1") keyfile=$(realpath "$2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir -p "$work/bin" "$work/dev" "$work/sys/class/tpm/tpm0/pcr-sha256" "$work/etc"
: >"$work/dev/tpmrm0"
printf '%064d\n' 0 >"$work/sys/class/tpm/tpm0/pcr-sha256/7"
# encrypt: keeps its argv and standard input; decrypt: gives back $FAKE_SECRET, or refuses
# as systemd-creds does when FAKE_REFUSE is set.
cat >"$work/bin/systemd-creds" <<'FAKE'
#!/bin/bash
set -euo pipefail
here=$(dirname "$0")
printf '%s\n' "$@" >"$here/argv"
case $1 in
encrypt) cat >"$here/stdin"; printf 'sealed\n' >"${!#}" ;;
decrypt)
	if [ -n "${FAKE_REFUSE:-}" ]; then
		echo "Failed to unseal secret using TPM2: State not recoverable" >&2
		echo "a second line" >&2
		exit 1
	fi
	cat "$FAKE_SECRET" ;;
esac
FAKE
chmod +x "$work/bin/systemd-creds"
export PATH="$work/bin:$PATH"

# seal --key-file: the key's bytes on the pipe, the documented argv, two warning lines:
# the unextended PCR, and the key file's clear copies.
"$tool" seal --sysfs "$work/sys" --dev "$work/dev" --key-file "$keyfile" "$work/etc/data.cred" \
	>"$work/out" 2>"$work/err" || fail "seal exited $?: $(cat "$work/err")"
cmp "$keyfile" "$work/bin/stdin" || fail "systemd-creds did not read the key file's bytes"
printf '%s\n' encrypt --with-key=tpm2 --tpm2-pcrs=7 --name=data - "$work/etc/data.cred" |
	cmp - "$work/bin/argv" || fail "argv: $(cat "$work/bin/argv")"
[ "$(head -n 1 "$work/err")" = "lbscrypt: warning: PCR 7 was never extended: a policy on it protects nothing" ] ||
	fail "stderr: $(cat "$work/err")"
second=$(sed -n 2p "$work/err")
case $second in
"lbscrypt: warning: $keyfile still holds the key in the clear"*) ;;
*) fail "stderr: $(cat "$work/err")" ;;
esac
[ "$(wc -l <"$work/err")" -eq 2 ] || fail "stderr: $(cat "$work/err")"
files() { (cd "$work/etc" && printf '%s ' *); }
[ "$(files)" = "data.cred " ] || fail "files beside the credential: $(files)"

# seal --random: 64 fresh bytes, and nothing but the credential written.
"$tool" seal -q --sysfs "$work/sys" --dev "$work/dev" --random 64 "$work/etc/fresh.cred" >/dev/null
[ "$(stat -c %s "$work/bin/stdin")" = 64 ] || fail "--random 64 gave $(stat -c %s "$work/bin/stdin") bytes"
! cmp -s "$keyfile" "$work/bin/stdin" || fail "--random gave the key file's bytes"
[ "$(files)" = "data.cred fresh.cred " ] || fail "files: $(files)"

# no TPM2: exit 4, one line, systemd-creds never run.
rm "$work/bin/argv"
rc=0
"$tool" seal --sysfs "$work/sys" --dev "$work/etc" --random 64 "$work/etc/none.cred" 2>"$work/err" || rc=$?
if ! { [ "$rc" = 4 ] && [ "$(wc -l <"$work/err")" = 1 ] && [ ! -e "$work/bin/argv" ] &&
	[ ! -e "$work/etc/none.cred" ]; }; then
	fail "no TPM2: exit $rc, $(cat "$work/err")"
fi

# --tpm2-credential: the key comes back through the pipe (table prints it).
export FAKE_SECRET=$keyfile
line=$("$tool" table --assume-version 1.30.0 --assume-page-size 4096 --size 8 \
	--tpm2-credential "$work/etc/data.cred" /dev/vdb)
[ "$line" = "0 8 crypt aes-xts-plain64 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f 0 /dev/vdb 0" ] ||
	fail "table: $line"
printf '%s\n' decrypt --name=data "$work/etc/data.cred" - | cmp - "$work/bin/argv" ||
	fail "decrypt argv: $(cat "$work/bin/argv")"

# The TPM refuses: one line with systemd-creds' first, exit 1, no table.
rc=0
FAKE_REFUSE=1 "$tool" table --assume-version 1.30.0 --assume-page-size 4096 --size 8 \
	--tpm2-credential "$work/etc/data.cred" /dev/vdb >"$work/out" 2>"$work/err" || rc=$?
if ! { [ "$rc" = 1 ] && [ ! -s "$work/out" ]; }; then
	fail "refused: exit $rc, out $(cat "$work/out")"
fi
[ "$(cat "$work/err")" = "lbscrypt: the TPM2 did not unseal $work/etc/data.cred (credential data): systemd-creds: Failed to unseal secret using TPM2: State not recoverable" ] ||
	fail "refused: $(cat "$work/err")"
# seal --name: sealed under the name of the line's credential it will replace; a name
# systemd-creds would refuse is refused in one line, systemd-creds never run.
"$tool" seal -q --sysfs "$work/sys" --dev "$work/dev" --random 64 --name data \
	"$work/etc/data.new.cred" >"$work/out"
printf '%s\n' encrypt --with-key=tpm2 --tpm2-pcrs=7 --name=data - "$work/etc/data.new.cred" |
	cmp - "$work/bin/argv" || fail "--name argv: $(cat "$work/bin/argv")"
grep -q "as credential data, not its file's name: it unseals once renamed to $work/etc/data.cred " \
	"$work/out" || fail "--name: $(cat "$work/out")"
rm "$work/bin/argv"
rc=0
"$tool" seal --sysfs "$work/sys" --dev "$work/dev" --random 64 --name a/b \
	"$work/etc/odd.cred" 2>"$work/err" || rc=$?
if ! { [ "$rc" = 1 ] && [ "$(wc -l <"$work/err")" = 1 ] && [ ! -e "$work/bin/argv" ] &&
	[ ! -e "$work/etc/odd.cred" ]; }; then
	fail "--name a/b: exit $rc, $(cat "$work/err")"
fi
echo "seal and --tpm2-credential through a fake systemd-creds: as documented"
