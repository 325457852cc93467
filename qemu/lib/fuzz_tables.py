#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""fuzz_tables.py: reproducible crypt table and message cases for tests/harden/dmfuzz.

    fuzz_tables.py --seed N --count N [--messages N] [--target crypt_lbs]
                   [--device /dev/ram0] [--dev-sectors 16384] [--page 65536] > CASES

Writes one case a line, tab-separated (the format dmfuzz reads):
    ID  KIND  TARGET  FLAGS  OP  LENGTH  PARAMS  [STEPS]
--count table cases, a quarter of them valid tables made from a grammar (classic and
capi: cipher specs, IV modes, key sizes and forms, keycount, iv_offset, device,
offset, the optional parameters), the rest mutations of valid tables by grammar;
then --messages message cases (default count/10) on a valid table, suspended or
not. KIND says what was made (the judge, tests/harden/fuzz_judge.py, reads it). FLAGS:
"stock-unsafe" (never feed it to the in-tree dm-crypt: a key size above 16384
makes it try the allocation and WARN), "ss>4096" (a sector size the in-tree
target cannot take), or "-". The same seed and arguments give the same file.
"""
import argparse
import random
import sys

HEX = "0123456789abcdef"
MAX_LINE = 60000          # far below dmfuzz's 512 KiB ioctl buffer
BIG_KEY = 16384           # the largest key ours takes; stock must never see more
IVS_OK = ["plain", "plain64", "plain64be", "essiv:sha256", "benbi", "null", "eboiv"]
# modes with their own key layout or sector bound: only in the IV x chain mutation
IVS_OWN_KEY = ["lmk", "tcw", "elephant", "elephant:sha256"]
# needs integrity metadata, which the fuzzer's ramdisk has not: refused by both targets
IVS_NEED_INTEGRITY = ["random"]
IVS_BAD = ["essiv:nosuchhash", "essiv", "plain:x", "plain64:", "nosuchiv", "benbi:1",
           "PLAIN64", "essiv:sha256:x"]
CHAINS = ["cbc", "xts", "ecb", "ctr", "lrw", "pcbc", "cts", "nosuchmode", "xctr"]
OPTS_FLAG = ["allow_discards", "same_cpu_crypt", "high_priority", "submit_from_crypt_cpus",
             "no_read_workqueue", "no_write_workqueue"]
KEYRING_SIZES = (16, 32, 64)   # keys dmfuzz adds: logon fz:kN and user fzu:kN


class Gen:
    def __init__(self, args):
        self.r = random.Random(args.seed)
        self.a = args
        self.sizes = [s for s in (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)
                      if s <= args.page]

    def hexkey(self, n):
        return "".join(self.r.choice(HEX) for _ in range(2 * n)) if n else "-"

    # --- valid tables -------------------------------------------------------------
    def valid(self):
        """a valid table: (tokens, length, flags, sector_size, key_bytes, info)"""
        r = self.r
        cipher = r.choice(["aes", "aes", "aes", "serpent", "twofish", "cipher_null"])
        if cipher == "cipher_null":
            chain, iv, base = "ecb", "", 0
        else:
            chain = r.choice(["cbc", "xts", "xts", "ecb", "ctr", "lrw"])
            iv = "" if chain == "ecb" else r.choice(IVS_OK)
            base = r.choice([16, 24, 32])
            if chain == "xts":
                base *= 2
            if chain == "lrw":
                base += 16
        keycount = 1
        if base and r.random() < 0.2:
            keycount = r.choice([1, 2, 4, 8, 16, 32, 64])
        if iv == "eboiv" and chain != "cbc":
            iv = "plain64"
        kbytes = base * keycount
        form = r.random()
        if keycount > 1 or cipher == "cipher_null" or r.random() < 0.5:
            # classic form (keycount exists only there); a bare name means cbc-plain
            spec = cipher + (":%d" % keycount if keycount > 1 else "") + "-" + chain + ("-" + iv if iv else "")
        else:
            spec = "capi:%s(%s)" % (chain, cipher) + ("-" + iv if iv else "")
        if kbytes in KEYRING_SIZES and form < 0.25:
            key = ":%d:%s" % (kbytes, r.choice(["logon:fz:k%d" % kbytes, "user:fzu:k%d" % kbytes]))
        else:
            key = self.hexkey(kbytes)
        ss = r.choice(self.sizes) if r.random() < 0.6 else 512
        length = r.choice([2048, 4096, 8192])   # multiples of every sector size
        step = ss // 512
        ivoff = r.choice([0, 0, step * r.randrange(0, 1 << 20), step * r.randrange(1, 9)])
        room = self.a.dev_sectors - length
        # dm core wants the offset aligned to the mapping's logical block (sector_size)
        offset = r.choice([0, 0, step * r.randrange(0, max(1, room // step))])
        dev = r.choice([self.a.device, self.a.device, self.a.devno])
        opts = [o for o in OPTS_FLAG if r.random() < 0.2]
        if ss != 512 or r.random() < 0.05:
            opts.append("sector_size:%d" % ss)
        if r.random() < 0.2:
            opts.append("iv_large_sectors")
        r.shuffle(opts)
        toks = [spec, key, str(ivoff), dev, str(offset)]
        if opts or r.random() < 0.1:
            toks += [str(len(opts))] + opts
        flags = ["ss>4096"] if ss > 4096 else []
        return toks, length, flags, ss, kbytes

    # --- mutations ---------------------------------------------------------------
    def num_variant(self, v):
        """a number written another way, and whether stock reads it as a number"""
        r = self.r
        return r.choice([
            ("plus", "+" + v), ("neg", "-" + v), ("lead0", "000" + v), ("junk", v + "x"),
            ("hex", "0x" + v), ("huge", "184467440737095516160" + v),
            ("u64max", "18446744073709551615"), ("u64wrap", "18446744073709551616"),
            ("u32wrap", str(4294967296 + int(v) if v.isdigit() else 4294967296)),
            ("empty-junk", "x"), ("unicode", v + "\u00b2"), ("float", v + ".0"),
            ("octal", "0" + v), ("neg0", "-0"),
        ])

    def mutate(self, toks, length, flags, ss, kbytes):
        """one mutation of a valid table: (kind, tokens, length, extra flags)"""
        r = self.r
        t = list(toks)
        nopt = len(t) - 6 if len(t) > 5 else -1
        m = r.choice(["num", "num", "ss", "optcount", "opt", "fields", "key", "key",
                      "keyring", "capi", "ivchain", "ivchain", "huge", "device", "keycount",
                      "length"])
        extra = []
        if m == "num":
            i, name = r.choice([(2, "iv_offset"), (4, "offset")])
            how, v = self.num_variant(t[i])
            t[i] = v
            kind = "num-lenient:%s:%s" % (name, how)
        elif m == "ss":
            v = r.choice(["69632", "65536", "131072", "3000", "0", "-4096", "+4096", "4096abc",
                          "04096", "4096 ", "61440", "513", "1", "4294971392", "%d" % (ss * 2),
                          "", "0x1000", "4096.0", "18446744073709555712"])
            opts = [o for o in t[6:] if not o.startswith("sector_size:")] if nopt >= 0 else []
            opts.append("sector_size:" + v.strip())
            t = t[:5] + [str(len(opts))] + opts
            kind = "num-lenient:sector_size:%s" % (v.strip() or "empty")
            try:
                n = int(v.strip())
                if 4096 < n <= self.a.page and n & (n - 1) == 0:
                    extra.append("ss>4096")
            except ValueError:
                pass
        elif m == "optcount":
            opts = t[6:] if nopt >= 0 else []
            how = r.choice(["more", "less", "zero", "huge", "neg", "junk", "plus", "ten",
                            "u32wrap"])
            if how == "ten":
                opts = (opts + OPTS_FLAG * 2)[:10]
                cnt = "10"
            elif how == "less" and not opts:
                opts = ["allow_discards"]
                cnt = "0"
            else:
                cnt = {"more": str(len(opts) + r.randrange(1, 4)),
                       "less": str(max(0, len(opts) - 1)), "zero": "0",
                       "huge": "4294967295", "neg": "-1", "junk": "1x", "plus": "+%d" % len(opts),
                       "u32wrap": str(4294967296 + len(opts))}[how]
                if how == "zero" and not opts:
                    opts = ["same_cpu_crypt"]
            t = t[:5] + [cnt] + opts
            kind = "optcount:%s" % how
        elif m == "opt":
            opts = t[6:] if nopt >= 0 else []
            how = r.choice(["dup", "conflict-ss", "unknown", "case", "ss-nocolon", "ss-empty",
                            "integrity", "integrity-key-size", "iv_large-dup", "colon-junk",
                            "empty-prefix", "ivls-alone"])
            add = {"dup": [r.choice(OPTS_FLAG)] * 2,
                   "conflict-ss": ["sector_size:512", "sector_size:%d" % ss],
                   "unknown": ["no_such_option"], "case": ["Allow_Discards"],
                   "ss-nocolon": ["sector_size"], "ss-empty": ["sector_size:"],
                   "integrity": ["integrity:28:aead"], "integrity-key-size": ["integrity_key_size:32"],
                   "iv_large-dup": ["iv_large_sectors", "iv_large_sectors"],
                   "colon-junk": ["allow_discards:1"], "empty-prefix": [":"],
                   "ivls-alone": ["iv_large_sectors"]}[how]
            opts = opts + add
            if how == "conflict-ss":
                opts = [o for o in opts[:-2] if not o.startswith("sector_size:")] + add
            t = t[:5] + [str(len(opts))] + opts
            kind = ("integrity:" if how.startswith("integrity") else "opt:") + how
        elif m == "fields":
            how = r.choice(["missing", "extra", "empty", "only-cipher", "swap"])
            if how == "missing":
                i = r.randrange(0, min(5, len(t)))
                del t[i]
                kind = "fields:missing-%d" % i
            elif how == "extra":
                t.insert(r.randrange(0, len(t) + 1), r.choice(["x", "0", "-", "1", "allow_discards"]))
                kind = "fields:extra"
            elif how == "empty":
                t = []
                kind = "fields:empty"
            elif how == "only-cipher":
                t = t[:1]
                kind = "fields:only-cipher"
            else:
                t[2], t[4] = t[4], t[2]
                kind = "fields:swap-offsets"
        elif m == "key":
            if kbytes == 0:
                how = r.choice(["hex-for-null", "empty-dash2"])
                t[1] = {"hex-for-null": "00" * 16, "empty-dash2": "--"}[how]
            else:
                hx = self.hexkey(kbytes)
                how = r.choice(["short", "long", "odd", "nonhex", "upper", "dash", "big", "bigger",
                                "zero-x", "half"])
                t[1] = {"short": hx[2:], "long": hx + "00", "odd": hx + "0",
                        "nonhex": "zz" + hx[2:], "upper": hx.upper(), "dash": "-",
                        "big": self.hexkey(BIG_KEY + 1), "bigger": "ab" * 24000,
                        "zero-x": "0x" + hx, "half": hx[:len(hx) // 2]}[how]
                if how in ("big", "bigger"):
                    extra.append("stock-unsafe")
                    how = "bigkey:" + how
            kind = "key:%s" % how
            if how.startswith("bigkey:"):
                kind = how
        elif m == "keyring":
            sz = r.choice([kbytes or 32, kbytes or 32, 16, 32, 64])
            how = r.choice(["ok", "size-mismatch", "zero", "neg", "plus", "lead0", "huge", "u32wrap",
                            "bad-type", "empty-type", "empty-desc", "no-key", "no-size",
                            "trailing-colon", "missing-colon", "just-colon", "big", "2g",
                            "upper-type", "encrypted", "trusted"])
            desc = "fz:k%d" % sz
            t[1] = {"ok": ":%d:logon:%s" % (sz, desc),
                    "size-mismatch": ":%d:logon:%s" % (sz + 16, desc),
                    "zero": ":0:logon:%s" % desc, "neg": ":-%d:logon:%s" % (sz, desc),
                    "plus": ":+%d:logon:%s" % (sz, desc), "lead0": ":00%d:logon:%s" % (sz, desc),
                    "huge": ":99999999999999999999:logon:x", "u32wrap": ":%d:logon:%s" % (4294967296 + sz, desc),
                    "bad-type": ":%d:bogus:%s" % (sz, desc), "empty-type": ":%d::%s" % (sz, desc),
                    "empty-desc": ":%d:logon:" % sz, "no-key": ":%d:logon:fz:nokey" % sz,
                    "no-size": "::logon:%s" % desc, "trailing-colon": ":%d:logon:%s:" % (sz, desc),
                    "missing-colon": ":%dlogon:%s" % (sz, desc), "just-colon": ":",
                    "big": ":%d:logon:x" % (BIG_KEY + 1), "2g": ":2147483647:logon:x",
                    "upper-type": ":%d:LOGON:%s" % (sz, desc),
                    "encrypted": ":%d:encrypted:%s" % (sz, desc),
                    "trusted": ":%d:trusted:%s" % (sz, desc)}[how]
            if how in ("big", "2g", "huge", "u32wrap"):
                extra.append("stock-unsafe")
            kind = ("bigkey:keyring-" if how in ("big", "2g") else
                    "num-lenient:keyring-size:" if how in ("plus", "lead0", "neg") else "keyring:") + how
        elif m == "capi":
            how = r.choice(["empty", "open", "close", "empty-inner", "no-mode", "dash-end",
                            "dash-dash", "unknown", "deep", "iv-opts-junk", "aead", "noiv",
                            "spaces-none", "long-name", "nested-ok"])
            base = "xts(aes)" if kbytes in (32, 48, 64) else "cbc(aes)"
            t[0] = {"empty": "capi:", "open": "capi:xts(aes-plain64", "close": "capi:xts(aes))-plain64",
                    "empty-inner": "capi:xts()-plain64", "no-mode": "capi:(aes)-plain64",
                    "dash-end": "capi:%s-" % base, "dash-dash": "capi:%s--plain64" % base,
                    "unknown": "capi:nosuch(aes)-plain64",
                    "deep": "capi:" + "cbc(" * 300 + "aes" + ")" * 300 + "-plain64",
                    "iv-opts-junk": "capi:%s-plain64:junk" % base,
                    "aead": "capi:authenc(hmac(sha256),%s)-random" % base,
                    "noiv": "capi:%s" % base, "spaces-none": "capi:-plain64",
                    "long-name": "capi:" + "a" * 3000 + "-plain64",
                    "nested-ok": "capi:%s-essiv:sha256" % base}[how]
            kind = {"aead": "integrity:capi-aead", "noiv": "capi-noiv:" + base}.get(how, "capi:" + how)
        elif m == "ivchain":
            chain = r.choice(CHAINS)
            iv = r.choice(IVS_OK + IVS_OWN_KEY + IVS_NEED_INTEGRITY + IVS_BAD + [""])
            cipher = r.choice(["aes", "aes", "serpent", "cipher_null", "des3_ede", "nosuchcipher"])
            form = r.choice(["classic", "capi"])
            if form == "classic":
                t[0] = "%s-%s" % (cipher, chain) + ("-" + iv if iv else "")
            else:
                t[0] = "capi:%s(%s)" % (chain, cipher) + ("-" + iv if iv else "")
            if cipher == "cipher_null":
                t[1] = "-"
            else:
                kb = {"xts": 64, "lrw": 48}.get(chain, 32) if cipher != "des3_ede" else 24
                t[1] = self.hexkey(kb)
            if iv in IVS_NEED_INTEGRITY:
                kind = "integrity:iv-%s:%s:%s" % (iv.split(":")[0], form, chain)
            elif not iv and form == "capi":
                kind = "capi-noiv:%s(%s)" % (chain, cipher)
            else:
                kind = "ivchain:%s:%s:%s" % (form, chain, iv or "none")
        elif m == "huge":
            how = r.choice(["cipher", "device", "option", "ivoff", "many-fields", "many-opts"])
            if how == "cipher":
                t[0] = "a" * 5000 + "-xts-plain64"
            elif how == "device":
                t[3] = "/dev/" + "r" * 5000
            elif how == "option":
                t = t[:5] + ["1", "sector_size:" + "4" * 5000]
            elif how == "ivoff":
                t[2] = "9" * 4000
            elif how == "many-fields":
                t = t + ["x"] * 3000
            else:
                t = t[:5] + ["3000"] + ["allow_discards"] * 3000
            # a 4000-digit number overflows: dm-crypt's sscanf wraps or truncates it
            kind = {"ivoff": "num-lenient:iv_offset:huge4000",
                    "option": "num-lenient:sector_size:huge5000"}.get(how, "huge:" + how)
        elif m == "device":
            how = r.choice(["missing", "zero", "bad-majmin", "junk", "relative", "char-dev", "itself",
                            "majmin-junk", "offset-past-end", "offset-at-end"])
            if how in ("offset-past-end", "offset-at-end"):
                t[4] = str(self.a.dev_sectors - (length // 2 if how == "offset-past-end" else 0))
            else:
                t[3] = {"missing": "/dev/nosuchdev", "zero": "0:0", "bad-majmin": "999:999",
                        "junk": "1:0x", "relative": "ram0", "char-dev": "/dev/null",
                        "itself": "/dev/mapper/control", "majmin-junk": "1:-0"}[how]
            kind = "device:" + how
        elif m == "keycount":
            v = r.choice(["3", "0", "128", "-2", "+2", "02", "2x", "65", "4294967296", "1", ""])
            spec = "aes:%s-cbc-plain64" % v
            t[0] = spec
            try:
                n = int(v)
                t[1] = self.hexkey(32 * n) if 0 < n <= 128 else self.hexkey(32)
            except ValueError:
                t[1] = self.hexkey(64)
            kind = ("num-lenient:keycount:" if v in ("+2", "02", "-2", "4294967296") else "keycount:") + (v or "empty")
        else:
            length = r.choice([0, 1, ss // 512 + 1 if ss > 512 else 1, self.a.dev_sectors + 8,
                               (1 << 63) - 1, length + 1])
            kind = "length:%d" % length
        return kind, t, length, extra

    # --- messages ----------------------------------------------------------------
    def message(self):
        r = self.r
        ss = r.choice(self.sizes)
        kb = 64
        good = self.hexkey(kb)
        keyref = r.random() < 0.3
        key = ":64:logon:fz:k64" if keyref else good
        toks = ["aes-xts-plain64", key, "0", self.a.device, "0"]
        if ss != 512:
            toks += ["1", "sector_size:%d" % ss]
        other = self.hexkey(kb)
        bad = r.choice([good[2:], good + "00", good + "0", "zz" + good[2:], "-", ":32:logon:fz:k32",
                        ":64:logon:fz:nokey", ":64:bogus:x", ":64:logon:", "0x" + good[2:],
                        ":+64:logon:fz:k64", ":2147483647:logon:x", self.hexkey(BIG_KEY + 1)])
        how = r.choice(["wipe-live", "set-live", "set-good", "set-bad", "wipe-resume", "wipe-set",
                        "set-other", "junk", "empty-args", "key", "key-set-noarg", "key-set-2",
                        "key-wipe-x", "key-frob", "upper", "long-junk", "set-bad-live",
                        "double-suspend", "wipe-set-bad-set"])
        steps = {"wipe-live": ["key wipe"], "set-live": ["key set " + key],
                 "set-good": ["suspend", "key set " + key, "resume"],
                 "set-bad": ["suspend", "key set " + bad, "resume"],
                 "wipe-resume": ["suspend", "key wipe", "resume"],
                 "wipe-set": ["suspend", "key wipe", "key set " + key, "resume"],
                 "set-other": ["suspend", "key set " + other, "resume"],
                 "junk": [r.choice(["foo", "foo bar", "keys set", "wipe", "set"])],
                 "empty-args": ["suspend", " ", "resume"],
                 "key": ["suspend", "key", "resume"], "key-set-noarg": ["suspend", "key set", "resume"],
                 "key-set-2": ["suspend", "key set %s %s" % (good, good), "resume"],
                 "key-wipe-x": ["suspend", "key wipe now", "resume"],
                 "key-frob": ["suspend", "key frob " + good, "resume"],
                 "upper": ["suspend", "KEY WIPE", "resume"],
                 "long-junk": ["suspend", "key set " + "q" * 20000, "resume"],
                 "set-bad-live": ["key set " + bad],
                 "double-suspend": ["suspend", "suspend", "key set " + key, "resume", "resume"],
                 "wipe-set-bad-set": ["suspend", "key wipe", "key set " + bad, "key set " + key,
                                      "resume"]}[how]
        flags = ["ss>4096"] if ss > 4096 else []
        if any(s.startswith("key set " + bad) for s in steps) and \
                (bad.startswith(":2147483647") or len(bad) > 2 * BIG_KEY):
            flags.append("stock-unsafe")
        if how == "set-other" and keyref:
            how = "set-other-hex"
        kind = "msg:" + how
        if "set-bad" in how or how == "wipe-set-bad-set":
            kind += ":" + ("bigkey" if "stock-unsafe" in flags else "bad")
        return kind, toks, 4096, flags, steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--count", type=int, required=True, help="table cases")
    ap.add_argument("--messages", type=int, default=-1, help="message cases (default count/10)")
    ap.add_argument("--target", default="crypt_lbs")
    ap.add_argument("--device", default="/dev/ram0")
    ap.add_argument("--devno", default="1:0", help="the device as major:minor")
    ap.add_argument("--dev-sectors", type=int, default=16384, help="the device's size (sectors)")
    ap.add_argument("--page", type=int, default=65536, help="the guest's page size")
    a = ap.parse_args()
    if a.messages < 0:
        a.messages = a.count // 10
    g = Gen(a)
    out = sys.stdout
    out.write("# fuzz_tables.py --seed %d --count %d --messages %d --target %s --page %d\n"
              % (a.seed, a.count, a.messages, a.target, a.page))
    n = 0
    while n < a.count:
        toks, length, flags, ss, kb = g.valid()
        if g.r.random() < 0.25:
            kind, t, ln, extra = "valid", toks, length, []
        else:
            kind, t, ln, extra = g.mutate(toks, length, flags, ss, kb)
            if kind.startswith("num-lenient:sector_size"):
                flags = [f for f in flags if f != "ss>4096"]
        params = " ".join(t)
        if len(params) > MAX_LINE or "\t" in params or "\n" in params:
            continue
        fl = sorted(set(flags + extra))
        out.write("%d\t%s\t%s\t%s\ttable\t%d\t%s\n" % (n, kind, a.target, ",".join(fl) or "-", ln,
                                                    params or "<empty>"))
        n += 1
    for i in range(a.messages):
        kind, toks, ln, flags, steps = g.message()
        out.write("m%d\t%s\t%s\t%s\tmsg\t%d\t%s\t%s\n" % (i, kind, a.target, ",".join(sorted(set(flags))) or "-",
                                                        ln, " ".join(toks), "|".join(steps)))


if __name__ == "__main__":
    main()
