#!/usr/bin/env bash
# DESCRIPTION: integrity.sh on 5 of its formats, the engine case and every refusal
# BOOT: both
# KERNELS: arm64-64k arm64-4k-6.1 arm64-64k-7.3
#   a second kernel API: 6.1's integrity profiles and authenc(); 7.3's new one
# FULL-KERNELS: none
#   integrity runs all 32 formats there
# LIMIT: 300 5 of them, the engine case, the refusals
# NEEDS: dm-integrity engine
# ORDER: 160
#
# integrity-core.sh: integrity.sh on 5 of its 32 LUKS2 formats, the ones that
# also flip a byte of a tag on the ramdisk (HMAC-SHA256 over CBC-ESSIV at 512
# and over XTS with random IVs at 512 and 4096; GCM and ChaCha20-Poly1305 with
# random IVs at 512), with its asynchronous AEAD case and every refusal: for a
# second kernel API (6.1's integrity profiles and authenc()) within make check's
# budget. Needs what integrity.sh needs.
set -euo pipefail
LBS_INTEGRITY_CASES=meta LBS_TEST_NAME=integrity-core.sh exec bash "$(dirname "$0")/integrity.sh"
