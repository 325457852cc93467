#!/bin/bash
# The sector_size acceptance matrix for the target loaded as `crypt`: for each
# argument, load a table over /dev/ram0 and report what the kernel did with it.
# Prints one tab-separated MATRIX record per argument (read by qemu/matrix):
#   MATRIX <arg> <outcome> <recorded> <logical_block_size> <target_version> <error>
set -euo pipefail
# shellcheck source=tests/guest/lib.sh
. "$(dirname "$0")/lib.sh"

args=(512 1024 2048 4096 8192 16384 32768 65536 131072 69632 3000 0 61440 -4096 4096abc +4096)
[ $# -eq 0 ] || args=("$@")
key=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
len=$(blockdev --getsz /dev/ram0)
version=$(target_version crypt)
[ -n "$version" ] || fail "no crypt target is registered"
on_exit dm_remove lbs-matrix

for arg in "${args[@]}"; do
	dm_remove lbs-matrix
	dmesg -c >/dev/null
	table="0 $len crypt aes-xts-plain64 $key 0 /dev/ram0 0 1 sector_size:$arg"
	recorded=- lbs=- err=-
	if out=$(dmsetup create lbs-matrix --table "$table" 2>&1); then
		outcome=ok
		recorded=$(dmsetup table lbs-matrix | grep -o 'sector_size:[0-9]*' | cut -d: -f2 || true)
		[ -n "$recorded" ] || recorded=512
		lbs=$(cat "/sys/block/$(dmsetup info -c --noheadings -o blkdevname lbs-matrix | tr -d ' ')/queue/logical_block_size")
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
	printf 'MATRIX\t%s\t%s\t%s\t%s\t%s\t%s\n' "$arg" "$outcome" "$recorded" "$lbs" "$version" "$err"
done
