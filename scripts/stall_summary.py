#!/usr/bin/env python3
"""Summarises Nsight Compute's per-instruction warp-state samples (the source page as CSV).

    ncu -i report.ncu-rep --page source --csv --print-source=sass > source.csv
    python3 scripts/stall_summary.py source.csv [--range 0x1000:0x3f00]

Prints the stall reasons over all sampled instructions (or over an address range relative to the
kernel's first instruction, e.g. the consumers' mainloop), the opcodes that collect the most samples,
and the instructions that do, each with its two main reasons. bench/NOTES.md quotes these.
"""
import argparse
import csv
from collections import defaultdict


def opcode(source):
    words = source.split()
    if not words:
        return ""
    word = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
    return word.split(".")[0]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("csv")
    parser.add_argument("--range", help="START:END, byte offsets from the kernel's first instruction")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()

    rows = list(csv.reader(open(args.csv)))
    header = next(r for r in rows if "Address" in r and "Source" in r)
    at = {name: i for i, name in enumerate(header)}
    data = [r for r in rows[rows.index(header) + 1:] if len(r) == len(header)]
    stalls = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    base = min(int(r[at["Address"]], 16) for r in data)
    lo, hi = (int(x, 16) for x in args.range.split(":")) if args.range else (0, 1 << 62)

    totals = defaultdict(int)
    by_opcode = defaultdict(lambda: defaultdict(int))
    lines = []
    for r in data:
        offset = int(r[at["Address"]], 16) - base
        if not lo <= offset < hi:
            continue
        counts = {h: int(r[at[h]] or 0) for h in stalls}
        for h, v in counts.items():
            totals[h] += v
            by_opcode[opcode(r[at["Source"]])][h] += v
        lines.append((sum(counts.values()), offset, r[at["Source"]].strip(), counts))
    total = sum(totals.values()) or 1

    def share(v):
        return f"{100.0 * v / total:5.1f}%"

    print(f"{total} samples" + (f" in {args.range}" if args.range else ""))
    print("stall reasons: " + ", ".join(f"{h[6:]} {share(v)}" for h, v in sorted(totals.items(), key=lambda x: -x[1]) if v))
    print("by opcode:")
    for op, counts in sorted(by_opcode.items(), key=lambda x: -sum(x[1].values()))[:12]:
        main_reasons = sorted(counts.items(), key=lambda x: -x[1])[:2]
        print(f"  {op:12s} {share(sum(counts.values()))}  " + ", ".join(f"{h[6:]} {share(v)}" for h, v in main_reasons))
    print("top instructions:")
    for samples, offset, source, counts in sorted(lines, key=lambda x: -x[0])[: args.top]:
        main_reasons = sorted(counts.items(), key=lambda x: -x[1])[:2]
        print(f"  {share(samples)} +0x{offset:05x} {source[:60]:60s} " + ", ".join(f"{h[6:]} {share(v)}" for h, v in main_reasons))


if __name__ == "__main__":
    main()
