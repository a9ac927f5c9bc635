// What the host hands the sm_90a kernels ("Params"), and what the prepare kernel hands the main one.
// Plain structs shared by host and device code; no device code here.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

#include "bsgemm/problem.hpp"
#include "src/core/resolved_group.hpp"
#include "src/core/tile_scheduler.hpp"

namespace bsgemm::cuda {

// How often the block scales change along K inside one 128-deep stage.
enum class ScaleGranularity : std::uint8_t {
  block128,  // fp8-block128: one scale per 128 of K (A per row, B per 128 columns)
  mx32,      // mxfp8, mxfp4: one scale per 32 of K, per row of A and per column of B
  nv16,      // nvfp4: one scale per 16 of K, per row of A and per column of B
  staged,    // none in the kernel: operands staged as bf16 with their scales folded in (stage_bf16.cu)
};

// Scales per row (or column) of an operand in one 128-deep stage.
constexpr int scale_steps(ScaleGranularity g) {
  return g == ScaleGranularity::nv16 ? 8 : g == ScaleGranularity::mx32 ? 4 : 1;
}

// One group, resolved by the prepare kernel, as the main kernel reads it.
struct alignas(16) DeviceGroup {
  std::int32_t m, n, k, l;
  std::int64_t tile_begin, tile_end;  // this group's range in the sequence of all tiles
  std::int32_t tiles_m, tiles_n;
  std::int32_t a_row0;    // row of the group's first row in the A tensor map (contiguous form)
  std::int32_t a_batch0;  // batch coordinate of the group in the A tensor map (masked form)
  std::int32_t b_batch0;  // batch coordinate of the group in the B tensor map (MoE forms)
  std::int32_t reserved;
  const CUtensorMap* a_map;  // per-group maps of the pointer-array form; null: the kernel's own maps
  const CUtensorMap* b_map;
  // The pointer-array form's D as (N, M, L) for the TMA-store epilogue, where group_output_map_applies; null:
  // the other epilogues write this group.
  const CUtensorMap* d_map;
  const void* sfa;
  const void* sfb;
  std::int64_t sfa_ld, sfa_batch_stride, sfb_ld, sfb_batch_stride;
  const void* c;
  void* d;
  std::int64_t ldc, batch_stride_c, ldd, batch_stride_d;
  float alpha, beta;
};

inline constexpr std::int32_t kNoFailure = 0x7FFFFFFF;

// Written by the prepare kernel on every run: the device-side validation result and the tile count.
struct alignas(16) DeviceStatus {
  std::int32_t failed_group;  // kNoFailure, or the lowest failing group
  std::uint8_t field;         // core::Field
  std::uint8_t violation;     // core::Violation
  std::int64_t value, limit;
  std::int64_t total_tiles;
  core::CallSpec spec;  // to word the message on the host
};

// K up to which the FP8 kernel's MX tiles write D through TMA stores. A tile of few k-blocks is mostly its
// epilogue, and the stores from the registers held its consumers for 4-6 us a tile (bench/NOTES.md, session
// 21's stamps); over long K those stores measured 4% faster than the TMA-store epilogue (version 11d), so MX
// tiles of deeper groups keep them.
inline constexpr std::int64_t kShortTileK = 512;

// The K up to which a group's tiles write through the TMA-store epilogue's boxes (epilogue.cuh), for a kernel
// choice's (swapped, decode, scales): the FP8 and decoding kernels are built with the boxes and use them at
// any K, but for the FP8 kernel's MX tiles (kShortTileK); the register-operand kernel (swapped) stores
// transposed slabs of its own (-1: never the boxes).
constexpr std::int64_t tma_store_max_k(bool swapped, bool decode, ScaleGranularity scales) {
  return swapped                                       ? -1
         : !decode && scales == ScaleGranularity::mx32 ? kShortTileK
                                                       : INT64_MAX;
}

// The TMA-store epilogue's box of 16-bit D (KernelParams::d_map): 64 rows of 128 bytes, the widest box the
// 128-byte swizzle takes.
inline constexpr int kEpilogueBoxColumns = 64;
inline constexpr std::size_t kEpilogueBoxBytes = 64 * kEpilogueBoxColumns * 2;

// The window of B's scale codes TMA brings per stage and row (KernelParams::sfb_map): 16 codes, the least a
// box's row may be (16 bytes), starting at a multiple of 16, which holds a whole stage's codes (8 nv16 or 4
// mx32, so a window serves two or four consecutive stages).
inline constexpr int kScaleCodeWindow = 16;

// The column of k-block kb's first code in its window, B's scales having `steps` codes a k-block.
constexpr int scale_code_window_col(int kb, int steps) { return kb * steps % kScaleCodeWindow; }

// Whether the register-operand kernel's staged-token tiles of `weights` weights store their slabs by TMA
// (epilogue.cuh's store_transposed_slab, KernelParams::d_map): the 256-weight tiles; the 384-weight tile's
// consumers (128 registers) spill 12 bytes with the second epilogue.
constexpr bool transposed_slab_stores(int weights) { return weights == 256; }

// TMA loads per stage of an operand tile of `rows` rows: a box has at most 256 rows, so the register-operand
// kernel's 384-weight tile arrives as two boxes of 192 (the map is encoded with rows / loads per box).
constexpr int tma_box_loads(int rows) { return rows > 256 ? 2 : 1; }

// How a walk finds the group of its next tile (tile_walker.cuh): one lane reading the groups' ends in turn, or a
// whole warp reading 32 groups' records at once. Each kernel's traits pick their consumers' (kConsumerSearch) by
// measurement (bench/NOTES.md versions 45-49): by warp where a step skips many groups, as at decode shapes.
enum class GroupSearch { by_lane, by_warp };

// Whether a kernel instantiation walks its tiles heavy-first (core::TileOrder, tile_walker.cuh): the decoding
// kernel, and the FP8 kernel's MX tiles of at most 128 columns a warpgroup (`scales`: the FP8 kernel's
// granularity; the other kernels ignore it). Not the register-operand kernel (swapped) nor the FP8 kernel's
// wider tiles, whose registers are spoken for and whose tiles are long (decode groups' whole K, prefill): the
// staged 128 x 256 consumers spilled 116 bytes with the heavy-first successor, the register-operand kernel up
// to 424 with it and kept group fields (bench/NOTES.md version 34a); nor fp8-block128's, whose one-k-block
// tiles took 0.2 us longer each with it (version 34) while its long tiles are short enough for the plain
// order. The host plans a heavy-first order only for instantiations that walk it.
constexpr bool heavy_first_walk(bool swapped, bool decode, ScaleGranularity scales, int block_m, int block_n) {
  return !swapped && (decode || (scales == ScaleGranularity::mx32 && !(block_m == 128 && block_n > 128)));
}

// K per pipeline stage of every kernel: one 128-byte swizzled row of FP8.
inline constexpr int kBlockK = 128;

// A CTA's stream-K partial: its fp32 accumulators of one tile of at most 64 tokens by 256 weights.
inline constexpr std::size_t kStreamKPartialFloats = 64 * 256;

// The main kernel's parameters (passed as a __grid_constant__).
struct KernelParams {
  CUtensorMap a_map;  // MoE forms: the whole A / B tensors; pointer-array form: unused
  CUtensorMap b_map;
  // MoE forms with a 16-bit n-major D and no C: D as (N, rows, batches) in 64 x 64 boxes, 128-byte swizzled,
  // for the FP8 kernel's TMA-store epilogue (epilogue.cuh); d_map_ready is false where it does not apply.
  CUtensorMap d_map;
  bool d_map_ready;
  // The register-operand kernel's staged-token tiles 256 weights wide, in the MoE forms with B's scales
  // linear and 16-byte aligned (scale_codes_by_tma_applies in cuda_backend.cpp): B's 8-bit scale codes as
  // (codes, N, experts), a box of the 16-code window holding a stage's codes (kScaleCodeWindow) by the tile's
  // rows, brought by TMA with the stage instead of by the scale loaders; sfb_by_tma is false elsewhere.
  CUtensorMap sfb_map;
  bool sfb_by_tma;
  // The register-operand kernel's stream-K instantiations (KernelChoice::stream_k, launched only where the
  // host's tile count splits): the last round's tiles split over K (core::StreamKSplit). A CTA's partial
  // (kStreamKPartialFloats fp32 at partials + its index times that) is ready for the tile's owner when its flag
  // (partial_flags[its index], zeroed by the staging pass before the call) is 1.
  float* partials;
  std::int32_t* partial_flags;
  const DeviceGroup* groups;
  const DeviceStatus* status;
  // The host wrote the records and the status (copy_host_records) before anything of the call ran: they may be
  // read before griddepcontrol.wait (no prepare kernel writes them).
  bool records_on_host;
  std::int32_t num_groups;
  std::int32_t band;     // N-blocks per band of the tile order (core/tile_scheduler.hpp)
  core::TileOrder tile_order;  // heavy tiles first (core/tile_scheduler.hpp); the plain walk by default
  bool per_group_maps;   // pointer-array form: each group has its own maps (DeviceGroup::a_map, b_map, d_map)
  DataType d_type;
  bool d_n_major;
  bool has_c;
  DataType sfa_type, sfb_type;
  ScaleLayout sfa_layout, sfb_layout;
  DataType a_element, b_element;  // the decoding kernel's operand types (e4m3, e5m2, e2m1)
  // The register-operand kernel's fp8-block128 tokens staged as f16 (kernel_traits_swapped.cuh's kF16): each
  // staged row's power of two (the staging pass's), the row of token t of batch b at b * token_factor_rows + t.
  const float* token_factors;
  std::int32_t token_factor_rows;
  // Where that kernel's fp32 path (mainloop_swapped.cuh's add_tile_in_fp32, for mx32 weights whose scales f16 cannot
  // hold) reads its operands: B's packed codes (the MoE forms' [experts][N][K]), its leading dimension and expert
  // stride in elements; the staged f16 tokens (rows of staged_ld elements, token_factor_rows a batch).
  const std::uint8_t* b_codes;
  std::int64_t b_ld, b_batch_stride;
  const std::uint16_t* staged_tokens;
  std::int64_t staged_ld;
};

// The prepare kernel's parameters.
struct PrepareParams {
  CUtensorMap a_template;  // pointer-array form: the maps every group's maps are edited from
  CUtensorMap b_template;
  CUtensorMap d_template;
  // Pointer-array form: groups of K up to this get a D map (group_output_map_applies); -1: none do (the
  // call has C, or a D the TMA-store epilogue does not write, or a kernel without it).
  std::int64_t output_map_max_k = -1;
  core::CallSpec spec;
  std::int32_t num_groups;
  std::int32_t block_m, block_n;
  const GroupProblem* groups;  // pointer-array form, device memory
  MoeGroups moe;               // MoE forms; its arrays are device memory
  DeviceGroup* out_groups;
  CUtensorMap* out_maps;    // 2 per group (A, B), pointer-array form
  CUtensorMap* out_d_maps;  // 1 per group (D), pointer-array form, where group_output_map_applies
  DeviceStatus* status;
};

// Where each piece lives in the caller's workspace. Depends on the group count only.
struct WorkspaceLayout {
  std::size_t status = 0, groups = 0, maps = 0, d_maps = 0, descriptions = 0, offsets = 0, masked_m = 0, alpha = 0,
              beta = 0;
  std::size_t total = 0;
};

inline WorkspaceLayout workspace_layout(std::int64_t num_groups) {
  const auto align = [](std::size_t x) { return (x + 255) / 256 * 256; };
  const std::size_t g = static_cast<std::size_t>(num_groups < 0 ? 0 : num_groups);
  WorkspaceLayout w;
  std::size_t at = 0;
  w.status = at;
  at = align(at + sizeof(DeviceStatus));
  w.groups = at;
  at = align(at + g * sizeof(DeviceGroup));
  w.maps = at;
  at = align(at + 2 * g * sizeof(CUtensorMap));
  w.d_maps = at;  // right after A's and B's, so that the host copies one run of bytes
  at = align(at + g * sizeof(CUtensorMap));
  // Copies of host-resident descriptions (the device reads them from here).
  w.descriptions = at;
  at = align(at + g * sizeof(GroupProblem));
  w.offsets = at;
  at = align(at + (g + 1) * sizeof(std::int64_t));
  w.masked_m = at;
  at = align(at + g * sizeof(std::int32_t));
  w.alpha = at;
  at = align(at + g * sizeof(float));
  w.beta = at;
  at = align(at + g * sizeof(float));
  w.total = at;
  return w;
}

}  // namespace bsgemm::cuda
