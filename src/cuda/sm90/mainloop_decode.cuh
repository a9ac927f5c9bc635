// The consumers' mainloop of the decoding kernel: decode raw stages into bf16 tiles, then BF16 wgmma.
//
// Each raw stage (128 of K) becomes two decoded tiles of 64, or one where K ends in its first half (a K of 32
// or 64 would otherwise decode and multiply as many zeros as values). All 256 consumer threads decode every
// tile together (A rows then B rows, 16-byte chunks, a warp per four rows), so a consumer warpgroup's
// wgmma read rows the other warpgroup decoded: two barriers per decoded tile carry that ("full": all 8
// consumer warps wrote it; "empty": all 8 finished their wgmma on it). The loop is pipelined by one
// tile: the wgmma of tile j are issued, tile j + 1 is decoded while they run, then they are waited for.
//
// Where an operand is FP4, every chunk of eight K positions is stored in the pairs order of decode_bf16.cuh,
// A's and B's alike (FP4 decodes fastest in it); FP8 x FP8 keeps the natural order.
//
// Scales folded into the decoded values (mx32, nv16) need no promotion: the wgmma accumulate the whole
// K range in fp32. With fp8-block128 activations A's scale stays in fp32: the two tiles of a stage
// accumulate afresh and are added into the result with the row's scale, as in the FP8 kernel.
#pragma once

#include <cstdint>
#include <type_traits>

#include "src/cuda/ptx/mbarrier.cuh"
#include "src/cuda/ptx/sync.cuh"
#include "src/cuda/ptx/wgmma.cuh"
#include "src/cuda/sm90/decode_bf16.cuh"
#include "src/cuda/sm90/kernel_traits_decode.cuh"
#include "src/cuda/sm90/pipeline.cuh"

namespace bsgemm::cuda {

template <class Traits>
struct DecodeMainloop {
  using Storage = typename Traits::SharedStorage;
  using Mma = ptx::WgmmaBf16<Traits::kWarpgroupN>;
  static constexpr int kAcc = Traits::kAccumulators;
  static constexpr int kDecoders = 2 * kThreadsPerWarpgroup;

  int wg_m, wg_n, frag_row, frag_col;
  int decoder;  // this thread's index among the decoding threads
  bool a_e5m2, b_e5m2;
  bool release_lane;

  // core::kBf16SelectorsLow from this lane's copy in shared memory, so that it stays in a register
  // (mainloop_swapped.cuh says why).
  std::uint32_t selector_table;

  __device__ DecodeMainloop(int consumer, const KernelParams& p, std::uint32_t selector_table_in_shared)
      : selector_table(selector_table_in_shared) {
    const int t = threadIdx.x % kThreadsPerWarpgroup;
    wg_m = consumer / Traits::kWarpgroupsAlongN;
    wg_n = consumer % Traits::kWarpgroupsAlongN;
    frag_row = wg_m * 64 + (t / 32) * 16 + (t % 32) / 4;
    frag_col = wg_n * Traits::kWarpgroupN + 2 * (t % 4);
    decoder = consumer * kThreadsPerWarpgroup + t;
    a_e5m2 = p.a_element == DataType::e5m2;
    b_e5m2 = p.b_element == DataType::e5m2;
    release_lane = t % 32 == 0;
  }

  // Thread u decodes chunk u % 8 of rows u / 8 + 32 i of A (i < kBlockM / 32), then of B, so a warp covers
  // four whole 128-byte rows (conflict-free) and which operand a chunk belongs to is known at compile time.
  static constexpr int kChunksA = Traits::kBlockM / 32, kChunksB = Traits::kBlockN / 32;
  static_assert(kChunksA + kChunksB == Traits::kChunksPerThread && kDecoders == 256);

  // One operand's chunks of a half stage: every raw load and scale load is issued before the first
  // conversion, so their latencies overlap instead of adding up chunk after chunk. Tail: the chunk
  // reaches past K (TMA zero-fills FP8 rows, but a packed row's last byte may hold a padding nibble).
  static constexpr bool kPairs = Traits::kAPacked || Traits::kBPacked;

