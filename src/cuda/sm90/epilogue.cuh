// The epilogue: D = alpha * accumulators + beta * C, rounded to D's type, written through shared memory.
//
// A consumer warpgroup's 64 x N accumulators are scattered over its threads in the wgmma fragment
// order; they go through shared memory 32 columns at a time so that each thread then writes 8
// consecutive elements of one row (n-major D) or one column (m-major D) with 16-byte stores. Every
// store is predicated on the group's own M and N, so a ragged tile never writes into the next
// group's rows of a contiguous D or past masked_m. Vector accesses fall back to scalar ones at the
// N edge and where a group's rows start unaligned (contiguous groups begin at any row).
// The FP8 and decoding kernels have two faster routes for 16-bit n-major D without C: TMA stores of 64-row
// slabs (the MoE forms' whole slabs through KernelParams::d_map, any slab of a pointer-array group through
// its own map, DeviceGroup::d_map), and stores straight from the registers (the FP8 kernel's MX tiles of
// long K); the register-operand kernel's staged-token tiles store their transposed slabs by TMA in the MoE
// forms.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "bsgemm/formats.hpp"
#include "src/cuda/ptx/global.cuh"
#include "src/cuda/ptx/stmatrix.cuh"
#include "src/cuda/ptx/sync.cuh"
#include "src/cuda/ptx/tma.cuh"
#include "src/cuda/sm90/kernel_traits.cuh"
#include "src/cuda/sm90/params.hpp"
#include "src/cuda/sm90/tile_walker.cuh"

namespace bsgemm::cuda {

__device__ __forceinline__ int element_bytes(DataType t) { return t == DataType::f32 ? 4 : 2; }

// What one tile's epilogue needs of its group, read once per tile through the read-only path
// (tile_walker.cuh); plain loads were issued again after every store to D (run 23's profile: a third of
// the FP8 consumers' time in the epilogue, much of it waiting on such reloads).
struct TileOutput {
  const std::uint8_t* c;  // batch l of C; null without C
  std::uint8_t* d;        // batch l of D
  std::int64_t ldc, ldd;
  std::int64_t m, n;  // the group's extents
  float alpha, beta;
  // Whether the TMA-store epilogue has a map of D: the group's own (group_d_map), which clips every store
  // at the group's extents, or the MoE forms' KernelParams::d_map, which spans all groups, so that only
  // slabs inside the group may go through it. The group's first row and its batch in that map.
  bool boxes;
  const CUtensorMap* group_d_map;
  std::int32_t map_row0, map_batch;
};

// A consumer's acquire of its group's D map before the first TMA store through it, once per group, as the
// TMA producer's of A's and B's (kernel_common.cuh's tile_source): the host's copy or the prepare kernel
// wrote the map through the generic proxy. The warpgroup's first thread issues the stores.
struct OutputMapAcquire {
  const CUtensorMap* acquired = nullptr;

