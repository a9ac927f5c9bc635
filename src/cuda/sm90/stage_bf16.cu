// The staging pass of KernelPath::staged: the operands of the MoE forms (mxfp8, mxfp4 or nvfp4) rewritten as
// bf16 with their block scales folded in, so that the GEMM kernel runs BF16 wgmma over the whole K with
// nothing to promote (kernel_staged.cu). One launch stages A and B (CTAs split between them by rows).
//
// A thread takes 8-element chunks of a row: 8 bytes of FP8 codes (4 of FP4) in, 16 bytes of bf16 out, so
// that a warp's loads and stores cover whole 128-byte lines (a 32-element block per thread, the first
// version, left each warp access spread over twice or four times the lines: 27% of HBM bandwidth, ncu
// run 48). Each thread has kChunksInFlight chunks loaded before it converts any, which keeps enough
// loads in flight for HBM at any row count. Conversion: e2m1 -> e4m3 (exact), FP8 -> f16 (exact,
// hardware), f16 -> f32 (exact), times the scale (2^(code - 127) or a ue4m3 value: exact unless the
// product leaves fp32's range, since e2m1 and FP8 values carry at most 4 significant bits and ue4m3 4),
// -> bf16 with round-to-nearest-even (exact for every normal bf16; the README's accuracy section names
// where subnormals round). FP4 rows in the weights' order skip the widening and the fp32 detour: their
// codes go straight to bf16 and take one bf16 multiply by the scale (core::stage_nv16_fp4_chunk_pairs and
// stage_mx32_fp4_chunk_pairs: bit for bit the same result, nvfp4's in 32 SASS instructions a chunk instead
// of 57, each compiled alone).
#include <algorithm>
#include <cstdint>

#include "bsgemm/formats.hpp"
#include "bsgemm/recipe.hpp"
#include "src/core/stage_bf16.hpp"
#include "src/cuda/ptx/sync.cuh"
#include "src/cuda/sm90/launch.hpp"
#include "src/cuda/sm90/scale_loader.cuh"

namespace bsgemm::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kChunk = 8;           // elements per chunk: 16 bytes of bf16
constexpr int kChunksInFlight = 4;  // chunks a thread loads before converting
constexpr int kCtasPerSm = 4;       // resident CTAs per SM (64 registers a thread)
constexpr std::uint8_t kUe8m0One = 127, kUe4m3One = 0x38;  // the scale codes of 1.0

// Threads per row: enough that each has kChunksInFlight chunks, at most the CTA; the CTA takes
// kThreads / lanes rows side by side, so that a row's batch comes from one division per row.
__host__ __device__ inline int lanes_per_row(std::int64_t chunks_per_row) {
  const std::int64_t wanted = (chunks_per_row + kChunksInFlight - 1) / kChunksInFlight;
  return wanted >= kThreads ? kThreads : static_cast<int>(wanted);
}

// The chunks a staged row is written in.
__host__ __device__ inline std::int64_t row_chunks(const StageOperand& op) {
  constexpr int kSlice = core::kWeightsOrderSlice;  // whole slices: weights_order_ld(k) elements
  return op.weights_order ? (op.k + kSlice - 1) / kSlice * (kSlice / kChunk) : (op.k + kChunk - 1) / kChunk;
}

// How a row's chunks become bf16: FP8 codes through f16 and fp32, times the scale, rounded to bf16; FP4
// codes widened to e4m3 first (rows in K order); FP4 codes in the weights' order straight to bf16 pairs,
// times the scale in bf16 (nvfp4's ue4m3, mxfp4's ue8m0).
enum class ChunkPath { fp8, fp4_widened, nv16_fp4_from_codes, mx32_fp4_from_codes };

// Words of codes a chunk holds from its load to its conversion: 8 bytes of FP8 codes, or the 8 nibbles of
// FP4 ones packed in one word (widened, where they are, only at the conversion).
template <bool kFp4>
constexpr int kCodeWords = kFp4 ? 1 : 2;

