#!/usr/bin/env bash
# DESCRIPTION: ours against the v2 reference (dm-crypt 1.30.0) at every sector size above 4096
# BOOT: both
# KERNELS: page>4096
# FULL-KERNELS: page>4096
# LIMIT: 600 pairwise: 42 cases in ~90 s on arm64-16k, 76 in ~165 s on arm64-64k
# FULL-LIMIT: 1800 the full product (LBS_MAINLINE_FULL=1): 148 cases in ~210 s on arm64-16k, 292 on 64K
# FULL-ENV: LBS_MAINLINE_FULL=1
# NEEDS: mainline-ref
# ORDER: 210
#
# mainline.sh: ours against the v2 reference (dm-crypt 1.30.0) at every sector size
# above 4096 this kernel takes (8192 to the page size). The reference is this
# kernel's own in-tree dm-crypt with the edits of the v2 patch (no mainline
# release through 7.3.x has it), as target
# crypt_ref (qemu/lib/mainline-dmcrypt builds it; its dm-crypt-ref.ko comes in
# /lbs/files). Needs `--module both` (stock as crypt, ours as crypt_lbs); loads
# the reference beside them, so all three run in one boot.
#
# Cases: IV modes plain, plain64, plain64be, essiv:sha256, benbi, null, eboiv and
# elephant; capi: specs; AES-XTS with 256- and 512-bit keys, AES-CBC with 128
# and 256, Serpent and Twofish; with and without iv_large_sectors; iv_offset 0
# and 2^64 - 256 (the IV's sector number wraps inside each case). By default a
# pairwise cover of (spec, sector size, iv_large_sectors, iv_offset): every
# spec at every size, iv_large_sectors and iv_offset chosen so that each pair of
# values of any two dimensions occurs; LBS_MAINLINE_FULL=1 (make check-full)
# runs the full product. Then refusal cases, at one size each (every size with
# LBS_MAINLINE_FULL=1): lmk and tcw (512-byte sectors only), random without
# integrity metadata, and integrity over dm-integrity with 4096-byte blocks; and
# one case of each documented "stricter than dm-crypt" kind the v2 bound leaves
# reachable (a number dm-crypt's sscanf wraps, a capi: cipher without IV mode, a
# hex key with an odd number of digits).
#
# Each case is loaded as its own device by ours (o-N) and by the reference
# (r-N) over the same 128 KiB of the ramdisk. Per case it prints
#   MAINLINE id=N ss=BYTES kind=KIND ours=OUTCOME ref=OUTCOME params="PARAMS"
# and, where both load it, compares (target names normalised to crypt):
#   - dmsetup table --showkeys and dmsetup status (STATUSTYPE_INFO) lines;
#   - dmsetup measure (STATUSTYPE_IMA) lines;
#   - data: random data written through ours (buffered, then flushed) reads back
#     through the reference, the raw bytes are not the plaintext; the segment
#     zeroed, the same data written through the reference leaves the same raw
#     bytes and reads back through ours;
# and prints
#   MAINLINE-SAME id=N table=yes|no status=yes|no ima=yes|no data=yes|no
# tests/run-guest-tests hands the lines to tests/reference/mainline.py judge,
# which checks the acceptance (the same, or ours stricter as
# Documentation/dm-crypt-lbs.rst lists, each counted by name) and prints the
# counts. This script fails on any difference in what both loaded.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

ko=/lbs/files/dm-crypt-ref.ko
dev=/dev/ram0
seg=$((128 << 10))
seglen=$((seg / 512))
big_ivo=18446744073709551360	# 2^64 - 256: a multiple of 65536 / 512
full=${LBS_MAINLINE_FULL:-0}

[ -f "$ko" ] || fail "no $ko: the host builds it with qemu/lib/mainline-dmcrypt and passes it with --file"
if [ -z "$(target_version crypt)" ] || [ -z "$(target_version crypt_lbs)" ]; then
	fail "needs --module both (stock as crypt, ours as crypt_lbs): $(dmsetup targets | tr '\n' ' ')"
fi
max=$(bound)
[ "$max" -gt 4096 ] || fail "the page size is $(page_size): there is no sector size above 4096 to compare"
on_exit rmmod dm_crypt_ref
on_exit dmsetup remove_all
insmod "$ko" || fail "insmod $ko failed: $(dmesg | tail -n 3 | tr '\n' ' ')"
[ "$(target_version crypt_ref)" = v1.30.0 ] || fail "crypt_ref is not v1.30.0: $(dmsetup targets | tr '\n' ' ')"
[ "$(target_version crypt_lbs)" = v1.30.0 ] || fail "crypt_lbs is not v1.30.0: $(dmsetup targets | tr '\n' ' ')"
modprobe -q dm-integrity 2>/dev/null || true
mapfile -t sizes < <(sizes_upto "$max" | awk '$1 > 4096')
printf 'mainline: reference crypt_ref %s (stock crypt %s), sizes %s, %s\n' "$(target_version crypt_ref)" \
	"$(target_version crypt)" "${sizes[*]}" "$([ "$full" = 1 ] && echo 'full product' || echo 'pairwise cover')"

