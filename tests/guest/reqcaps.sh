#!/usr/bin/env bash
# DESCRIPTION: max_read_size and max_write_size split requests as stock's do
# BOOT: both
# KERNELS: all -arm64-4k
#   arm64-4k in make check-full: arm64-4k-6.1 covers arm64's 4K pages,
#   arm64-16k Debian's 6.12 arm64 build
# FULL-KERNELS: all
# LIMIT: 120 about four times the longest expected (5 to 25 s on arm64-64k, idle)
# NEEDS: none
# ORDER: 60
#
# reqcaps.sh: the request caps (max_read_size, max_write_size),
# stock beside ours, seen in the lower device's requests. Needs stock as crypt and
# ours as crypt_lbs (`--module both`). The lower device is a dm-linear over the
# ramdisk, so its /sys/block/dm-N/stat counts every bio a target sends down.
# Checks:
# - a 1 MiB O_DIRECT read and write through each target reach the lower device as
#   the same number of requests (in-tree caps both at 128 KiB: 8 each); where the
#   in-tree target has no caps (6.1), ours still splits at 128 KiB (documented);
# - max_read_size / max_write_size of 65536 double the requests through ours; a
#   value above the default (1 MiB) does not raise the cap;
# - at the largest sector size, a cap below one sector still lets whole sectors
#   through: 32 KiB on 64K pages gives one 64 KiB request each.
# Stock on 6.1 has no caps: its count is printed, not judged.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

dev=/dev/ram0
mib=$((1 << 20))
len=$((8 * mib / 512))
key=$(test_key 64)
params=/sys/module/dm_crypt_lbs/parameters
on_exit dm_remove lbs-rc
on_exit dm_remove lbs-lower
on_exit reset_caps
reset_caps() {
	echo 0 >"$params/max_read_size"
	echo 0 >"$params/max_write_size"
}
[ -w "$params/max_read_size" ] || fail "ours has no writable $params/max_read_size"

dmsetup create lbs-lower --table "0 $len linear $dev 0"
lower=$(dm_blkdev lbs-lower)
stat_file=/sys/block/${lower#/dev/}/stat

# ios DIR: reads (r) or writes (w) the lower device has completed
ios() {
	awk -v d="$1" '{ print (d == "r" ? $1 : $5) }' "$stat_file"
}
# through TARGET SS DIR: requests one 1 MiB O_DIRECT read or write through a
# fresh TARGET mapping of sector size SS makes on the lower device
through() {
	local before after map
	dmsetup create lbs-rc --table "0 $len $1 aes-xts-plain64 $key 0 $lower 0 1 sector_size:$2" ||
		fail "$1 refused sector_size:$2: $(ti_error)"
	map=$(dm_blkdev lbs-rc)
	before=$(ios "$3")
	if [ "$3" = r ]; then
		dd if="$map" of=/dev/null bs=1M count=1 iflag=direct status=none
	else
		dd if=/dev/zero of="$map" bs=1M count=1 oflag=direct status=none
	fi
	after=$(ios "$3")
	dm_remove lbs-rc
	echo $((after - before))
}
# expect WHAT GOT WANT
expect() {
	[ "$2" = "$3" ] || fail "$1: $2 requests on the lower device, expected $3"
	ok "$1: $2 requests on the lower device"
}

stock_version=$(target_version crypt)
for dir in r w; do
	what=$([ "$dir" = r ] && echo read || echo write)
	s=$(through crypt 4096 "$dir")
	o=$(through crypt_lbs 4096 "$dir")
	expect "ours, 1 MiB $what at 4096" "$o" 8
	case $(uname -r) in
	6.1.*) ok "stock $stock_version (6.1, no caps): $s requests for the same $what" ;;
	*) expect "stock $stock_version, 1 MiB $what at 4096" "$s" 8 ;;
	esac
done

echo 65536 >"$params/max_read_size"
echo 65536 >"$params/max_write_size"
expect "ours, max_read_size=65536, 1 MiB read" "$(through crypt_lbs 4096 r)" 16
expect "ours, max_write_size=65536, 1 MiB write" "$(through crypt_lbs 4096 w)" 16
echo $mib >"$params/max_read_size"
echo $mib >"$params/max_write_size"
expect "ours, max_read_size=1 MiB (above the default: no effect), 1 MiB read" "$(through crypt_lbs 4096 r)" 8
expect "ours, max_write_size=1 MiB (above the default: no effect), 1 MiB write" "$(through crypt_lbs 4096 w)" 8

big=$(bound)
if [ "$big" -gt 32768 ]; then
	echo 32768 >"$params/max_read_size"
	echo 32768 >"$params/max_write_size"
	expect "ours at sector_size $big, caps 32768, 1 MiB read" "$(through crypt_lbs "$big" r)" $((mib / big))
	expect "ours at sector_size $big, caps 32768, 1 MiB write" "$(through crypt_lbs "$big" w)" $((mib / big))
fi
reset_caps
expect "ours at sector_size $big, default caps, 1 MiB read" "$(through crypt_lbs "$big" r)" \
	$((mib / (big > 131072 ? big : 131072)))