  __device__ void operator()(const TileOutput& o) {
    if (o.group_d_map == nullptr || o.group_d_map == acquired) return;
    if (threadIdx.x % kThreadsPerWarpgroup == 0) ptx::fence_tensormap_acquire(o.group_d_map);
    acquired = o.group_d_map;
  }
};

// GroupMaps: whether the instantiation can meet pointer-array groups' D maps (not the staged path's, which
// runs the MoE forms only, nor the register-operand kernel's, which has no boxes).
template <bool GroupMaps = false>
__device__ __forceinline__ TileOutput tile_output(const KernelParams& p, const DeviceGroup* g, std::int32_t l) {
  const int bytes = element_bytes(p.d_type);
  TileOutput o;
  o.m = read_only(g->m);
  o.n = read_only(g->n);
  o.ldd = read_only(g->ldd);
  o.d = static_cast<std::uint8_t*>(read_only(g->d)) + l * read_only(g->batch_stride_d) * bytes;
  o.c = nullptr;
  o.ldc = 0;
  if (p.has_c) {
    o.c = static_cast<const std::uint8_t*>(read_only(g->c)) + l * read_only(g->batch_stride_c) * bytes;
    o.ldc = read_only(g->ldc);
  }
  o.alpha = read_only(g->alpha);
  o.beta = read_only(g->beta);
  o.boxes = p.d_map_ready;
  o.group_d_map = nullptr;
  o.map_row0 = 0;
  o.map_batch = 0;
  if (p.d_map_ready) {
    // D's rows and experts line up with A's in the MoE forms.
    o.map_row0 = read_only(g->a_row0);
    o.map_batch = read_only(g->a_batch0) + l;
  } else if (GroupMaps && p.per_group_maps) {
    o.group_d_map = read_only(g->d_map);
    o.boxes = o.group_d_map != nullptr;
    o.map_batch = l;
  }
  return o;
}

// Eight consecutive elements of type T (f32, f16 or bf16) at element index `index`; `valid` of them exist.
// One 16-byte access where all 8 are valid and aligned (contiguous groups begin at any row).
template <DataType T>
__device__ __forceinline__ void load8(const std::uint8_t* base, std::int64_t index, int valid, float (&v)[8]) {
  constexpr int kBytes = T == DataType::f32 ? 4 : 2;
  const std::uint8_t* bytes = base + index * kBytes;
  const bool vector = valid == 8 && (reinterpret_cast<std::uintptr_t>(bytes) % 16 == 0);
  if constexpr (T == DataType::f32) {
    const auto* f = reinterpret_cast<const float*>(bytes);
    if (vector) {
      const float4 lo = __ldg(reinterpret_cast<const float4*>(f)), hi = __ldg(reinterpret_cast<const float4*>(f) + 1);
      v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w, v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
    } else {
#pragma unroll
      for (int q = 0; q < 8; ++q) v[q] = q < valid ? __ldg(f + q) : 0.0f;
    }
  } else {
    const auto* h = reinterpret_cast<const std::uint16_t*>(bytes);
    std::uint16_t raw[8];
    if (vector) {
      const uint4 w = __ldg(reinterpret_cast<const uint4*>(h));
      const std::uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
      for (int q = 0; q < 4; ++q) raw[2 * q] = words[q] & 0xFFFFu, raw[2 * q + 1] = words[q] >> 16;
    } else {
#pragma unroll
      for (int q = 0; q < 8; ++q) raw[q] = q < valid ? __ldg(h + q) : 0;
    }
#pragma unroll
    for (int q = 0; q < 8; ++q) v[q] = T == DataType::bf16 ? decode_bf16(raw[q]) : __half2float(__ushort_as_half(raw[q]));
  }
}

template <DataType T>
__device__ __forceinline__ std::uint16_t round_half_type(float x) {
  return T == DataType::bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(x)) : __half_as_ushort(__float2half_rn(x));
}

// Two values rounded to T (bf16 or f16) in one word, the first in the low half.
template <DataType T>
__device__ __forceinline__ std::uint32_t pack_half_pair(float lo, float hi) {
  std::uint32_t bits;
  if constexpr (T == DataType::bf16) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    memcpy(&bits, &v, 4);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    memcpy(&bits, &v, 4);
  }
  return bits;
}