// The codes of the chunk at src whose first `valid` elements lie before K's end, in K order (8-bit codes
// four to a word, or e2m1 codes eight to a word, the low nibble first), the elements past K's end zero.
template <bool kFp4>
__device__ __forceinline__ void load_chunk(const std::uint8_t* src, int valid, std::uint32_t (&codes)[kCodeWords<kFp4>]) {
  constexpr int kBytes = kFp4 ? kChunk / 2 : kChunk;
  const bool whole = valid == kChunk && (reinterpret_cast<std::uintptr_t>(src) & (kBytes - 1)) == 0;
  if constexpr (kFp4) {
    std::uint32_t packed = 0;
    if (whole) {
      packed = __ldg(reinterpret_cast<const std::uint32_t*>(src));
    } else {
#pragma unroll
      for (int e = 0; e < kChunk; e += 2)
        if (e < valid) packed |= static_cast<std::uint32_t>(__ldg(src + e / 2)) << (4 * e);
      packed &= valid >= kChunk ? ~0u : (1u << (4 * valid)) - 1u;  // an odd tail's last nibble
    }
    codes[0] = packed;
  } else if (whole) {
    const uint2 v = __ldg(reinterpret_cast<const uint2*>(src));
    codes[0] = v.x, codes[1] = v.y;
  } else {
    codes[0] = codes[1] = 0;
#pragma unroll
    for (int e = 0; e < kChunk; ++e)
      if (e < valid) codes[e / 4] |= static_cast<std::uint32_t>(__ldg(src + e)) << (8 * (e % 4));
  }
}

// The bf16 of a chunk times its scale: pairs[i] holds elements i and i + 4 (the pairs order) for the
// weights' order, elements 2 i and 2 i + 1 (K order) otherwise.
template <ChunkPath kPath>
__device__ __forceinline__ void convert_chunk(const StageOperand& op,
                                              const std::uint32_t (&codes)[kCodeWords<kPath != ChunkPath::fp8>],
                                              std::uint8_t scale_code, std::uint32_t (&pairs)[4]) {
  if constexpr (kPath == ChunkPath::nv16_fp4_from_codes) {
    core::stage_nv16_fp4_chunk_pairs(codes[0], scale_code, pairs);
  } else if constexpr (kPath == ChunkPath::mx32_fp4_from_codes) {
    core::stage_mx32_fp4_chunk_pairs(codes[0], scale_code, pairs);
  } else {
    std::uint32_t fp8_codes[2];
    if constexpr (kPath == ChunkPath::fp4_widened) {
      core::widen_fp4_chunk(codes[0], fp8_codes);
    } else {
      fp8_codes[0] = codes[0], fp8_codes[1] = codes[1];
    }
    const bool e5m2 = op.element == DataType::e5m2;
    // ue4m3 (the sign bit ignored, as decode_ue4m3 does) or ue8m0.
    const float scale = op.nv16 ? decode_ue4m3(scale_code) : ue8m0_to_float(scale_code);
    if (op.weights_order)
      core::stage_chunk_pairs(fp8_codes, e5m2, scale, pairs);
    else
      core::stage_chunk(fp8_codes, e5m2, scale, pairs);
  }
}

// Chunk c of a row staged in the weights' order: chunk j of a slice holds positions 8 j .. 8 j + 7, and pair
// i (positions 8 j + i and + 4) lands at slot 8 (4 (j % 2) + i) + 2 (j / 2) (core::weights_order_slot): four
// 4-byte stores, a warp's eight chunks of a slice filling its 128 bytes (16-byte stores after an exchange
// through shared memory measured no faster: bench/NOTES.md version 30).
__device__ __forceinline__ void store_weights_order_chunk(std::uint16_t* row, int c, const std::uint32_t (&pairs)[4]) {
  const int j = c % 8;
  std::uint16_t* slice = row + core::kWeightsOrderSlice * (c / 8);
#pragma unroll
  for (int i = 0; i < 4; ++i) *reinterpret_cast<std::uint32_t*>(slice + 8 * (4 * (j % 2) + i) + 2 * (j / 2)) = pairs[i];
}

// Row r of an operand's batches x rows: where its codes are, where its bf16 goes, and its scale row (null for
// an unscaled operand).
struct StagedRow {
  const std::uint8_t* src;
  std::uint16_t* dst;
  const std::uint8_t* scales;
};
template <bool kFp4>
__device__ __forceinline__ StagedRow staged_row(const StageOperand& op, std::int64_t r, std::int64_t scale_cols) {
  const std::int64_t batch = r / op.rows;
  const std::int64_t row = r - batch * op.rows;
  return {op.src + ((batch * op.batch_stride + row * op.ld) >> (kFp4 ? 1 : 0)), op.dst + batch * op.dst_batch_stride + row * op.dst_ld,
          op.scales == nullptr ? nullptr
                               : op.scales + batch * op.scale_batch_stride + scale_row_offset(op.scale_layout, row, scale_cols, op.scale_ld)};
}

