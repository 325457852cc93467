# shellcheck shell=bash
# DESCRIPTION: the helpers every guest test sources (the framework's API)
#
# common/lib.sh: the shared helpers of the guest tests (run inside a rig guest
# by qemu/run), and of the guest halves and bench/guest's scripts. Source it
# after `set -euo pipefail`. It prints the environment first, as every guest
# log must start with uname -r and dmsetup targets.
#
# The framework's API, what a test may call or read (each is described where
# it is defined, below):
#   verdicts   fail MSG, soft_fail MSG (LBS_FAILS counts them), ok MSG; a
#              skipped case prints "LBS-SKIP <test>: <why>" (skip_lacking)
#   needs      require WORD... (lib.sh runs it on the header's NEEDS when
#              sourced), have_need WORD, skip_lacking WORD WHAT [WHY];
#              need_met WORD and the checks under it: have_module NAME,
#              have_program NAME, have_file PATTERN, have_fs NAME
#              (LBS_NEED_WHY: what is missing)
#   cleanup    on_exit CMD..., dm_remove NAME, unload_engine, stop_fio
#              (fio_pid), loop_attach VAR FILE, state_fs DIR SIZE
#   devices    dm_blkdev, target_version, ti_error, refuses_einval, lbsize,
#              io_bs, sha_of, put, raw_views, seg_sums, scsi_debug_disk
#              (SD_DISK), page_size, bound, sizes_upto
#   data       test_key, test_key_file, pattern, plain_fill
#   fio        fio_clean, fio_ok, bench_job, fio_bytes
#   engine     load_engine [PARAM=VALUE...], LBS_ENGINE_KO
#   ciphers    cryptd_spec
#   reencrypt  run_alive, run_wait_until, reenc_private, reenc_both_private,
#              run_in_io_on (RUN_PID, RUN_LOG: the test's)
#   the test   LBS_TEST (its name, as FAIL lines give it; LBS_TEST_NAME
#              before sourcing names a wrapper's)
# The rest (LBS_CLEANUPS, LBS_ENGINE_LOADED, LBS_LACKING, LBS_LACK_SAID,
# LBS_TEST_FILE, lbs_*) is the framework's own: a test neither calls nor sets
# it. A helper only some tests share goes into a file of its own here
# (reencrypt-replay.sh).

