// Compile-time shape of one instantiation of the decoding kernel (kernel_decode.cuh): the recipes with
// an FP4 operand (nvfp4, mxfp4, and FP8 activations with FP4 weights).
//
// Same 384 threads and roles as the FP8 kernel (kernel_traits.cuh): TMA brings each operand's stored
// bytes (4-bit or 8-bit, unswizzled) into a raw stage, the scale loaders gather the stage's scales as
// fp32, and the consumer warpgroups decode raw stages into bf16 tiles (decode_bf16.cuh) that their
// BF16 wgmma read. Decoded tiles are 64 deep (one 128-byte swizzled row per tile row), double-buffered:
// while the wgmma read one, the consumers decode the next.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/cuda/sm90/kernel_traits.cuh"
#include "src/cuda/sm90/params.hpp"

namespace bsgemm::cuda {

inline constexpr int kDecodedK = 64;  // K per decoded tile: 128 bytes of bf16 per row
inline constexpr int kDecodedStages = 2;

// The raw stages (each with its scales and two barriers) that fit in shared memory next to the decoded
// tiles, the epilogue's staging, the decoded tiles' barriers and table_bytes of tables, at most 8. Both decoding
// kernels (this one and kernel_traits_swapped.cuh) lay out their shared memory this way.
constexpr int raw_stages_that_fit(std::size_t raw_stage_bytes, std::size_t stage_scale_bytes,
                                  std::size_t decoded_stage_bytes, int consumers = 2, std::size_t table_bytes = 0) {
  const std::size_t fixed = decoded_stage_bytes * kDecodedStages + sizeof(float) * consumers * 64 * kEpiloguePitch +
                            1024 /* base alignment */ + 4 * sizeof(std::uint64_t) * kDecodedStages + table_bytes;
  const std::size_t per_stage = raw_stage_bytes + stage_scale_bytes + 2 * sizeof(std::uint64_t);
  const std::size_t fit = (kSharedMemoryLimit - fixed - 256) / per_stage;
  return static_cast<int>(fit > 8 ? 8 : fit);
}

// Stages per scale-loader chunk (kernel_decode.cuh): `wanted`, halved until a loader's consecutive stages
// lie within one turn of the ring. A loader's next stage after a chunk is (kScaleLoaderWarps - 1) * chunk + 1
// stages on; were that more than the ring holds, its wait for the slot to be empty could see the parity
// of an earlier turn's release and pass before the consumers are done with the slot.
constexpr int scale_chunk_that_fits(int wanted, int stages) {
  int chunk = wanted;
  while (chunk > 1 && (kScaleLoaderWarps - 1) * chunk + 1 > stages) chunk /= 2;
  return chunk;
}

// APacked / BPacked: e2m1 in memory (else e4m3 or e5m2, chosen at run time by KernelParams). AScales /
// BScales: mx32 and nv16 scales are folded into the decoded values; block128 (A only) is applied in fp32
// once per 128-deep stage, like the FP8 kernel's promotion.
template <bool APacked, ScaleGranularity AScales, bool BPacked, ScaleGranularity BScales, int BlockM, int BlockN>
struct DecodeKernelTraits {
  static_assert(BlockM == 64 || BlockM == 128, "consumer warpgroups cover 64 rows each");
  static_assert(BScales != ScaleGranularity::block128, "B's scales are folded into its decoded values");
  static_assert(!APacked || AScales != ScaleGranularity::block128);
  static constexpr bool kAPacked = APacked;
  static constexpr bool kBPacked = BPacked;
  static constexpr ScaleGranularity kAScales = AScales;
  static constexpr ScaleGranularity kBScales = BScales;
  static constexpr bool kPromote = AScales == ScaleGranularity::block128;
  static constexpr bool kTokensStaged = false;  // both operands arrive as stored (kernel_traits_swapped.cuh)
  static constexpr bool kScaleCodeWindows = false;  // the scale loaders bring every scale (kernel_traits_swapped.cuh)
  static constexpr bool kLoadsAScales = true;
  static constexpr int kScaleRowsA = BlockM;
  static constexpr int kConsumers = 2;          // consumer warpgroups (the CTA's threads: kKernelThreads)
  static constexpr int kThreads = kKernelThreads;
  static constexpr int kConsumerRegs = kConsumerRegisters;
  // The scale loaders hold a chunk of stages' codes of A and B in flight (kScaleChunk): the producer
  // warpgroup's whole share.
  static constexpr int kProducerRegisters = 120;
  static_assert(kThreadsPerWarpgroup * (kProducerRegisters + 2 * kConsumerRegs) <= kKernelThreads * kLaunchRegisters);
  static constexpr int kBlockM = BlockM;
  static constexpr int kBlockN = BlockN;
  static constexpr int kBLoads = tma_box_loads(BlockN);  // TMA boxes of B per stage
  static constexpr int kWarpgroupsAlongM = BlockM / 64;
  static constexpr int kWarpgroupsAlongN = 2 / kWarpgroupsAlongM;
  static constexpr int kWarpgroupN = BlockN / kWarpgroupsAlongN;
  static constexpr int kAccumulators = kWarpgroupN / 2;
  static constexpr bool kDirectEpilogue = false;  // decoding bounds these tiles (epilogue.cuh)
  static constexpr bool kHeavyFirstWalk = heavy_first_walk(false, true, AScales, BlockM, BlockN);  // tile_walker.cuh
  // The consumers' walk keeps its group (tile_walker.cuh) in the 128-row tiles; the 64-row ones spill with it.
  static constexpr bool kKeepWalkGroup = BlockM == 128;
  // The lane's search: the warp's measured 1-2% slower here on the reference system's example (4 groups), and no
  // decode row, where it pays, runs this kernel (bench/NOTES.md version 47).
  static constexpr GroupSearch kConsumerSearch = GroupSearch::by_lane;
  static constexpr bool kStreamK = false;  // whole tiles only (tile_walker.cuh)
  static constexpr bool kPrefetchFirstWeights = false;  // no staging pass runs before it (kernel_decode.cuh)
  // The TMA-store epilogue (epilogue.cuh) one 64 x 64 box at a time, in the staged epilogue's rows.
  static constexpr int kBoxesPerWarpgroup = kWarpgroupN / kEpilogueBoxColumns;
  static constexpr int kEpilogueBoxes = 1;
  static_assert(kEpilogueBoxBytes <= sizeof(float) * 64 * kEpiloguePitch);
  static constexpr bool kTransposedBoxes = false;
  static_assert(kWarpgroupN == 64 || kWarpgroupN == 128);

