// Compile-time shape of one instantiation of the register-operand kernel (kernel_swapped.cuh): decode-
// sized groups (at most 64 tokens) with FP4 weights.
//
// It computes D^T = W X^T: the weights W (B, 256 or 384 rows per tile) are wgmma's A operand, decoded from
// the packed tile straight into each thread's fragment registers; the tokens X (A, Tokens rows per tile)
// are decoded once per CTA into a small bf16 tile in shared memory, wgmma's B operand. Each consumer
// warpgroup owns 64 x Slabs weight rows as 64-row slabs: two of two warpgroups (256-weight tiles), or three
// at 32 tokens (384-weight tiles, whose per-stage waits, token decode and addressing spread over 1.5x the
// weights); with staged tokens one slab each of four warpgroups (two each of three for 384 weights).
// Weight decoding thus costs no shared-memory round trip, and only the few token rows are written back
// decoded.
//
// A thread's A fragment of a 64x16 step holds K positions {2q, 2q+1, 2q+8, 2q+9} (q = lane % 4) of rows
// g and g + 8 (g = lane / 4 within the warp's 16). Within each 64-deep slice the kernel feeds logical slot
// (step s, q, j = 0..3) from stored position 16 q + 8 (s / 2) + 2 (s % 2) + j / 2 + 4 (j % 2), so a
// thread's 16 weights of a row and slice are one 8-byte load and each fragment register holds two codes
// four apart in a word (core::e2m1x8_to_bf16_pairs); the tokens are decoded into the same permuted order
// (the sum over K does not depend on the order). Scale blocks stay whole: a thread's 16 positions share
// one nv16 scale, and pairs of threads one mx32 scale.
//
// Where a pass before the kernel has staged the tokens as bf16 in that order (AScales == staged,
// stage_bf16.cu with weights_order), TMA brings them into each raw stage as two 128-byte-swizzled halves,
// wgmma's B operand as it is: no token decode, no decoded tiles and their barriers, no token scales.
// fp8-block128 tokens (AScales == block128) carry fp32 scales that neither bf16 nor f16 can hold exactly with
// their values: the pass stages them as f16 with the scales folded in and rounded (core::block128_row_exponent:
// each row divided by a power of two that keeps it inside f16's range, relative error at most 2^-11), the
// weights decode to f16 (exact for every nv16 scale and for the mx32 scales 2^-19 .. 32, the rest added in fp32:
// mainloop_swapped.cuh), the wgmma are F16, and each token's outputs take its power of two back in the epilogue
// (kF16): no second set of accumulators, so the tiles run on four warpgroups like the other staged tokens'.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "src/core/scale_codes.hpp"
#include "src/cuda/sm90/kernel_traits.cuh"
#include "src/cuda/sm90/kernel_traits_decode.cuh"
#include "src/cuda/sm90/params.hpp"