LBS_TEST=${LBS_TEST_NAME:-${0##*/}}	# a wrapper names the test it runs as
LBS_TEST_FILE=$LBS_TEST	# the file whose header says its needs (no process: TCG)
[[ $0 != */* ]] || LBS_TEST_FILE=${0%/*}/$LBS_TEST
LBS_CLEANUPS=()
LBS_LACKING=()	# the needs this test runs without (MAY-LACK here)
LBS_LACK_SAID=()	# those skip_lacking reported a skip for
LBS_ENGINE_LOADED=0	# load_engine ran: unload it after the cleanups

# fail MSG: say what was checked and why it failed, with a call trace, clean up, exit 1.
fail() {
	local i
	printf 'FAIL %s: %s\n' "$LBS_TEST" "$*"
	for ((i = 1; i < ${#FUNCNAME[@]}; i++)); do
		printf '  at %s (%s:%s)\n' "${FUNCNAME[$i]}" "${BASH_SOURCE[$i]##*/}" "${BASH_LINENO[$((i - 1))]}"
	done
	exit 1
}

# on_exit CMD...: run CMD at exit (last registered first). Cleanups must be safe
# to run twice and when the thing they undo was never made.
on_exit() {
	LBS_CLEANUPS+=("$(printf '%q ' "$@")")
}

# soft_fail MSG: report a failed check and go on with the next one; the test
# then exits 1 (for lists of independent cases, so one run shows every failure).
LBS_FAILS=0
soft_fail() {
	printf 'FAIL %s: %s\n' "$LBS_TEST" "$*"
	LBS_FAILS=$((LBS_FAILS + 1))
}

# lbs_run_cleanups: the EXIT trap: the cleanups, last first, then the engine;
# a test with soft failures exits 1.
lbs_run_cleanups() {
	local rc=$? i
	for ((i = ${#LBS_CLEANUPS[@]} - 1; i >= 0; i--)); do
		eval "${LBS_CLEANUPS[$i]}" >/dev/null 2>&1 || true
	done
	[ "$LBS_ENGINE_LOADED" = 0 ] || unload_engine >/dev/null 2>&1 || true
	if [ "$LBS_FAILS" -gt 0 ]; then
		printf 'FAIL %s: %s failed checks\n' "$LBS_TEST" "$LBS_FAILS"
		rc=1
	fi
	# a need this kernel may lack and lacks: the test must have said what it
	# skipped for it, or the need was silently ignored
	for i in "${LBS_LACKING[@]}"; do
		[ "$rc" = 0 ] || break
		[[ " ${LBS_LACK_SAID[*]} " == *" $i "* ]] && continue
		printf 'FAIL %s: this kernel lacks %s (its NEEDS), and the test skipped nothing for it (skip_lacking)\n' "$LBS_TEST" "$i"
		rc=1
	done
	exit "$rc"
}
trap lbs_run_cleanups EXIT

# dm_remove NAME: remove a mapping if it exists (retrying while it is busy).
dm_remove() {
	for _ in 1 2 3 4 5; do
		dmsetup info "$1" >/dev/null 2>&1 || return 0
		dmsetup remove "$1" >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	dmsetup remove --force "$1" >/dev/null 2>&1 || true
}

# dm_blkdev NAME: /dev/dm-N of a mapping (there is no udev for /dev/mapper).
dm_blkdev() {
	printf '/dev/%s\n' "$(dmsetup info -c --noheadings -o blkdevname "$1" | tr -d ' ')"
}

# target_version NAME: the version dmsetup targets shows for target NAME (v1.2.3).
target_version() {
	dmsetup targets | awk -v t="$1" '$1 == t { print $2 }'
}

# ti_error: the last table error the kernel logged (the ti->error text), cleared.
# dm-crypt-lbs puts a static text in ti->error and logs the detail, with the value
# as written, just before dm core logs ti->error: that detail follows in brackets.
ti_error() {
	dmesg -c 2>/dev/null | awk '
		/device-mapper: crypt-lbs: / { d = $0; sub(/.*device-mapper: crypt-lbs: /, "", d); next }
		/device-mapper: table: [0-9:]*: [a-z_]*: / {
			e = $0; sub(/.*device-mapper: table: [0-9:]*: [a-z_]*: /, "", e)
			last = d == "" ? e : e " [" d "]"
		}
		{ d = "" }
		END { print last }'
}

printf '== %s on %s (%s, page size %s)\n' "$LBS_TEST" "$(uname -r)" "$(uname -m)" "$(getconf PAGESIZE)"
dmsetup targets | sed 's/^/   target /'
dmesg -c >/dev/null 2>&1 || true
# The tests' O_DIRECT must be real. busybox's dd retries without O_DIRECT when the
# kernel refuses its buffer (page-aligned only for blocks of a page or more), so
# under 16K and 64K pages its "direct" I/O was buffered; GNU dd aligns every buffer.
dd --version 2>/dev/null | grep -q coreutils ||
	fail "dd here is not GNU coreutils' (busybox's falls back to buffered I/O where O_DIRECT is refused)"

# --- helpers of the integration suite (tests/run-guest-tests) ---

# --- the emulated offload engine (tests/engine/; qemu/run puts it in /lbs/kmod) ---
LBS_ENGINE_KO=/lbs/kmod/lbs-engine.ko

# unload_engine: remove the engine if it is loaded; safe to run twice.
unload_engine() {
	[ ! -d /sys/module/lbs_engine ] || rmmod lbs_engine
}

# load_engine [PARAM=VALUE...]: load the engine afresh with these parameters (one
# already loaded is removed first); the test's end removes it, after its
# cleanups (they remove the mappings that use it). Fails the test when it is not
# built for this kernel or does not load.
load_engine() {
	[ -f "$LBS_ENGINE_KO" ] ||
		fail "no $LBS_ENGINE_KO: the engine is not built for $(uname -r) (qemu/lib/build-engine)"
	unload_engine || fail "rmmod lbs_engine failed (still in use?)"
	insmod "$LBS_ENGINE_KO" "$@" || fail "insmod lbs-engine.ko $*: refused; dmesg: $(dmesg | tail -n 3)"
	LBS_ENGINE_LOADED=1
}

# fio_pid: the fio a test runs in the background (fio ... & fio_pid=$!);
# stop_fio kills it, safe to run twice (on_exit stop_fio).
fio_pid=""
stop_fio() {
	[ -z "$fio_pid" ] || kill "$fio_pid" 2>/dev/null || true
}

# ok MSG: one line for a check that passed.
ok() {
	printf 'ok   %s\n' "$*"
}

# test_key BYTES: the suite's fixed key, bytes 00 01 02 ... as hex ("-" for 0 bytes).
# tests/reference/dmcrypt_ref.py uses the same bytes.
test_key() {
	local i b out=""
	[ "$1" -gt 0 ] || { printf -- '-\n'; return 0; }
	for ((i = 0; i < $1; i++)); do
		printf -v b '%02x' "$((i & 255))"
		out+=$b
	done
	printf '%s\n' "$out"
}

# test_key_file PATH BYTES: the same key bytes as test_key, as a binary key file.
test_key_file() {
	local i b fmt=""
	for ((i = 0; i < $2; i++)); do
		printf -v b '\\x%02x' "$((i & 255))"
		fmt+=$b
	done
	# shellcheck disable=SC2059 # the format is the escaped bytes
	printf "$fmt" >"$1"
}

# pattern BYTES: the reference plaintext on stdout. 16-byte record i (from 0) is i
# in lowercase hex, zero-padded to 15 digits, then a newline: deterministic, every
# cipher block distinct, and the same bytes tests/reference/dmcrypt_ref.py makes.
pattern() {
	# shellcheck disable=SC2046 # one printf argument per record
	printf '%015x\n' $(seq 0 $(($1 / 16 - 1)))
}

# io_bs DEV: the block size the helpers below use by default for DEV: 32 KiB, or
# DEV's logical block size when that is larger (O_DIRECT needs whole blocks).
io_bs() {
	local lbs=512
	[ ! -b "$1" ] || lbs=$(lbsize "$1")
	printf '%s\n' "$((lbs > 32768 ? lbs : 32768))"
}

# sha_of DEV BYTES [BS]: sha256 of the first BYTES (a multiple of BS, default
# io_bs) of a block device, read with O_DIRECT after dropping its page cache.
sha_of() {
	local bs=${3:-$(io_bs "$1")}
	blockdev --flushbufs "$1"
	dd if="$1" bs="$bs" count="$(($2 / bs))" iflag=direct status=none | sha256sum | cut -d' ' -f1
}

# put FILE DEV [BS]: write FILE (a multiple of BS, default io_bs) to DEV with O_DIRECT.
put() {
	dd if="$1" of="$2" bs="${3:-$(io_bs "$2")}" oflag=direct conv=fsync status=none
}

# loop_attach VAR FILE: a loop device over FILE, its path into VAR, detached at exit.
loop_attach() {
	local got
	got=$(losetup --find --show "$2") || fail "losetup of $2 failed"
	on_exit losetup -d "$got"
	printf -v "$1" '%s' "$got"
}

# plain_fill DEVICE NAME KEY BYTES DATA: BYTES of random plaintext (kept in the
# file DATA) written through NAME, a plain aes-xts-plain64 mapping of DEVICE with
# KEY at sector size 512, closed again; prints the plaintext's sha256.
plain_fill() {
	head -c "$4" /dev/urandom >"$5"
	# open prints the mapping it made on stdout: not part of the sha256
	lbscrypt -q open --cipher aes-xts-plain64 --key-size 512 --key-file "$3" \
		--sector-size 512 "$1" "$2" >/dev/null || fail "open of $1 at 512 failed"
	put "$5" "/dev/mapper/$2" 65536
	sha_of "/dev/mapper/$2" "$4" 65536
	lbscrypt close "$2"
}

# state_fs DIR SIZE: ext4 on a loop device over a file of SIZE in /tmp, mounted
# on DIR (a reencrypt state file's place: the tool refuses tmpfs); undone at exit.
state_fs() {
	local loop
	truncate -s "$2" "/tmp/${1##*/}.img"
	loop=$(losetup --find --show "/tmp/${1##*/}.img") || fail "losetup of /tmp/${1##*/}.img failed"
	on_exit losetup -d "$loop"
	mkfs.ext4 -q -F "$loop" >/dev/null || fail "mkfs.ext4 of the state filesystem failed"
	mkdir -p "$1"
	mount "$loop" "$1" || fail "cannot mount the state filesystem on $1"
	on_exit umount "$1"
}

# fio_clean LOG: true when a fio log shows no error: no job with err= other than 0
# and no verification failure (fio can exit 0 with either printed).
fio_clean() {
	! grep -qiE 'verify: bad|verify failed|bad magic|err= *[1-9]' "$1"
}

# fio_ok LOG FIO-ARGS...: run fio with its output in LOG; true when it exits 0
# and LOG is clean (fio_clean).
fio_ok() {
	local log=$1
	shift
	fio "$@" >"$log" 2>&1 && fio_clean "$log"
}

# bench_job JOB: "<rw> <bs>" of make bench's fio jobs (seqread and seqwrite
# with 1 MiB blocks, randread and randwrite with 64 KiB); fails on another name.
bench_job() {
	case $1 in
	seqread) echo "read 1m" ;;
	seqwrite) echo "write 1m" ;;
	randread) echo "randread 64k" ;;
	randwrite) echo "randwrite 64k" ;;
	*) return 1 ;;
	esac
}