// The rows of one operand that CTA `cta` of `ctas` owns, chunk by chunk. In the weights' K order a row
// covers whole 64-deep slices: the chunks past K's end are written as zeros.
template <ChunkPath kPath>
__device__ __forceinline__ void stage_rows(const StageOperand& op, int cta, int ctas) {
  constexpr bool kFp4 = kPath != ChunkPath::fp8;
  const int chunks_per_row = static_cast<int>(row_chunks(op));  // K < 2^31 (can_implement)
  const int lanes = lanes_per_row(chunks_per_row);
  const int rows_per_cta = kThreads / lanes;
  const int row_in_cta = static_cast<int>(threadIdx.x) / lanes, lane = static_cast<int>(threadIdx.x) % lanes;
  if (row_in_cta >= rows_per_cta) return;
  // A chunk lies inside one scale block: 32 elements (ue8m0, four chunks) or 16 (nvfp4's ue4m3, two). In
  // the weights' order chunks_per_row counts whole 64-deep slices, so scale_cols may exceed the scales'
  // columns by one or two; only the blocked layout reads it, padded to 4 columns, where both come out the
  // same (4 ceil(K / 128) for ue8m0, 4 ceil(K / 64) for ue4m3).
  const int scale_shift = op.nv16 ? 1 : 2;
  const std::int64_t scale_cols = (chunks_per_row + (1 << scale_shift) - 1) >> scale_shift;
  const std::int64_t total_rows = op.batches * op.rows;
  for (std::int64_t r = static_cast<std::int64_t>(cta) * rows_per_cta + row_in_cta; r < total_rows;
       r += static_cast<std::int64_t>(ctas) * rows_per_cta) {
    const auto [src, dst, scales] = staged_row<kFp4>(op, r, scale_cols);
    for (int first = lane; first < chunks_per_row; first += kChunksInFlight * lanes) {
      std::uint32_t codes[kChunksInFlight][kCodeWords<kFp4>];
      std::uint8_t scale_codes[kChunksInFlight];
#pragma unroll
      for (int u = 0; u < kChunksInFlight; ++u) {
        const int c = first + u * lanes;
        if (c < chunks_per_row) {
          const std::int64_t valid = op.k - static_cast<std::int64_t>(kChunk) * c;
          load_chunk<kFp4>(src + ((kChunk * c) >> (kFp4 ? 1 : 0)),
                           valid <= 0 ? 0 : valid < kChunk ? static_cast<int>(valid) : kChunk, codes[u]);
          // A chunk wholly past K's end (weights order) has zero codes and no scale column, and unscaled
          // operands none at all: scale one.
          scale_codes[u] = valid <= 0 || op.scales == nullptr
                               ? (op.nv16 ? kUe4m3One : kUe8m0One)
                               : __ldg(scales + scale_col_offset(op.scale_layout, c >> scale_shift, op.scale_ld));
        }
      }
#pragma unroll
      for (int u = 0; u < kChunksInFlight; ++u) {
        const int c = first + u * lanes;
        if (c < chunks_per_row) {
          std::uint32_t pairs[4];
          convert_chunk<kPath>(op, codes[u], scale_codes[u], pairs);
          if (kPath == ChunkPath::nv16_fp4_from_codes || kPath == ChunkPath::mx32_fp4_from_codes || op.weights_order) {
            store_weights_order_chunk(dst, c, pairs);
          } else {
            // dst_ld is a multiple of 8 and the buffer 256-byte aligned: every chunk's 16 bytes are aligned,
            // and a chunk at K's tail stays inside the row's staged_ld elements (its last ones zero).
            *reinterpret_cast<uint4*>(dst + kChunk * c) = make_uint4(pairs[0], pairs[1], pairs[2], pairs[3]);
          }
        }
      }
    }
  }
}

