// The consumers' mainloop of the register-operand kernel (kernel_traits_swapped.cuh): FP4 weights decoded
// into wgmma's A fragments in registers, tokens decoded into a small bf16 tile in shared memory.
//
// Per 64-deep slice: all 256 consumer threads decode the slice's tokens (one barrier pair per decoded
// tile, as in mainloop_decode.cuh), each thread decodes its own weight fragments (no sharing), and each
// warpgroup issues 4 k16 steps x its slabs of m64 x Tokens x k16 BF16 wgmma. Two register sets of fragments
// alternate: while the wgmma of one half of a stage run on the tensor cores, the other half is decoded.
// An iteration is one raw stage and ends with nothing in flight (ptxas serializes wgmma otherwise).
//
// With staged tokens (Traits::kTokensStaged) the wgmma read the tokens straight from the raw stage: the
// consumers only decode weights, and the warpgroups meet nowhere but at the raw stages' barriers. That loop
// walks a stage slice by slice, each decoded under the wgmma of the last. fp8-block128 tokens come staged as
// f16 (Traits::kF16): the weights then decode to f16 and the wgmma are F16, the rest as with bf16.
// Weights are decoded by bit placement (core::e2m1x8_to_tiny_bf16_pairs or e2m1x8_to_tiny_f16_pairs,
// decode_weights), tokens through the byte tables (core::e2m1x8_to_bf16_pairs), whose exact bf16 needs no
// accumulator scale.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "src/core/fp4_to_fp8.hpp"
#include "src/core/scale_codes.hpp"
#include "src/core/stage_bf16.hpp"
#include "src/cuda/ptx/mbarrier.cuh"
#include "src/cuda/ptx/sync.cuh"
#include "src/cuda/ptx/wgmma.cuh"
#include "src/cuda/sm90/decode_bf16.cuh"
#include "src/cuda/sm90/kernel_traits_swapped.cuh"
#include "src/cuda/sm90/tile_walker.cuh"
#include "src/cuda/sm90/pipeline.cuh"
#include "src/cuda/sm90/scale_loader.cuh"

namespace bsgemm::cuda {

template <class Traits>
struct SwappedMainloop {
  using Storage = typename Traits::SharedStorage;
  using Mma = std::conditional_t<Traits::kF16, ptx::WgmmaF16RegisterA<Traits::kBlockM>, ptx::WgmmaBf16RegisterA<Traits::kBlockM>>;
  static constexpr int kAcc = Traits::kAccumulators;
  static constexpr int kSlabs = Traits::kSlabs;
  static constexpr int kSteps = kDecodedK / 16;
  static constexpr int kTokenChunksPerThread = Traits::kTokenChunks / (2 * kThreadsPerWarpgroup);
  // A fragments of one 64-deep slice: [slab][k16 step][register]; register 0: row g, slots j = 0, 1; 1: row
  // g + 8, j = 0, 1; 2: row g, j = 2, 3; 3: row g + 8, j = 2, 3 (the PTX fragment layout of a 64x16 bf16 or f16
  // A). Two 4-byte code words of each of the thread's rows, two k16 steps per word.
  using Fragments = std::uint32_t[kSlabs][kSteps][4];

  int consumer, warp, g, q;
  int decoder;  // this thread's index among the 256 token decoders
  bool a_e5m2, release_lane;
  // core::kBf16SelectorsLow (the token decode's table), loaded from each lane's own copy in shared memory:
  // a value ptxas cannot prove warp-uniform, so it stays in a register instead of a uniform register moved
  // back before each of the two lookups per word of eight codes (~47 moves per stage otherwise).
  std::uint32_t selector_table;

  __device__ SwappedMainloop(int consumer_index, const KernelParams& p, std::uint32_t selector_table_in_shared)
      : selector_table(selector_table_in_shared) {
    const int t = threadIdx.x % kThreadsPerWarpgroup;
    consumer = consumer_index;
    warp = t / 32;
    g = (t % 32) / 4;
    q = t % 4;
    decoder = consumer * kThreadsPerWarpgroup + t;
    a_e5m2 = p.a_element == DataType::e5m2;
    release_lane = t % 32 == 0;
  }

  // Tile-local weight row of this warpgroup's slab's first row, and of its row g (upper = 0) or g + 8 (upper = 1).
  __device__ int slab_row0(int slab) const { return (consumer * kSlabs + slab) * 64; }
  __device__ int weight_row(int slab, int upper) const { return slab_row0(slab) + warp * 16 + g + 8 * upper; }