# fio_bytes JSON read|write: "<bw_bytes> <io_bytes>" of the first job's
# section in fio's JSON output; fails when either is missing.
fio_bytes() {
	awk -v sec="$2" '
		$1 == "\"read\"" && $3 == "{" { s = "read" }
		$1 == "\"write\"" && $3 == "{" { s = "write" }
		$1 == "\"io_bytes\"" && s == sec && io == "" { io = $3; sub(/,$/, "", io) }
		$1 == "\"bw_bytes\"" && s == sec && bw == "" { bw = $3; sub(/,$/, "", bw) }
		END { if (bw == "" || io == "") exit 1; print bw, io }' "$1"
}

# lbsize DEV: the logical block size the kernel gives DEV (a node or a link to one).
lbsize() {
	local d
	d=$(readlink -f "$1")
	cat "/sys/class/block/${d##*/}/queue/logical_block_size"
}

# cryptd_spec TARGET DEV KEY: the capi: spec of an asynchronous XTS cipher that
# TARGET loads on this kernel (cryptd wrapping the generic AES, which 6.x names
# aes-generic and 7.x aes-lib), or nothing where the kernel has no cryptd
# (CONFIG_CRYPTO_CRYPTD is not set in Debian's arm64 kernels). cryptd is named
# by driver: "cryptd(xts(aes))" finds no instance to wrap.
cryptd_spec() {
	local drv spec
	modprobe -q cryptd 2>/dev/null || true
	for drv in aes-generic aes-lib; do
		spec="capi:cryptd(xts(ecb($drv)))-plain64"
		if dmsetup create lbs-cryptd-probe --table "0 8 $1 $spec $3 0 $2 0" >/dev/null 2>&1; then
			dm_remove lbs-cryptd-probe
			printf '%s\n' "$spec"
			return 0
		fi
		dmesg -c >/dev/null 2>&1 || true	# the refusal's log line
	done
}

