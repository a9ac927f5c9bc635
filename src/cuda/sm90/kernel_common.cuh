// What the persistent kernels (kernel_fp8.cuh, kernel_decode.cuh) share: the shared-memory base, the
// TMA producer's tensor maps per tile, the launch, and the dispatch from a tile shape to an instantiation.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "src/cuda/ptx/mbarrier.cuh"
#include "src/cuda/ptx/sync.cuh"
#include "src/cuda/ptx/tma.cuh"
#include "src/cuda/sm90/kernel_traits.cuh"
#include "src/cuda/sm90/launch.hpp"
#include "src/cuda/sm90/params.hpp"
#include "src/cuda/sm90/pipeline.cuh"
#include "src/cuda/sm90/tile_walker.cuh"
#include "src/core/tile_scheduler.hpp"

namespace bsgemm::cuda {

// The kernel's SharedStorage at the first 1024-byte boundary of the dynamic shared memory (swizzled
// tiles need it; the launch reserves 1024 extra bytes). The padding is added to the shared array itself,
// not to an integer address, so that the compiler still sees shared-memory accesses (LDS/STS rather
// than generic loads).
template <class Storage>
__device__ __forceinline__ Storage& align_shared_storage(std::uint8_t* shared_raw) {
  const std::uint32_t misalignment = ptx::smem_address(shared_raw) & 1023u;
  return *reinterpret_cast<Storage*>(shared_raw + ((1024u - misalignment) & 1023u));
}

// The first step of every GEMM kernel: its dynamic shared memory as its SharedStorage. Its barriers' setup
// follows, then wait_for_valid_records: the setup reads only the kernel's parameters, so it runs under the
// kernel before (bench/NOTES.md version 46).
template <class Storage>
__device__ __forceinline__ Storage& gemm_shared_storage() {
  extern __shared__ std::uint8_t shared_raw[];
  return align_shared_storage<Storage>(shared_raw);
}

// Waits for the prepare kernel's group records, which it may still be writing (the GEMM kernel is launched
// as its programmatic dependent), and says whether they passed validation; where a device-resident
// description failed, the kernel writes nothing. Nothing before it may read the records, the status, the
// staged operands or the maps the prepare kernel edits.
__device__ __forceinline__ bool wait_for_valid_records(const KernelParams& p) {
  ptx::wait_for_prerequisite_grids();
  return p.status->failed_group == kNoFailure;
}

// Where the TMA producer reads a tile of group g from: the group's own maps (pointer-array form) or the
// kernel's, the coordinates of the tile's first row of A and of B, and the number of k-blocks (128 bytes of
// each row: 128 of K for 8-bit operands, 64 for staged bf16 ones, ElementBytes = 2).
struct TileSource {
  const CUtensorMap* a_map;
  const CUtensorMap* b_map;
  std::int32_t a_row, b_row, a_batch, b_batch;
  int k_blocks;
};

template <int BlockM, int BlockN, int ElementBytes = 1>
__device__ __forceinline__ TileSource tile_source(const KernelParams& p, const DeviceGroup& g, const core::TileCoord& c,
                                                  std::int32_t group, std::int32_t* acquired_group) {
  TileSource t;
  t.a_map = g.a_map != nullptr ? g.a_map : &p.a_map;
  t.b_map = g.b_map != nullptr ? g.b_map : &p.b_map;
  if (g.a_map != nullptr && group != *acquired_group) {
    // The prepare kernel edited these maps, or the host copied them, through the generic proxy.
    ptx::fence_tensormap_acquire(t.a_map);
    ptx::fence_tensormap_acquire(t.b_map);
    *acquired_group = group;
  }
  t.a_row = g.a_row0 + c.m_block * BlockM;
  t.b_row = c.n_block * BlockN;
  t.a_batch = g.a_batch0 + c.l;
  t.b_batch = g.b_batch0 + c.l;
  t.k_blocks = static_cast<int>(core::ceil_div(static_cast<std::int64_t>(g.k) * ElementBytes, kBlockK));
  return t;
}

// The TMA producer's walk: f(tile source, k_block, stage state) for every stage of the CTA's sequence (with
// Traits::kStreamK, the k-blocks of each unit of StreamKTileWalker's walk).
template <class Traits, int ElementBytes = 1, class F>
__device__ __forceinline__ void for_each_producer_stage(const KernelParams& p, F&& f) {
  PipelineState<Traits::kStages> state;
  core::TileCoord c;
  const DeviceGroup* g;
  std::int32_t acquired_group = -1;
  // k-blocks [kb_begin, kb_end) of tile c of group g (the walk's `group`); kb_end < 0: the whole tile's.
  const auto walk_unit = [&](std::int32_t group, int kb_begin, int kb_end) {
    const TileSource t = tile_source<Traits::kBlockM, Traits::kBlockN, ElementBytes>(p, *g, c, group, &acquired_group);
    const int end = kb_end < 0 ? t.k_blocks : kb_end;
    for (int kb = kb_begin; kb < end; ++kb) {
      f(t, kb, state);
      state.advance();
    }
  };
  if constexpr (Traits::kStreamK) {
    StreamKTileWalker walker;
    core::WorkUnit u;
    while (walker.next(p, &u, &c, &g)) walk_unit(walker.group, u.kb_begin, u.kb_end);
  } else {
    TileWalker<Traits::kHeavyFirstWalk> walker(p);
    while (walker.next(p, &c, &g)) walk_unit(walker.group, 0, -1);
  }
}

// The scale loaders' share of the walk: loader `loader` fills every kScaleLoaderWarps-th stage of the
// CTA's sequence. on_tile(group, tile) runs before the first stage this loader fills in a tile (per-tile
// addressing is computed once there), on_stage(group, tile, k_block, stage state) for each of them.
template <int Stages, bool HeavyFirst, class OnTile, class OnStage>
__device__ __forceinline__ void for_each_loader_stage(const KernelParams& p, int loader, OnTile&& on_tile, OnStage&& on_stage) {
  TileWalker<HeavyFirst> walker(p);
  core::TileCoord c;
  const DeviceGroup* g;
  PipelineState<Stages> state;
  state.advance(loader);
  int next_kb = loader;  // this loader's next stage, counted from the current tile's first
  while (walker.next(p, &c, &g)) {
    const int k_blocks = static_cast<int>(core::ceil_div(g->k, kBlockK));
    if (next_kb < k_blocks) on_tile(*g, c);
    for (; next_kb < k_blocks; next_kb += kScaleLoaderWarps) {
      on_stage(*g, c, next_kb, state);
      state.advance(kScaleLoaderWarps);
    }
    next_kb -= k_blocks;
  }
}

// The decoding kernels' scale loaders walk in chunks: a tile's k-blocks (StreamK: a unit's) in runs of Chunk (a
// chunk never spans two tiles or units), loader `loader` taking every kScaleLoaderWarps-th chunk of the CTA's
// sequence, so that it can fetch a chunk's scales of a row in one vector load where the layout allows
// (ScaleRows::load_chunk). on_tile(group, tile) runs before the first chunk this loader takes in a tile or unit,
// on_chunk(group, tile, first k-block of the tile's, k-blocks in the chunk (1 .. Chunk), stage state of the
// first) for each of them.
template <int Stages, int Chunk, bool HeavyFirst, bool StreamK = false, class OnTile, class OnChunk>
__device__ __forceinline__ void for_each_loader_chunk(const KernelParams& p, int loader, OnTile&& on_tile, OnChunk&& on_chunk) {
  // A loader's next stage after a chunk must lie within one turn of the ring (scale_chunk_that_fits).
  static_assert((kScaleLoaderWarps - 1) * Chunk + 1 <= Stages, "a loader would wait on an earlier turn's parity");
  core::TileCoord c;
  const DeviceGroup* g;
  PipelineState<Stages> unit_state;  // the stage of the current unit's first k-block
  int next = loader;                 // this loader's next chunk, counted from the current unit's first
  // k-blocks [kb_begin, kb_end) of tile c of group g: the whole tile, or (StreamK) a unit of StreamKTileWalker's.
  const auto walk_unit = [&](int kb_begin, int kb_end) {
    const int k_blocks = kb_end - kb_begin;
    const int chunks = (k_blocks + Chunk - 1) / Chunk;
    if (next < chunks) on_tile(*g, c);
    for (; next < chunks; next += kScaleLoaderWarps) {
      PipelineState<Stages> first = unit_state;
      first.skip(next * Chunk);
      const int left = k_blocks - next * Chunk;
      on_chunk(*g, c, kb_begin + next * Chunk, left < Chunk ? left : Chunk, first);
    }
    next -= chunks;
    unit_state.skip(k_blocks);
  };
  if constexpr (StreamK) {
    StreamKTileWalker walker;
    core::WorkUnit u;
    while (walker.next(p, &u, &c, &g)) walk_unit(u.kb_begin, u.kb_end);
  } else {
    TileWalker<HeavyFirst> walker(p);
    while (walker.next(p, &c, &g)) walk_unit(0, static_cast<int>(core::ceil_div(g->k, kBlockK)));
  }
}

// Thread 0, before the block-wide barrier: the prefetch of the kernel's own tensor maps (the MoE forms).
__device__ __forceinline__ void prefetch_kernel_maps(const KernelParams& p) {
  if (!p.per_group_maps) {
    ptx::prefetch_tensormap(&p.a_map);
    ptx::prefetch_tensormap(&p.b_map);
  }
  if (p.d_map_ready) ptx::prefetch_tensormap(&p.d_map);
  if (p.sfb_by_tma) ptx::prefetch_tensormap(&p.sfb_map);
}

// The roles of the threads after setup: warp 0's first lane issues TMA, warps 1-3 load scales (loader
// index 0-2), warpgroups 1.. consume (index 0..); setmaxnreg moves registers to the consumers.
template <int ProducerRegisters, int ConsumerRegisters = kConsumerRegisters, class Tma, class Loader, class Consumer>
__device__ __forceinline__ void run_roles(Tma&& tma, Loader&& loader, Consumer&& consumer) {
  const int warp = threadIdx.x / 32;
  if (warp < 4) {
    ptx::setmaxnreg_dec<ProducerRegisters>();
    if (warp == 0) {
      if (threadIdx.x == 0) tma();
    } else {
      loader(warp - 1);
    }
  } else {
    ptx::setmaxnreg_inc<ConsumerRegisters>();
    consumer(warp / 4 - 1);
  }
}

// One persistent CTA per SM (`grid`), Traits::kThreads threads, Traits::kSharedBytes of dynamic shared memory. Launched
// with programmatic dependent launch: the CTAs start while the prepare kernel (or the staging pass) finishes
// and wait for its writes in griddepcontrol.wait, so the launch latency overlaps the kernel before.
template <class Traits>
cudaError_t launch_persistent(void (*kernel)(KernelParams), const KernelParams& p, int grid, cudaStream_t stream) {
  const cudaError_t e =
      allow_dynamic_shared_memory<Traits>(reinterpret_cast<const void*>(kernel), static_cast<int>(Traits::kSharedBytes));
  if (e != cudaSuccess) return e;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(grid));
  config.blockDim = dim3(Traits::kThreads);
  config.dynamicSmemBytes = Traits::kSharedBytes;
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, p);
}

// Calls f(TraitsOf<BlockM, BlockN>{}) for the tile (one of launch.hpp's kTiles); false for others.
template <template <int, int> class TraitsOf, class F>
bool visit_tile(int block_m, int block_n, F&& f) {
  if (block_m == 128 && block_n == 128) return f(TraitsOf<128, 128>{}), true;
  if (block_m == 128 && block_n == 64) return f(TraitsOf<128, 64>{}), true;
  if (block_m == 64 && block_n == 256) return f(TraitsOf<64, 256>{}), true;
  if (block_m == 64 && block_n == 128) return f(TraitsOf<64, 128>{}), true;
  return false;
}

}  // namespace bsgemm::cuda
