#!/usr/bin/env python3
"""An independent model of dm-crypt's on-disk format, for the guest tests.

The guest writes a known plaintext through a crypt target and prints the sha256
of the raw device (tests/guest/reference.sh and friends, one REFERENCE line per
case). This script computes the ciphertext dm-crypt must have written, with
python3-cryptography, and compares. It shares nothing with the module: it is
written from dm-crypt's documented format (Documentation/admin-guide/
device-mapper/dm-crypt.rst and the behaviour of drivers/md/dm-crypt.c):

* The mapping is cut into encryption sectors of sector_size bytes; each one is
  encrypted on its own (one XTS data unit, one CBC chain).
* Encryption sector u (from 0 at the start of the mapping) starts at 512-byte
  sector s = iv_offset + u * sector_size / 512. The IV counts that number s in
  512-byte units, also for large sectors, unless iv_large_sectors is set: then it
  counts sector_size units, s / (sector_size / 512).
* plain64: the IV is that number, 64-bit little-endian, zero-padded to the
  cipher's block. essiv:sha256: that plain64 block encrypted (ECB) with
  sha256(volume key) as the key.
* elephant (BitLocker's AES-CBC + Elephant diffuser, from Ferguson's 2006 paper
  "AES-CBC + Elephant diffuser"): the key is the CBC key followed by a sector-key
  key Ks of the same size. The sector's byte offset o is that IV number times
  sector_size (dm-crypt's eboiv; also without iv_large_sectors). The IV is the
  AES encryption of o as a 16-byte little-endian block. Before CBC the sector is
  XORed with AES(Ks, o) || AES(Ks, o with its last byte 0x80), repeated, then run
  through the inverse of diffuser A and the inverse of diffuser B (see
  `diffuser`).

The plaintext (the same bytes as tests/guest/common/lib.sh `pattern`): 16-byte record i
is i in lowercase hex, zero-padded to 15 digits, then a newline. The key (lib.sh
`test_key`): bytes 0, 1, 2, ... of the cipher's key length.

Usage:
  dmcrypt_ref.py check LOG...   compare every REFERENCE line of the logs; prints
                                one line per case; exit 1 on any mismatch or if
                                there are no lines at all
  dmcrypt_ref.py sha CIPHER SECTOR_SIZE IV_LARGE_SECTORS IV_OFFSET BYTES
                                print the expected sha256 of one case
"""

import hashlib
import struct
import sys

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

KEY_BYTES = {"aes-xts-plain64": 64, "aes-cbc-essiv:sha256": 32, "aes-cbc-elephant": 64}
MASK32 = 2**32 - 1


def rol32(x, r):
    return ((x << r) | (x >> (32 - r))) & MASK32 if r else x


def diffuser(words, cycles, o1, o2, rot, inverse):
    """The paper's diffuser on a list of 32-bit words, in place: each cycle,
    for i = 0 .. n-1, d[i] += d[i + o1] ^ rol(d[i + o2], rot[i mod 4]) (indices
    mod n). Diffuser A: 5 cycles, o1 -2, o2 -5, rot (9, 0, 13, 0); diffuser B:
    3 cycles, o1 2, o2 5, rot (0, 10, 0, 25). The inverse walks i from n-1 down
    and subtracts."""
    n = len(words)
    order = range(n - 1, -1, -1) if inverse else range(n)
    for _ in range(cycles):
        for i in order:
            t = words[(i + o1) % n] ^ rol32(words[(i + o2) % n], rot[i % 4])
            words[i] = (words[i] - t if inverse else words[i] + t) & MASK32


def elephant_in(chunk, ks, offset):
    """The sector as it goes into AES-CBC."""
    ecb = Cipher(algorithms.AES(ks), modes.ECB()).encryptor()
    e = struct.pack("<Q", offset) + bytes(8)
    sector_key = ecb.update(e) + ecb.update(e[:15] + b"\x80")
    xored = bytes(b ^ sector_key[i % 32] for i, b in enumerate(chunk))
    words = list(struct.unpack(f"<{len(chunk) // 4}I", xored))
    diffuser(words, 5, -2, -5, (9, 0, 13, 0), inverse=True)
    diffuser(words, 3, 2, 5, (0, 10, 0, 25), inverse=True)
    return struct.pack(f"<{len(words)}I", *words)


