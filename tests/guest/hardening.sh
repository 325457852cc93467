#!/usr/bin/env bash
# DESCRIPTION: the regression tests of the hardening fixes
# BOOT: both
# KERNELS: arm64-64k amd64-4k
#   arm64-64k has lrw, whose odd request size found an alignment oops on
#   Debian's arm64 kernel (any arm64 traps it); amd64-4k the 4K pages
# FULL-KERNELS: all
# LIMIT: 480 37 cipher cases, fio under a bounce bound, a race
# NEEDS: null_blk cryptd
# MAY-LACK: cryptd arm64-16k arm64-4k arm64-4k-6.1
#   Debian's arm64 kernels are built without CONFIG_CRYPTO_CRYPTD: the
#   asynchronous case is skipped there
# ORDER: 130
#
# hardening.sh: the regression tests of the hardening fixes.
# Needs ours as crypt_lbs beside stock (`--module both`).
#  1. IV modes: every chaining mode (ecb cbc xts ctr lrw) x IV mode (none included) in capi: form, and the
#     legacy form without an IV mode, on stock and ours. Where both load, a write
#     through ours reads back through ours and through stock; where ours refuses,
#     it is EINVAL with a message, and stock refuses too - except a capi: cipher
#     that takes an IV but has no IV mode (stock loads it with an IV buffer it
#     never fills; ours refuses, Documentation/dm-crypt-lbs.rst). The reported
#     oops (capi:xts(aes), then a write) is one of these cases.
#  2. Writes from the writer thread: it exists for each device and goes with it;
#     with an asynchronous cipher (cryptd, where the kernel has it) fio verifies
#     writes that the writer thread submits.
#  3. Bounce memory: with max_bounce_pages=1 four writers of 1 MiB bios complete and
#     verify, and the pages held never exceed the bound plus the one reserve; the
#     default bound is 2% of RAM; every page comes back when the device goes; with
#     two devices, one writing holds no more than its share of the bound; a bound
#     of 2^64-1 is no bound (the writer goes past its reserve).
#  4. key set / key wipe racing suspend and resume: a read returns the data or
#     fails, never other bytes; afterwards the data is intact.
#  5. Key sizes: a keyring reference or hex key above 16384 bytes is EINVAL before
#     any allocation, with no WARNING in the kernel log; also in "key set".
#  6. Messages: ti->error is a fixed text, the value as written is logged once.
# In 3, the two devices share a bound of eight reserves: one written by three
# jobs at iodepth 8 while the other idles holds at most its share (four) plus
# the idle one's reserve. In 6, a refused sector_size:69632 logs the value once,
# in the detail. Without cryptd (Debian's arm64 kernels) the writer-thread case
# of 2 is skipped (LBS-SKIP).
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

dev=/dev/ram0
k64=$(test_key 64)
k32=$(test_key 32)
params=/sys/module/dm_crypt_lbs/parameters
on_exit dm_remove lbs-h
on_exit dm_remove lbs-hs
on_exit dm_remove lbs-bad
on_exit sh -c "echo 0 >$params/max_bounce_pages"
[ -d "$params" ] || fail "no $params: is ours loaded as dm_crypt_lbs?"

# no_warnings WHAT: the kernel logged no WARNING, BUG or call trace since the last dmesg -c
no_warnings() {
	local w
	w=$(dmesg | grep -E 'WARNING:|BUG:|Call trace:|Call Trace:' || true)
	[ -z "$w" ] || { dmesg | tail -n 40; fail "$1: the kernel logged: $(printf '%s' "$w" | head -n 1)"; }
}

# --- 1. IV modes ---------------------------------------------------------------
seg=32768
head -c "$seg" /dev/urandom >/tmp/h.data
want=$(sha256sum </tmp/h.data | cut -d' ' -f1)
len=$((seg / 512))

# loads TARGET NAME SPEC KEY: 0 when TARGET loads SPEC, else 1 with $err = the kernel's message
loads() {
	dmesg -c >/dev/null
	if out=$(dmsetup create "$2" --table "0 $len $1 $3 $4 0 $dev 0" 2>&1); then
		return 0
	fi
	err=$(ti_error)
	case $out in *"Invalid argument"*) ;; *) err="not EINVAL: $out; $err" ;; esac
	return 1
}

