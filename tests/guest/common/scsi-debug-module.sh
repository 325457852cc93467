#!/usr/bin/env bash
# DESCRIPTION: puts the host's scsi_debug where modprobe finds it (run by suite.sh)
#
# scsi-debug-module.sh: a kernel built without scsi_debug (Debian's arm64 ones)
# gets it from the host (qemu/lib/scsi-debug builds it from the kernel's own
# source) in /lbs/files; this puts it where modprobe finds it. Run by suite.sh
# before its tests and by cryptsetup-upstream.sh; nothing to do without the file,
# or once done. Not a test of its own.
set -euo pipefail
ko=/lbs/files/scsi_debug.ko
dir=/lib/modules/$(uname -r)/extra
[ -f "$ko" ] || exit 0
! cmp -s "$ko" "$dir/scsi_debug.ko" || exit 0
mkdir -p "$dir"
cp "$ko" "$dir/"
depmod -a || { echo "FAIL ${0##*/}: depmod after adding $ko failed" >&2; exit 1; }