# scsi_debug_disk: wait up to 10 s for the disk of a scsi_debug just loaded and
# set SD_DISK to its name (sdX); fail the test when none appears.
scsi_debug_disk() {
	local b
	SD_DISK=""
	for _ in $(seq 100); do
		for b in /sys/block/sd*; do
			[ -e "$b/device/model" ] && grep -q scsi_debug "$b/device/model" && SD_DISK=${b##*/}
		done
		[ -z "$SD_DISK" ] || [ ! -b "/dev/$SD_DISK" ] || return 0
		sleep 0.1
	done
	fail "scsi_debug made no disk"
}

# page_size, and bound: the largest sector_size dm-crypt-lbs accepts here (min(page, 65536)).
page_size() {
	getconf PAGESIZE
}
bound() {
	local p
	p=$(page_size)
	[ "$p" -le 65536 ] || p=65536
	printf '%s\n' "$p"
}

# sizes_upto MAX: the powers of two from 512 to MAX.
sizes_upto() {
	local s=512
	while [ "$s" -le "$1" ]; do
		printf '%s\n' "$s"
		s=$((s * 2))
	done
}

# refuses_einval WHAT CMD...: CMD must fail with "Invalid argument", leave no
# mapping named lbs-bad and make the kernel log a ti->error (printed). A case
# that does not is reported with soft_fail.
refuses_einval() {
	local what=$1 out err
	shift
	dmesg -c >/dev/null 2>&1 || true
	if out=$("$@" 2>&1); then
		soft_fail "$what: accepted, expected EINVAL ($*)"
		dm_remove lbs-bad
		return 0
	fi
	err=$(ti_error)
	case $out in
	*"Invalid argument"*) ;;
	*) soft_fail "$what: refused, but not with EINVAL: $(printf '%s' "$out" | head -n 1); ti->error: ${err:-none}"; return 0 ;;
	esac
	if dmsetup info lbs-bad >/dev/null 2>&1; then
		soft_fail "$what: a device lbs-bad was left behind"
		dm_remove lbs-bad
	elif [ -z "$err" ]; then
		soft_fail "$what: EINVAL without a ti->error in the kernel log"
	else
		ok "$what: EINVAL, ti->error: $err"
	fi
}