  // The weights reach wgmma as their values times 2^-kWeightExponent: the codes as e2m1 x 2^-126
  // (core::e2m1x8_to_tiny_bf16_pairs), then one multiply by an nv16 scale lifted by 2^119, exact for every
  // ue4m3 scale (tests/cpu/test_formats.cpp); the epilogue's alpha takes the 2^7 back (exact, a power of
  // two). mx32 scales span 2^-127 .. 2^127, too wide for one lifted multiply in general: by 2^(e + 122)
  // where the warp's scales allow it (up to 32), else 2^122 and then the scale (decode_weights); the
  // epilogue takes 2^4 back. Every product is then e2m1 x 2^(e - 131), a bf16 down to the smallest scale
  // (0.5 x 2^-131 = 2^-132, above bf16's smallest subnormal 2^-133).
  static constexpr int kWeightExponent = Traits::kBScales == ScaleGranularity::nv16 ? 7 : 4;
  static constexpr float kAccumulatorScale = static_cast<float>(1 << kWeightExponent);
  // 2^(kTinyBf16Exponent - kWeightExponent): 448 x 2^119 and 32 x 2^122 fit bf16's exponent range. The f16
  // operands' lifts 2^(kTinyF16Exponent - kWeightExponent) are 2^7 (nv16) and 2^10 (mx32, ue8m0_lifted_f16x2).
  static_assert(core::kTinyBf16Exponent == 126 && core::kUe4m3Lift == 0x1p119f && core::kUe8m0Lift == 0x1p122f,
                "the lifts of src/core/scale_codes.hpp");
  static_assert(core::kTinyF16Exponent == 14 && core::kUe4m3F16Lift == 0x1p7f && core::kUe8m0F16Highest == 132,
                "the f16 lifts of src/core/scale_codes.hpp");

  // A row's scale code in raw stage s where B's scales came as codes in their windows (Codes: by TMA, or by the
  // scale loaders: Traits::kScaleCodeWindows), else as fp32 by step and row (sfb[s][step][row], the
  // loaders'): kScaleCodeWindow bytes a row in sfb's room, the stage's first code at window_col of its row's
  // window (kernel_traits_swapped.cuh).
  __device__ __forceinline__ static std::uint32_t weight_scale_code(const Storage& ss, int s, int step, int row,
                                                                    int window_col) {
    return reinterpret_cast<const std::uint8_t*>(&ss.sfb[s][0][0])[row * kScaleCodeWindow + window_col + step];
  }

  // The column of k-block kb's first code in its window of B's scale codes.
  __device__ __forceinline__ static int scale_window_col(int kb) { return scale_code_window_col(kb, Traits::kStepsB); }

