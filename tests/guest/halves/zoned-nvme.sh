#!/usr/bin/env bash
# DESCRIPTION: AEAD over a zoned NVMe namespace with separate metadata (the guest half of tests/zoned-nvme-check)
#
# zoned-nvme.sh: the guest half of tests/zoned-nvme-check (not a test the runner
# schedules: the host must attach the disk). Needs ours as crypt (qemu/run
# --module lbscrypt) and an NVMe namespace, /dev/nvme0n1, that is zoned
# (host-managed) with 64 bytes of separate metadata per 4096-byte block and no
# protection information (qemu's nvme-ns zoned=on,ms=64, 4096-byte blocks), on a
# kernel with 64K pages, PCI, NVMe and integrity metadata (arm64-64k,
# arm64-64k-7.3).
#
# Over it, capi:gcm(aes)-random with integrity:28:aead at sector_size 4096 keeps a
# 28-byte IV and tag in each block's metadata. One pool entry of the target's
# integrity metadata bounds the mapping's max_hw_sectors on a zoned device, and
# a zoned write larger than an entry is failed when its metadata must come from
# the pool. 512 bytes of tuples cover 8 sectors, 32 KiB, less than a 64K page;
# the block layer's stacking then raises the limit to a page (6.12 and 7.3 do;
# its validation would WARN and refuse a limit below a page), so the mapping
# took 64 KiB writes that one entry did not cover. Entries now cover a page.
# What this boot can see is the limit and that the table loads and works; the
# pool's failure needs an allocation failure (make harden's fault injection).
# Checks:
# - the namespace is what the host asked for (zoned, 4096-byte blocks, opaque
#   metadata per block: sysfs does not say how many bytes);
# - the table loads, with no kernel warning, and the mapping's largest request
#   is at least a page;
# - 2 MiB written sequentially from the first zone's start in 1 MiB direct
#   writes (dm core cuts them to the mapping's limits) read back through a
#   fresh mapping with the same key (each block's tag is checked on the way);
# - a block read with another key fails (the tags are checked, not only
#   stored).
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/../common/lib.sh"

dev=/dev/nvme0n1
for _ in $(seq 100); do [ -b "$dev" ] && break; sleep 0.1; done
[ -b "$dev" ] || fail "no $dev: the kernel found no NVMe namespace (controllers: $(echo /sys/class/nvme/*); dmesg: $(dmesg | grep -i nvme | tail -n 3 | tr '\n' ' '))"
sys=/sys/block/nvme0n1
[ "$(cat "$sys/queue/zoned")" = host-managed ] ||
	fail "$dev is not host-managed but '$(cat "$sys/queue/zoned")' (the host's nvme-ns needs zoned=on)"
[ "$(lbsize "$dev")" = 4096 ] || fail "$dev has $(lbsize "$dev")-byte blocks, not 4096"
# sysfs names the metadata's format and interval, not its size: "nop" (no
# checksum: opaque metadata) per 4096 bytes; the table below needs 28 bytes of it
format=$(cat "$sys/integrity/format" 2>/dev/null || echo none)
interval=$(cat "$sys/integrity/protection_interval_bytes" 2>/dev/null || echo 0)
if [ "$format" != nop ] || [ "$interval" != 4096 ]; then
	fail "$dev has integrity format '$format' per $interval bytes, not opaque metadata ('nop') per 4096 (qemu's ms=64 without pi; the kernel needs CONFIG_BLK_DEV_INTEGRITY)"
fi
page=$(page_size)
echo "   $dev: host-managed, 4096-byte blocks with opaque metadata, $(blkzone report "$dev" | wc -l) zones; page size $page"

[ "$(target_version crypt)" = v1.30.0 ] || fail "the crypt target is $(target_version crypt), not ours (v1.30.0): boot with --module lbscrypt"
key=$(test_key 32)
len=$(blockdev --getsz "$dev")
table="0 $len crypt capi:gcm(aes)-random $key 0 $dev 0 2 sector_size:4096 integrity:28:aead"
on_exit dm_remove lbs-zn
dmesg -c >/dev/null
blkzone reset "$dev"
dmsetup create lbs-zn --table "$table" ||
	fail "ours refused an AEAD table over the zoned namespace with metadata: $(ti_error); kernel: $(dmesg | grep -E 'WARNING|limits' | head -n 2 | tr '\n' ' ')"
if dmesg | grep -q 'WARNING'; then
	fail "the table loaded, but the kernel warned: $(dmesg | grep -A2 WARNING | head -n 3 | tr '\n' ' ')"
fi
map=$(dm_blkdev lbs-zn)
hw=$(cat "/sys/block/${map#/dev/}/queue/max_hw_sectors_kb")
[ $((hw * 1024)) -ge "$page" ] || fail "the mapping's max_hw_sectors_kb is $hw, below a page ($page bytes)"
ok "capi:gcm(aes)-random integrity:28:aead at 4096 over the zoned namespace loads, no warning; largest request $hw KiB (page $page)"

bytes=$((2 << 20))
pattern "$bytes" >/tmp/zn.plain
want=$(sha256sum </tmp/zn.plain | cut -d' ' -f1)
dd if=/tmp/zn.plain of="$map" bs=1M oflag=direct status=none ||
	fail "2 MiB of sequential 1 MiB direct writes from the zone's start failed: $(dmesg | tail -n 3 | tr '\n' ' ')"
dm_remove lbs-zn
dmsetup create lbs-zn --table "$table" || fail "the same table did not load again: $(ti_error)"
map=$(dm_blkdev lbs-zn)
got=$(sha_of "$map" "$bytes" 65536)
[ "$got" = "$want" ] || fail "the 2 MiB read back through a new mapping as sha256 $got, not $want"
ok "2 MiB written sequentially in 1 MiB direct writes reads back through a new mapping, every tag checked"

# a block read with another key: its tag cannot match (the tags are checked on
# the way, not only stored)
dm_remove lbs-zn
other=$(printf '%064x' 1)
dmsetup create lbs-zn --table "${table/$key/$other}" || fail "a table with another key did not load: $(ti_error)"
map=$(dm_blkdev lbs-zn)
if dd if="$map" of=/dev/null bs=4096 count=1 iflag=direct status=none 2>/dev/null; then
	fail "a block read with another key passed its tag check"
fi
ok "a block read with another key fails its tag check"