namespace bsgemm::cuda {

// APacked / AScales: the tokens (e2m1, or e4m3/e5m2 chosen at run time); BScales: the FP4 weights'.
// Consumers: consumer warpgroups, two, or with staged tokens three or four, whose extra warps hide the
// latency of the weights' decode (two consumer warps per scheduler issue in 40% of cycles, run 60);
// StreamK: the walk splits the last round's tiles over K (below; staged-token tiles 256 weights wide only).
template <bool APacked, ScaleGranularity AScales, ScaleGranularity BScales, int Tokens, int Slabs = 2, int Consumers = 2,
          bool StreamK = false>
struct SwappedKernelTraits {
  static_assert(Tokens == 16 || Tokens == 32 || Tokens == 64, "wgmma's N, and the epilogue's columns per pass");
  static_assert((Consumers == 2 && (Slabs == 2 || (Slabs == 3 && Tokens == 32))) || (Consumers == 3 && Slabs == 2 && Tokens == 32) ||
                    (Consumers == 4 && Slabs == 1),
                "two fragment sets and the accumulators fit the consumers' registers");
  static_assert(BScales != ScaleGranularity::block128, "the weights' scales are folded into their decoded values");
  // f16 operands: fp8-block128 tokens staged as f16 with their scales folded in, the weights decoded to f16.
  static constexpr bool kF16 = AScales == ScaleGranularity::block128;
  static constexpr bool kTokensStaged = AScales == ScaleGranularity::staged || kF16;
  static_assert(!kTokensStaged || !APacked, "staged tokens are 16-bit");
  static_assert(Consumers == 2 || kTokensStaged, "the token decode is split between two warpgroups");
  static_assert(Tokens != 16 || kTokensStaged, "16 token rows are too few for the token decode's split");
  static constexpr int kConsumers = Consumers;
  static constexpr int kThreads = (1 + Consumers) * kThreadsPerWarpgroup;
  static constexpr bool kAPacked = APacked;
  static constexpr bool kBPacked = true;
  static constexpr ScaleGranularity kAScales = AScales;
  static constexpr ScaleGranularity kBScales = BScales;
  // The scale loaders hold a chunk of stages' codes (kernel_decode.cuh): 16 more registers than the
  // decoding kernel's producers, taken from the consumers, which need no more than 184 here.
  // More consumers share the launch's registers (640 threads: 96 each at launch; 512: 128). ptxas without
  // spills: four consumers of one slab at 96 with the producers at 96; three of two slabs at 128 each (the
  // producers' loaders, B's scales of 384 rows, spill at 96). setmaxnreg to the launch's own count (PTX asks
  // only for 24-256 in steps of 8) keeps ptxas's per-role allocation: without it these spill 200-600 bytes.
  static constexpr int kConsumerRegs = Consumers == 2 ? 184 : Consumers == 3 ? 128 : 96;
  static constexpr int kProducerRegisters = Consumers == 2 ? 136 : Consumers == 3 ? 128 : 96;
  static_assert(kThreadsPerWarpgroup * (kProducerRegisters + Consumers * kConsumerRegs) <=
                kThreads * launch_registers(kThreads));
  static constexpr int kBlockM = Tokens;  // the tile's rows of D (tokens)
  static constexpr int kSlabs = Slabs;            // 64-row weight slabs per consumer warpgroup
  static constexpr int kBlockN = Consumers * 64 * Slabs;  // the tile's columns of D (weights)
  static constexpr int kBLoads = tma_box_loads(kBlockN);
  // The epilogue's view of one slab: 64 rows (weights) x Tokens columns (tokens).
  static constexpr int kWarpgroupN = Tokens;
  static constexpr int kAccumulators = Tokens / 2;
  static constexpr bool kDirectEpilogue = false;  // it writes D^T: columns of an n-major D (epilogue.cuh)
  static constexpr bool kHeavyFirstWalk = heavy_first_walk(true, true, AScales, Tokens, kBlockN);  // tile_walker.cuh
  // The warp's search: 0.1-2.1% faster than the lane's (bench/NOTES.md version 46).
  static constexpr GroupSearch kConsumerSearch = GroupSearch::by_warp;
  static constexpr int kEpilogueBoxes = 0;        // not the FP8 kernel's TMA-store boxes (epilogue.cuh) ...
  // ... but with staged tokens each slab through a TMA store of the tile's tokens by 64 weights, where
  // KernelParams::d_map is ready (store_transposed_slab), its box in the slab's warpgroup's staging room.
  static constexpr bool kTransposedBoxes = kTokensStaged && transposed_slab_stores(kBlockN);
  static_assert(Tokens * 2 * kEpilogueBoxColumns <= 64 * kEpiloguePitch * static_cast<int>(sizeof(float)));