// The weights' order over whole slices (K a multiple of 64, every row's codes aligned to a chunk's), the
// decode calls' tokens. A warp takes a row in rounds of kWholeSliceChunks chunks a lane (K = 4096 in one round, 7168
// in two), chunk round + 32 u + lane for u < kWholeSliceChunks: each is one plain load at a fixed offset from the
// lane's first, and its stores land at fixed offsets from the lane's first too (store_weights_order_chunk: c % 8 is
// lane % 8). A round's chunks span 32 kWholeSliceChunks / B scale blocks (B chunks a block: 4 for ue8m0, 2 for
// ue4m3), whose codes the lanes load 32 at a time (lane l the round's blocks l, l + 32, ...), and each chunk takes its
// block's code from the lane that holds it by a shuffle. Up to version 67 a row was the lanes of a CTA (four chunks
// each), each chunk loading its own scale code through the layout's column steps and testing its bounds: about 138
// instructions a chunk under ncu against 79 now, for about the same time: the L2 bounds the pass, at about 90% of its
// throughput while the SMs are active, for the 16-bit rows it writes; whole-sector stores and one round of loads for
// K = 7168 measured no faster (bench/NOTES.md version 67, session 42). Whether an operand qualifies is the host's
// choice of kernel (launch_stage_bf16).
constexpr int kWholeSliceChunks = 16;
constexpr int kWholeSliceCtasPerSm = 2;  // 128 registers a thread: sixteen chunks in flight
constexpr int kWholeSliceRowsPerCta = kThreads / 32;  // a warp a row

bool whole_slices(const StageOperand& op) {
  const bool fp4 = op.element == DataType::e2m1;
  if (!op.weights_order || op.k <= 0 || op.k % core::kWeightsOrderSlice != 0) return false;
  if (fp4 && (op.ld % 2 != 0 || op.batch_stride % 2 != 0)) return false;
  const std::uint64_t bytes = reinterpret_cast<std::uintptr_t>(op.src) |
                              static_cast<std::uint64_t>(fp4 ? op.ld / 2 : op.ld) |
                              static_cast<std::uint64_t>(op.batches > 1 ? (fp4 ? op.batch_stride / 2 : op.batch_stride) : 0);
  return bytes % (fp4 ? kChunk / 2 : kChunk) == 0;
}

// Where a lane's first chunk of a round (chunk first_chunk, lane % 8 of its slice) starts in the staged row.
__device__ __forceinline__ std::uint16_t* lane_weights_order_start(std::uint16_t* row, int first_chunk, int lane) {
  return row + core::kWeightsOrderSlice * (first_chunk / 8) + 32 * (lane % 2) + 2 * ((lane % 8) / 2);
}
// Chunk u of a lane's round, 32 u chunks after its first: the same places of the slice 4 u slices on
// (store_weights_order_chunk's, at offsets fixed at compile time).
__device__ __forceinline__ void store_lane_chunk(std::uint16_t* lane_start, int u, const std::uint32_t (&pairs)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) *reinterpret_cast<std::uint32_t*>(lane_start + 4 * core::kWeightsOrderSlice * u + 8 * i) = pairs[i];
}

