# shellcheck shell=bash
# Shared helpers of the guest tests (run inside a rig guest by qemu/run).
# Source it after `set -euo pipefail`. It prints the environment first, as every
# guest log must start with uname -r and dmsetup targets.

LBS_TEST=${0##*/}
LBS_CLEANUPS=()

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

lbs_run_cleanups() {
	local i
	for ((i = ${#LBS_CLEANUPS[@]} - 1; i >= 0; i--)); do
		eval "${LBS_CLEANUPS[$i]}" >/dev/null 2>&1 || true
	done
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
ti_error() {
	dmesg -c 2>/dev/null | sed -n 's/.*device-mapper: table: [0-9:]*: [a-z_]*: //p' | tail -n 1
}

printf '== %s on %s (%s, page size %s)\n' "$LBS_TEST" "$(uname -r)" "$(uname -m)" "$(getconf PAGESIZE)"
dmsetup targets | sed 's/^/   target /'
dmesg -c >/dev/null 2>&1 || true