  template <bool Packed, ScaleGranularity Scales, int Rows, int Chunks, bool Tail>
  __device__ __forceinline__ static void decode_operand(const std::uint8_t* raw, const float (&scales)[scale_steps(Scales)][Rows],
                                                        std::uint8_t* out, int row0, int c, int k0, bool e5m2, int keep,
                                                        std::uint32_t selector_table) {
    std::uint32_t lo[Chunks], hi[Chunks];
    float scale[Chunks];
#pragma unroll
    for (int i = 0; i < Chunks; ++i) {
      const int row = row0 + 32 * i;
      if constexpr (Packed) {
        lo[i] = *reinterpret_cast<const std::uint32_t*>(raw + row * (kBlockK / 2) + k0 / 2);
        hi[i] = 0;
      } else {
        const uint2 codes = *reinterpret_cast<const uint2*>(raw + row * kBlockK + k0);
        lo[i] = codes.x;
        hi[i] = codes.y;
      }
      scale[i] = 1.0f;
      if constexpr (Scales == ScaleGranularity::mx32) scale[i] = scales[k0 / 32][row];
      if constexpr (Scales == ScaleGranularity::nv16) scale[i] = scales[k0 / 16][row];
    }
    // Rows 32 apart share row % 8, so every chunk of this thread lands in the same swizzled column.
    const int column = (c ^ (row0 % 8)) * 16;
#pragma unroll
    for (int i = 0; i < Chunks; ++i) {
      uint4 v;
      if constexpr (Packed) v = decode_e2m1x8_pairs(lo[i], scale[i], selector_table);
      else if constexpr (kPairs) v = decode_fp8x8_pairs(lo[i], hi[i], e5m2, scale[i]);
      else v = decode_fp8x8(lo[i], hi[i], e5m2, scale[i]);
      if constexpr (Tail) {
        if constexpr (kPairs) clear_pairs_tail(&v, keep);
        else clear_chunk_tail(&v, 2 * keep);  // bytes
      }
      *reinterpret_cast<uint4*>(out + (row0 + 32 * i) * 128 + column) = v;
    }
  }

  // Decodes half `half` (K 64 half .. 64 half + 63) of raw stage s into decoded tile d.
  __device__ __forceinline__ void decode_half(Storage& ss, int s, int half, int d, int k_valid) const {
    const int row0 = decoder / 8, c = decoder % 8;
    const int k0 = half * kDecodedK + 8 * c;
    const auto both = [&](auto tail) {
      constexpr bool kTail = decltype(tail)::value;
      const int keep = k_valid - k0 < 0 ? 0 : k_valid - k0;
      decode_operand<Traits::kAPacked, Traits::kAScales, Traits::kBlockM, kChunksA, kTail>(
          ss.raw[s].a, ss.sfa[s], ss.decoded[d].a, row0, c, k0, a_e5m2, keep, selector_table);
      decode_operand<Traits::kBPacked, Traits::kBScales, Traits::kBlockN, kChunksB, kTail>(
          ss.raw[s].b, ss.sfb[s], ss.decoded[d].b, row0, c, k0, b_e5m2, keep, selector_table);
    };
    // Only the last stage of a K range not a multiple of 128 has chunks past K.
    if (k_valid - k0 >= 8) both(std::false_type{});
    else both(std::true_type{});
  }

  // The wgmma of decoded tile d (4 of k16) into acc, as one commit group.
  __device__ __forceinline__ void issue_mma(const Storage& ss, int d, float (&acc)[kAcc], bool fresh) const {
    const std::uint64_t desc_a = ptx::make_smem_desc_sw128(ss.decoded[d].a + wg_m * 64 * 128);
    const std::uint64_t desc_b = ptx::make_smem_desc_sw128(ss.decoded[d].b + wg_n * Traits::kWarpgroupN * 128);
    ptx::fence_accumulators(acc);
    ptx::wgmma_fence();
#pragma unroll
    for (int k = 0; k < kDecodedK / 16; ++k)
      Mma::mma(acc, ptx::advance_desc(desc_a, 32 * k), ptx::advance_desc(desc_b, 32 * k), (fresh && k == 0) ? 0u : 1u);
    ptx::wgmma_commit();
  }