template <DataType T>
__device__ __forceinline__ void store8(std::uint8_t* base, std::int64_t index, int valid, const float (&v)[8]) {
  constexpr int kBytes = T == DataType::f32 ? 4 : 2;
  std::uint8_t* bytes = base + index * kBytes;
  const bool vector = valid == 8 && (reinterpret_cast<std::uintptr_t>(bytes) % 16 == 0);
  if constexpr (T == DataType::f32) {
    auto* f = reinterpret_cast<float*>(bytes);
    if (vector) {
      reinterpret_cast<float4*>(f)[0] = make_float4(v[0], v[1], v[2], v[3]);
      reinterpret_cast<float4*>(f)[1] = make_float4(v[4], v[5], v[6], v[7]);
    } else {
#pragma unroll
      for (int q = 0; q < 8; ++q)
        if (q < valid) f[q] = v[q];
    }
  } else {
    auto* h = reinterpret_cast<std::uint16_t*>(bytes);
    if (vector) {
      std::uint32_t words[4];
#pragma unroll
      for (int q = 0; q < 4; ++q)
        words[q] = static_cast<std::uint32_t>(round_half_type<T>(v[2 * q])) |
                   (static_cast<std::uint32_t>(round_half_type<T>(v[2 * q + 1])) << 16);
      *reinterpret_cast<uint4*>(h) = make_uint4(words[0], words[1], words[2], words[3]);
    } else {
#pragma unroll
      for (int q = 0; q < 8; ++q)
        if (q < valid) h[q] = round_half_type<T>(v[q]);
    }
  }
}

// One output type and major of store_warpgroup_tile, chosen once per tile: the code a run executes is
// then one contiguous block instead of six variants' branches interleaved over 48 KB (run 23's profile:
// instruction-fetch stalls in the epilogue).
template <class Traits, DataType T, bool NMajor>
__device__ __forceinline__ void write_warpgroup_tile(const TileOutput& o, std::int64_t m_extent, std::int64_t n_extent,
                                                  std::int64_t row0, std::int64_t col0,
                                                  const float (&acc)[Traits::kAccumulators], float* stage,
                                                  std::uint32_t barrier_id) {
  const int t = threadIdx.x % kThreadsPerWarpgroup;
  const int warp = t / 32, lane = t % 32;
  const int frag_row = warp * 16 + lane / 4;
  const int frag_col = 2 * (lane % 4);
  // Columns per pass through the staging buffer: 32, or all of a 16-column warpgroup tile (the
  // register-operand kernel's 16-token tile).
  constexpr int kCols = Traits::kWarpgroupN < 32 ? Traits::kWarpgroupN : 32;
  constexpr int kSegs = kCols / 8;  // runs of 8 columns per row

#pragma unroll
  for (int chunk = 0; chunk < Traits::kWarpgroupN / kCols; ++chunk) {
    // Registers -> shared memory: fragment column group j = kSegs * chunk + jj holds columns 8j .. 8j+7.
#pragma unroll
    for (int jj = 0; jj < kSegs; ++jj) {
      const int i = 4 * (kSegs * chunk + jj);
      *reinterpret_cast<float2*>(&stage[frag_row * kEpiloguePitch + 8 * jj + frag_col]) = make_float2(acc[i], acc[i + 1]);
      *reinterpret_cast<float2*>(&stage[(frag_row + 8) * kEpiloguePitch + 8 * jj + frag_col]) =
          make_float2(acc[i + 2], acc[i + 3]);
    }
    ptx::named_barrier_sync(barrier_id, kThreadsPerWarpgroup);

    // Shared memory -> global: 64 rows x kCols columns = 8 kCols runs of 8, kCols / 16 per thread.
#pragma unroll
    for (int it = 0; it < kCols / 16; ++it) {
      float v[8], cv[8];
      std::int64_t m, n, index, ld_c_index;
      int valid;
      if constexpr (NMajor) {
        const int r = t / kSegs + (kThreadsPerWarpgroup / kSegs) * it, seg = t % kSegs;
        m = row0 + r;
        n = col0 + kCols * chunk + 8 * seg;
        if (m >= m_extent || n >= n_extent) continue;
        const float4 lo = *reinterpret_cast<const float4*>(&stage[r * kEpiloguePitch + 8 * seg]);
        const float4 hi = *reinterpret_cast<const float4*>(&stage[r * kEpiloguePitch + 8 * seg + 4]);
        v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w, v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
        valid = n_extent - n < 8 ? static_cast<int>(n_extent - n) : 8;
        index = m * o.ldd + n;
        ld_c_index = m * o.ldc + n;
      } else {
        const int col = t % kCols, rseg = t / kCols + (kThreadsPerWarpgroup / kCols) * it;
        n = col0 + kCols * chunk + col;
        m = row0 + 8 * rseg;
        if (m >= m_extent || n >= n_extent) continue;
#pragma unroll
        for (int q = 0; q < 8; ++q) v[q] = stage[(8 * rseg + q) * kEpiloguePitch + col];
        valid = m_extent - m < 8 ? static_cast<int>(m_extent - m) : 8;
        index = n * o.ldd + m;
        ld_c_index = n * o.ldc + m;
      }
      if (o.c != nullptr) {
        load8<T>(o.c, ld_c_index, valid, cv);
#pragma unroll
        for (int q = 0; q < 8; ++q) v[q] = fmaf(o.alpha, v[q], o.beta * cv[q]);
      } else {
#pragma unroll
        for (int q = 0; q < 8; ++q) v[q] = o.alpha * v[q];
      }
      store8<T>(o.d, index, valid, v);
    }
    ptx::named_barrier_sync(barrier_id, kThreadsPerWarpgroup);
  }
}

