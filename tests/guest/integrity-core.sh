#!/usr/bin/env bash
# integrity-core.sh: integrity.sh on 5 of its 32 LUKS2 formats, the ones that
# also flip a byte of a tag on the ramdisk (HMAC-SHA256 over CBC-ESSIV at 512
# and over XTS with random IVs at 512 and 4096; GCM and ChaCha20-Poly1305 with
# random IVs at 512), with its asynchronous AEAD case and every refusal: for a
# second kernel API (6.1's integrity profiles and authenc()) within make check's
# budget. Needs what integrity.sh needs.
set -euo pipefail
LBS_INTEGRITY_CASES=meta LBS_TEST_NAME=integrity-core.sh exec bash "$(dirname "$0")/integrity.sh"