template <ChunkPath kPath>
__device__ __forceinline__ void stage_whole_slices(const StageOperand& op, int cta, int ctas) {
  constexpr bool kFp4 = kPath != ChunkPath::fp8;
  // Chunks a scale block: ue4m3 per 16 elements (nvfp4) or ue8m0 per 32 (mxfp4, mxfp8; the host launches FP8 rows
  // with ue4m3 scales elsewhere).
  constexpr int kBlockChunks = kPath == ChunkPath::nv16_fp4_from_codes ? 2 : 4;
  constexpr int kCodeRegisters = kWholeSliceChunks / kBlockChunks;  // a lane's codes of a round's blocks
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int chunks_per_row = static_cast<int>(op.k / kChunk);  // K < 2^31 (can_implement)
  const int scale_cols = chunks_per_row / kBlockChunks;
  const auto [group_stride, col_step] = scale_col_steps(op.scale_layout, op.scale_ld);
  const std::uint32_t unit_scale = op.nv16 ? kUe4m3One : kUe8m0One;
  const std::int64_t total_rows = op.batches * op.rows;
  for (std::int64_t r = static_cast<std::int64_t>(cta) * kWholeSliceRowsPerCta + static_cast<int>(threadIdx.x / 32);
       r < total_rows; r += static_cast<std::int64_t>(ctas) * kWholeSliceRowsPerCta) {
    const auto [src, dst, scales] = staged_row<kFp4>(op, r, scale_cols);
    for (int round = 0; round < chunks_per_row; round += kWholeSliceChunks * 32) {
      const int first = round + lane;
      const bool full = round + kWholeSliceChunks * 32 <= chunks_per_row;
      std::uint32_t codes[kWholeSliceChunks][kCodeWords<kFp4>];
#pragma unroll
      for (int u = 0; u < kWholeSliceChunks; ++u) {
        if (full || first + u * 32 < chunks_per_row) {
          if constexpr (kFp4) {
            codes[u][0] = __ldg(reinterpret_cast<const std::uint32_t*>(src) + first + u * 32);
          } else {
            const uint2 v = __ldg(reinterpret_cast<const uint2*>(src) + first + u * 32);
            codes[u][0] = v.x, codes[u][1] = v.y;
          }
        }
      }
      std::uint32_t block_codes[kCodeRegisters];
#pragma unroll
      for (int j = 0; j < kCodeRegisters; ++j) {
        const int col = round / kBlockChunks + 32 * j + lane;
        block_codes[j] = scales == nullptr || col >= scale_cols ? unit_scale
                                                                : __ldg(scales + (col >> 2) * group_stride + (col & 3) * col_step);
      }
      std::uint16_t* lane_dst = lane_weights_order_start(dst, first, lane);
#pragma unroll
      for (int u = 0; u < kWholeSliceChunks; ++u) {
        // Chunk u's block is the round's (32 u + lane) / kBlockChunks: register u / kBlockChunks of its lane modulo 32.
        const int holder = (32 / kBlockChunks) * (u % kBlockChunks) + lane / kBlockChunks;
        const auto scale_code = static_cast<std::uint8_t>(__shfl_sync(0xFFFFFFFFu, block_codes[u / kBlockChunks], holder));
        if (full || first + u * 32 < chunks_per_row) {
          std::uint32_t pairs[4];
          convert_chunk<kPath>(op, codes[u], scale_code, pairs);
          store_lane_chunk(lane_dst, u, pairs);
        }
      }
    }
  }
}

// The stream-K flags of the GEMM kernel that follows (StageOperand::flags_to_zero), by the pass's first CTA.
__device__ __forceinline__ void zero_flags(const StageOperand& op) {
  if (blockIdx.x != 0) return;
  for (int i = static_cast<int>(threadIdx.x); i < op.flag_count; i += kThreads) op.flags_to_zero[i] = 0;
}

__device__ __forceinline__ void stage_operand_rows(const StageOperand& op, int cta, int ctas) {
  if (op.element != DataType::e2m1)
    stage_rows<ChunkPath::fp8>(op, cta, ctas);
  else if (op.weights_order && op.nv16)
    stage_rows<ChunkPath::nv16_fp4_from_codes>(op, cta, ctas);
  else if (op.weights_order)
    stage_rows<ChunkPath::mx32_fp4_from_codes>(op, cta, ctas);
  else
    stage_rows<ChunkPath::fp4_widened>(op, cta, ctas);
}

// CTAs [0, a_ctas) stage A, the rest B. The GEMM kernel that follows (a programmatic dependent launch) may
// be launched at once: its CTAs take an SM as this pass's CTAs leave it and wait there in griddepcontrol.wait
// for the whole pass and its writes (wait_for_valid_records), instead of the launch waiting for the pass's
// end (bench/NOTES.md version 25: -0.5 to -1.7% at G128-M16, nothing at G32-M64).
__global__ void __launch_bounds__(kThreads, kCtasPerSm) stage_bf16_kernel(const StageOperand a, const StageOperand b, int a_ctas) {
  ptx::launch_dependents();
  zero_flags(a);
  const int cta = static_cast<int>(blockIdx.x);
  if (cta < a_ctas)
    stage_operand_rows(a, cta, a_ctas);
  else
    stage_operand_rows(b, cta - a_ctas, static_cast<int>(gridDim.x) - a_ctas);
}

// The decode calls' tokens (A alone, whole slices): a kernel of its own per conversion, whose code is only
// stage_whole_slices' (bench/NOTES.md version 33: in one kernel with stage_rows' paths, the FP8 tokens' calls
// measured 0.5-1% slower for the FP4 paths' sake).
template <ChunkPath kPath>
__global__ void __launch_bounds__(kThreads, kWholeSliceCtasPerSm) stage_whole_slices_kernel(const StageOperand a) {
  ptx::launch_dependents();
  zero_flags(a);
  stage_whole_slices<kPath>(a, static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x));
}