// The common case straight from the registers: a 16-bit n-major D without C, the warpgroup's columns inside
// N, rows 4-byte aligned. Each thread stores its fragment's column pairs as 32-bit words (a warp's store
// covers 16 bytes of 8 rows; L2 merges the halves of each sector), with no staging and no barrier: about
// a quarter of the staged epilogue's instructions. Rows past the group's M are skipped.
template <class Traits, DataType T>
__device__ __forceinline__ void direct_store_warpgroup_tile(const TileOutput& o, std::int64_t m_extent, std::int64_t row0,
                                                            std::int64_t col0, const float (&acc)[Traits::kAccumulators]) {
  const int t = threadIdx.x % kThreadsPerWarpgroup;
  const int frag_row = (t / 32) * 16 + (t % 32) / 4;
  const int frag_col = 2 * (t % 4);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const std::int64_t m = row0 + frag_row + 8 * half;
    if (m >= m_extent) continue;
    auto* row = reinterpret_cast<std::uint32_t*>(o.d + (m * o.ldd + col0 + frag_col) * 2);
#pragma unroll
    for (int j = 0; j < Traits::kWarpgroupN / 8; ++j) {
      const float lo = o.alpha * acc[4 * j + 2 * half], hi = o.alpha * acc[4 * j + 2 * half + 1];
      ptx::store_global_u32(row + 4 * j, pack_half_pair<T>(lo, hi));  // columns 8 j + frag_col, + 1
    }
  }
}