iv_case() {	# iv_case SPEC KEY DIFFERENCE(0|1): DIFFERENCE 1 when ours may refuse what stock loads
	local spec=$1 key=$2 diff=$3 stock=1 ours=1 serr oerr got
	loads crypt lbs-hs "$spec" "$key" || { stock=0; serr=$err; }
	dm_remove lbs-hs
	loads crypt_lbs lbs-h "$spec" "$key" || { ours=0; oerr=$err; }
	if [ "$ours" = 1 ]; then
		put /tmp/h.data "$(dm_blkdev lbs-h)"
		got=$(sha_of "$(dm_blkdev lbs-h)" "$seg")
		dm_remove lbs-h
		[ "$got" = "$want" ] || { soft_fail "$spec: ours loaded it, but the data did not read back"; return 0; }
		if [ "$stock" = 0 ]; then
			soft_fail "$spec: ours loads it, stock refuses it (${serr:-no message})"
			return 0
		fi
		dmsetup create lbs-hs --table "0 $len crypt $spec $key 0 $dev 0" || fail "$spec: stock loaded it once, not twice"
		got=$(sha_of "$(dm_blkdev lbs-hs)" "$seg")
		dm_remove lbs-hs
		[ "$got" = "$want" ] || { soft_fail "$spec: what ours wrote reads back differently through stock"; return 0; }
		ok "$spec: loads on both; ours writes, ours and stock read the same bytes"
		return 0
	fi
	case $oerr in
	'' | "not EINVAL"*) soft_fail "$spec: ours refused it without EINVAL and a message: ${oerr:-no message}"; return 0 ;;
	esac
	if [ "$stock" = 1 ] && [ "$diff" = 0 ]; then
		soft_fail "$spec: stock loads it, ours refuses it: $oerr"
	elif [ "$stock" = 1 ]; then
		ok "$spec: ours refuses (stock loads it with an IV it never fills): $oerr"
	else
		ok "$spec: both refuse; ours: $oerr"
	fi
}

# lrw: with eboiv, its odd-sized scratch request once left struct lbs_io misaligned
# in the per-bio data (an alignment fault at the first write on arm64-4k)
k48=${k64:0:96}
for chain in ecb cbc xts ctr lrw; do
	key=$k32
	[ "$chain" != xts ] || key=$k64
	[ "$chain" != lrw ] || key=$k48
	for iv in "" plain plain64 plain64be essiv:sha256 benbi null eboiv; do
		diff=0
		[ -n "$iv" ] || [ "$chain" = ecb ] || diff=1
		iv_case "capi:$chain(aes)${iv:+-$iv}" "$key" "$diff"
	done
	iv_case "aes-$chain" "$key" 0
done

# the reported oops: the table, then a write; the guest must live on
if dmsetup create lbs-h --table "0 8192 crypt_lbs capi:xts(aes) $k64 0 $dev 0" 2>/dev/null; then
	dd if=/dev/urandom of="$(dm_blkdev lbs-h)" bs=4096 count=4 oflag=direct status=none || true
	dm_remove lbs-h
	soft_fail "capi:xts(aes) without an IV mode: loaded (and survived a write)"
else
	ok "capi:xts(aes) without an IV mode, as reported: refused, no write reaches the cipher"
fi
no_warnings "the IV mode cases"

# --- 2. the writer thread --------------------------------------------------------
writers() {	# writers: how many writer threads of ours exist
	cat /proc/[0-9]*/comm 2>/dev/null | grep -c '^kcryptd_lbs_w/' || true
}
before=$(writers)
dmsetup create lbs-h --table "0 8192 crypt_lbs aes-xts-plain64 $k64 0 $dev 0"
[ "$(writers)" = "$((before + 1))" ] || fail "writer thread: $(writers) with one device, $before without"
dm_remove lbs-h
[ "$(writers)" = "$before" ] || fail "writer thread: $(writers) left after the device was removed (was $before)"
ok "writer thread: one per device, gone with it"

