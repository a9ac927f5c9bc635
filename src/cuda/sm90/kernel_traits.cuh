// Compile-time shape of one FP8 kernel instantiation: tile, warpgroup split, stages, shared memory.
//
// 384 threads: warpgroup 0 produces (warp 0 issues TMA for A and B, warps 1-3 gather block scales),
// warpgroups 1 and 2 consume (FP8 wgmma into a fresh accumulator per scale block, promoted into fp32
// registers with the scales applied). With a 128-row tile each consumer owns 64 rows and all columns;
// with a 64-row tile (decode-sized groups) both own the 64 rows and half of the columns each.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/cuda/ptx/wgmma.cuh"
#include "src/cuda/sm90/params.hpp"

namespace bsgemm::cuda {

inline constexpr int kThreadsPerWarpgroup = 128;
inline constexpr int kKernelThreads = 3 * kThreadsPerWarpgroup;
inline constexpr int kScaleLoaderWarps = 3;       // warps 1-3 of the producer warpgroup
// Registers per thread at launch: __launch_bounds__(384, 1) lets ptxas use 65536 / 384 rounded down to
// a multiple of 8. setmaxnreg then moves registers from the producer warpgroup to the consumers; the
// total may not exceed what the CTA was launched with, or setmaxnreg.inc waits forever.
inline constexpr int kLaunchRegisters = 65536 / kKernelThreads / 8 * 8;
inline constexpr int kConsumerRegisters = 192;
// fp8-block128's 128 x 192 tile: 96 accumulator and 96 result registers per consumer thread, which fit 224
// without spills; the producer warpgroup (the TMA thread and the block128 scale gathers, four rows per
// lane) keeps 56, enough since the scale loaders hold row addresses instead of base and offsets.
inline constexpr int kWideConsumerRegisters = 224;
inline constexpr int kWideProducerRegisters = 56;
inline constexpr std::size_t kSharedMemoryLimit = 232448;  // sm_90 opt-in maximum per block
inline constexpr int kEpiloguePitch = 36;  // floats per staged row: 32 + 4 keeps float4 reads conflict-free

enum class NamedBarrier : std::uint32_t {
  epilogue_consumer0 = 1,
  epilogue_consumer1 = 2,
  issue_turn_consumer0 = 3,
  issue_turn_consumer1 = 4,
  epilogue_consumer2 = 5,  // the register-operand kernel's third and fourth consumers (kernel_traits_swapped.cuh)
  epilogue_consumer3 = 6,
  stream_k_consumers = 7,  // all consumer warpgroups, around a stream-K partial (stream_k.cuh)
};

// The named barrier of consumer warpgroup `consumer`'s epilogue.
__host__ __device__ constexpr std::uint32_t epilogue_barrier(int consumer) {
  return static_cast<std::uint32_t>(consumer < 2 ? NamedBarrier::epilogue_consumer0 : NamedBarrier::epilogue_consumer2) +
         static_cast<std::uint32_t>(consumer % 2);
}

// Registers per thread at launch for a CTA of `threads`: 65536 / threads rounded down to a multiple of 8.
constexpr int launch_registers(int threads) { return 65536 / threads / 8 * 8; }

// APacked / BPacked: the operand is stored as e2m1 (FP4, two per byte). TMA copies its packed tile into
// a raw buffer and the scale loaders widen it to e4m3 in the stage (src/core/fp4_to_fp8.hpp), which the
// FP8 wgmma then reads like any other; kA / kB are then e4m3.
template <ptx::Fp8Kind A, ptx::Fp8Kind B, ScaleGranularity Scales, int BlockM, int BlockN, bool APacked = false,
          bool BPacked = false>
struct Fp8KernelTraits {
  static_assert(BlockM == 64 || BlockM == 128, "consumer warpgroups cover 64 rows each");
  static_assert(!(APacked || BPacked) || Scales == ScaleGranularity::mx32, "FP4 operands come with MX scales here");
  static constexpr bool kStreamK = false;  // whole tiles only (tile_walker.cuh)
  static constexpr ptx::Fp8Kind kA = A;
  static constexpr ptx::Fp8Kind kB = B;
  static constexpr bool kAPacked = APacked;
  static constexpr bool kBPacked = BPacked;
  static constexpr bool kAnyPacked = APacked || BPacked;
  static constexpr ScaleGranularity kScales = Scales;
  // Staged operands (stage_bf16.cu: mxfp8, mxfp4, nvfp4): A and B arrive as bf16 with their scales folded
  // in, a stage's 128-byte rows hold 64 of K, BF16 wgmma accumulate the whole K in the result registers,
  // and the scale loaders have nothing to do.
  static constexpr bool kStaged = Scales == ScaleGranularity::staged;
  static_assert(!kStaged || !(APacked || BPacked));
  static constexpr int kElementBytes = kStaged ? 2 : 1;
  static constexpr int kBlockM = BlockM;
  static constexpr int kBlockN = BlockN;
  static constexpr int kWarpgroupsAlongM = BlockM / 64;
  static constexpr int kWarpgroupsAlongN = 2 / kWarpgroupsAlongM;
  static constexpr int kWarpgroupN = BlockN / kWarpgroupsAlongN;  // wgmma N of one consumer warpgroup
  static constexpr int kAccumulators = kWarpgroupN / 2;           // fp32 registers per accumulator per thread
  // Partial sums and results of more than 128 columns: only fp8-block128 (one scale product per row, no FP4
  // widening) can run its producers in 56 registers. Staged tiles have no partial sums: 256 columns are
  // 128 registers.
  static constexpr bool kWideAccumulators = kWarpgroupN > 128 && !kStaged;
  static_assert(!kWideAccumulators || (Scales == ScaleGranularity::block128 && !kAnyPacked && kWarpgroupN == 192),
                "more than 128 columns per consumer warpgroup only for fp8-block128's 128 x 192 tile");
  static constexpr int kConsumers = 2;  // consumer warpgroups (the CTA's threads: kKernelThreads)
  static constexpr int kThreads = kKernelThreads;
  static constexpr int kConsumerRegs = kWideAccumulators ? kWideConsumerRegisters : kConsumerRegisters;
  // Widening FP4 tiles next to the scale gathers needs the producer warpgroup's whole share.
  static constexpr int kProducerRegisters = kWideAccumulators ? kWideProducerRegisters : kAnyPacked ? 120 : 112;
  static_assert(kThreadsPerWarpgroup * (kProducerRegisters + 2 * kConsumerRegs) <= kKernelThreads * kLaunchRegisters,
                "setmaxnreg would ask for more registers than the CTA holds");
  // The epilogue stores straight from the registers (epilogue.cuh) where that measured faster: mxfp8 tiles
  // of long K (promotion every 32 of K; shorter ones go through TMA stores, params.hpp kShortTileK), +3-4%;
  // fp8-block128 lost 1-6% (its short tiles end in
  // bursts of stores, and 4-byte stores take twice the L2 write transactions of the staged 16-byte ones;
  // bench/NOTES.md session 6).
  static constexpr bool kDirectEpilogue = Scales == ScaleGranularity::mx32;
  static constexpr bool kHeavyFirstWalk = heavy_first_walk(false, false, Scales, BlockM, BlockN);  // tile_walker.cuh
  // The consumers' walk keeps its group (tile_walker.cuh) but in the tiles of more than 128 columns a warpgroup,
  // whose consumers spill with it (8 bytes).
  static constexpr bool kKeepWalkGroup = kWarpgroupN <= 128;
  // The warp's search for the 64-row tiles (decode-sized groups, where a step skips many groups: -0.8 to -1.8% on
  // the decode rows), the lane's for the 128-row ones (+9% on mxfp8's run of the reference system's example with
  // the warp's; bench/NOTES.md versions 47 and 49).
  static constexpr GroupSearch kConsumerSearch = BlockM == 64 ? GroupSearch::by_warp : GroupSearch::by_lane;
  // Scale-loader warps that arrive on each stage's full barrier (none for staged operands).
  static constexpr int kScaleLoaderArrivals = kStaged ? 0 : 32;
  static_assert(kWarpgroupN % 32 == 0 && kWarpgroupN <= 256);
  // With fp8-block128 one B scale covers 128 columns. A consumer's columns straddle two such blocks only in
  // the 192-wide tile, whose tiles start at a multiple of 64: the boundary then falls between two 8-column
  // fragment chunks (mainloop_fp8.cuh), at 64 or 128.
  static_assert(Scales != ScaleGranularity::block128 || 128 % kWarpgroupN == 0 || kWarpgroupN % 128 == 0 ||
                kWarpgroupN == 192);