# Process starts are what costs under TCG (~0.25 s each), so the tests put many
# cases in one device, one segment each, and read the segments back through
# linear views made in one dmsetup call.

# raw_views N SECTORS: linear views raw-0 .. raw-(N-1) of consecutive SECTORS-long
# regions of /dev/ram0, in one dmsetup call.
raw_views() {
	local i spec=""
	for ((i = 0; i < $1; i++)); do
		spec+="${spec:+;}raw-$i,,,rw,0 $2 linear /dev/ram0 $((i * $2))"
	done
	dmsetup create --concise "$spec"
}

# seg_sums PREFIX N: the sha256 of /dev/mapper/PREFIX-0 .. PREFIX-(N-1), one a
# line, read after dropping their page caches.
seg_sums() {
	local i devs=()
	for ((i = 0; i < $2; i++)); do devs+=("/dev/mapper/$1-$i"); done
	blockdev --flushbufs "${devs[@]}"
	sha256sum "${devs[@]}" | cut -d' ' -f1
}

# ---- a background lbscrypt reencrypt run, held where a test wants it --------
# No timing: the tests hold the run by holding I/O it does (its private
# mappings suspended). They set RUN_PID (the run's process) and RUN_LOG (its
# output) before using these.

# run_alive: the run's process has not ended (a zombie has).
run_alive() {
	[ -r "/proc/$RUN_PID/stat" ] && [ "$(awk '{ print $3 }' "/proc/$RUN_PID/stat")" != Z ]
}
# run_wait_until WHAT CMD...: CMD true within 60 s, the run still alive meanwhile.
run_wait_until() {
	local what=$1
	shift
	for _ in $(seq 600); do
		"$@" && return 0
		run_alive || fail "$what: the run ended first ($(cat "$RUN_LOG"))"
		sleep 0.1
	done
	fail "$what: not within 60 s; the run is in: $(cat "/proc/$RUN_PID/syscall" 2>/dev/null) $(head -3 "/proc/$RUN_PID/stack" 2>/dev/null | tr '\n' ' ')"
}
# reenc_private SUFFIX: the run's private mapping named ...-SUFFIX (old, new,
# hotzone), if it exists.
reenc_private() {
	dmsetup ls 2>/dev/null | awk -v s="-$1" '/^lbscrypt-reenc-/ && substr($1, length($1) - length(s) + 1) == s { print $1 }'
}
# reenc_both_private: -old and -new exist with their tables live (the run has
# made them whole: a suspend before that would be undone by the run's resume).
reenc_both_private() {
	local side m
	for side in old new; do
		m=$(reenc_private "$side")
		[ -n "$m" ] || return 1
		[[ $(dmsetup info "$m" 2>/dev/null) == *"Tables present:"*LIVE* ]] || return 1
	done
}
# run_in_io_on MAPPING: the run is in a system call on its descriptor of
# MAPPING's node (/proc/PID/syscall: the call's number, then its arguments, the
# first the fd). The run uses its -old descriptor only to read a hotzone and its
# -new one only to write and flush it, so with MAPPING suspended this is the
# call that waits.
run_in_io_on() {
	local want fd nr arg0
	want=$(dmsetup info -c --noheadings -o major,minor --separator ' ' "$1" | awk '{ printf "%x:%x\n", $1, $2 }')
	read -r nr arg0 _ <"/proc/$RUN_PID/syscall" || return 1
	[ "$nr" != running ] && [ "$nr" != -1 ] && [ -n "$arg0" ] || return 1
	fd=$((arg0))
	[ "$(stat -L -c '%t:%T' "/proc/$RUN_PID/fd/$fd" 2>/dev/null)" = "$want" ]
}