  // Accumulates one tile of K = k (its raw stages of 128 from `raw` on, its decoded tiles from `decoded` on;
  // both states end past the tile) into out. acc is scratch with block128 A.
  template <int Stages>
  __device__ void accumulate_tile(Storage& ss, const StagePipeline<Stages>& pipe, PipelineState<Stages>& raw,
                                  PipelineState<kDecodedStages>& decoded, std::int64_t k, float (&acc)[kAcc],
                                  float (&out)[kAcc]) const {
    // Decoded tiles of 64 that hold any of K: every stage's two halves but the last one's second where K
    // ends in its first half (a one-tile stage, whose tile the loop below leaves to the lines after it).
    const int k_blocks = static_cast<int>(core::ceil_div(k, static_cast<std::int64_t>(kBlockK)));
    const bool one_tile_last = k - static_cast<std::int64_t>(k_blocks - 1) * kBlockK <= kDecodedK;
    const int tiles = 2 * k_blocks - (one_tile_last ? 1 : 0);
#pragma unroll
    for (int i = 0; i < kAcc; ++i) out[i] = 0.0f;
    if (k_blocks == 0) return;  // K = 0: the producers load nothing for this tile
    float sa_top = 0.0f, sa_bottom = 0.0f;  // block128: the scales of the stage being accumulated
    PipelineState<kDecodedStages> write = decoded, read = decoded;

    // block128: the stage's scales, read before its second half is decoded (the stage before's promotion is done by
    // then), so that the decode's loads and stores lie between these loads and the stage's release: ptxas issues the
    // release's arrive without waiting for shared loads still in flight, and the scale loaders' next turn could
    // overwrite the scales before such a load had read them (bench/NOTES.md session 40).
    const auto read_stage_scales = [&] {
      if constexpr (Traits::kPromote) {
        sa_top = ss.sfa[raw.index][0][frag_row];
        sa_bottom = ss.sfa[raw.index][0][frag_row + 8];
      }
    };
    // The raw stage back to the producers.
    const auto finish_stage = [&] {
      __syncwarp();
      if (release_lane) pipe.consumer_release(raw);
      raw.advance();
    };
    // Decodes tile j; a second half finishes its stage.
    const auto decode_tile = [&](int j) {
      const int kb = j / 2, half = j % 2;
      if (half == 0) pipe.consumer_wait(raw);
      else read_stage_scales();
      ptx::mbarrier_wait(&ss.decoded_empty[write.index], write.phase ^ 1u);
      decode_half(ss, raw.index, half, write.index, static_cast<int>(k - static_cast<std::int64_t>(kb) * kBlockK));
      // The wgmma of both warpgroups read the tile through the async proxy.
      ptx::fence_proxy_async_shared();
      __syncwarp();
      if (release_lane) ptx::mbarrier_arrive(&ss.decoded_full[write.index]);
      write.advance();
      if (half == 1) finish_stage();
    };
    // The wgmma of tile j, and once they are done the tile back to the decoders and (block128, at a stage's
    // last tile) the products added into out times the stage's scales; tile j + 1 decoded meanwhile.
    const auto multiply_tile = [&](int j, bool decode_next, bool ends_stage) {
      ptx::mbarrier_wait(&ss.decoded_full[read.index], read.phase);
      issue_mma(ss, read.index, Traits::kPromote ? acc : out, Traits::kPromote ? j % 2 == 0 : j == 0);
      if (decode_next) decode_tile(j + 1);
      ptx::wgmma_wait<0>();
      ptx::fence_accumulators(Traits::kPromote ? acc : out);
      __syncwarp();
      if (release_lane) ptx::mbarrier_arrive(&ss.decoded_empty[read.index]);
      read.advance();
      if constexpr (Traits::kPromote) {
        if (ends_stage) {
#pragma unroll
          for (int i = 0; i < kAcc; ++i) out[i] = fmaf(acc[i], (i & 2) ? sa_bottom : sa_top, out[i]);
        }
      }
    };

    decode_tile(0);
    const int paired_tiles = 2 * (tiles / 2);
    for (int j = 0; j < paired_tiles; ++j) multiply_tile(j, j + 1 < tiles, j % 2 == 1);
    // A one-tile last stage: decoded in the loop's last step (or above), its scales read only now, after the
    // promotion of the stage before it, whose scales sa_top and sa_bottom held; released after its wgmma.
    if (one_tile_last) {
      read_stage_scales();
      multiply_tile(tiles - 1, false, true);
      finish_stage();
    }
    decoded = read;
  }
};

}  // namespace bsgemm::cuda