// The common case through TMA stores: a 16-bit n-major D without C (TileOutput::boxes), the warpgroup's 64 rows and
// all its columns inside the group, or any slab where the map clips at the group's extents. The warpgroup rounds
// its sums into 64 x 64 boxes laid out as the map's 128-byte swizzle (16-byte chunk c of row r at chunk
// c ^ (r % 8), so a warp's 32-bit stores of 8 rows x 4 column pairs hit 32 distinct banks), one thread issues the boxes'
// stores, and the consumers go on to the next tile while TMA writes this one: the tensor cores no longer idle for
// the global stores at the end of every tile (bench/NOTES.md, version 11d). The boxes are reused only after the
// stores that read them have (bulk_wait_group_read), checked by the issuing thread before a barrier.
template <class Traits, DataType T>
__device__ __forceinline__ void tma_store_warpgroup_tile(const KernelParams& p, const TileOutput& o, std::int64_t row0,
                                                         std::int64_t col0, const float (&acc)[Traits::kAccumulators],
                                                         std::uint8_t* boxes, std::uint32_t barrier_id) {
  const int t = threadIdx.x % kThreadsPerWarpgroup;
  const int lane = t % 32;
  const int frag_row = (t / 32) * 16 + lane / 4;
  const int swizzle = lane / 4;  // frag_row % 8, and (frag_row + 8) % 8
  std::uint8_t* const thread_row = boxes + frag_row * (2 * kEpilogueBoxColumns) + 4 * (lane % 4);
  constexpr int kRounds = Traits::kBoxesPerWarpgroup / Traits::kEpilogueBoxes;
#pragma unroll
  for (int round = 0; round < kRounds; ++round) {
    if (t == 0) ptx::bulk_wait_group_read<0>();
    ptx::named_barrier_sync(barrier_id, kThreadsPerWarpgroup);
#pragma unroll
    for (int b = 0; b < Traits::kEpilogueBoxes; ++b) {
#pragma unroll
      for (int chunk = 0; chunk < 8; ++chunk) {
        const int j = 8 * (round * Traits::kEpilogueBoxes + b) + chunk;  // fragment columns 8 j .. 8 j + 7
        std::uint8_t* at = thread_row + b * kEpilogueBoxBytes + 16 * (chunk ^ swizzle);
        *reinterpret_cast<std::uint32_t*>(at) = pack_half_pair<T>(o.alpha * acc[4 * j], o.alpha * acc[4 * j + 1]);
        *reinterpret_cast<std::uint32_t*>(at + 8 * 2 * kEpilogueBoxColumns) =
            pack_half_pair<T>(o.alpha * acc[4 * j + 2], o.alpha * acc[4 * j + 3]);
      }
    }
    ptx::fence_proxy_async_shared();
    ptx::named_barrier_sync(barrier_id, kThreadsPerWarpgroup);
    if (t == 0) {
#pragma unroll
      for (int b = 0; b < Traits::kEpilogueBoxes; ++b)
        ptx::tma_store_3d(o.group_d_map != nullptr ? o.group_d_map : &p.d_map,
                          static_cast<std::int32_t>(col0) + kEpilogueBoxColumns * (round * Traits::kEpilogueBoxes + b),
                          o.map_row0 + static_cast<std::int32_t>(row0), o.map_batch, boxes + b * kEpilogueBoxBytes);
    }
    // Every thread commits (the others' groups are empty, as PTX allows): a commit inside the branch made ptxas
    // move the decoding kernel's mainloop arithmetic out of the uniform registers (+23 instructions per decoded
    // tile in version 35, which measured -6% on fp8-block128 x nvfp4's prefill; bench/NOTES.md version 39).
    ptx::bulk_commit_group();
  }
}

// The end of a consumer's tiles: its TMA stores complete before the thread that issued them exits.
template <class Traits>
__device__ __forceinline__ void finish_warpgroup_stores(const KernelParams& p) {
  if constexpr (Traits::kEpilogueBoxes > 0 || Traits::kTransposedBoxes) {
    if ((p.d_map_ready || p.per_group_maps) && threadIdx.x % kThreadsPerWarpgroup == 0) ptx::bulk_wait_group<0>();
  }
}

