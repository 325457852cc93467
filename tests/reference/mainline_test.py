#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""mainline.py's own test: the anchored edits and the judge, on made-up input.

The source below is written by hand: the lines the v2 edits anchor on, in the
layout of drivers/md/dm-crypt.c (tabs and spacing as the kernel writes them),
nothing else of the kernel. The edits must apply to it once each and give the
v2 results; a missing or doubled anchor, an unexpected target version and a
source that is already 1.30.0 must each fail, naming the edit. The judge must
pass agreeing cases and count documented differences by name, and fail each
planted fault. Run by make rig-host-test.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mainline  # noqa: E402

SOURCE = (
    "struct crypt_config {\n"
    "\tunsigned int iv_size;\n"
    "\tunsigned short sector_size;\n"
    "\tunsigned char sector_shift;\n"
    "};\n"
    "#define POOL_ENTRY_SIZE\t512\n"
    "\n"
    "static DEFINE_SPINLOCK(dm_crypt_clients_lock);\n"
    "\t\t} else if (sscanf(opt_string, \"sector_size:%hu%c\", &cc->sector_size, &dummy) == 1) {\n"
    "\t\t\tif (cc->sector_size < (1 << SECTOR_SHIFT) ||\n"
    "\t\t\t    cc->sector_size > 4096 ||\n"
    "\t\t\t    (cc->sector_size & (cc->sector_size - 1))) {\n"
    "\t\t\t\tDMEMIT(\" sector_size:%d\", cc->sector_size);\n"
    "\t\t\tDMEMIT(\",sector_size=%d\", cc->sector_size);\n"
    "static struct target_type crypt_target = {\n"
    "\t.name   = \"crypt\",\n"
    "\t.version = {1, 29, 0},\n"
    "};\n")

passed = failed = 0


def check(what, ok, detail=""):
    global passed, failed
    if ok:
        print("ok   %s" % what)
        passed += 1
    else:
        print("FAIL %s%s" % (what, "\n     " + detail if detail else ""))
        failed += 1


def refused(what, text, expect, **kw):
    """apply_edits must raise, with EXPECT in the message"""
    try:
        mainline.apply_edits(text, **kw)
    except mainline.EditError as e:
        check(what, expect in str(e), "message: %s" % e)
        return
    check(what, False, "the edits applied")


out = mainline.apply_edits(SOURCE)
check("edits: sector_size is an unsigned int", "\tunsigned int sector_size;\n" in out
      and "unsigned short sector_size" not in out)
check("edits: read with %u", '"sector_size:%u%c"' in out and "%hu" not in out)
check("edits: the bound is min(PAGE_SIZE, BLK_MAX_BLOCK_SIZE), defined once and used",
      out.count("#define DM_CRYPT_MAX_SECTOR_SIZE\tmin_t(unsigned int, PAGE_SIZE, BLK_MAX_BLOCK_SIZE)") == 1
      and "cc->sector_size > DM_CRYPT_MAX_SECTOR_SIZE ||" in out and "> 4096" not in out)
check("edits: both status lines print %u", 'DMEMIT(" sector_size:%u"' in out and 'DMEMIT(",sector_size=%u"' in out
      and "sector_size:%d" not in out and "sector_size=%d" not in out)
check("edits: target crypt_ref v1.30.0", '\t.name   = "crypt_ref",\n\t.version = {1, 30, 0},\n' in out)
check("edits: the define comes before the clients' lock",
      out.index("DM_CRYPT_MAX_SECTOR_SIZE") < out.index("static DEFINE_SPINLOCK"))
out = mainline.apply_edits(SOURCE.replace("{1, 29, 0}", "{1, 28, 0}"), have_blk_max=False)
check("edits: 6.12 (1.28.0, no BLK_MAX_BLOCK_SIZE): bound PAGE_SIZE, version 1.30.0",
      "#define DM_CRYPT_MAX_SECTOR_SIZE\tPAGE_SIZE\n" in out and "{1, 30, 0}" in out
      and "BLK_MAX_BLOCK_SIZE" not in out)
out = mainline.apply_edits(SOURCE, name="crypt_x")
check("edits: another target name", '.name   = "crypt_x",' in out)

refused("a missing anchor fails, naming its edit", SOURCE.replace("cc->sector_size > 4096", "cc->sector_size > 8192"),
        "edit 'the bound replaces 4096'")