  static constexpr int kScaleSteps = Scales == ScaleGranularity::mx32 ? kBlockK / 32 : 1;
  // Rows of A scales per stage: one per 32-deep step (mxfp8), or one per 128 columns of the tile with
  // that block's B scale folded in (fp8-block128; scale_loader.cuh). B scales per stage: mxfp8 only.
  static constexpr int kSfaSlots = Scales == ScaleGranularity::mx32 ? kScaleSteps : (BlockN + 127) / 128;
  static constexpr int kSfbPerStage = Scales == ScaleGranularity::mx32 ? kScaleSteps * BlockN : 0;
  // Bytes TMA delivers per stage into the stage itself (FP8 operands) and into the raw buffer (FP4).
  static constexpr std::uint32_t kStageBytes =
      static_cast<std::uint32_t>(((APacked ? 0 : BlockM) + (BPacked ? 0 : BlockN)) * kBlockK);
  static constexpr std::uint32_t kRawABytes = APacked ? BlockM * kBlockK / 2 : 0;
  static constexpr std::uint32_t kRawBBytes = BPacked ? BlockN * kBlockK / 2 : 0;
  static constexpr std::uint32_t kRawBytes = kRawABytes + kRawBBytes;

  struct alignas(1024) Stage {
    std::uint8_t a[BlockM * kBlockK];
    std::uint8_t b[BlockN * kBlockK];
  };
  // The packed tiles as TMA writes them: row r of A at a + 64 r, of B at b + 64 r (no swizzle).
  struct alignas(128) RawStage {
    std::uint8_t bytes[kRawBytes > 0 ? kRawBytes : 128];
    __device__ std::uint8_t* a() { return bytes; }
    __device__ std::uint8_t* b() { return bytes + kRawABytes; }
  };
  static constexpr std::size_t kStageScaleBytes = kStaged ? 0 : sizeof(float) * (kSfaSlots * BlockM + kSfbPerStage);
  // Stages that fit next to two consumer epilogue areas of `epilogue_bytes` each.
  static constexpr auto kStagesFor = [](std::size_t epilogue_bytes) {
    const std::size_t per_stage = sizeof(Stage) + (kAnyPacked ? sizeof(RawStage) + sizeof(std::uint64_t) : 0) +
                                  kStageScaleBytes + 2 * sizeof(std::uint64_t);
    const std::size_t fixed = 2 * epilogue_bytes + 1024 /* base alignment */;
    const std::size_t fit = (kSharedMemoryLimit - fixed - 256) / per_stage;
    return static_cast<int>(fit > 8 ? 8 : fit);
  };
  // A consumer's epilogue area: the staged epilogue's fp32 rows, or the TMA-store epilogue's 64 x 64 boxes
  // of 16-bit D (epilogue.cuh), all of the warpgroup's columns at once where that costs no pipeline stage or
  // where the tile is 192 wide (4 stages against 5, measured +0.4% on the H200's prefill cases: the rounds'
  // waits cost more than the stage), else one box at a time (fp8-block128's 128 x 128 tile: 6 stages
  // against 5; the MX tiles, whose one box fits the staged epilogue's rows).
  static constexpr std::size_t kStagedEpilogueBytes = sizeof(float) * 64 * kEpiloguePitch;
  static constexpr int kBoxesPerWarpgroup = kWarpgroupN / kEpilogueBoxColumns;
  static constexpr auto kEpilogueBytesFor = [](int boxes) {
    const std::size_t box_bytes = static_cast<std::size_t>(boxes) * kEpilogueBoxBytes;
    return box_bytes > kStagedEpilogueBytes ? box_bytes : kStagedEpilogueBytes;
  };
  static constexpr int kEpilogueBoxes =
      kWideAccumulators || kStagesFor(kEpilogueBytesFor(kBoxesPerWarpgroup)) == kStagesFor(kEpilogueBytesFor(1))
          ? kBoxesPerWarpgroup
          : 1;
  static constexpr std::size_t kEpilogueBytes = kEpilogueBytesFor(kEpilogueBoxes);
  static constexpr bool kTransposedBoxes = false;  // the register-operand kernel's (epilogue.cuh)
  static constexpr int kStages = kStagesFor(kEpilogueBytes);
  static_assert(kStages >= 3, "tile too large for a useful pipeline");
  static constexpr int kScaleStages = kStaged ? 1 : kStages;  // staged operands: one unused slot
  static_assert(kEpilogueBytes % 1024 == 0, "each consumer's boxes start 1024-byte aligned (the 128-byte swizzle's period)");

  // The scale and staging arrays are read as float2 / float4: keep each 16-byte aligned whatever the
  // sizes before it.
  struct SharedStorage {
    Stage stages[kStages];
    alignas(1024) std::uint8_t epilogue[2][kEpilogueBytes];  // per consumer warpgroup
    RawStage raw[kAnyPacked ? kStages : 1];
    alignas(16) float sfa[kScaleStages][kSfaSlots][BlockM];
    alignas(16) float sfb[kScaleStages][kSfbPerStage > 0 ? kSfbPerStage : 1];
    alignas(8) std::uint64_t full[kStages];
    alignas(8) std::uint64_t empty[kStages];
    alignas(8) std::uint64_t raw_full[kAnyPacked ? kStages : 1];  // packed tiles landed (TMA -> scale loaders)
  };
  static constexpr std::size_t kSharedBytes = sizeof(SharedStorage) + 1024;
  static_assert(kSharedBytes <= kSharedMemoryLimit);
};

}  // namespace bsgemm::cuda
