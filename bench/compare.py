#!/usr/bin/env python3
"""Side-by-side table of bsgemm's benchmark and the peers' (../shared/bench/peers.py), as Markdown.

    python3 bench/compare.py bench.json peers.json [--gpu "NVIDIA H200, ..."] > bench/results/h200.md

bench.json: `bsgemm bench --json` records {case, recipe, layout, backend, median_ms, tflops, gbps, check}.
peers.json: peers.py records {case, peer, ms, tflops}. DeepGEMM cannot be installed on the GPU machine;
its numbers, measured on an H200 on 2026-11-29, are taken from ../shared/design.md (the title names the card that
ran the call: H100 or H200).
"""
import argparse
import json

# DeepGEMM (fp8-block128, every group padded to 128 rows), from design.md: TFLOP/s or milliseconds.
DEEPGEMM = {
    ("prefill-uniform-G8-N4096-K7168", "contiguous"): ("tflops", 1240),
    ("prefill-skew-G32-N4096-K7168", "contiguous"): ("tflops", 1160),
    ("down-skew-G32-N7168-K2048", "contiguous"): ("tflops", 1081),
    ("decode-G32-M64-N4096-K7168", "contiguous"): ("ms", 0.270),
    ("decode-G32-M64-N4096-K7168", "masked"): ("ms", 0.247),
    ("decode-G128-M16-N3072-K4096", "contiguous"): ("ms", 0.457),
    ("decode-G128-M16-N3072-K4096", "masked"): ("ms", 0.407),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bench")
    ap.add_argument("peers")
    ap.add_argument("--gpu", default="")
    args = ap.parse_args()
    ours = json.load(open(args.bench))
    peers = json.load(open(args.peers))

    best_fp8 = {}  # case -> (ms, peer): the fastest FP8 peer that ran
    for p in peers:
        if p.get("ms") and "fp8" in p["peer"]:
            if p["case"] not in best_fp8 or p["ms"] < best_fp8[p["case"]][0]:
                best_fp8[p["case"]] = (p["ms"], p["peer"])

    # The lent machines are H200s or H100s; DeepGEMM's figures are the H200's whatever ran the call.
    card = "H100" if "H100" in args.gpu else "H200"
    print(f"# bsgemm on the {card} next to the Hopper paths users have today")
    print()
    if args.gpu:
        print(f"GPU: {args.gpu}")
        print()
    print("Peers: torch/cuBLAS (`../shared/bench/peers.py`, same call); DeepGEMM from design.md (measured on an H200,")
    print("2026-11-29; it cannot be installed on the GPU machine). Ratios > 1 mean bsgemm is faster.")
    if card != "H200":
        print(f"This call ran on an {card}: the DeepGEMM column compares its H200 figures with this card's times.")
    print("bsgemm times are medians of CUDA-event-timed calls with inputs rotated through copies larger than L2;")
    places = {r.get("descriptions", "host") for r in ours}
    if places == {"host"}:
        print("host-resident descriptions, so no call runs the prepare kernel; a staged call's time includes its")
        print("staging pass. Output bf16 everywhere.")
    else:
        print("descriptions on the device for some rows, whose calls include the prepare kernel; a staged call's")
        print("time includes its staging pass. Output bf16 everywhere.")
    print()
    print("| case | recipe | layout | bsgemm ms | bsgemm TFLOP/s | GB/s | check | best torch/cuBLAS FP8 | vs torch | DeepGEMM | vs DeepGEMM |")
    print("| --- | --- | --- | ---: | ---: | ---: | --- | --- | ---: | --- | ---: |")
    for r in ours:
        case, layout = r["case"], r["layout"]
        ms = r.get("median_ms")
        peer = best_fp8.get(case)
        peer_text, vs_peer = "-", "-"
        if peer and ms:
            flops_ratio = peer[0] / ms
            peer_text = f"{peer[0]:.4f} ms ({peer[1]})"
            vs_peer = f"{flops_ratio:.2f}x"
        dg_text, vs_dg = "-", "-"
        dg = DEEPGEMM.get((case, layout))
        # DeepGEMM runs fp8-block128; FP4-weight rows are held to it too (issue 4's targets are ratios to it).
        if dg and ms and (r["recipe"] == "fp8-block128" or r["recipe"].endswith(("mxfp4", "nvfp4"))):
            if dg[0] == "ms":
                dg_text, vs_dg = f"{dg[1]:.3f} ms", f"{dg[1] / ms:.2f}x"
            elif r.get("tflops"):
                dg_text, vs_dg = f"{dg[1]} TFLOP/s", f"{r['tflops'] / dg[1]:.2f}x"
        ms_text = f"{ms:.4f}" if ms else "-"
        tf = f"{r['tflops']:.0f}" if r.get("tflops") else "-"
        gbps = f"{r['gbps']:.0f}" if r.get("gbps") else "-"
        print(f"| {case} | {r['recipe']} | {layout} | {ms_text} | {tf} | {gbps} | {r.get('check', '-')} | {peer_text} | {vs_peer} | {dg_text} | {vs_dg} |")
    print()
    print("All peers as measured in the same call:")
    print()
    print("| case | peer | ms | TFLOP/s |")
    print("| --- | --- | ---: | ---: |")
    for p in peers:
        ms = f"{p['ms']:.4f}" if p.get("ms") else "-"
        tf = f"{p['tflops']:.0f}" if p.get("tflops") else p.get("error", "-")
        print(f"| {p['case']} | {p['peer']} | {ms} | {tf} |")


if __name__ == "__main__":
    main()