// fp8-block128 tokens as f16 (StageOperand::block128_f16): rows in the weights' f16 order, each divided by its
// power of two 2^E (core::block128_row_exponent), which goes to op.factors. A warp takes a row in one pass over its
// codes: E comes first from the bound on the row's largest |x s| that its scales give, read before the codes arrive;
// every chunk is then staged at s x 2^-E (core::stage_block128_f16_chunk) while the warp takes the row's largest
// |x s| from the codes it holds (from each chunk's largest e4m3 magnitude code times its block's scale), and stages
// the row again in the rare case that the largest value asks for another E (its codes in L1 or L2 by then). Over
// whole slices a lane holds sixteen chunks in flight (K = 4096 in one round, 7168 in two; 128 registers, two CTAs
// an SM), four over K's tail (load_chunk's byte loads). The largest value taken first, then each chunk loaded again
// to stage it, at seven chunks a lane: bench/NOTES.md version 67; a row's lanes as a CTA's (up to 256), met in shared
// memory between three barriers, 0.5-0.8% more of each decode call (bench/NOTES.md session 31).
constexpr int kBlock128Chunks = 128 / kChunk;  // chunks per fp32 scale
// Over whole slices the f16 pass takes its rounds and occupancy from stage_whole_slices'.
constexpr int block128_chunks_in_flight(bool whole_slices) { return whole_slices ? kWholeSliceChunks : kChunksInFlight; }
constexpr int block128_ctas_per_sm(bool whole_slices) { return whole_slices ? kWholeSliceCtasPerSm : kCtasPerSm; }
constexpr int kBlock128RowsPerCta = kWholeSliceRowsPerCta;  // a warp a row, over K's tail too
static_assert(kWholeSliceChunks <= kBlock128Chunks, "a whole-slices round's blocks are the warp's lanes, at most one each");

// The fp32 scales of one row of fp8-block128 tokens: f32 or ue8m0, in any scale layout.
struct Block128RowScales {
  const std::uint8_t* row;  // the row's first scale
  ScaleLayout layout;
  std::int64_t ld;
  bool f32;
  __device__ __forceinline__ float at(int col) const {
    const std::int64_t offset = scale_col_offset(layout, col, ld);
    return f32 ? __ldg(reinterpret_cast<const float*>(row) + offset) : ue8m0_to_float(__ldg(row + offset));
  }
};

// |x| of the largest of eight e4m3 codes (its magnitude code is the largest: the codes of e4m3 magnitudes are in
// the order of their values, NaN's 0x7F last), as fp32.
__device__ __forceinline__ float largest_e4m3(const std::uint32_t (&codes)[2]) {
  const std::uint32_t pairs = __vmaxu4(codes[0] & 0x7F7F7F7Fu, codes[1] & 0x7F7F7F7Fu);
  const std::uint32_t halves = __vmaxu4(pairs, pairs >> 16);
  const std::uint32_t top = max(halves & 0xFFu, (halves >> 8) & 0xFFu);
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(top), __NV_E4M3);
  return __half2float(*reinterpret_cast<const __half*>(&h.x));
}

