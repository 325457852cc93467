#!/usr/bin/env bash
# DESCRIPTION: the emulated offload engine is a correct cipher, queues like a driver, fails on demand
# BOOT: both
# KERNELS: arm64-64k arm64-64k-7.3
# FULL-KERNELS: all
# LIMIT: 360 20 ms a request; ~80 s on arm64-64k
# NEEDS: engine
# ORDER: 150
#
# engine.sh: the emulated offload engine (tests/engine/) is a
# correct cipher, queues like a driver and injects errors. Needs stock as crypt
# and ours as crypt_lbs (`--module both`) and /lbs/kmod/lbs-engine.ko
# (qemu/lib/build-engine). Checks:
# - registration: /proc/crypto lists lbs-engine-xts-aes as an asynchronous
#   xts(aes) whose self-test passed, with a priority below every other xts(aes);
#   a mapping of plain aes-xts-plain64 does not use it;
# - known answer: through stock and ours, at 512, 4096 (and ours at the page
#   size), capi:lbs-engine-xts-aes-plain64 writes exactly the bytes the software
#   aes-xts-plain64 writes with the same key, each reads what the other wrote,
#   and the engine counted the requests;
# - queue discipline (the engine idle, 200 ms latency): queue_depth requests
#   without MAY_BACKLOG return -EINPROGRESS, one more -ENOSPC, one with
#   MAY_BACKLOG -EBUSY and is told -EINPROGRESS once before it completes;
# - backlog under load: queue_depth 2, 2 channels, 64 I/Os in flight through each
#   target: fio's crc32c verification passes, requests were backlogged, the queue
#   never held more than 2;
# - backlog throttled: one bio at a time (512-byte sectors, 8 channels, a queue of
#   8 that complete together): through stock and ours, the engine's backlog never
#   holds more than the one request its converter waits on;
# - error injection: error_rate_ppm=1000000 makes direct reads and writes through
#   both targets fail with EIO and the data stay; 300000 fails about 30 % of 200 direct reads, each as EIO.
# The queue discipline runs at queue depth 4; under load no request is refused.
# At error_rate_ppm=300000 fio sees exactly the errors the engine injected, and
# those must be 30 to 90 of the 200 (about 60 expected).
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

ko=$LBS_ENGINE_KO
drv='lbs-engine-xts-aes'
spec=capi:$drv-plain64
sysd=/sys/kernel/lbs_engine
params=/sys/module/lbs_engine/parameters
key=$(test_key 64)
dev=/dev/ram0
data=$((256 << 10))	# bytes per known-answer case
len=$((data / 512))
plain=/tmp/engine-plain
log=/tmp/engine-fio.log

[ -f "$ko" ] || fail "no $ko: the engine is not built for $(uname -r) (qemu/lib/build-engine)"

# counter NAME: one counter of the engine
counter() {
	awk -v n="$1" '$1 == n { print $2 }' "$sysd/stats"
}
on_exit dm_remove lbs-eng
on_exit dm_remove lbs-cpu

# map NAME TARGET CIPHER SS: a mapping of the first $data bytes of the ramdisk
map() {
	dmsetup create "$1" --table "0 $len $2 $3 $key 0 $dev 0 1 sector_size:$4" ||
		fail "$2 $3 sector_size:$4: the table was refused: $(ti_error)"
}

# --- registration
deps=$(modinfo -F depends "$ko" | tr ',' ' ')
# shellcheck disable=SC2086 # a list of module names
[ -z "$deps" ] || modprobe -a $deps
load_engine
# the registered algorithm's block of /proc/crypto (not a larval's); the
# kernel's self-test of a new algorithm may finish after insmod returns
entry=
for _ in $(seq 1 50); do
	entry=$(awk -v d="$drv" '/^name/ { block = ""; found = 0 } { block = block $0 "\n" }
		$1 == "driver" && $3 == d { drv = 1 } $1 == "module" && $3 == "lbs_engine" && drv { found = 1 }
		$1 == "name" { drv = 0 } /^$/ { if (found) { printf "%s", block; exit } }' /proc/crypto)
	case $entry in *"selftest     : passed"*) break ;; esac
	sleep 0.2