# the specs both load, with their key sizes in bytes
specs=("aes-xts-plain64 64" "aes-xts-plain64 32" "aes-xts-plain 64" "aes-xts-plain64be 64"
	"aes-cbc-plain64 16" "aes-cbc-essiv:sha256 16" "aes-cbc-essiv:sha256 32" "aes-cbc-benbi 32"
	"aes-cbc-null 16" "aes-cbc-eboiv 32" "aes-cbc-elephant 32" "aes-cbc-elephant 64"
	"capi:xts(aes)-plain64 64" "capi:cbc(aes)-essiv:sha256 32" "capi:xts(aes)-plain64be 32"
	"serpent-xts-plain64 64" "twofish-cbc-essiv:sha256 32")

# A dm-integrity device with 4096-byte blocks and 28-byte tags (no internal
# hash: the tags are dm-crypt's), at the end of the ramdisk, for the refusal of
# integrity above 4096.
ram=$(($(blockdev --getsz "$dev")))
int_len=$((8 << 11))
int_off=$((ram - int_len))
dmsetup create ml-intbase --table "0 $int_len linear $dev $int_off" || fail "cannot map the ramdisk's end"
dd if=/dev/zero of=/dev/mapper/ml-intbase bs=1M oflag=direct status=none 2>/dev/null || true
integritysetup format -q --no-wipe --tag-size 28 --sector-size 4096 /dev/mapper/ml-intbase >/dev/null ||
	fail "integritysetup format --tag-size 28 --sector-size 4096 failed"
int_sectors=$(integritysetup dump /dev/mapper/ml-intbase | sed -n 's/.*provided_data_sectors *//p')
[ -n "$int_sectors" ] || fail "integritysetup dump shows no provided_data_sectors"
dmsetup create ml-int --table "0 $int_sectors integrity /dev/mapper/ml-intbase 0 28 D 1 block_size:4096" ||
	fail "cannot map dm-integrity with 4096-byte blocks: $(dmesg | tail -n 2 | tr '\n' ' ')"
intdev=$(dm_blkdev ml-int)

# outcome OUT: ok, or the errno name of dmsetup's message OUT
outcome() {
	case $1 in
	*"Invalid argument"*) echo EINVAL ;;
	*"Cannot allocate memory"*) echo ENOMEM ;;
	*"No such device or address"*) echo ENXIO ;;
	*"Device or resource busy"*) echo EBUSY ;;
	*"No such file or directory"*) echo ENOENT ;;
	*) echo "other:$(printf '%s' "$1" | tr -c 'A-Za-z0-9\n' _ | head -n 1 | cut -c1-40)" ;;
	esac
}