  static constexpr int kStepsA = scale_steps(AScales);
  static constexpr int kStepsB = scale_steps(BScales);
  static constexpr int kRowBytesA = APacked ? kBlockK / 2 : kBlockK;  // stored bytes per row and stage
  static constexpr int kRowBytesB = BPacked ? kBlockK / 2 : kBlockK;
  static constexpr std::uint32_t kStageBytes = static_cast<std::uint32_t>(BlockM * kRowBytesA + BlockN * kRowBytesB);
  // Decoding: 16-byte chunks of 8 bf16, eight per decoded row, spread over the 256 consumer threads.
  static constexpr int kChunksPerHalf = (BlockM + BlockN) * (kDecodedK / 8);
  static constexpr int kChunksPerThread = kChunksPerHalf / (2 * kThreadsPerWarpgroup);
  static_assert(kChunksPerHalf % (2 * kThreadsPerWarpgroup) == 0);

  struct alignas(128) RawStage {
    std::uint8_t a[BlockM * kRowBytesA];
    std::uint8_t b[BlockN * kRowBytesB];
  };
  struct alignas(1024) DecodedStage {
    std::uint8_t a[BlockM * 128];
    std::uint8_t b[BlockN * 128];
  };
  static constexpr std::size_t kStageScaleBytes = sizeof(float) * (kStepsA * BlockM + kStepsB * BlockN);
  static constexpr int kStages = raw_stages_that_fit(sizeof(RawStage), kStageScaleBytes, sizeof(DecodedStage));
  // Fewer than three raw stages starve the pipeline (a two-stage 64x256 mxfp8 x mxfp8 instance also
  // faulted, bench/NOTES.md version 7): such combinations are not launched.
  static constexpr bool kFits = kStages >= 3;
  // Stages per scale-loader chunk: 16 bytes of B's codes per row, 8 for 256-wide tiles (16 bytes of 256 rows
  // do not fit the producers' 120 registers), fewer where the ring is short.
  static constexpr int kScaleChunk =
      scale_chunk_that_fits((BScales == ScaleGranularity::nv16 ? 2 : 4) / (BlockN >= 256 ? 2 : 1), kStages);

  struct SharedStorage {
    DecodedStage decoded[kDecodedStages];
    // 1024-byte aligned for the boxes' 128-byte swizzle (each consumer's rows are 9 x 1024 bytes), and right
    // after the decoded tiles, whose size keeps it so without padding.
    alignas(1024) float epilogue[2][64][kEpiloguePitch];
    RawStage raw[kStages];
    alignas(16) float sfa[kStages][kStepsA][BlockM];
    alignas(16) float sfb[kStages][kStepsB][BlockN];
    alignas(8) std::uint64_t full[kStages];
    alignas(8) std::uint64_t empty[kStages];
    alignas(8) std::uint64_t decoded_full[kDecodedStages];   // consumers -> consumers: a decoded tile is ready
    alignas(8) std::uint64_t decoded_empty[kDecodedStages];  // consumers -> consumers: its wgmma are done
    // core::kBf16SelectorsLow once per lane, read once into a register (mainloop_decode.cuh).
    std::uint32_t selector_table[32];
  };
  static constexpr std::size_t kSharedBytes = sizeof(SharedStorage) + 1024;
  static_assert(kSharedBytes <= kSharedMemoryLimit);
};

}  // namespace bsgemm::cuda
