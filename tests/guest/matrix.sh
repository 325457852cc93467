#!/bin/bash
# The sector_size acceptance matrix: for each target named on the command line
# (default: crypt) and each argument, load a table over /dev/ram0 and report what
# the kernel did with it. One tab-separated record per cell (read by qemu/matrix):
#   MATRIX <target> <arg> <outcome> <recorded> <logical_block_size> <version> <error>
set -euo pipefail
# shellcheck source=tests/guest/lib.sh
. "$(dirname "$0")/lib.sh"

args=(512 1024 2048 4096 8192 16384 32768 65536 131072 69632 3000 0 61440 -4096 4096abc +4096)
targets=("$@")
[ $# -gt 0 ] || targets=(crypt)
key=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
len=$(blockdev --getsz /dev/ram0)
on_exit dm_remove lbs-matrix

for target in "${targets[@]}"; do
	version=$(target_version "$target")
	[ -n "$version" ] || fail "no $target target is registered"
	for arg in "${args[@]}"; do
		dm_remove lbs-matrix
		dmesg -c >/dev/null
		table="0 $len $target aes-xts-plain64 $key 0 /dev/ram0 0 1 sector_size:$arg"
		recorded=- lbs=- err=-
		if out=$(dmsetup create lbs-matrix --table "$table" 2>&1); then
			outcome=ok
			recorded=$(dmsetup table lbs-matrix | grep -o 'sector_size:[0-9]*' | cut -d: -f2 || true)
			[ -n "$recorded" ] || recorded=512
			lbs=$(cat "/sys/block/$(dm_blkdev lbs-matrix | cut -d/ -f3)/queue/logical_block_size")
		else
			case $out in
			*"Invalid argument"*) outcome=EINVAL ;;
			*"Device or resource busy"*) outcome=EBUSY ;;
			*"Cannot allocate memory"*) outcome=ENOMEM ;;
			*) outcome="other: $(printf '%s' "$out" | tr '\t\n' '  ')" ;;
			esac
			err=$(ti_error)
			[ -n "$err" ] || err=-
		fi
		printf 'MATRIX\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$target" "$arg" "$outcome" "$recorded" "$lbs" "$version" "$err"
	done
done