# ---- what a test needs: its header's NEEDS and MAY-LACK --------------------
# A word of NEEDS the guest lacks fails the test before it starts, unless a
# MAY-LACK line of its header ("# MAY-LACK: WORD SET") names this kernel: then
# the test runs without it and says, for each case it leaves out, what it
# skipped (skip_lacking: an LBS-SKIP line the runner lists). The words are
# need_met's (tests/guest-headers check refuses any other). The checks start
# no process where they need not: under TCG each start costs about 0.25 s.
LBS_NEED_WHY=''	# what the last check that failed found missing

# have_module NAME: the kernel has module NAME, loaded, built in or to load
# (modprobe --dry-run loads nothing: a test loads it with its own parameters).
have_module() {
	[ -d "/sys/module/${1//-/_}" ] && return 0
	modprobe -n -q "$1" 2>/dev/null && return 0
	LBS_NEED_WHY="no module $1: not built for $(uname -r), nor built in"
	return 1
}
# have_program NAME: NAME is on PATH.
have_program() {
	command -v "$1" >/dev/null && return 0
	LBS_NEED_WHY="no program $1 on the guest's PATH"
	return 1
}
# have_file PATTERN: a file matches PATTERN (a path, or a glob).
have_file() {
	compgen -G "$1" >/dev/null && return 0
	LBS_NEED_WHY="no $1"
	return 1
}
# have_fs NAME: the kernel has filesystem NAME (built in, or as a module).
have_fs() {
	grep -qw "$1" /proc/filesystems && return 0
	have_module "$1" || { LBS_NEED_WHY="no filesystem $1 in the kernel"; return 1; }
}

# need_met WORD: the guest has what the NEEDS word WORD names; when not,
# LBS_NEED_WHY says what is missing. One word an arm: tests/guest-headers reads
# the words from here.
need_met() {
	local t=/sys/kernel/tracing d=/sys/kernel/debug
	LBS_NEED_WHY=''
	case $1 in
	tool) have_program lbscrypt ;;	# make deb, or make -f tools/tools.mk tools tools-arm64
	engine) have_file "$LBS_ENGINE_KO" ;;	# the emulated engine (qemu/lib/build-engine)
	scsi_debug) have_module scsi_debug ;;	# suite.sh installs the runner's build where a kernel lacks it
	mainline-ref) have_file /lbs/files/dm-crypt-ref.ko ;;	# the v2 reference the runner builds
	cryptsetup-src) have_file '/lbs/files/tests-*.tar' ;;	# cryptsetup's tests, packed by the runner
	readme) have_file /lbs/files/README.md ;;	# README.md, handed over by the runner
	null_blk) have_module null_blk ;;
	cryptd) have_module cryptd ;;	# (CONFIG_CRYPTO_CRYPTD; Debian's arm64 kernels lack it)
	dm-integrity) have_module dm-integrity ;;
	dm-log-writes) have_module dm-log-writes ;;
	loop) have_module loop ;;
	btrfs) have_fs btrfs && have_program mkfs.btrfs ;;
	xfs) have_fs xfs && have_program mkfs.xfs ;;
	lvm) have_program lvm ;;
	keyutils) have_program keyctl ;;
	ftrace)	# the function tracer (CONFIG_FUNCTION_TRACER)
		[ -d "$t/events" ] || mount -t tracefs nodev "$t" 2>/dev/null || true
		have_file "$t/set_ftrace_filter" ;;
	debug-kernel)	# kmemleak and fault injection: arm64-64k-debug
		[ -d "$d/failslab" ] || mount -t debugfs nodev "$d" 2>/dev/null || true
		have_file "$d/kmemleak" && have_file "$d/failslab" && have_file "$d/fail_page_alloc" ;;
	*)
		LBS_NEED_WHY="'$1' is no NEEDS word (common/lib.sh, need_met)"
		return 1
		;;
	esac
}

