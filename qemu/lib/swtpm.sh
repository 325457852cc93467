# shellcheck shell=bash
# The rig's software TPM 2.0: swtpm (Debian's package) beside qemu, for qemu/run
# --tpm STATE_DIR and the boot checks, or alone on the host for the checks to
# seal and unseal with systemd-creds. Source it after qemu/lib/common.sh.
#
# A TPM's state directory holds what survives a power cycle: its seeds (what a
# sealed credential is bound to) and its NV storage. swtpm makes a fresh TPM
# there the first time (tpm2-00.permall) and reuses it after, so a key sealed in
# one boot opens in the next, and a new directory is a new TPM that refuses it.
# One swtpm at a time per directory: swtpm locks it as its TPM comes up (a
# second one on the host fails to start, saying so; beside qemu, that qemu fails
# as it starts).

# swtpm_pid: the swtpm swtpm_start started, until swtpm_stop
swtpm_pid=''

# swtpm_start STATE_DIR SOCKET [host]: start swtpm on STATE_DIR (made when
# missing) in the background. For qemu (the default) SOCKET is its control
# channel, qemu's "-chardev socket" (swtpm_qemu_args), and swtpm ends when qemu
# closes it (--terminate). With "host", a TPM the host's programs reach through
# the tcti "swtpm:path=SOCKET" (commands on SOCKET, control on SOCKET.ctrl),
# started up (TPM2_Startup) at once. Its messages go to SOCKET.log. Returns once
# the sockets are there; fails in one line, with swtpm's own, when it could not
# start. A unix socket's path is at most 107 bytes: keep SOCKET short.
swtpm_start() {
	local state=$1 sock=$2 mode=${3:-qemu} i
	local -a args
	command -v swtpm >/dev/null || fail "swtpm is missing (Debian's package swtpm); run 'make deps'"
	[ "${#sock}" -le 100 ] || fail "the TPM's socket path $sock is longer than a unix socket takes"
	[[ $state != *,* ]] || fail "the TPM state directory $state has a ',' (swtpm's options take none)"
	mkdir -p "$state" 2>/dev/null || fail "cannot make the TPM state directory $state"
	if [ ! -d "$state" ] || [ ! -w "$state" ]; then
		fail "the TPM state directory $state is not a writable directory"
	fi
	rm -f "$sock" "$sock.ctrl"
	args=(socket --tpm2 --tpmstate "dir=$state")
	if [ "$mode" = host ]; then
		# shellcheck disable=SC2054 # the commas belong to swtpm's options
		args+=(--server "type=unixio,path=$sock" --ctrl "type=unixio,path=$sock.ctrl"
			--flags not-need-init,startup-clear)
	else
		args+=(--ctrl "type=unixio,path=$sock" --terminate)
	fi
	swtpm "${args[@]}" </dev/null >/dev/null 2>"$sock.log" &
	swtpm_pid=$!
	for ((i = 0; i < 50; i++)); do
		if [ -S "$sock" ] && { [ "$mode" != host ] || [ -S "$sock.ctrl" ]; }; then
			return 0
		fi
		if ! kill -0 "$swtpm_pid" 2>/dev/null; then
			wait "$swtpm_pid" 2>/dev/null || true
			swtpm_pid=''
			fail "swtpm did not start on $state: $(tr '\n' ' ' <"$sock.log")"
		fi
		sleep 0.1
	done
	swtpm_stop
	fail "swtpm made no socket $sock within 5 s: $(tr '\n' ' ' <"$sock.log")"
}

# swtpm_stop: end the swtpm swtpm_start started (gone already when qemu ended)
swtpm_stop() {
	[ -n "$swtpm_pid" ] || return 0
	kill "$swtpm_pid" 2>/dev/null || true
	wait "$swtpm_pid" 2>/dev/null || true
	swtpm_pid=''
}

# swtpm_qemu_args ARCH SOCKET: sets swtpm_qemu to qemu's options for a TPM 2.0
# on the swtpm of control channel SOCKET: an MMIO TIS on arm64's virt machine
# (tpm-tis-device, which qemu describes in the device tree it makes for a direct
# kernel boot), the ISA TIS on amd64's pc (in its ACPI tables)
# shellcheck disable=SC2034 # read by the caller
swtpm_qemu=()
swtpm_qemu_args() {
	local dev=tpm-tis
	[ "$1" != arm64 ] || dev=tpm-tis-device
	# shellcheck disable=SC2054,SC2034 # the commas belong to qemu's options; read by the caller
	swtpm_qemu=(-chardev "socket,id=chrtpm,path=$2" -tpmdev emulator,id=tpm0,chardev=chrtpm
		-device "$dev,tpmdev=tpm0")
}

# swtpm_creds STATE_DIR systemd-creds ARGS...: systemd-creds ARGS run on the host
# against the TPM of STATE_DIR (a swtpm of its own for the one command: the host
# reaches it without a resource manager, so a command that fails may leave
# sessions behind that the next would run out of). The tcti goes in as
# --tpm2-device=swtpm:path=..., which systemd-creds 252 loads
# (libtss2-tcti-swtpm.so.0, package libtss2-tcti-swtpm0). Its status is
# systemd-creds's.
swtpm_creds() {
	local state=$1 dir rc=0
	shift 2
	dir=$(mktemp -d /tmp/lbs-tpm.XXXXXX)
	swtpm_start "$state" "$dir/tpm" host
	systemd-creds "$@" --tpm2-device="swtpm:path=$dir/tpm" || rc=$?
	local said
	said=$(swtpm_shutdown "$dir/tpm")
	swtpm_stop
	rm -rf "$dir"
	[ "$said" = 80010000000a00000000 ] || fail "swtpm did not take TPM2_Shutdown on $state: $(tr '\n' ' ' <<<"$said")"
	return "$rc"
}

# swtpm_shutdown SOCKET: TPM2_Shutdown(TPM_SU_CLEAR) sent on the command socket
# of a host swtpm, as a kernel sends it when the machine powers off. A TPM
# stopped without it counts the stop as a possible attack (TPM2's dictionary
# attack protection), and a few such stops of a state lock it out: systemd-creds
# then fails with "TPM2 device is in dictionary attack lockout mode". Prints
# the TPM's reply in hex (80010000000a00000000: success) or what went wrong.
swtpm_shutdown() {
	python3 - "$1" <<'PY' 2>&1 || true
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
# tag TPM_ST_NO_SESSIONS, size 12, TPM_CC_Shutdown, TPM_SU_CLEAR
s.sendall(bytes.fromhex("80010000000c000001450000"))
reply = b""
while len(reply) < 10:
    part = s.recv(10 - len(reply))
    if not part:
        break
    reply += part
print(reply.hex())
PY
}

# swtpm_seal STATE_DIR PCRS NAME IN OUT: IN sealed to the TPM of STATE_DIR alone
# (--with-key=tpm2) and PCRS (systemd-creds' --tpm2-pcrs=, e.g. 7 or 7+15), as
# the credential NAME, into OUT; what `lbscrypt seal` makes on a machine with
# that TPM
swtpm_seal() {
	swtpm_creds "$1" systemd-creds encrypt --with-key=tpm2 --tpm2-pcrs="$2" --name="$3" "$4" "$5"
}
