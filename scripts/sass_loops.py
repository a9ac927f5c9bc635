#!/usr/bin/env python3
"""The innermost tensor-core loop of each kernel in a SASS dump, as instruction counts.

    cuobjdump -sass build/CMakeFiles/bsgemm.dir/src/cuda/sm90/kernel_fp8_block128.cu.o > k.sass
    python3 scripts/sass_loops.py k.sass [--name TEXT] [--min-mma N] [--opcodes]

For every function (or those whose mangled name contains TEXT) it finds the smallest backward branch whose
body holds at least N wgmma instructions (HGMMA / QGMMA; default 1) and prints the body's size and its
most frequent opcodes. Runs on the CPU machine: the static count per K-block is how bench/NOTES.md predicts
a kernel change before measuring it (e.g. version 11d's 129 -> 156 -> 135).
"""
import argparse
import collections
import re

INSTRUCTION = re.compile(r"\s+/\*([0-9a-f]+)\*/\s+(.*?);")
BACK_BRANCH = re.compile(r"BRA (?:`\(.*?\)\s*)?0x([0-9a-f]+)")
PREDICATE = re.compile(r"^@!?U?P\w+\s+")


def functions(text):
    for chunk in re.split(r"\n\s+Function : ", text)[1:]:
        name = chunk.split("\n", 1)[0].strip()
        body = []
        for line in chunk.split("\n"):
            m = INSTRUCTION.match(line)
            if m:
                body.append((int(m.group(1), 16), m.group(2).strip()))
        yield name, body


def innermost_mma_loop(body, min_mma):
    best = None
    for address, text in body:
        m = BACK_BRANCH.search(text)
        if not m:
            continue
        target = int(m.group(1), 16)
        if target >= address:
            continue
        loop = [x for x in body if target <= x[0] <= address]
        if sum("GMMA" in t for _, t in loop) >= min_mma and (best is None or len(loop) < len(best)):
            best = loop
    return best


def opcode(text):
    return PREDICATE.sub("", text).split()[0].split(".")[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sass")
    parser.add_argument("--name", default="", help="only functions whose mangled name contains this")
    parser.add_argument("--min-mma", type=int, default=1, help="wgmma instructions the loop must hold")
    parser.add_argument("--opcodes", action="store_true", help="print every opcode's count")
    args = parser.parse_args()
    with open(args.sass) as f:
        text = f.read()
    for name, body in functions(text):
        if args.name not in name:
            continue
        loop = innermost_mma_loop(body, args.min_mma)
        if loop is None:
            continue
        counts = collections.Counter(opcode(t) for _, t in loop)
        shown = sorted(counts.items()) if args.opcodes else counts.most_common(6)
        print(f"{name}\n  {len(body)} instructions, loop {len(loop)}: " + ", ".join(f"{k} {v}" for k, v in shown))


if __name__ == "__main__":
    main()