refused("a doubled anchor fails, naming its edit", SOURCE + 'DMEMIT(" sector_size:%d", cc->sector_size);\n',
        "edit 'table status prints sector_size with %u': its anchor occurs 2 times")
refused("the struct field in another layout fails",
        SOURCE.replace("\tunsigned short sector_size;\n", "\tu16 sector_size;\n"),
        "edit 'sector_size widened to unsigned int'")
refused("an unexpected target version fails", SOURCE.replace("{1, 29, 0}", "{1, 27, 0}"),
        "the kernel's target is 1.27.0")
refused("a source that is already 1.30.0 fails", SOURCE.replace("{1, 29, 0}", "{1, 30, 0}"),
        "the kernel's target is 1.30.0")
refused("the edited source does not take the edits again", mainline.apply_edits(SOURCE),
        "edit 'sector_size widened to unsigned int': its anchor occurs 0 times")
refused("a name that is no target name is refused", SOURCE, "lowercase letters", name="crypt-x")
out = mainline.apply_edits(SOURCE, name="crypt")
check("edits: --name crypt keeps the name (the in-tree stand-in), version 1.30.0",
      '\t.name   = "crypt",\n\t.version = {1, 30, 0},\n' in out)

KEY = "00" * 64
GOOD = [
    'MAINLINE id=0 ss=8192 kind=both ours=ok ref=ok params="aes-xts-plain64 %s 0 /dev/ram0 0 1 sector_size:8192"' % KEY,
    "MAINLINE-SAME id=0 table=yes status=yes ima=yes data=yes",
    'MAINLINE id=1 ss=8192 kind=refuse-lmk ours=EINVAL ref=EINVAL params="aes-cbc-lmk %s 0 /dev/ram0 256 1 sector_size:8192"'
    % KEY[:64],
    'MAINLINE id=2 ss=8192 kind=num-lenient:sector_size-above-32-bits ours=EINVAL ref=ok '
    'params="aes-xts-plain64 %s 0 /dev/ram0 512 1 sector_size:4294975488"' % KEY,
    'MAINLINE id=3 ss=8192 kind=stricter-capi-without-iv ours=EINVAL ref=ok '
    'params="capi:xts(aes) %s 0 /dev/ram0 768 1 sector_size:8192"' % KEY,
    'MAINLINE id=4 ss=8192 kind=stricter-odd-hex-key ours=EINVAL ref=ok '
    'params="aes-xts-plain64 %s0 0 /dev/ram0 1024 1 sector_size:8192"' % KEY,
]
counts, stricter, problems = mainline.judge(GOOD)
check("judge: agreeing cases pass", not problems, "; ".join(problems))
check("judge: counts", (counts["cases"], counts["loaded by both"], counts["cross-reads identical"],
                        counts["refused by both"], counts["stricter (documented)"]) == (5, 1, 1, 1, 3), str(counts))
check("judge: each documented difference counted by name", len(stricter) == 3 and all(v == 1 for v in stricter.values())
      and any("capi:" in k for k in stricter), str(dict(stricter)))


def planted(what, lines, expect):
    _, _, probs = mainline.judge(lines)
    check("judge fails: " + what, any(expect in p for p in probs), "problems: %s" % probs)


planted("ours refuses what the reference loads, undocumented",
        [GOOD[0].replace("ours=ok", "ours=EINVAL")], "names no such case")
planted("ours loads what the reference refuses", [GOOD[0].replace("ref=ok", "ref=EINVAL")], "ours ok, the reference EINVAL")
planted("data differs", [GOOD[0], GOOD[1].replace("data=yes", "data=no")], "data differs")
planted("the table differs", [GOOD[0], GOOD[1].replace("table=yes", "table=no")], "table differs")
planted("the IMA line differs", [GOOD[0], GOOD[1].replace("ima=yes", "ima=no")], "ima differs")
planted("a case both load, not compared", [GOOD[0]], "no comparison was reported")
planted("a refusal case ours loads", [GOOD[2].replace("ours=EINVAL", "ours=ok")], "a refusal case that ours loads")
planted("a stricter case both load", [GOOD[3].replace("ours=EINVAL", "ours=ok"),
                                      "MAINLINE-SAME id=2 table=yes status=yes ima=yes data=yes"],
        "a case of the stricter list")
planted("no lines", [], "no MAINLINE lines")

print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