template <bool kWholeSlices>
__device__ __forceinline__ void stage_block128_rows(const StageOperand& op, int cta, int ctas) {
  constexpr int kInFlight = block128_chunks_in_flight(kWholeSlices);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int chunks_per_row = static_cast<int>(kWholeSlices ? op.k / kChunk : row_chunks(op));  // K < 2^31
  const int scale_cols = static_cast<int>((op.k + 127) / 128);
  const int scale_shift = op.scale_type == DataType::f32 ? 2 : 0;
  const std::int64_t total_rows = op.batches * op.rows;
  // Chunk c's codes (zeros past K) and its block's scale (0 past K).
  const auto load = [&](const std::uint8_t* src, const Block128RowScales& scales, int c, std::uint32_t (&codes)[2],
                        float* scale) {
    if constexpr (kWholeSlices) {
      const uint2 v = __ldg(reinterpret_cast<const uint2*>(src) + c);
      codes[0] = v.x, codes[1] = v.y;
      *scale = scales.at(c / kBlock128Chunks);
    } else {
      const std::int64_t valid = op.k - static_cast<std::int64_t>(kChunk) * c;
      load_chunk<false>(src + kChunk * c, valid <= 0 ? 0 : valid < kChunk ? static_cast<int>(valid) : kChunk, codes);
      *scale = valid <= 0 ? 0.0f : scales.at(c / kBlock128Chunks);
    }
  };
  for (std::int64_t r = static_cast<std::int64_t>(cta) * kBlock128RowsPerCta + static_cast<int>(threadIdx.x / 32);
       r < total_rows; r += static_cast<std::int64_t>(ctas) * kBlock128RowsPerCta) {
    const std::int64_t batch = r / op.rows;
    const std::int64_t row = r - batch * op.rows;
    const std::uint8_t* src = op.src + batch * op.batch_stride + row * op.ld;
    std::uint16_t* dst = op.dst + batch * op.dst_batch_stride + row * op.dst_ld;
    const Block128RowScales scales{
        op.scales + ((batch * op.scale_batch_stride + scale_row_offset(op.scale_layout, row, scale_cols, op.scale_ld)) << scale_shift),
        op.scale_layout, op.scale_ld, scale_shift == 2};
    int e = 0;
    std::uint32_t largest_bits = 0;  // of |x s|: non-negative fp32 (NaN above every value) compare as integers
    // Rounds the whole warp takes (the bound's reduction is in the first): chunk round + 32 u + lane for u < kInFlight.
    for (int round = 0; round < chunks_per_row; round += kInFlight * 32) {
      const int first = round + lane;
      const bool full = round + kInFlight * 32 <= chunks_per_row;
      std::uint32_t codes[kInFlight][2];
      float scale[kInFlight];  // K's tail: each chunk's
      float round_scale = 0.0f;  // whole slices: the round's 32 blocks, a lane's each
      if constexpr (kWholeSlices) {
        const uint2* lane_codes = reinterpret_cast<const uint2*>(src) + first;
#pragma unroll
        for (int u = 0; u < kInFlight; ++u) {
          if (full || first + u * 32 < chunks_per_row) {
            const uint2 v = __ldg(lane_codes + u * 32);
            codes[u][0] = v.x, codes[u][1] = v.y;
          }
        }
        const int col = round / kBlock128Chunks + lane;
        if (col < scale_cols) round_scale = scales.at(col);
      } else {
#pragma unroll
        for (int u = 0; u < kInFlight; ++u) {
          const int c = first + u * 32;
          if (c < chunks_per_row) load(src, scales, c, codes[u], &scale[u]);
        }
      }
      if (round == 0) {
        // The bound's exponent, while the first round's codes are on their way.
        std::uint32_t scale_bits = 0;
        for (int col = lane; col < scale_cols; col += 32) scale_bits = max(scale_bits, __float_as_uint(fabsf(scales.at(col))));
        e = core::block128_token_exponent(
            __float_as_uint(max_finite(DataType::e4m3) * __uint_as_float(__reduce_max_sync(0xFFFFFFFFu, scale_bits))));
      }
      if constexpr (kWholeSlices) {
        // Chunk u of this lane lies in the round's block 2 u + lane / 16, whose scale that lane holds.
        const float round_staging_scale = core::block128_staging_scale(round_scale, e);
        std::uint16_t* lane_dst = lane_weights_order_start(dst, first, lane);
#pragma unroll
        for (int u = 0; u < kInFlight; ++u) {
          const int holder = 2 * u + lane / 16;
          const float chunk_scale = __shfl_sync(0xFFFFFFFFu, round_scale, holder);
          const float staging_scale = __shfl_sync(0xFFFFFFFFu, round_staging_scale, holder);
          if (full || first + u * 32 < chunks_per_row) {
            largest_bits = max(largest_bits, __float_as_uint(fabsf(largest_e4m3(codes[u]) * chunk_scale)));
            std::uint32_t pairs[4];
            core::stage_block128_f16_chunk(codes[u], staging_scale, pairs);
            store_lane_chunk(lane_dst, u, pairs);
          }
        }
      } else {
#pragma unroll
        for (int u = 0; u < kInFlight; ++u) {
          const int c = first + u * 32;
          if (c < chunks_per_row) {
            largest_bits = max(largest_bits, __float_as_uint(fabsf(largest_e4m3(codes[u]) * scale[u])));
            std::uint32_t pairs[4];
            core::stage_block128_f16_chunk(codes[u], core::block128_staging_scale(scale[u], e), pairs);
            store_weights_order_chunk(dst, c, pairs);
          }
        }
      }
    }
    const int row_e = core::block128_row_exponent(e, __reduce_max_sync(0xFFFFFFFFu, largest_bits));
    if (row_e != e) {
      // The row's largest value lies too far below its bound: staged again, each lane over its own chunks (the
      // stores above are its own, so these land after them).
      e = row_e;
      for (int c = lane; c < chunks_per_row; c += 32) {
        std::uint32_t codes[2];
        float scale;
        load(src, scales, c, codes, &scale);
        std::uint32_t pairs[4];
        core::stage_block128_f16_chunk(codes, core::block128_staging_scale(scale, e), pairs);
        store_weights_order_chunk(dst, c, pairs);
      }
    }
    if (lane == 0) op.factors[r] = core::power_of_two(e);
  }
}