done
[ -n "$entry" ] || fail "/proc/crypto has no driver $drv after insmod"
field() { printf '%s' "$entry" | awk -v f="$1" '$1 == f { print $3 }'; }
[ "$(field name)" = "xts(aes)" ] || fail "$drv registers name '$(field name)', expected xts(aes)"
[ "$(field async)" = yes ] || fail "$drv is not asynchronous (async: '$(field async)')"
[ "$(field selftest)" = passed ] || fail "$drv: the kernel's self-test did not pass (selftest: '$(field selftest)')"
ours_prio=$(field priority)
others=$(awk -v d="$drv" '$1 == "name" { n = $3 } $1 == "driver" { dr = $3 }
	$1 == "priority" && n == "xts(aes)" && dr != d { print $3 }' /proc/crypto | sort -n | head -n 1)
[ -n "$others" ] || fail "no other xts(aes) in /proc/crypto to compare $drv's priority with (the fallback should be one)"
[ "$ours_prio" -lt "$others" ] || fail "$drv has priority $ours_prio, not below the lowest other xts(aes) ($others)"
ok "registered: $drv, xts(aes), async, self-test passed, priority $ours_prio < $others"

pattern "$data" >"$plain"
want=$(sha256sum <"$plain" | cut -d' ' -f1)
before=$(counter completed)
map lbs-cpu crypt aes-xts-plain64 4096
put "$plain" "$(dm_blkdev lbs-cpu)"
[ "$(sha_of "$(dm_blkdev lbs-cpu)" "$data")" = "$want" ] || fail "aes-xts-plain64 through stock did not read back its plaintext"
dm_remove lbs-cpu
[ "$(counter completed)" = "$before" ] || fail "a plain aes-xts-plain64 mapping used the engine ($before -> $(counter completed) requests)"
ok "aes-xts-plain64 without capi: does not reach the engine"

# --- known answer, both targets
sizes() {	# the sector sizes a target takes here (stock: up to 4096)
	local s
	for s in 512 4096 "$(bound)"; do
		[ "$1" = crypt_lbs ] || [ "$s" -le 4096 ] || continue
		printf '%s\n' "$s"
	done | sort -nu
}
for target in crypt crypt_lbs; do
	for ss in $(sizes "$target"); do
		# the software side: stock where it takes the size, ours above 4096
		soft=crypt
		[ "$ss" -le 4096 ] || soft=crypt_lbs
		what="$target $spec sector_size:$ss against $soft aes-xts-plain64"
		before=$(counter completed)
		map lbs-eng "$target" "$spec" "$ss"
		map lbs-cpu "$soft" aes-xts-plain64 "$ss"
		eng=$(dm_blkdev lbs-eng) cpu=$(dm_blkdev lbs-cpu)
		[ "$(dmsetup table lbs-eng | awk '{ print $4 }')" = "$spec" ] ||
			fail "$what: dmsetup table shows cipher '$(dmsetup table lbs-eng | awk '{ print $4 }')'"
		put "$plain" "$eng"
		by_engine=$(sha_of "$dev" "$data")
		[ "$by_engine" != "$want" ] || fail "$what: the engine wrote the plaintext itself"
		got=$(sha_of "$cpu" "$data")
		[ "$got" = "$want" ] || fail "$what: data the engine wrote does not read back through the software cipher"
		dd if=/dev/zero of="$dev" bs=64k count=$((data >> 16)) oflag=direct status=none
		put "$plain" "$cpu"
		by_cpu=$(sha_of "$dev" "$data")
		[ "$by_cpu" = "$by_engine" ] || fail "$what: ciphertext differs (engine $by_engine, software $by_cpu)"
		got=$(sha_of "$eng" "$data")
		[ "$got" = "$want" ] || fail "$what: data the software cipher wrote does not read back through the engine"
		dm_remove lbs-eng
		dm_remove lbs-cpu
		reqs=$(($(counter completed) - before))
		[ "$reqs" -ge $((2 * data / ss)) ] ||
			fail "$what: the engine completed $reqs requests, expected at least $((2 * data / ss)) (one per sector written and read)"
		ok "$what: same ciphertext, each reads the other's, $reqs engine requests"
	done
done

# --- queue discipline, driven from inside the kernel
load_engine channels=1 queue_depth=4 latency_us=200000
echo queue >"$sysd/measure" || fail "the queue check could not run: $(dmesg | tail -n 3)"
got=$(cat "$sysd/measure")
expect="queue depth=4 inprogress=4 nospc=1 busy=1 other=0 notified=1 done=5 errors=0"
[ "$got" = "$expect" ] || fail "queue discipline: got '$got', expected '$expect'"
ok "queue discipline: $got"

# --- backlog under load: 64 I/Os of 64 KiB (16 requests each) against a queue of 2
load_engine channels=2 queue_depth=2 latency_us=500
for target in crypt crypt_lbs; do
	dmsetup create lbs-eng --table "0 $((8 << 11)) $target $spec $key 0 $dev 0 1 sector_size:4096" ||
		fail "$target $spec: refused: $(ti_error)"
	b0=$(counter backlogged) r0=$(counter rejected)
	if ! fio --name=lbs --filename="$(dm_blkdev lbs-eng)" --rw=randrw --bs=64k --direct=1 \
		--ioengine=libaio --iodepth=16 --numjobs=4 --size=1m --offset_increment=1m \
		--verify=crc32c --verify_fatal=1 --randrepeat=1 >"$log" 2>&1; then
		cat "$log"
		fail "$target: fio with 64 I/Os in flight through a queue of 2 failed"
	fi
	fio_clean "$log" || { cat "$log"; fail "$target: fio reported errors"; }
	dm_remove lbs-eng
	backlogged=$(($(counter backlogged) - b0)) rejected=$(($(counter rejected) - r0))
	[ "$backlogged" -gt 0 ] || fail "$target: no request was backlogged with 64 I/Os against a queue of 2"
	[ "$rejected" = 0 ] || fail "$target: $rejected requests were refused with -ENOSPC; dm-crypt always allows the backlog"
	[ "$(counter peak)" -le 2 ] || fail "$target: the queue held $(counter peak) requests, its depth is 2"
	ok "$target: 64 I/Os through a queue of 2: fio verified, $backlogged requests backlogged (-EBUSY), peak $(counter peak)"
done

# --- one backlogged request per converter: one writer, then one reader (one bio
# in flight, 128 requests of 512 bytes each) against 8 channels and a queue of 8
# that complete together. After -EBUSY a converter waits until the driver takes
# its request from the backlog (-EINPROGRESS), as dm-crypt does, so the backlog
# never holds more than 1; one that went on at the end of any earlier request
# piled its requests up there.
for target in crypt crypt_lbs; do
	load_engine channels=8 queue_depth=8 latency_us=2000
	dmsetup create lbs-eng --table "0 $((8 << 11)) $target $spec $key 0 $dev 0" ||
		fail "$target $spec: refused: $(ti_error)"
	for rw in write read; do
		if ! fio --name=lbs --filename="$(dm_blkdev lbs-eng)" --rw="$rw" --bs=64k --direct=1 \
			--ioengine=psync --size=2m >"$log" 2>&1 || ! fio_clean "$log"; then
			cat "$log"
			fail "$target: one $rw stream through a queue of 8 failed"
		fi
	done
	dm_remove lbs-eng
	[ "$(counter backlogged)" -gt 0 ] || fail "$target: no request was backlogged: the case tested nothing"
	[ "$(counter backlog_peak)" -le 1 ] ||
		fail "$target: one bio at a time left $(counter backlog_peak) requests in the backlog at once; a converter must wait for its backlogged request to be taken (at most 1)"
	ok "$target: one bio at a time: $(counter backlogged) requests backlogged, never more than $(counter backlog_peak) at once"
done

# --- error injection
load_engine latency_us=100
for target in crypt crypt_lbs; do
	map lbs-eng "$target" "$spec" 4096
	eng=$(dm_blkdev lbs-eng)
	put "$plain" "$eng"
	i0=$(counter injected)
	echo 1000000 >"$params/error_rate_ppm"
	if out=$(dd if="$eng" of=/dev/null bs=4096 count=1 iflag=direct 2>&1); then
		fail "$target: a read succeeded with error_rate_ppm=1000000"
	fi
	case $out in *"I/O error"* | *"Input/output error"*) ;; *) fail "$target: the read failed, but not with EIO: $out" ;; esac
	if out=$(dd if=/dev/zero of="$eng" bs=4096 count=1 oflag=direct 2>&1); then
		fail "$target: a write succeeded with error_rate_ppm=1000000"
	fi
	case $out in *"I/O error"* | *"Input/output error"*) ;; *) fail "$target: the write failed, but not with EIO: $out" ;; esac
	echo 0 >"$params/error_rate_ppm"
	[ "$(($(counter injected) - i0))" -ge 2 ] || fail "$target: the engine counted $(($(counter injected) - i0)) injected errors, expected 2 or more"
	[ "$(sha_of "$eng" "$data")" = "$want" ] || fail "$target: after the injected errors the data is not what was written"
	ok "$target: error_rate_ppm=1000000: read and write fail with EIO, the data stays"
	dm_remove lbs-eng