fio_verify() {	# fio_verify WHAT DEVICE [fio options]: write and verify, errors fatal
	local what=$1 target=$2
	shift 2
	if ! fio_ok /tmp/h.fio --name=h --filename="$target" --rw=randwrite --direct=1 --ioengine=libaio \
		--verify=crc32c --verify_fatal=1 --randrepeat=1 "$@"; then
		cat /tmp/h.fio
		fail "$what: fio write+verify failed"
	fi
}

async_spec=$(cryptd_spec crypt_lbs "$dev" "$k64")
if [ -n "$async_spec" ]; then
	dmsetup create lbs-h --table "0 32768 crypt_lbs $async_spec $k64 0 $dev 0 1 sector_size:4096"
	fio_verify "asynchronous cipher (writer thread)" "$(dm_blkdev lbs-h)" --bs=64k --iodepth=16 --numjobs=2 \
		--size=4m --offset_increment=4m
	dm_remove lbs-h
	ok "asynchronous cipher $async_spec: fio randwrite 64k iodepth 16 x2, crc32c verified (writes submitted by the writer thread)"
else
	skip_lacking cryptd "the writer thread under an asynchronous cipher" "cryptd(xts) does not load"
fi

# --- 3. bounce memory --------------------------------------------------------------
page=$(page_size)
reserve=$((1048576 / page))	# LBS_BOUNCE_PAGES: one bio of 1 MiB
[ "$reserve" -le 256 ] || reserve=256
[ "$reserve" -ge 1 ] || reserve=1
[ "$(cat "$params/bounce_pages")" = 0 ] || fail "bounce pages: $(cat "$params/bounce_pages") held with no device of ours"
echo 0 >"$params/max_bounce_pages"
ram_pages=$(($(awk '/^MemTotal:/ { print $2 }' /proc/meminfo) * 1024 / page))
limit=$(cat "$params/max_bounce_pages")
expect=$((ram_pages / 50))
[ "$expect" -ge $((4 * reserve)) ] || expect=$((4 * reserve))
# MemTotal is totalram_pages(); allow 1% for rounding
if [ "$limit" -lt $((expect - expect / 100)) ] || [ "$limit" -gt $((expect + expect / 100)) ]; then
	fail "bounce pages: default bound $limit, expected 2% of RAM ($expect pages of $page bytes, at least $((4 * reserve)))"
fi
ok "bounce pages: default bound $limit pages (2% of $ram_pages pages of RAM)"

echo 1 >"$params/max_bounce_pages"
dmsetup create lbs-h --table "0 65536 crypt_lbs aes-xts-plain64 $k64 0 $dev 0"
held=$(cat "$params/bounce_pages")
[ "$held" = "$reserve" ] || fail "bounce pages: $held held by one idle device, expected its reserve of $reserve"
echo 0 >"$params/bounce_pages_peak"
fio_verify "four writers under max_bounce_pages=1" "$(dm_blkdev lbs-h)" --bs=1m --iodepth=4 --numjobs=4 \
	--size=8m --offset_increment=8m
peak=$(cat "$params/bounce_pages_peak")
[ "$peak" -le $((1 + reserve)) ] ||
	fail "bounce pages: peak $peak under max_bounce_pages=1, above the bound 1 + the reserve $reserve"
dm_remove lbs-h
echo 0 >"$params/max_bounce_pages"
[ "$(cat "$params/bounce_pages")" = 0 ] || fail "bounce pages: $(cat "$params/bounce_pages") still held after the device was removed"
ok "bounce pages: 4 jobs x 1 MiB writes iodepth 4 under max_bounce_pages=1 verified; peak $peak <= 1 + reserve $reserve; all returned on remove"

# Each device takes its share of the bound, not the whole: two devices over a
# null_blk whose writes complete after 1 s (so encrypted writes pile up and
# hold their pages), a bound of 8 reserves. One writing hard holds its share, 4,
# while the other idles on its reserve; before the bound was shared, the writer
# took all but the other's reserve, 7.
if ! out=$(modprobe null_blk nr_devices=1 gb=1 memory_backed=1 bs=4096 irqmode=2 completion_nsec=1000000000 2>&1); then
	fail "modprobe null_blk (a slow disk for the share test) failed: $out (the rig's kernels need CONFIG_BLK_DEV_NULL_BLK=m)"