def pattern(nbytes):
    """The reference plaintext (see the module docstring)."""
    return b"".join(b"%015x\n" % i for i in range(nbytes // 16))


def test_key(nbytes):
    return bytes(i & 255 for i in range(nbytes))


def iv_sector(unit, sector_size, iv_large_sectors, iv_offset):
    """The number the IV of encryption sector `unit` is made from."""
    start = iv_offset + unit * (sector_size // 512)
    return start // (sector_size // 512) if iv_large_sectors else start


def encrypt(cipher, key, sector_size, iv_large_sectors, iv_offset, data):
    if len(data) % sector_size:
        raise ValueError("data is not a whole number of sectors")
    out = []
    if cipher == "aes-cbc-essiv:sha256":
        essiv = Cipher(algorithms.AES(hashlib.sha256(key).digest()), modes.ECB()).encryptor()
    for unit in range(len(data) // sector_size):
        chunk = data[unit * sector_size:(unit + 1) * sector_size]
        number = iv_sector(unit, sector_size, iv_large_sectors, iv_offset)
        plain64 = struct.pack("<Q", number & (2**64 - 1)) + bytes(8)
        if cipher == "aes-cbc-elephant":
            half = len(key) // 2
            offset = (number * sector_size) & (2**64 - 1)
            eboiv = Cipher(algorithms.AES(key[:half]), modes.ECB()).encryptor()
            iv = eboiv.update(struct.pack("<Q", offset) + bytes(8))
            enc = Cipher(algorithms.AES(key[:half]), modes.CBC(iv)).encryptor()
            chunk = elephant_in(chunk, key[half:], offset)
        elif cipher == "aes-xts-plain64":
            enc = Cipher(algorithms.AES(key), modes.XTS(plain64)).encryptor()
        elif cipher == "aes-cbc-essiv:sha256":
            enc = Cipher(algorithms.AES(key), modes.CBC(essiv.update(plain64))).encryptor()
        else:
            raise ValueError(f"no reference for cipher {cipher}")
        out.append(enc.update(chunk) + enc.finalize())
    return b"".join(out)


def decrypt_xts_plain64(key, sector_size, data):
    """The plaintext of a whole aes-xts-plain64 mapping (iv_offset 0, no
    iv_large_sectors): what the host tests read back after a guest wrote."""
    if len(data) % sector_size:
        raise ValueError("data is not a whole number of sectors")
    out = []
    for unit in range(len(data) // sector_size):
        plain64 = struct.pack("<Q", iv_sector(unit, sector_size, False, 0)) + bytes(8)
        dec = Cipher(algorithms.AES(key), modes.XTS(plain64)).decryptor()
        out.append(dec.update(data[unit * sector_size:(unit + 1) * sector_size]) + dec.finalize())
    return b"".join(out)


def expected_sha(cipher, sector_size, iv_large_sectors, iv_offset, nbytes):
    key = test_key(KEY_BYTES[cipher])
    return hashlib.sha256(encrypt(cipher, key, sector_size, iv_large_sectors, iv_offset,
                                  pattern(nbytes))).hexdigest()


def check(logs):
    cases = bad = 0
    for log in logs:
        with open(log, errors="replace") as f:
            for line in f:
                fields = line.split()
                if not fields or fields[0] != "REFERENCE":
                    continue
                # REFERENCE <test> <target> <cipher> <ss> <ivls> <ivo> <bytes> <sha256>
                test, target, cipher, ss, ivls, ivo, nbytes, got = fields[1:9]
                want = expected_sha(cipher, int(ss), ivls == "1", int(ivo), int(nbytes))
                cases += 1
                what = (f"{test}: {target} {cipher} sector_size={ss} iv_large_sectors={ivls} "
                        f"iv_offset={ivo} {nbytes} bytes")
                if got == want:
                    print(f"ok   {what}: ciphertext matches the reference")
                else:
                    bad += 1
                    print(f"FAIL {what}: raw device sha256 {got}, reference {want}")
    if cases == 0:
        print("FAIL no REFERENCE lines to check")
        return 1
    print(f"reference: {cases - bad} of {cases} cases match")
    return 1 if bad else 0


def main(argv):
    if len(argv) >= 2 and argv[0] == "check":
        return check(argv[1:])
    if len(argv) == 6 and argv[0] == "sha":
        print(expected_sha(argv[1], int(argv[2]), argv[3] == "1", int(argv[4]), int(argv[5])))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