  // This thread's weights of half (slice) `half` of raw stage s: the stored positions 64 half + 16 q .. + 15 of
  // each of its rows (one 8-byte load each), decoded and scaled into fragments. window_col: scale_window_col of
  // the stage's k-block where Codes. Returns whether some of this thread's weights of the slice are left out of the
  // fragments (as zeros) for add_tile_in_fp32 after the tile: f16 operands' mx32 scales outside f16's window.
  template <bool Codes = false>
  __device__ __forceinline__ bool decode_weights(const Storage& ss, int s, int half, Fragments& frag,
                                                 int window_col = 0) const {
    std::uint32_t codes[kSlabs][2][2];
    float scale[kSlabs][2];
    std::uint32_t scale_code[kSlabs][2];  // Codes
#pragma unroll
    for (int slab = 0; slab < kSlabs; ++slab)
#pragma unroll
      for (int upper = 0; upper < 2; ++upper) {
        const int row = weight_row(slab, upper);
        const uint2 both = *reinterpret_cast<const uint2*>(ss.raw[s].b + row * (kBlockK / 2) + half * 32 + 8 * q);
        codes[slab][upper][0] = both.x;
        codes[slab][upper][1] = both.y;
        const int step = Traits::kBScales == ScaleGranularity::nv16 ? 4 * half + q : 2 * half + q / 2;
        if constexpr (Codes) scale_code[slab][upper] = weight_scale_code(ss, s, step, row, window_col);
        else scale[slab][upper] = ss.sfb[s][step][row];
      }
    // The codes' lifted pairs from the table (Traits::kLiftedScaleTable): nv16's exact for every code; the f16
    // operands' mx32 ones 0 outside f16's window, whose weights are then zeros in the fragments, left out for
    // add_tile_in_fp32.
    if constexpr (Traits::kLiftedScaleTable) {
      static_assert(Codes, "the table is of the codes in the stages' windows");
      std::uint32_t lifted[kSlabs][2];
      bool left_out = false;
#pragma unroll
      for (int slab = 0; slab < kSlabs; ++slab)
#pragma unroll
        for (int upper = 0; upper < 2; ++upper) {
          lifted[slab][upper] = ss.lifted_scales[scale_code[slab][upper]];
          if constexpr (Traits::kBScales == ScaleGranularity::mx32) left_out = left_out || lifted[slab][upper] == 0u;
        }
      if constexpr (Traits::kF16) scale_f16_rows(codes, lifted, frag);
      else scale_rows<ScaleSteps::lifted_pair>(codes, lifted, frag);
      return left_out;
    }
    // Codes (mx32 here: nv16's came from the table): the lifted scale's bf16 pair by one integer multiply-add where
    // every code of the warp's rows allows it (ue8m0 scales up to 32: src/core/scale_codes.hpp), as realistic
    // weights' are; their fp32 values and the multiplies below elsewhere. Warp-uniform: one vote per slice. Measured
    // -3 to -5% against the fp32 path (bench/NOTES.md, run 84).
    if constexpr (Codes && Traits::kBScales == ScaleGranularity::mx32) {
      bool lifts = true;
#pragma unroll
      for (int slab = 0; slab < kSlabs; ++slab)
#pragma unroll
        for (int upper = 0; upper < 2; ++upper) lifts = lifts && core::ue8m0_lifts_exactly(scale_code[slab][upper]);
      if (__all_sync(0xFFFFFFFFu, lifts)) {
        std::uint32_t lifted[kSlabs][2];
#pragma unroll
        for (int slab = 0; slab < kSlabs; ++slab)
#pragma unroll
          for (int upper = 0; upper < 2; ++upper) lifted[slab][upper] = core::ue8m0_lifted_bf16x2(scale_code[slab][upper]);
        scale_rows<ScaleSteps::lifted_pair>(codes, lifted, frag);
        return false;
      }
#pragma unroll
      for (int slab = 0; slab < kSlabs; ++slab)
#pragma unroll
        for (int upper = 0; upper < 2; ++upper) scale[slab][upper] = ue8m0_to_float(scale_code[slab][upper]);
    }
    // mx32: one multiply where every scale of the warp's rows is at most 32 (2^(e + 122) is then a bf16, and
    // so is every product, exactly), as realistic weights' blocks are; two elsewhere. Warp-uniform: no
    // divergence, one vote per slice.
    if constexpr (Traits::kBScales == ScaleGranularity::mx32) {
      bool small = true;
#pragma unroll
      for (int slab = 0; slab < kSlabs; ++slab)
#pragma unroll
        for (int upper = 0; upper < 2; ++upper) small = small && scale[slab][upper] <= core::kUe8m0LiftedScaleLimit;
      if (!__all_sync(0xFFFFFFFFu, small)) {
        scale_rows<ScaleSteps::two>(codes, scale, frag);
        return false;
      }
    }
    scale_rows<ScaleSteps::one>(codes, scale, frag);
    return false;
  }

  // How decoded codes (e2m1 x 2^-126) take their scale: one multiply by the scale lifted by
  // 2^(126 - kWeightExponent) (from its fp32 value, or lifted_pair: given as that bf16 pair), or (any mx32
  // scale) by 2^(126 - kWeightExponent) and then by the scale.
  enum class ScaleSteps { one, two, lifted_pair };
  static constexpr float kLift = Traits::kBScales == ScaleGranularity::nv16 ? core::kUe4m3Lift : core::kUe8m0Lift;