fi
on_exit rmmod null_blk
# the mappings over it go first (cleanups run last registered first)
on_exit dm_remove lbs-h
on_exit dm_remove lbs-hs
[ -b /dev/nullb0 ] || fail "null_blk made no /dev/nullb0"
echo $((8 * reserve)) >"$params/max_bounce_pages"
dmsetup create lbs-h --table "0 65536 crypt_lbs aes-xts-plain64 $k64 0 /dev/nullb0 0"
dmsetup create lbs-hs --table "0 65536 crypt_lbs aes-xts-plain64 $k64 0 /dev/nullb0 65536"
held=$(cat "$params/bounce_pages")
[ "$held" = $((2 * reserve)) ] || fail "bounce pages: $held held by two idle devices, expected their reserves, 2 x $reserve"
echo 0 >"$params/bounce_pages_peak"
fio_verify "three writers on one of two devices under max_bounce_pages=$((8 * reserve))" "$(dm_blkdev lbs-h)" \
	--bs=1m --iodepth=8 --numjobs=3 --size=8m --offset_increment=8m
peak=$(cat "$params/bounce_pages_peak")
[ "$peak" -le $((5 * reserve)) ] ||
	fail "bounce pages: peak $peak with one of two devices writing, above its share $((4 * reserve)) + the other's reserve $reserve"
[ "$peak" -ge $((5 * reserve)) ] ||
	fail "bounce pages: peak $peak: the writer never reached its share $((4 * reserve)) (+ the idle reserve $reserve); the delayed disk did not hold writes back, so nothing was measured"
dm_remove lbs-hs
ok "bounce pages: one of two devices writing 3 jobs x 1 MiB iodepth 8 to a slow disk holds its share: peak $peak = share $((4 * reserve)) + idle reserve $reserve"

# A bound of 2^64-1 pages (or anything from 2^63) is no bound: the writer takes
# what its writes need, past its reserve (a share once read as a negative long
# refused every page, and the device wrote from its reserve alone).
echo 18446744073709551615 >"$params/max_bounce_pages"
[ "$(cat "$params/max_bounce_pages")" = 18446744073709551615 ] ||
	fail "bounce pages: max_bounce_pages reads $(cat "$params/max_bounce_pages"), written 18446744073709551615"
echo 0 >"$params/bounce_pages_peak"
fio_verify "three writers under max_bounce_pages=2^64-1" "$(dm_blkdev lbs-h)" \
	--bs=1m --iodepth=8 --numjobs=3 --size=8m --offset_increment=8m
peak=$(cat "$params/bounce_pages_peak")
[ "$peak" -gt "$reserve" ] ||
	fail "bounce pages: peak $peak under max_bounce_pages=2^64-1: the writer never went past its reserve $reserve"
dm_remove lbs-h
rmmod null_blk
echo 0 >"$params/max_bounce_pages"
[ "$(cat "$params/bounce_pages")" = 0 ] || fail "bounce pages: $(cat "$params/bounce_pages") still held after both devices were removed"
ok "bounce pages: under max_bounce_pages=2^64-1 the writer went past its reserve $reserve (peak $peak)"