  static constexpr int kStepsA = kTokensStaged ? 0 : scale_steps(AScales);
  // The scale loaders' rows of A (a warp's at least) and whether they load A's scales at all.
  static constexpr int kScaleRowsA = Tokens < 32 ? 32 : Tokens;
  static constexpr bool kLoadsAScales = kStepsA > 0;
  static constexpr int kStepsB = scale_steps(BScales);
  // Whether B's scale codes reach the consumers as stored, in a window of kScaleCodeWindow codes a row and stage
  // (sfb's room), the consumers decoding the code they need instead of reading fp32 from the loaders: the
  // staged-token tiles 256 weights wide. TMA brings the window with each stage where the scales' layout allows
  // (KernelParams::sfb_by_tma; measured -7 to -13% against the loaders' fp32, bench/NOTES.md version 23); elsewhere
  // the scale loaders write the stage's codes into it (ScaleRows::store_codes), so that the consumers have one loop
  // and a stage's room is the window's 16 bytes a row: nv16's fp32 scales took 32, one raw stage fewer (64 tokens: 4
  // against 5; 16 tokens: 6 against 7; the blocked 128x4 layout's decode rows -0.4 to -8.5%, bench/NOTES.md version
  // 52). The 384-weight tile's consumers spilled 172 bytes with the codes' loop; the f16 operands have only it.
  static constexpr bool kScaleCodeWindows = kTokensStaged && kBlockN == 256;
  static_assert(!kF16 || kScaleCodeWindows, "the f16 weights decode from their scale codes");
  // Whether the walk splits its last round's tiles over K (KernelParams::stream_k, tile_walker.cuh's
  // StreamKTileWalker): an instantiation of its own, launched where the host's count of tiles leaves the last
  // round at most half full (core::plan_stream_k), since its walk costs 2-5% where nothing splits (bench/NOTES.md
  // session 23). The staged-token tiles 256 weights wide, whose calls all run the staging pass (which zeroes the
  // partials' flags) and share one K (the MoE forms).
  static constexpr bool kStreamK = StreamK;
  static_assert(!kStreamK || (kTokensStaged && kBlockN == 256), "stream-K: staged-token tiles 256 weights wide");
  // Whether the producer brings its first tile's first stages of weights into L2 before griddepcontrol.wait, under
  // the staging pass's end (kernel_decode.cuh's prefetch_first_weights): nvfp4 weights' decode rows -0.2 to -0.8%
  // with it; mxfp4 weights' +0.25 to +0.4% (bench/NOTES.md version 48). The whole-tile walk only: the stream-K one
  // is launched for prefill-sized calls.
  static constexpr bool kPrefetchFirstWeights = kTokensStaged && !kStreamK && BScales == ScaleGranularity::nv16;
  static_assert(!kStreamK || Consumers * Slabs * kAccumulators * kThreadsPerWarpgroup <= static_cast<int>(kStreamKPartialFloats));
  // The stage's window of codes: kScaleCodeWindow bytes of each of the tile's weight rows (TMA's box), in sfb's
  // room, which holds kSfbSteps floats a row: the window's where only codes come, else the fp32 scales' kStepsB.
  static constexpr std::uint32_t kScaleCodeBoxBytes = kBlockN * kScaleCodeWindow;
  static constexpr int kSfbSteps = kScaleCodeWindows ? kScaleCodeWindow / static_cast<int>(sizeof(float)) : kStepsB;
  static_assert(!kScaleCodeWindows || kScaleCodeWindow <= kSfbSteps * static_cast<int>(sizeof(float)),
                "a row's window fits its room");
  static constexpr int kRowBytesA = kTokensStaged ? 2 * kBlockK : APacked ? kBlockK / 2 : kBlockK;
  static constexpr int kRowBytesB = kBlockK / 2;
  static constexpr std::uint32_t kStageBytes = static_cast<std::uint32_t>(Tokens * kRowBytesA + kBlockN * kRowBytesB);
  // Token decoding: 16-byte chunks of 8 bf16, eight per 64-deep row, one or two per consumer thread.
  static constexpr int kTokenChunks = Tokens * (kDecodedK / 8);
  static_assert(kTokensStaged || kTokenChunks % (2 * kThreadsPerWarpgroup) == 0);