# lbs_header FIELD: the values of FIELD in the test's header (the comment
# lines after the shebang), a line each.
lbs_header() {
	local line n=0 f="# $1: "
	[ -f "$LBS_TEST_FILE" ] || return 0
	while IFS= read -r line; do
		n=$((n + 1))
		[ "$n" != 1 ] || continue
		[[ $line == '#'* ]] || break
		[[ $line != "$f"* ]] || printf '%s\n' "${line#"$f"}"
	done <"$LBS_TEST_FILE"
}
# lbs_kernel: this guest's kernel id (qemu/run writes it to /lbs/env).
lbs_kernel() {
	local var value
	[ -f /lbs/env ] || return 0
	while IFS='=' read -r var value; do
		[ "$var" != LBS_KERNEL ] || printf '%s\n' "$value"
	done </lbs/env
}
# lbs_set_has WORD KERNEL PAGE: a word of a SET (tests/README) names the kernel.
lbs_set_has() {
	case $1 in
	all) return 0 ;;
	none) return 1 ;;
	page\<*) [ "$3" -lt "${1#page<}" ] ;;
	page\>*) [ "$3" -gt "${1#page>}" ] ;;
	page=*) [ "$3" -eq "${1#page=}" ] ;;
	*) [ "$1" = "$2" ] ;;
	esac
}
# lbs_may_lack WORD: a MAY-LACK line of the header lets this kernel lack WORD
# (a word of its SET names the kernel, and no -word does).
lbs_may_lack() {
	local kernel page word set w plus minus
	kernel=$(lbs_kernel)
	page=$(page_size)
	while read -r word set; do
		[ "$word" = "$1" ] || continue
		plus=0 minus=0
		for w in $set; do
			if [ "${w#-}" != "$w" ]; then
				! lbs_set_has "${w#-}" "$kernel" "$page" || minus=1
			else
				! lbs_set_has "$w" "$kernel" "$page" || plus=1
			fi
		done
		[ "$plus" = 0 ] || [ "$minus" = 1 ] || return 0
	done < <(lbs_header MAY-LACK)
	return 1
}

# require WORD...: the guest has each WORD (need_met). One it lacks fails the
# test, unless its header's MAY-LACK names this kernel for it: then the test
# goes on without it (have_need WORD is false), and must say what it skips for
# it (skip_lacking) or fail at its end. lib.sh runs it on the header's NEEDS.
require() {
	local word
	for word in "$@"; do
		[ "$word" != none ] || continue
		need_met "$word" && continue
		lbs_may_lack "$word" ||
			fail "it needs $word: $LBS_NEED_WHY (on $(lbs_kernel), where no MAY-LACK of its header lets it lack $word)"
		LBS_LACKING+=("$word")
	done
}
# have_need WORD: the guest has WORD, a need of the header (false only where
# its MAY-LACK let require go on without it).
have_need() {
	[[ " ${LBS_LACKING[*]} " != *" $1 "* ]]
}
# skip_lacking WORD WHAT [WHY]: the case WHAT is left out, for it needs WORD,
# which the guest lacks (WHY: what shows it). An LBS-SKIP line where the
# header's MAY-LACK names this kernel for WORD; elsewhere the test fails.
skip_lacking() {
	local why=${3:-$LBS_NEED_WHY}
	[[ " $(lbs_header NEEDS) " == *" $1 "* ]] || fail "skip_lacking $1: its header's NEEDS does not name $1"
	lbs_may_lack "$1" ||
		fail "$2: this kernel lacks $1${why:+ ($why)}, and no MAY-LACK of its header lets $(lbs_kernel) lack it"
	printf 'LBS-SKIP %s: %s: this kernel lacks %s%s\n' "${LBS_TEST%.sh}" "$2" "$1" "${why:+ ($why)}"
	LBS_LACK_SAID+=("$1")
}

# the needs of the test's header, before the test begins
# shellcheck disable=SC2046 # the header's words
require $(lbs_header NEEDS)