# --- 4. key messages racing suspend and resume -------------------------------------
bytes=$((256 << 10))
dmsetup create lbs-h --table "0 $((bytes / 512)) crypt_lbs aes-xts-plain64 $k64 0 $dev 0"
head -c "$bytes" /dev/urandom >/tmp/h.big
put /tmp/h.big "$(dm_blkdev lbs-h)"
want_big=$(sha256sum </tmp/h.big | cut -d' ' -f1)
(
	for _ in $(seq 1 25); do
		dmsetup message lbs-h 0 key wipe 2>/dev/null || true
		dmsetup message lbs-h 0 key set "$k64" 2>/dev/null || true
	done
) &
racer=$!
wrong=0 eio=0 good=0
for _ in $(seq 1 10); do
	dmsetup suspend lbs-h
	# a resume refused for a wiped key: set it and try again (the racer ends)
	until dmsetup resume lbs-h 2>/dev/null; do
		dmsetup message lbs-h 0 key set "$k64" 2>/dev/null || true
	done
	# the device is active: a read gives the data, or fails (short) when a wipe
	# slipped in between preresume and resume; other bytes mean a wiped key in use
	dd if="$(dm_blkdev lbs-h)" of=/tmp/h.read bs=65536 iflag=direct status=none 2>/dev/null || true
	if [ "$(stat -c %s /tmp/h.read)" != "$bytes" ]; then
		eio=$((eio + 1))
	elif [ "$(sha256sum </tmp/h.read | cut -d' ' -f1)" = "$want_big" ]; then
		good=$((good + 1))
	else
		wrong=$((wrong + 1))
	fi
done
wait "$racer" || true
dmsetup suspend lbs-h
dmsetup message lbs-h 0 key set "$k64"
dmsetup resume lbs-h
got=$(sha_of "$(dm_blkdev lbs-h)" "$bytes" 65536)
dm_remove lbs-h
[ "$wrong" = 0 ] || fail "key messages racing resume: $wrong of 10 reads returned other bytes (a wiped key in use)"
[ "$got" = "$want_big" ] || fail "key messages racing resume: after key set and resume the data differs"
ok "key wipe/set racing suspend/resume: 10 reads, $good intact, $eio failed, 0 other bytes; data intact afterwards"
no_warnings "the key message race"

# --- 5. key sizes ------------------------------------------------------------------
dmesg -c >/dev/null
for ref in ":2147483647:logon:lbs:x" ":16385:logon:lbs:x" ":99999999999999999999:logon:lbs:x" \
	":4294967296:user:lbs:x"; do
	refuses_einval "keyring key $ref" \
		dmsetup create lbs-bad --table "0 8 crypt_lbs aes-xts-plain64 $ref 0 $dev 0"
done
refuses_einval "hex key of 16385 bytes" \
	dmsetup create lbs-bad --table "0 8 crypt_lbs aes-xts-plain64 $(head -c 16385 /dev/zero | od -An -v -tx1 | tr -d ' \n') 0 $dev 0"
no_warnings "huge key sizes"
dmsetup create lbs-h --table "0 $((bytes / 512)) crypt_lbs aes-xts-plain64 $k64 0 $dev 0"
dmsetup suspend lbs-h
if dmsetup message lbs-h 0 key set ":2147483647:logon:lbs:x" 2>/dev/null; then
	soft_fail "key set with a 2 GiB keyring key size: accepted"
fi
dmsetup resume lbs-h || fail "resume after a refused key set: the key was lost"
got=$(sha_of "$(dm_blkdev lbs-h)" "$bytes" 65536)
dm_remove lbs-h
[ "$got" = "$want_big" ] || fail "after a refused key set the data differs"
no_warnings "key set with a huge key size"
ok "key set with a 2 GiB keyring key size: refused, the key and data intact, no WARNING"

# --- 6. messages ---------------------------------------------------------------------
dmesg -c >/dev/null
dmsetup create lbs-bad --table "0 256 crypt_lbs aes-xts-plain64 $k64 0 $dev 0 1 sector_size:69632" 2>/dev/null &&
	fail "sector_size:69632 accepted"
log=$(dmesg -c)
n=$(grep -c 69632 <<<"$log" || true)
table_line=$(grep 'device-mapper: table:' <<<"$log" | tail -n 1)
[ "$n" = 1 ] || { printf '%s\n' "$log"; fail "sector_size:69632: the value appears in $n kernel messages, expected once (the detail)"; }
case $table_line in
*69632*) fail "sector_size:69632: the ti->error carries the value: $table_line" ;;
*sector_size*) ;;
*) printf '%s\n' "$log"; fail "sector_size:69632: no ti->error naming sector_size: $table_line" ;;
esac
ok "sector_size:69632: ti->error is the fixed text, the value logged once: $(grep -v 'table:' <<<"$log" | grep 69632 | sed 's/^\[[^]]*\] //')"
