#!/usr/bin/env python3
"""check_isa_leaks.py PROGRAM

Checks that a program built without -march (the x86-64 baseline) runs no instruction above
that baseline unless one of the CPU levels that ms selects at run time is in force.

A function may hold AVX, AVX-512 or SSE4 instructions when it is level code:
  * its name is in a level namespace (ms::...::isa_sse4::, isa_avx2::, isa_avx512::), or an
    xsimd instantiation for a level's architecture (xsimd::avx2, xsimd::fma3<...>, ...);
  * or its signature carries a 256- or 512-bit vector type (float __vector(8), ...): only
    code compiled for AVX can call it;
  * or every reference to it (call, jump, address taken) comes from level code: the linker
    kept a level unit's copy of an inline function (from libstdc++, Eigen or xsimd) that
    only level code uses.
Any other function with such an instruction is a leak: code compiled for a higher level
that the baseline program can reach (the classic trap of multi-ISA builds: an inline
function instantiated in an AVX-512 unit kept by the linker for the whole program). The
start-up code of every unit is covered too (its functions are checked like any other).
Exit status 1, with the offending functions and where they are referenced from, on a leak.
"""
import re
import subprocess
import sys

LEVEL_NAME = re.compile(
    r"::isa_(sse4|avx2|avx512)::|xsimd::(sse4_1|sse4_2|avx|avx2|fma3<[^>]*>|avx512f|avx512cd|avx512dq|avx512bw)\b"
    # xsimd's helpers defined in its AVX headers, which a baseline unit never includes
    r"|xsimd::kernel::detail::(split_avx|merge_sse|merge_avx)\b")
WIDE_VECTOR = re.compile(
    r"\b(float|int|unsigned int) __vector\((8|16)\)|\b(double|long|long long|unsigned long|unsigned long long) "
    r"__vector\((4|8)\)|\b(char|signed char|unsigned char) __vector\((32|64)\)|\b(short|unsigned short) __vector\((16|32)\)")
SSE4 = set("""pblendvb blendvps blendvpd blendps blendpd roundps roundpd roundss roundsd ptest pmulld pminsb
pminsd pminuw pminud pmaxsb pmaxsd pmaxuw pmaxud pcmpeqq pcmpgtq insertps extractps pextrb pextrd pextrq
pinsrb pinsrd pinsrq dpps dppd mpsadbw phminposuw pmovsxbw pmovsxbd pmovsxbq pmovsxwd pmovsxwq pmovsxdq
pmovzxbw pmovzxbd pmovzxbq pmovzxwd pmovzxwq pmovzxdq packusdw movntdqa popcnt crc32 pcmpestri pcmpestrm
pcmpistri pcmpistrm""".split())
HEADER = re.compile(r"^[0-9a-f]+ <(.*)>:$")
REF = re.compile(r"<([^<>]*(?:<.*>)?[^<>]*?)(?:\+0x[0-9a-f]+)?>\s*$")


def above_baseline(insn):
    mnemonic = insn.split()[0] if insn.split() else ""
    if mnemonic.startswith("v") or re.search(r"%[yz]mm[0-9]|%k[0-7]\b", insn):
        return "AVX"
    if mnemonic in SSE4:
        return "SSE4"
    return None


def main():
    prog = sys.argv[1]
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", prog], capture_output=True, text=True,
                         check=True).stdout
    bad = {}      # function -> first instruction above the baseline
    refs = {}     # function -> functions that reference it
    funcs = set()
    fn = None
    for line in out.splitlines():
        m = HEADER.match(line)
        if m:
            fn = m.group(1)
            funcs.add(fn)
            continue
        if fn is None or ":\t" not in line:
            continue
        insn = line.split(":\t", 1)[1].strip()
        kind = above_baseline(insn)
        if kind and fn not in bad:
            bad[fn] = f"{insn} ({kind})"
        r = REF.search(insn)
        if r:
            target = r.group(1)
            if target != fn and not target.endswith("@plt"):
                refs.setdefault(target, set()).add(fn)

    def level(f):
        return bool(LEVEL_NAME.search(f) or WIDE_VECTOR.search(f))

    # Functions reachable only from level code (a fixed point over the references).
    contained = set()
    changed = True
    while changed:
        changed = False
        for f in funcs:
            if f in contained or level(f):
                continue
            by = refs.get(f)
            if by and all(level(c) or c in contained for c in by):
                contained.add(f)
                changed = True

    leaks = sorted(f for f in bad if not level(f) and f not in contained)
    if leaks:
        for f in leaks[:40]:
            by = sorted(c for c in refs.get(f, ()) if not (level(c) or c in contained))[:3]
            print(f"check_isa_leaks: {f}: {bad[f]}; referenced from: {', '.join(by) or '(no direct reference)'}")
        print(f"check_isa_leaks: {len(leaks)} function(s) above x86-64 reachable outside the level code of {prog}")
        return 1
    n_level = sum(1 for f in bad if level(f))
    print(f"check_isa_leaks: {prog}: {len(bad)} functions hold instructions above x86-64: {n_level} level code, "
          f"{len(contained)} reachable only from level code; none outside")
    return 0


if __name__ == "__main__":
    sys.exit(main())