  // Staged tokens: half h of a stage's tokens (K 64 h .. 64 h + 63, Tokens rows of 128 bytes of bf16 or f16) at
  // a + h * kTokenHalfBytes, 1024-byte aligned for the swizzle.
  static constexpr int kTokenHalfBytes = Tokens * 128;
  struct alignas(kTokensStaged ? 1024 : 128) RawStage {
    std::uint8_t a[Tokens * kRowBytesA];
    std::uint8_t b[kBlockN * kRowBytesB];
  };
  struct alignas(1024) DecodedStage {
    std::uint8_t a[Tokens * 128];  // the tokens of one 64-deep slice, bf16, 128-byte swizzled
  };
  static constexpr std::size_t kStageScaleBytes = sizeof(float) * (kStepsA * kScaleRowsA + kSfbSteps * kBlockN);
  // nv16 weights' scale codes in windows: the consumers look each code's lifted pair up in a table of all 256
  // (core::ue4m3_lifted_bf16x2_entry or _f16x2_entry, filled before the roles start: fill_lifted_scales), exact for
  // every code, so that their loop holds no test, no vote and no fp32 path for the codes (bench/NOTES.md version 66).
  // The f16 operands' mx32 codes too (core::ue8m0_lifted_f16x2_entry: 0 outside f16's window, which the lookup's
  // compare then reports), instead of the window's test, the lift and a select a code.
  static constexpr bool kLiftedScaleTable =
      kScaleCodeWindows && (BScales == ScaleGranularity::nv16 || (kF16 && BScales == ScaleGranularity::mx32));
  static_assert(!kF16 || kLiftedScaleTable, "the f16 weights take their lifted pairs from the table (decode_weights)");
  static constexpr int kLiftedScaleEntries = kLiftedScaleTable ? core::kScaleCodes : 1;
  static constexpr int kStages = raw_stages_that_fit(sizeof(RawStage), kStageScaleBytes, kTokensStaged ? 0 : sizeof(DecodedStage),
                                                     Consumers, kLiftedScaleTable ? sizeof(std::uint32_t) * kLiftedScaleEntries : 0);
  static constexpr bool kFits = kStages >= 3;
  // Stages per scale-loader chunk: 16 bytes of B's codes per row, 8 for the 384-weight tile, fewer where
  // the ring is short (scale_chunk_that_fits).
  static constexpr int kScaleChunk =
      Consumers > 2 ? 1 : scale_chunk_that_fits((BScales == ScaleGranularity::nv16 ? 2 : 4) / (Slabs == 3 ? 2 : 1), kStages);
  // (More consumers: chunks of one stage, the producers' registers being fewer.)
  static_assert(kFits);

  struct DecodingStorage {
    DecodedStage decoded[kDecodedStages];
    RawStage raw[kStages];
    alignas(16) float sfa[kStages][kStepsA][Tokens];
    alignas(16) float sfb[kStages][kSfbSteps][kBlockN];
    alignas(16) float epilogue[2][64][kEpiloguePitch];
    alignas(8) std::uint64_t full[kStages];
    alignas(8) std::uint64_t empty[kStages];
    alignas(8) std::uint64_t decoded_full[kDecodedStages];
    alignas(8) std::uint64_t decoded_empty[kDecodedStages];
    // core::kBf16SelectorsLow once per lane, read once into a register (mainloop_swapped.cuh).
    std::uint32_t selector_table[32];
  };
  // Staged tokens: no decoded tiles, no token scales.
  struct StagedTokensStorage {
    // First, where the boxes' 1024-byte alignment (the 128-byte swizzle) needs no padding: each
    // consumer's room is 9 KB.
    alignas(1024) float epilogue[Consumers][64][kEpiloguePitch];
    RawStage raw[kStages];
    // 128-byte aligned for the codes' TMA box (each stage's room is a multiple of 1024 bytes).
    alignas(128) float sfb[kStages][kSfbSteps][kBlockN];
    alignas(8) std::uint64_t full[kStages];
    alignas(8) std::uint64_t empty[kStages];
    std::uint32_t selector_table[32];
    std::uint32_t lifted_scales[kLiftedScaleEntries];
  };
  using SharedStorage = std::conditional_t<kTokensStaged, StagedTokensStorage, DecodingStorage>;
  static constexpr std::size_t kSharedBytes = sizeof(SharedStorage) + 1024;
  static_assert(kSharedBytes <= kSharedMemoryLimit);
};

}  // namespace bsgemm::cuda
