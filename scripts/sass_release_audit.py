#!/usr/bin/env python3
"""Barrier arrivals issued while shared-memory loads of the same warp are still in flight, in a SASS dump.

    cuobjdump -sass build/CMakeFiles/bsgemm.dir/src/cuda/sm90/kernel_swapped.cu.o > k.sass
    python3 scripts/sass_release_audit.py k.sass [--name TEXT]

ptxas issues an mbarrier arrive (SYNCS.ARRIVE) without waiting for the warp's earlier LDS to return, so a consumer
that releases a stage before using every value it loaded from it lets a producer overwrite the stage under a load
still in flight (bench/NOTES.md session 40: the register-operand kernel's race). For every SYNCS.ARRIVE this lists the
LDS issued since the warp's previous barrier instruction whose scoreboard no instruction in between waited on (the
control bits of each instruction's second word: write scoreboard bits 46-48, wait mask bits 52-57).

Not every hit is a hazard: a hit matters where the arrival releases the stage those loads read (the consumers' empty
barrier), not where it signals something else (the decoded tiles' barriers after a wgmma wait, with the next stage's
loads in flight). Read each hit's barrier operand and load address against the kernel's shared layout.
"""
import argparse
import re

INSTRUCTION = re.compile(r"\s+/\*([0-9a-f]+)\*/\s+(.*?);\s*/\* (0x[0-9a-f]+) \*/")
CONTROL = re.compile(r"/\* (0x[0-9a-f]+) \*/")
NO_SCOREBOARD = 7


def functions(lines):
    """(name, [(address, text, write scoreboard, wait mask)]) for each function of the dump."""
    name, body = None, []
    i = 0
    while i < len(lines):
        header = re.search(r"Function : (\S+)", lines[i])
        if header:
            if name:
                yield name, body
            name, body = header.group(1), []
        else:
            m = INSTRUCTION.match(lines[i])
            if m and i + 1 < len(lines):
                control = int(CONTROL.search(lines[i + 1]).group(1), 16) >> 41
                body.append((m.group(1), m.group(2).strip(), (control >> 5) & 7, (control >> 11) & 0x3F))
                i += 1
        i += 1
    if name:
        yield name, body


def loads_in_flight(body, arrive):
    """The LDS between the previous barrier instruction and body[arrive] whose scoreboard nothing waited on."""
    pending = {}
    start = arrive
    while start > 0 and "SYNCS" not in body[start - 1][1]:
        start -= 1
    for _, text, write, wait in body[start:arrive + 1]:
        for scoreboard in [s for s in pending if wait >> s & 1]:
            del pending[scoreboard]
        opcode = re.sub(r"^@!?U?P\w+\s+", "", text).split()[0]
        if opcode.startswith("LDS") and write != NO_SCOREBOARD:
            pending.setdefault(write, []).append(text)
    return [load for loads in pending.values() for load in loads]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sass")
    parser.add_argument("--name", default="", help="only functions whose mangled name contains this")
    args = parser.parse_args()
    with open(args.sass) as f:
        lines = f.read().split("\n")
    hits = 0
    for name, body in functions(lines):
        if args.name not in name:
            continue
        for k, (address, text, _, _) in enumerate(body):
            if "SYNCS.ARRIVE" not in text:
                continue
            for load in loads_in_flight(body, k):
                barrier = text.split("[", 1)[1].split("]", 1)[0]
                print(f"{name}\n  arrive at {address} [{barrier}] with in flight: {load}")
                hits += 1
    print(f"{hits} arrivals with shared loads in flight")


if __name__ == "__main__":
    main()