done
# a share: 200 direct one-request reads at 30 % (fio goes on after a read error;
# busybox dd would retry a failed O_DIRECT read through the page cache)
map lbs-eng crypt_lbs "$spec" 4096
i0=$(counter injected) c0=$(counter completed)
echo 300000 >"$params/error_rate_ppm"
fio --name=lbs --filename="$(dm_blkdev lbs-eng)" --rw=randread --bs=4096 --direct=1 --ioengine=psync \
	--size=256k --io_size=$((200 * 4096)) --continue_on_error=read --output-format=json >"$log" 2>&1 || true
echo 0 >"$params/error_rate_ppm"
dm_remove lbs-eng
injected=$(($(counter injected) - i0)) done=$(($(counter completed) - c0))
errs=$(sed -n 's/.*"total_err" : \([0-9]*\).*/\1/p' "$log" | head -n 1)
[ -n "$errs" ] || { cat "$log"; fail "error_rate_ppm=300000: fio reported no total_err"; }
[ "$((injected + done))" = 200 ] || fail "error_rate_ppm=300000: the engine saw $((injected + done)) requests for 200 one-request reads"
[ "$errs" = "$injected" ] || fail "error_rate_ppm=300000: fio saw $errs read errors, the engine injected $injected"
# 30 % of 200 is 60; outside 30..90 is a 1-in-10^5 event for a fair coin
if [ "$injected" -lt 30 ] || [ "$injected" -gt 90 ]; then
	fail "error_rate_ppm=300000: $injected of 200 requests failed, expected about 60 (30..90)"
fi
ok "error_rate_ppm=300000: $injected of 200 one-request reads failed with EIO (fio: $errs errors)"