// Writes one consumer warpgroup's part of a tile. `acc` holds the promoted fp32 sums in wgmma fragment
// order; `stage` is this warpgroup's [64][kEpiloguePitch] staging area; (row0, col0) is the group-local
// position of the warpgroup's first row and column. Transposed: the accumulator's rows are D's columns
// and its columns D's rows (the register-operand kernel computes D^T = B A^T).
template <class Traits>
__device__ __forceinline__ void store_warpgroup_tile(const KernelParams& p, const TileOutput& o, std::int64_t row0,
                                                     std::int64_t col0, const float (&acc)[Traits::kAccumulators],
                                                     float* stage, std::uint32_t barrier_id, bool transposed = false) {
  // D^T is D with the other major and the extents swapped.
  const bool n_major = p.d_n_major != transposed;
  const std::int64_t m_extent = transposed ? o.n : o.m, n_extent = transposed ? o.m : o.n;
  if constexpr (Traits::kEpilogueBoxes > 0) {
    // A vote, so that ptxas sees a uniform branch: on the per-thread condition it moved the mainloop's
    // pipeline arithmetic out of the uniform registers (27 more instructions per k-block, -5% on prefill).
    if (o.boxes && __all_sync(0xFFFFFFFFu, o.group_d_map != nullptr ||
                                                (row0 + 64 <= m_extent && col0 + Traits::kWarpgroupN <= n_extent))) {
      auto* boxes = reinterpret_cast<std::uint8_t*>(stage);
      if (p.d_type == DataType::bf16)
        tma_store_warpgroup_tile<Traits, DataType::bf16>(p, o, row0, col0, acc, boxes, barrier_id);
      else
        tma_store_warpgroup_tile<Traits, DataType::f16>(p, o, row0, col0, acc, boxes, barrier_id);
      return;
    }
  }
  if constexpr (Traits::kDirectEpilogue) {
    const bool aligned = reinterpret_cast<std::uintptr_t>(o.d) % 4 == 0 && o.ldd % 2 == 0;
    if (n_major && o.c == nullptr && p.d_type != DataType::f32 && aligned && col0 + Traits::kWarpgroupN <= n_extent) {
      if (p.d_type == DataType::bf16) direct_store_warpgroup_tile<Traits, DataType::bf16>(o, m_extent, row0, col0, acc);
      else direct_store_warpgroup_tile<Traits, DataType::f16>(o, m_extent, row0, col0, acc);
      return;
    }
  }
  if constexpr (Traits::kEpilogueBoxes > 0) {
    // An edge tile stages through the same bytes as the boxes: the stores that read them must be done.
    if (p.d_map_ready || p.per_group_maps) {
      if (threadIdx.x % kThreadsPerWarpgroup == 0) ptx::bulk_wait_group_read<0>();
      ptx::named_barrier_sync(barrier_id, kThreadsPerWarpgroup);
    }
  }
  const auto write = [&](auto type, auto major) {
    write_warpgroup_tile<Traits, decltype(type)::value, decltype(major)::value>(o, m_extent, n_extent, row0, col0, acc,
                                                                               stage, barrier_id);
  };
  using NMajor = std::true_type;
  using MMajor = std::false_type;
  switch (p.d_type) {
    case DataType::f32:
      n_major ? write(std::integral_constant<DataType, DataType::f32>{}, NMajor{})
              : write(std::integral_constant<DataType, DataType::f32>{}, MMajor{});
      break;
    case DataType::f16:
      n_major ? write(std::integral_constant<DataType, DataType::f16>{}, NMajor{})
              : write(std::integral_constant<DataType, DataType::f16>{}, MMajor{});
      break;
    default:
      n_major ? write(std::integral_constant<DataType, DataType::bf16>{}, NMajor{})
              : write(std::integral_constant<DataType, DataType::bf16>{}, MMajor{});
      break;
  }
}