# compare_batch: compare the cases in both[] (loaded by both, devices o-N and
# r-N), print their MAINLINE-SAME lines, then remove their devices. dm-crypt
# keeps a pool of 256 pages a device (16 MiB with 64K pages), so the cases go
# in batches, not all at once.
same=0 loaded=0 shown=0
plain=/tmp/mainline.plain
head -c "$seg" /dev/urandom >"$plain"
want=$(sha256sum <"$plain" | cut -d' ' -f1)
zero=$(head -c "$seg" /dev/zero | sha256sum | cut -d' ' -f1)
compare_batch() {
	local id k t s m d why o_devs=() r_devs=() raw_devs=() spec=""
	local -A tab=() sta=() ima=()
	[ "${#both[@]}" -gt 0 ] || return 0
	listing tab table --showkeys
	listing sta status
	# IMA: dmsetup measure prints each mapping's STATUSTYPE_IMA line
	listing ima measure
	[ "${#ima[@]}" -gt 0 ] || fail "dmsetup measure printed no line for any mapping: $(dmsetup measure 2>&1 | head -n 3 | tr '\n' ' ')"
	if [ "$shown" = 0 ]; then
		printf 'mainline: case %s, as ours prints it: table %s; IMA %s\n' "${both[0]}" "${tab[o-${both[0]}]:-}" "${ima[o-${both[0]}]:-}" |
			sed -E 's/ [0-9a-f]{32,} / <key> /'
		shown=1
	fi
	# the data, both directions, over each case's own segment
	for id in "${both[@]}"; do
		o_devs+=("/dev/mapper/o-$id") r_devs+=("/dev/mapper/r-$id") raw_devs+=("/dev/mapper/raw-$id")
		spec+="${spec:+;}raw-$id,,,rw,0 $seglen linear $dev $((id * seglen))"
	done
	dmsetup create --concise "$spec" || fail "cannot map the raw views of cases ${both[*]}"
	zero_segments
	tee "${o_devs[@]}" <"$plain" >/dev/null || fail "writing through ours failed (cases ${both[*]})"
	mapfile -t raw_o < <(sums "${raw_devs[@]}")
	mapfile -t read_r < <(sums "${r_devs[@]}")
	zero_segments
	blockdev --flushbufs "${o_devs[@]}" "${r_devs[@]}"
	tee "${r_devs[@]}" <"$plain" >/dev/null || fail "writing through the reference failed (cases ${both[*]})"
	mapfile -t raw_r < <(sums "${raw_devs[@]}")
	mapfile -t read_o < <(sums "${o_devs[@]}")
	if [ "${#raw_o[@]}" != "${#both[@]}" ] || [ "${#raw_r[@]}" != "${#both[@]}" ]; then
		fail "read ${#raw_o[@]} and ${#raw_r[@]} segments, expected ${#both[@]}"
	fi
	for ((k = 0; k < ${#both[@]}; k++)); do
		id=${both[$k]}
		t=yes s=yes m=yes d=yes why=()
		if [ -z "${tab[o-$id]:-}" ] || [ "${tab[o-$id]}" != "${tab[r-$id]:-}" ]; then
			t=no why+=("table: ours '${tab[o-$id]:-}', reference '${tab[r-$id]:-}'")
		fi
		if [ "${sta[o-$id]:-x}" != "${sta[r-$id]:-y}" ]; then
			s=no why+=("status: ours '${sta[o-$id]:-}', reference '${sta[r-$id]:-}'")
		fi
		if [ -z "${ima[o-$id]:-}" ] || [ "${ima[o-$id]}" != "${ima[r-$id]:-}" ]; then
			m=no why+=("IMA: ours '${ima[o-$id]:-}', reference '${ima[r-$id]:-}'")
		fi
		[ "${raw_o[$k]}" = "${raw_r[$k]}" ] || d=no why+=("the same data leaves other raw bytes through ours than through the reference")
		[ "${read_r[$k]}" = "$want" ] || d=no why+=("written through ours, read through the reference: differs")
		[ "${read_o[$k]}" = "$want" ] || d=no why+=("written through the reference, read through ours: differs")
		if [ "${raw_o[$k]}" = "$want" ] || [ "${raw_o[$k]}" = "$zero" ]; then
			d=no why+=("the raw segment holds the plaintext or nothing")
		fi
		printf 'MAINLINE-SAME id=%s table=%s status=%s ima=%s data=%s\n' "$id" "$t" "$s" "$m" "$d"
		if [ "${#why[@]}" -gt 0 ]; then
			soft_fail "case $id ($(grep -o "sector_size:[0-9]*" <<<"${tab[o-$id]:-}" | head -n 1)): $(printf '%s; ' "${why[@]}")"
		else
			same=$((same + 1))
		fi
	done
	for id in "${both[@]}"; do
		dm_remove "o-$id"
		dm_remove "r-$id"
		dm_remove "raw-$id"
	done
	loaded=$((loaded + ${#both[@]}))
	both=()
}
# listing ARRAY DMSETUP-ARGS...: ARRAY[name] = the lines of each case's
# mappings in that dmsetup listing, the target name normalised to crypt
listing() {
	local -n into=$1
	local line name
	shift
	while IFS= read -r line; do
		case $line in [or]-[0-9]*:*) ;; *) continue ;; esac
		name=${line%%:*}
		line=${line#*: }
		line=${line//crypt_lbs/crypt}
		line=${line//crypt_ref/crypt}
		into["$name"]+="$line|"
	done < <(dmsetup "$@" 2>&1)
}
sums() {	# sums DEV...: sha256 of each, one a line, read after dropping the caches
	blockdev --flushbufs "$@"
	sha256sum "$@" | cut -d' ' -f1
}
zero_segments() {	# zero_segments: the segments of the cases in both[], with one dd
	local first=${both[0]} last=${both[-1]}
	dd if=/dev/zero of="$dev" bs="$seg" seek="$first" count=$((last - first + 1)) oflag=direct status=none
}
# cases loaded at once: 256 MiB of the two targets' page pools (32 cases on
# 16K pages, 8 on 64K)
batch=$(((256 << 20) / (2 * 256 * $(page_size))))
[ "$batch" -ge 1 ] || batch=1

n=0
both=()
# add KIND SS PARAMS: case n, loaded by ours and by the reference
add() {
	local kind=$1 ss=$2 params=$3 out o=ok r=ok
	out=$(dmsetup create "o-$n" --table "0 $seglen crypt_lbs $params" 2>&1) || o=$(outcome "$out")
	out=$(dmsetup create "r-$n" --table "0 $seglen crypt_ref $params" 2>&1) || r=$(outcome "$out")
	printf 'MAINLINE id=%s ss=%s kind=%s ours=%s ref=%s params="%s"\n' "$n" "$ss" "$kind" "$o" "$r" "$params"
	if [ "$o" = ok ] && [ "$r" = ok ]; then
		both+=("$n")
		n=$((n + 1))
		[ "${#both[@]}" -lt "$batch" ] || compare_batch
		return 0
	else
		dm_remove "o-$n"
		dm_remove "r-$n"
	fi
	n=$((n + 1))
}
# opts SS IVLS: the optional parameters
opts() {
	if [ "$2" = 1 ]; then printf '2 sector_size:%s iv_large_sectors' "$1"; else printf '1 sector_size:%s' "$1"; fi
}

nsz=${#sizes[@]}
for ((i = 0; i < ${#specs[@]}; i++)); do
	read -r spec kb <<<"${specs[$i]}"
	key=$(test_key "$kb")
	for ((j = 0; j < nsz; j++)); do
		ss=${sizes[$j]}
		if [ "$full" = 1 ]; then
			for ivls in 0 1; do
				for ivo in 0 "$big_ivo"; do
					add both "$ss" "$spec $key $ivo $dev $((n * seglen)) $(opts "$ss" "$ivls")"
				done
			done
		else
			# pairwise: iv_large_sectors varies with the size within each spec, and
			# iv_offset too but shifted every other spec, so that the four pairs of
			# (iv_large_sectors, iv_offset) all occur
			ivls=$(((i + j) % 2))
			ivo=0
			[ $(((j + i / 2) % 2)) = 0 ] || ivo=$big_ivo
			add both "$ss" "$spec $key $ivo $dev $((n * seglen)) $(opts "$ss" "$ivls")"
		fi
	done
done

# refusals: both must refuse (lmk and tcw are defined on 512-byte sectors,
# random needs integrity metadata, dm-integrity's blocks stop at 4096)
refusals=("refuse-lmk aes-cbc-lmk $(test_key 32) 0 DEV"
	"refuse-tcw aes-cbc-tcw $(test_key 64) 0 DEV"
	"refuse-random aes-xts-random $(test_key 64) 0 DEV"
	"refuse-integrity capi:gcm(aes)-random $(test_key 32) 0 INT")
for ((r = 0; r < ${#refusals[@]}; r++)); do
	read -r kind spec key ivo where <<<"${refusals[$r]}"
	for ((j = 0; j < nsz; j++)); do
		[ "$full" = 1 ] || [ "$j" = $((r % nsz)) ] || continue
		ss=${sizes[$j]}
		if [ "$where" = INT ]; then
			add "$kind" "$ss" "$spec $key $ivo $intdev 0 2 integrity:28:aead sector_size:$ss"
		else
			add "$kind" "$ss" "$spec $key $ivo $dev $((n * seglen)) 1 sector_size:$ss"
		fi
	done
done

# ours stricter, as documented: the reference loads, ours refuses
ss=${sizes[0]}
key64=$(test_key 64)
add num-lenient:sector_size-above-32-bits "$ss" "aes-xts-plain64 $key64 0 $dev $((n * seglen)) 1 sector_size:$((ss + (1 << 32)))"
add num-lenient:iv_offset-above-64-bits "$ss" "aes-xts-plain64 $key64 18446744073709551616 $dev $((n * seglen)) 1 sector_size:$ss"
add stricter-capi-without-iv "$ss" "capi:xts(aes) $key64 0 $dev $((n * seglen)) 1 sector_size:$ss"
add stricter-odd-hex-key "$ss" "aes-xts-plain64 ${key64}0 0 $dev $((n * seglen)) 1 sector_size:$ss"
dmesg -c >/dev/null 2>&1 || true

compare_batch
dmesg -c >/dev/null 2>&1 || true
[ "$loaded" -gt 0 ] || fail "no case loaded by both ours and the reference"
printf 'MAINLINE-SUMMARY cases=%s loaded-by-both=%s identical=%s\n' "$n" "$loaded" "$same"
[ "$LBS_FAILS" -gt 0 ] || ok "$n cases; $loaded loaded by both, each with the same table, status, IMA line and data both ways"