template <bool kWholeSlices>
__global__ void __launch_bounds__(kThreads, block128_ctas_per_sm(kWholeSlices)) stage_block128_f16_kernel(const StageOperand a) {
  ptx::launch_dependents();
  zero_flags(a);
  stage_block128_rows<kWholeSlices>(a, static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x));
}

// CTAs that cover an operand's rows once (0 when it has none).
std::int64_t ctas_wanted(const StageOperand& op) {
  const std::int64_t chunks_per_row = row_chunks(op);
  const std::int64_t rows = op.batches * op.rows;
  if (rows <= 0 || chunks_per_row <= 0) return 0;
  const std::int64_t rows_per_cta = op.block128_f16 ? kBlock128RowsPerCta : kThreads / lanes_per_row(chunks_per_row);
  return (rows + rows_per_cta - 1) / rows_per_cta;
}

}  // namespace

cudaError_t launch_stage_bf16(const StageOperand& a, const StageOperand& b, int sms, cudaStream_t stream) {
  const std::int64_t wanted_a = ctas_wanted(a), wanted_b = ctas_wanted(b);
  if (wanted_a + wanted_b == 0) return cudaSuccess;
  // One wave of resident CTAs, split between A and B by bytes to write so that both finish together; each
  // operand's loop strides past the rows beyond its CTAs.
  const std::int64_t cap = static_cast<std::int64_t>(kCtasPerSm) * sms;
  if (a.block128_f16) {
    const bool whole = whole_slices(a);
    const auto grid = static_cast<unsigned>(std::min<std::int64_t>(wanted_a, block128_ctas_per_sm(whole) * sms));
    if (whole) stage_block128_f16_kernel<true><<<grid, kThreads, 0, stream>>>(a);
    else stage_block128_f16_kernel<false><<<grid, kThreads, 0, stream>>>(a);
    return cudaGetLastError();
  }
  if (wanted_b == 0 && whole_slices(a) && (a.element == DataType::e2m1 || !a.nv16)) {
    const std::int64_t rows = a.batches * a.rows;
    const auto grid = static_cast<unsigned>(
        std::min<std::int64_t>((rows + kWholeSliceRowsPerCta - 1) / kWholeSliceRowsPerCta, kWholeSliceCtasPerSm * sms));
    if (a.element != DataType::e2m1)
      stage_whole_slices_kernel<ChunkPath::fp8><<<grid, kThreads, 0, stream>>>(a);
    else if (a.nv16)
      stage_whole_slices_kernel<ChunkPath::nv16_fp4_from_codes><<<grid, kThreads, 0, stream>>>(a);
    else
      stage_whole_slices_kernel<ChunkPath::mx32_fp4_from_codes><<<grid, kThreads, 0, stream>>>(a);
    return cudaGetLastError();
  }
  const double bytes_a = static_cast<double>(a.batches * a.rows) * static_cast<double>(a.k);
  const double bytes_b = static_cast<double>(b.batches * b.rows) * static_cast<double>(b.k);
  std::int64_t ctas_a = std::min(wanted_a, static_cast<std::int64_t>(static_cast<double>(cap) * bytes_a / (bytes_a + bytes_b)));
  if (wanted_a > 0 && ctas_a == 0) ctas_a = 1;
  std::int64_t ctas_b = std::min(wanted_b, std::max<std::int64_t>(cap - ctas_a, wanted_b > 0 ? 1 : 0));
  stage_bf16_kernel<<<static_cast<unsigned>(ctas_a + ctas_b), kThreads, 0, stream>>>(a, b, static_cast<int>(ctas_a));
  return cudaGetLastError();
}

}  // namespace bsgemm::cuda