// The register-operand kernel's slabs (kernel_swapped.cuh) through TMA stores where the MoE forms' 16-bit
// n-major D without C allows it (KernelParams::d_map, in boxes of the tile's tokens by 64 weights): a
// warpgroup's accumulators of a slab hold 64 weights (rows) by the tile's tokens (columns) of D^T. Per warp
// and 8 tokens, its 16 weight rows are two 8x8 matrices in the fragment layout stmatrix takes, which .trans
// writes as 8 token rows of 8 consecutive weights: rows of the box, 128-byte swizzled (chunk c of row r at
// c ^ (r % 8), so stmatrix's 8 rows of a matrix hit distinct banks). One thread issues the store, and the
// consumers go on with the next tile while TMA writes this one, where the staged epilogue held them for its
// global stores (bench/NOTES.md version 24). The box is written again only once the store has read it.
template <class Traits, DataType T>
__device__ __forceinline__ void tma_store_transposed_slab(const KernelParams& p, const TileOutput& o, std::int64_t weight0,
                                                          std::int64_t token0, const float (&acc)[Traits::kAccumulators],
                                                          std::uint8_t* box, std::uint32_t barrier_id) {
  constexpr int kTokens = Traits::kWarpgroupN;
  const int t = threadIdx.x % kThreadsPerWarpgroup;
  const int warp = t / 32, lane = t % 32;
  if (t == 0) ptx::bulk_wait_group_read<0>();
  ptx::named_barrier_sync(barrier_id, kThreadsPerWarpgroup);
  // Matrix m = lane / 8 of round i holds tokens 8 j .. 8 j + 7 (j = 2 i + m / 2) of the warp's weight rows
  // 8 (m % 2) .. + 7; the lane gives the address of token row 8 j + lane % 8, whose 8 weights are the box
  // row's 16-byte chunk 2 warp + m % 2.
  const int chunk = 2 * warp + (lane / 8) % 2;
#pragma unroll
  for (int i = 0; i < kTokens / 16; ++i) {
    const int token = 16 * i + 8 * (lane / 16) + lane % 8;
    std::uint32_t pairs[4];
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      // Accumulators 4 j + 2 (m % 2) and + 1: tokens 8 j + 2 q and + 1 of weight row g + 8 (m % 2).
      const int a = 4 * (2 * i + m / 2) + 2 * (m % 2);
      pairs[m] = pack_half_pair<T>(o.alpha * acc[a], o.alpha * acc[a + 1]);
    }
    ptx::stmatrix_x4_trans(box + token * (2 * kEpilogueBoxColumns) + 16 * (chunk ^ (token % 8)), pairs[0], pairs[1],
                           pairs[2], pairs[3]);
  }
  ptx::fence_proxy_async_shared();
  ptx::named_barrier_sync(barrier_id, kThreadsPerWarpgroup);
  if (t == 0) {
    ptx::tma_store_3d(&p.d_map, static_cast<std::int32_t>(weight0), o.map_row0 + static_cast<std::int32_t>(token0),
                      o.map_batch, box);
  }
  ptx::bulk_commit_group();  // by every thread, as in tma_store_warpgroup_tile
}

// One slab of the register-operand kernel (weight0, token0: its first weight and token in the group):
// through TMA stores where d_map is ready and the slab's weights and the tile's tokens lie inside the group,
// else through the staged epilogue, which writes the box's bytes only once the last store has read them.
template <class Traits>
__device__ __forceinline__ void store_transposed_slab(const KernelParams& p, const TileOutput& o, std::int64_t weight0,
                                                      std::int64_t token0, const float (&acc)[Traits::kAccumulators],
                                                      float* stage, std::uint32_t barrier_id) {
  if constexpr (Traits::kTransposedBoxes) {
    if (p.d_map_ready) {
      // A vote, so that ptxas sees a uniform branch (the condition is uniform already).
      if (__all_sync(0xFFFFFFFFu, token0 + Traits::kWarpgroupN <= o.m && weight0 + 64 <= o.n)) {
        auto* box = reinterpret_cast<std::uint8_t*>(stage);
        if (p.d_type == DataType::bf16)
          tma_store_transposed_slab<Traits, DataType::bf16>(p, o, weight0, token0, acc, box, barrier_id);
        else
          tma_store_transposed_slab<Traits, DataType::f16>(p, o, weight0, token0, acc, box, barrier_id);
        return;
      }
      if (threadIdx.x % kThreadsPerWarpgroup == 0) ptx::bulk_wait_group_read<0>();
      ptx::named_barrier_sync(barrier_id, kThreadsPerWarpgroup);
    }
  }
  store_warpgroup_tile<Traits>(p, o, weight0, token0, acc, stage, barrier_id, /*transposed=*/true);
}

}  // namespace bsgemm::cuda