  template <ScaleSteps Steps, class Scale>
  __device__ __forceinline__ static void scale_rows(const std::uint32_t (&codes)[kSlabs][2][2],
                                                    const Scale (&scale)[kSlabs][2], Fragments& frag) {
#pragma unroll
    for (int slab = 0; slab < kSlabs; ++slab)
#pragma unroll
      for (int upper = 0; upper < 2; ++upper) {
        // Word i of code word h (positions 8 h + i and + 4) feeds step 2 h + i / 2, slots j = 2 (i % 2) + {0, 1}
        // (kernel_traits_swapped.cuh).
        std::uint32_t w[2][4];
#pragma unroll
        for (int h = 0; h < 2; ++h) core::e2m1x8_to_tiny_bf16_pairs(codes[slab][upper][h], w[h]);
        if constexpr (Steps == ScaleSteps::lifted_pair) {
#pragma unroll
          for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int i = 0; i < 4; ++i) w[h][i] = core::bf16x2_multiply(w[h][i], scale[slab][upper]);
        } else if constexpr (Steps == ScaleSteps::one) {
          const float lifted = scale[slab][upper] * kLift;
#pragma unroll
          for (int h = 0; h < 2; ++h) scale_bf16x2(w[h], lifted);
        } else {
#pragma unroll
          for (int h = 0; h < 2; ++h) scale_bf16x2(w[h], core::kUe8m0Lift);
#pragma unroll
          for (int h = 0; h < 2; ++h) scale_bf16x2(w[h], scale[slab][upper]);
        }
        place_words(w, upper, frag[slab]);
      }
  }

