#!/usr/bin/env bash
# DESCRIPTION: what this test checks, in one line (the tables of testing.rst show it)
# BOOT: both
#   the qemu/run --module of the boot that runs it: both (stock as crypt, ours
#   as crypt_lbs), lbscrypt (ours as crypt) or stock (stock alone); a second
#   BOOT line puts it in a second boot, "BOOT: stock arm64-64k" on one kernel only
# KERNELS: none
#   where make check runs it, among the kernels of qemu/kernels.conf: all, none,
#   kernel ids, page>4096, page=65536; "-ID" leaves one out ("all -arm64-4k")
# FULL-KERNELS: none
#   where it runs with LBS_GUEST_ALL=1 (make check-full) and on every kernel
#   outside qemu/kernels.conf (make harden's debug kernel, kernels-extra.conf's):
#   usually all
# LIMIT: 120 the seconds after which suite.sh kills it, then why that many
#   (about four times the longest it takes on the slowest kernel, loaded)
# NEEDS: none
#   what it needs beside the guest's usual tools, words common/lib.sh's
#   need_met checks before the test starts: engine (/lbs/kmod/lbs-engine.ko),
#   scsi_debug, mainline-ref or cryptsetup-src (the runner builds these three
#   and hands them to the boot), readme (README.md, handed over as it is), tool,
#   null_blk, dm-integrity, ...; one the guest lacks fails the test, unless a
#   line "# MAY-LACK: WORD SET" names the kernel: then the test goes on without
#   it and skips what needs it, case by case (skip_lacking WORD CASE)
# ORDER: 500
#   its place in its boot, lower first (the cheap broad tests run first)
#
# TEMPLATE.sh: the guest test to copy to tests/guest/NAME.sh (tests/README),
# where it runs (its lib.sh is common/lib.sh from there): qemu/run arm64-64k
# --module both -- bash /lbs/tests/guest/common/suite.sh NAME. As it is here
# it is placed nowhere (KERNELS and FULL-KERNELS none), which
# tests/guest-headers check refuses of a test until one of them names kernels.
# Here the header's free text says what the test proves, case by case: data
# written through ours at the largest sector size this kernel takes reads
# back, and the ciphertext on the ramdisk is not the plaintext.
set -euo pipefail
# lib.sh prints uname -r and dmsetup targets first, gives fail, soft_fail, ok,
# on_exit, dm_remove, test_key, put, sha_of, bound, load_engine and the rest
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

dev=/dev/ram0
len=2048 # sectors of 512 bytes: 1 MiB
map="lbs-template"
on_exit dm_remove "$map"
head -c $((len * 512)) /dev/urandom >/tmp/template.data
want=$(sha256sum </tmp/template.data | cut -d' ' -f1)

ss=$(bound) # the largest sector size here (the page size, up to 65536)
dmsetup create "$map" --table "0 $len crypt_lbs aes-xts-plain64 $(test_key 64) 0 $dev 0 1 sector_size:$ss" ||
	fail "ours refused a table at sector size $ss"
put /tmp/template.data "/dev/mapper/$map" 65536
[ "$(sha_of "/dev/mapper/$map" $((len * 512)) 65536)" = "$want" ] ||
	fail "ss=$ss: what was written does not read back"
ok "ss=$ss: the data reads back"
[ "$(sha_of "$dev" $((len * 512)) 65536)" != "$want" ] || fail "ss=$ss: the ramdisk holds the plaintext"
ok "ss=$ss: the ramdisk holds no plaintext"