  // Word i of code word h feeds step 2 h + i / 2, fragment registers 2 (i % 2) + upper (both orders of the
  // pairs: kernel_traits_swapped.cuh, core::weights_order_slot and weights_order_slot_f16).
  __device__ __forceinline__ static void place_words(const std::uint32_t (&w)[2][4], int upper, std::uint32_t (&frag)[4][4]) {
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int i = 0; i < 4; ++i) frag[2 * h + i / 2][(i % 2) * 2 + upper] = w[h][i];
  }

  // Codes (e2m1 x 2^-14) times their lifted f16 pairs, into fragments.
  __device__ __forceinline__ static void scale_f16_rows(const std::uint32_t (&codes)[kSlabs][2][2],
                                                        const std::uint32_t (&lifted)[kSlabs][2], Fragments& frag) {
#pragma unroll
    for (int slab = 0; slab < kSlabs; ++slab)
#pragma unroll
      for (int upper = 0; upper < 2; ++upper) {
        std::uint32_t w[2][4];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          core::e2m1x8_to_tiny_f16_pairs(codes[slab][upper][h], w[h]);
#pragma unroll
          for (int i = 0; i < 4; ++i) w[h][i] = core::f16x2_multiply(w[h][i], lifted[slab][upper]);
        }
        place_words(w, upper, frag[slab]);
      }
  }

  // The products that decode_weights left out of the fragments (f16 operands' mx32 scales outside f16's window,
  // such as the ends of ue8m0's range, which no realistic weights reach), added into acc in fp32 after the tile's
  // mainloop: a warp-uniform branch of the warps any of whose lanes left some out, outside the stage loop, where this code
  // cost the loop 6-13% at decode shapes (bench/NOTES.md session 30). From global memory: for each of the
  // thread's weight rows, each 32-deep block of k-blocks [kb_begin, kb_begin + k_blocks) whose scale code lies
  // outside the window and each of the thread's tokens, the block's weights decoded in fp32 (times
  // 2^-kWeightExponent, as the fragments') times the staged f16 tokens (KernelParams::b_codes, staged_tokens),
  // summed apart and added to the token's accumulator. Rows, blocks and tokens in loops, not unrolled, and the sum
  // added by a compare with each accumulator's index: few registers live beside the accumulators.
  __device__ void add_tile_in_fp32(const KernelParams& p, const DeviceGroup* g, const core::TileCoord& c, int kb_begin,
                                   int k_blocks, float (&acc)[kSlabs][kAcc]) const {
    const std::int64_t k = read_only(g->k), n = read_only(g->n);
    const std::int64_t scale_cols = core::ceil_div(k, 32);
    const std::int64_t col_end = 4 * static_cast<std::int64_t>(kb_begin + k_blocks) < scale_cols
                                     ? 4 * static_cast<std::int64_t>(kb_begin + k_blocks)
                                     : scale_cols;
    const std::int64_t token0 = static_cast<std::int64_t>(c.m_block) * Traits::kBlockM + accumulator_token(0);
    const std::int64_t tokens_left = read_only(g->m) - token0;  // the thread's tokens are token0 + (8 j + e)
    const std::uint16_t* tokens =
        p.staged_tokens + ((read_only(g->a_batch0) + c.l) * p.token_factor_rows + read_only(g->a_row0) + token0) * p.staged_ld;
#pragma unroll
    for (int slab = 0; slab < kSlabs; ++slab)
#pragma unroll 1
      for (int upper = 0; upper < 2; ++upper) {
        const std::int64_t row = static_cast<std::int64_t>(c.n_block) * Traits::kBlockN + weight_row(slab, upper);
        if (row >= n) continue;
        const std::uint8_t* weights = p.b_codes + ((read_only(g->b_batch0) + c.l) * p.b_batch_stride + row * p.b_ld) / 2;
#pragma unroll 1
        for (std::int64_t col = 4 * static_cast<std::int64_t>(kb_begin); col < col_end; ++col) {
          const std::uint32_t code =
              static_cast<const std::uint8_t*>(read_only(g->sfb))[scale_offset(p.sfb_layout, row, col, scale_cols, read_only(g->sfb_ld))];
          if (core::ue8m0_lifts_exactly_f16(code)) continue;  // in the fragments
          const float scale = ue8m0_to_float(code) * (1.0f / kAccumulatorScale);
          const std::int64_t end = 32 * col + 32 < k ? 32 * col + 32 : k;
#pragma unroll 1
          for (int i = 0; i < kAcc; ++i) {
            const int offset = 8 * (i / 4) + i % 2;  // accumulator i's token, from token0
            if (((i >> 1) & 1) != upper || offset >= tokens_left) continue;
            const std::uint16_t* token = tokens + offset * p.staged_ld;
            float sum = 0.0f;
#pragma unroll 1
            for (std::int64_t position = 32 * col; position < end; ++position) {
              const float weight = decode_e2m1(static_cast<std::uint8_t>(weights[position / 2] >> (4 * (position % 2)))) * scale;
              const std::uint16_t bits =
                  token[position / kDecodedK * kDecodedK + core::weights_order_slot_f16(static_cast<int>(position % kDecodedK))];
              sum = fmaf(weight, __half2float(*reinterpret_cast<const __half*>(&bits)), sum);
            }
#pragma unroll
            for (int r = 0; r < kAcc; ++r)
              if (r == i) acc[slab][r] += sum;
          }
        }
      }
  }

  // The tokens of half `half` of raw stage s into decoded tile d, in the weights' K order: logical chunk c of
  // a token row holds slots (step c / 2, q = e / 2, j = 2 (c % 2) + e % 2) for e = 0..7, i.e. word p of the
  // chunk holds the stored positions 16 p + b and 16 p + b + 4 of the slice, b = 8 (c / 4) + c % 4
  // (kernel_traits_swapped.cuh). A thread takes one unit: the eight positions 16 p + 8 g .. + 7 of a row,
  // whose four pairs four apart are word p of chunks 4 g .. 4 g + 3 (one decode, one scale, four 4-byte
  // stores). Tail (only in the last stage of a K range not a multiple of 128): positions at or past k_valid
  // are zeroed (a packed row's last byte may hold a padding nibble; the weights there are finite, so zero
  // tokens cancel them).
  template <bool Tail>
  __device__ __forceinline__ void decode_tokens(Storage& ss, int s, int half, int d, int k_valid) const {
#pragma unroll
    for (int i = 0; i < kTokenChunksPerThread; ++i) {
      const int id = decoder + 2 * kThreadsPerWarpgroup * i;
      const int t = id / 8, g = (id % 8) / 4, p = id % 4;
      float scale = 1.0f;
      if constexpr (Traits::kAScales == ScaleGranularity::nv16) scale = ss.sfa[s][4 * half + p][t];
      if constexpr (Traits::kAScales == ScaleGranularity::mx32) scale = ss.sfa[s][2 * half + p / 2][t];
      std::uint32_t w[4];
      if constexpr (Traits::kAPacked) {
        core::e2m1x8_to_bf16_pairs(*reinterpret_cast<const std::uint32_t*>(ss.raw[s].a + t * (kBlockK / 2) + half * 32 +
                                                                             8 * p + 4 * g),
                                   w, selector_table);
        scale_bf16x2(w, scale);
      } else {
        const uint2 eight = *reinterpret_cast<const uint2*>(ss.raw[s].a + t * kBlockK + half * 64 + 16 * p + 8 * g);
        const uint4 v = decode_fp8x8_pairs(eight.x, eight.y, a_e5m2, scale);
        w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
      }
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        if constexpr (Tail) {
          const int k0 = half * kDecodedK + 16 * p + 8 * g + k;  // the low element; the high is k0 + 4
          if (k0 + 4 >= k_valid) w[k] = k0 >= k_valid ? 0u : (w[k] & 0xFFFFu);
        }
        const int c = 4 * g + k;
        *reinterpret_cast<std::uint32_t*>(ss.decoded[d].a + t * 128 + ((c ^ (t % 8)) * 16) + 4 * p) = w[k];
      }
    }
  }

  // The wgmma of one slice (its tokens, a 16-bit tile of descriptor tokens_desc; weight fragments frag) into acc, as
  // one commit group.
  __device__ __forceinline__ void issue_mma(std::uint64_t tokens_desc, const Fragments& frag, float (&acc)[kSlabs][kAcc],
                                            bool fresh) const {
#pragma unroll
    for (int slab = 0; slab < kSlabs; ++slab) ptx::fence_accumulators(acc[slab]);
    ptx::wgmma_fence();
#pragma unroll
    for (int step = 0; step < kSteps; ++step)
#pragma unroll
      for (int slab = 0; slab < kSlabs; ++slab)
        Mma::mma(acc[slab], frag[slab][step], ptx::advance_desc(tokens_desc, 32 * step), (fresh && step == 0) ? 0u : 1u);
    ptx::wgmma_commit();
  }

  __device__ __forceinline__ static void zero_accumulators(float (&acc)[kSlabs][kAcc]) {
#pragma unroll
    for (int slab = 0; slab < kSlabs; ++slab)
#pragma unroll
      for (int i = 0; i < kAcc; ++i) acc[slab][i] = 0.0f;
  }

  // Accumulates one tile of `k_blocks` raw stages (K = k) into acc; both pipeline states end past the tile.
  template <int Stages>
  __device__ void accumulate_tile(Storage& ss, const StagePipeline<Stages>& pipe, PipelineState<Stages>& raw,
                                  PipelineState<kDecodedStages>& decoded, int k_blocks, std::int64_t k,
                                  float (&acc)[kSlabs][kAcc]) const {
    zero_accumulators(acc);
    if (k_blocks == 0) return;  // K = 0: the producers load nothing for this tile
    Fragments first_half, second_half;
    PipelineState<kDecodedStages> write = decoded, read = decoded;

    // Decodes half `half` of stage kb (the raw stage at `raw`) into the next decoded tile and `frag`.
    const auto produce = [&](int kb, int half, Fragments& frag) {
      if (half == 0) pipe.consumer_wait(raw);
      ptx::mbarrier_wait(&ss.decoded_empty[write.index], write.phase ^ 1u);
      const int k_valid = static_cast<int>(k - static_cast<std::int64_t>(kb) * kBlockK);
      if (k_valid >= (half + 1) * kDecodedK) decode_tokens<false>(ss, raw.index, half, write.index, k_valid);
      else decode_tokens<true>(ss, raw.index, half, write.index, k_valid);
      // Both warpgroups' wgmma read the tokens through the async proxy.
      ptx::fence_proxy_async_shared();
      __syncwarp();
      if (release_lane) ptx::mbarrier_arrive(&ss.decoded_full[write.index]);
      write.advance();
      decode_weights(ss, raw.index, half, frag);
    };
    // The raw stage back to the producers once the wgmma of its second half are issued. Not before: ptxas issues the
    // release's arrive without waiting for the warp's shared loads still in flight, and a loader's store (or TMA)
    // could then overwrite a stage's scales or codes before a load had read them (bench/NOTES.md session 40: 68-3609
    // wrong elements of slab 1, whose loads come last). The wgmma read the second half's fragments, which every load
    // of the stage feeds (the tokens' through the decoded tiles' stores), so those loads have landed by then.
    const auto release_raw = [&] {
      __syncwarp();
      if (release_lane) pipe.consumer_release(raw);
      raw.advance();
    };
    const auto consume = [&](const Fragments& frag, bool fresh) {
      ptx::mbarrier_wait(&ss.decoded_full[read.index], read.phase);
      issue_mma(ptx::make_smem_desc_sw128(ss.decoded[read.index].a), frag, acc, fresh);
    };
    const auto retire = [&] {
      ptx::wgmma_wait<0>();
#pragma unroll
      for (int slab = 0; slab < kSlabs; ++slab) ptx::fence_accumulators(acc[slab]);
      __syncwarp();
      if (release_lane) ptx::mbarrier_arrive(&ss.decoded_empty[read.index]);
      read.advance();
    };

    produce(0, 0, first_half);
    for (int kb = 0; kb < k_blocks; ++kb) {
      consume(first_half, kb == 0);
      produce(kb, 1, second_half);
      retire();
      consume(second_half, false);
      release_raw();
      if (kb + 1 < k_blocks) produce(kb + 1, 0, first_half);
      retire();
    }
    decoded = read;
  }

  // The column (token) of accumulator register i: m64nNk16's fragment holds columns 8 (i / 4) + 2 q + i % 2.
  __device__ int accumulator_token(int i) const { return 8 * (i / 4) + 2 * q + i % 2; }

  // accumulate_tile with staged tokens: each slice's wgmma read the tokens from the raw stage, which is
  // released once both its slices' wgmma are done; each slice is decoded under the wgmma of the one before.
  // The next stage's first slice is decoded under the last one's wgmma, so a warpgroup holds two raw stages
  // for that long. Codes: B's scale codes are in the stages' windows (decode_weights). The stages are the
  // tile's k-blocks [kb_begin, kb_begin + k_blocks) (a stream-K unit's, or the whole tile's from 0). Returns
  // whether decode_weights left some of the warp's weights out (warp-uniform; the caller adds them with
  // add_tile_in_fp32): always false but for the f16 operands' mx32 weights.
  template <bool Codes, int Stages>
  __device__ bool accumulate_staged_tile(const Storage& ss, const StagePipeline<Stages>& pipe, PipelineState<Stages>& raw,
                                         int kb_begin, int k_blocks, float (&acc)[kSlabs][kAcc]) const {
    zero_accumulators(acc);
    if (k_blocks == 0) return false;  // K = 0: the producers load nothing for this tile
    Fragments frag[2];
    bool left_out = false;  // whether decode_weights left some of the warp's weights of a slice to add_tile_in_fp32
    const auto retire = [&] {
      ptx::wgmma_wait<0>();
#pragma unroll
      for (int slab = 0; slab < kSlabs; ++slab) ptx::fence_accumulators(acc[slab]);
    };

    // The current raw stage's tokens descriptor, carried from stage to stage (one add, a select where the ring turns)
    // rather than made again from the stage's address (bench/NOTES.md version 65).
    constexpr std::uint32_t kStageBytes = sizeof(ss.raw[0]);
    static_assert(kStageBytes % 16 == 0 && Traits::kTokenHalfBytes % 16 == 0);
    std::uint64_t tokens_desc = ptx::make_smem_desc_sw128(ss.raw[raw.index].a);
    pipe.consumer_wait(raw);
    left_out |= decode_weights<Codes>(ss, raw.index, 0, frag[0], scale_window_col(kb_begin));
    for (int kb = 0; kb < k_blocks; ++kb) {
      PipelineState<Stages> next;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        issue_mma(ptx::advance_desc(tokens_desc, half * Traits::kTokenHalfBytes), frag[half], acc, half == 0 && kb == 0);
        if (half == 0) {
          left_out |= decode_weights<Codes>(ss, raw.index, 1, frag[1], scale_window_col(kb_begin + kb));
        } else {
          next = raw;
          next.advance();
          if (kb + 1 < k_blocks) {
            pipe.consumer_wait(next);
            left_out |= decode_weights<Codes>(ss, next.index, 0, frag[0], scale_window_col(kb_begin + kb + 1));
          }
        }
        retire();
      }
      __syncwarp();
      if (release_lane) pipe.consumer_release(raw);
      raw = next;
      tokens_desc = raw.index == 0 ? tokens_desc - (Stages - 1) * (kStageBytes / 16) : ptx::advance_desc(tokens_desc, kStageBytes);
    }
    // Each lane knows only the blocks it decoded; a left-out block's products are added by the lanes that own its
    // row's accumulators (add_tile_in_fp32), so the lanes' answers are joined, once a tile instead of a vote a slice.
    if constexpr (Traits::kF16 && Traits::kBScales == ScaleGranularity::mx32) return __any_sync(0xFFFFFFFFu, left_out);
    return false;
  }
};

}  // namespace bsgemm::cuda
