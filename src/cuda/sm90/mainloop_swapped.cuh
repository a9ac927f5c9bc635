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
// walks a stage in pieces (whole slices, or half slices where fp8-block128 tokens' second set of
// accumulators takes the registers of the second fragment set), each decoded under the wgmma of the last.
// Weights are decoded by bit placement (core::e2m1x8_to_tiny_bf16_pairs, decode_weights), tokens through
// the byte tables (core::e2m1x8_to_bf16_pairs), whose exact bf16 needs no accumulator scale.
#pragma once

#include <cstdint>

#include "src/core/fp4_to_fp8.hpp"
#include "src/core/scale_codes.hpp"
#include "src/core/stage_bf16.hpp"
#include "src/cuda/ptx/mbarrier.cuh"
#include "src/cuda/ptx/sync.cuh"
#include "src/cuda/ptx/wgmma.cuh"
#include "src/cuda/sm90/decode_bf16.cuh"
#include "src/cuda/sm90/kernel_traits_swapped.cuh"
#include "src/cuda/sm90/pipeline.cuh"
#include "src/cuda/sm90/scale_loader.cuh"

namespace bsgemm::cuda {

template <class Traits>
struct SwappedMainloop {
  using Storage = typename Traits::SharedStorage;
  using Mma = ptx::WgmmaBf16RegisterA<Traits::kBlockM>;
  static constexpr int kAcc = Traits::kAccumulators;
  static constexpr int kSlabs = Traits::kSlabs;
  static constexpr int kSteps = kDecodedK / 16;
  static constexpr int kTokenChunksPerThread = Traits::kTokenChunks / (2 * kThreadsPerWarpgroup);
  // A fragments of one piece of a slice: [slab][k16 step][register]; register 0: row g, slots j = 0, 1;
  // 1: row g + 8, j = 0, 1; 2: row g, j = 2, 3; 3: row g + 8, j = 2, 3 (the PTX fragment layout of a 64x16
  // bf16 A). A piece is `Words` 4-byte code words of each of the thread's rows, two k16 steps per word: the
  // whole 64-deep slice (2), or half of it (1).
  template <int Words>
  using FragmentsOf = std::uint32_t[kSlabs][2 * Words][4];
  using Fragments = FragmentsOf<2>;
  // The staged-token loop's piece: half slices where fp8-block128's second set of accumulators leaves no room
  // for two sets of whole-slice fragments (64 tokens on two slabs: 64 + 64 accumulators, 168 registers).
  static constexpr int kStagedPieceWords = Traits::kPromoteTokens && Traits::kBlockM == 64 ? 1 : 2;

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
  // 2^(kTinyBf16Exponent - kWeightExponent): 448 x 2^119 and 32 x 2^122 fit bf16's exponent range.
  static_assert(core::kTinyBf16Exponent == 126 && core::kUe4m3Lift == 0x1p119f && core::kUe8m0Lift == 0x1p122f,
                "the lifts of src/core/scale_codes.hpp");

  // Whether decode_weights makes the lifted scales' bf16 pairs from the codes where they allow it (Codes):
  // measured -3 to -5% on the mx32 rows, within 1% on the nv16 ones (bench/NOTES.md, run 84). Not nv16 weights
  // with fp8-block128 tokens' 64-token tile (two warpgroups of two slabs, half-slice pieces), which keeps the fp32
  // path: +9% with the lift in run 84, +6.6% with version 53's in run 159, where mx32 weights' tile gained 2.3%.
  static constexpr bool kLiftsScaleCodes =
      !(Traits::kPromoteTokens && Traits::kBlockM == 64 && Traits::kBScales == ScaleGranularity::nv16);

  // A row's scale code in raw stage s where B's scales came as codes in their windows (Codes: by TMA, or by the
  // scale loaders where Traits::kLoadersWriteCodes), else as fp32 by step and row (sfb[s][step][row], the
  // loaders'): kScaleCodeWindow bytes a row in sfb's room, the stage's first code at window_col of its row's
  // window (kernel_traits_swapped.cuh).
  __device__ __forceinline__ static std::uint32_t weight_scale_code(const Storage& ss, int s, int step, int row,
                                                                    int window_col) {
    return reinterpret_cast<const std::uint8_t*>(&ss.sfb[s][0][0])[row * kScaleCodeWindow + window_col + step];
  }
  __device__ __forceinline__ static float scale_code_value(std::uint32_t code) {
    return Traits::kBScales == ScaleGranularity::nv16 ? core::ue4m3_code_to_float(code) : ue8m0_to_float(code);
  }
  __device__ __forceinline__ static bool scale_code_lifts(std::uint32_t code) {
    return Traits::kBScales == ScaleGranularity::nv16 ? core::ue4m3_lifts_exactly(code) : core::ue8m0_lifts_exactly(code);
  }
  __device__ __forceinline__ static std::uint32_t scale_code_lifted_pair(std::uint32_t code) {
    return Traits::kBScales == ScaleGranularity::nv16 ? core::ue4m3_lifted_bf16x2(code) : core::ue8m0_lifted_bf16x2(code);
  }

  // The column of k-block kb's first code in its window of B's scale codes.
  __device__ __forceinline__ static int scale_window_col(int kb) { return scale_code_window_col(kb, Traits::kStepsB); }

  // This thread's weights of piece `piece` of raw stage s: of half slice `half`, the stored positions
  // 64 half + 16 q .. + 15 of each of its rows (whole slices: one 8-byte load each), or the eight at
  // 64 half + 16 q + 8 w (half slices, w = piece % 2: one 4-byte load), decoded and scaled into fragments.
  // window_col: scale_window_col of the stage's k-block where Codes.
  template <int Words = 2, bool Codes = false>
  __device__ __forceinline__ void decode_weights(const Storage& ss, int s, int piece, FragmentsOf<Words>& frag,
                                                 int window_col = 0) const {
    constexpr int kPiecesPerSlice = 2 / Words;
    const int half = piece / kPiecesPerSlice;
    std::uint32_t codes[kSlabs][2][Words];
    float scale[kSlabs][2];
    std::uint32_t scale_code[kSlabs][2];  // Codes
#pragma unroll
    for (int slab = 0; slab < kSlabs; ++slab)
#pragma unroll
      for (int upper = 0; upper < 2; ++upper) {
        const int row = weight_row(slab, upper);
        const std::uint8_t* first =
            ss.raw[s].b + row * (kBlockK / 2) + half * 32 + 8 * q + 4 * Words * (piece % kPiecesPerSlice);
        if constexpr (Words == 2) {
          const uint2 both = *reinterpret_cast<const uint2*>(first);
          codes[slab][upper][0] = both.x;
          codes[slab][upper][1] = both.y;
        } else {
          codes[slab][upper][0] = *reinterpret_cast<const std::uint32_t*>(first);
        }
        const int step = Traits::kBScales == ScaleGranularity::nv16 ? 4 * half + q : 2 * half + q / 2;
        if constexpr (Codes) scale_code[slab][upper] = weight_scale_code(ss, s, step, row, window_col);
        else scale[slab][upper] = ss.sfb[s][step][row];
      }
    // Codes: the lifted scale's bf16 pair by one integer multiply-add where every code of the warp's rows
    // allows it (normal ue4m3 scales, ue8m0 ones up to 32: src/core/scale_codes.hpp), as realistic weights'
    // are; their fp32 values and the multiplies below elsewhere. Warp-uniform: one vote per piece.
    if constexpr (Codes && kLiftsScaleCodes) {
      bool lifts = true;
#pragma unroll
      for (int slab = 0; slab < kSlabs; ++slab)
#pragma unroll
        for (int upper = 0; upper < 2; ++upper) lifts = lifts && scale_code_lifts(scale_code[slab][upper]);
      if (__all_sync(0xFFFFFFFFu, lifts)) {
        std::uint32_t lifted[kSlabs][2];
#pragma unroll
        for (int slab = 0; slab < kSlabs; ++slab)
#pragma unroll
          for (int upper = 0; upper < 2; ++upper) lifted[slab][upper] = scale_code_lifted_pair(scale_code[slab][upper]);
        return scale_rows<ScaleSteps::lifted_pair, Words>(codes, lifted, frag);
      }
    }
    if constexpr (Codes) {
#pragma unroll
      for (int slab = 0; slab < kSlabs; ++slab)
#pragma unroll
        for (int upper = 0; upper < 2; ++upper) scale[slab][upper] = scale_code_value(scale_code[slab][upper]);
    }
    // mx32: one multiply where every scale of the warp's rows is at most 32 (2^(e + 122) is then a bf16, and
    // so is every product, exactly), as realistic weights' blocks are; two elsewhere. Warp-uniform: no
    // divergence, one vote per piece.
    if constexpr (Traits::kBScales == ScaleGranularity::mx32) {
      bool small = true;
#pragma unroll
      for (int slab = 0; slab < kSlabs; ++slab)
#pragma unroll
        for (int upper = 0; upper < 2; ++upper) small = small && scale[slab][upper] <= core::kUe8m0LiftedScaleLimit;
      if (!__all_sync(0xFFFFFFFFu, small)) return scale_rows<ScaleSteps::two, Words>(codes, scale, frag);
    }
    scale_rows<ScaleSteps::one, Words>(codes, scale, frag);
  }

  // How decoded codes (e2m1 x 2^-126) take their scale: one multiply by the scale lifted by
  // 2^(126 - kWeightExponent) (from its fp32 value, or lifted_pair: given as that bf16 pair), or (any mx32
  // scale) by 2^(126 - kWeightExponent) and then by the scale.
  enum class ScaleSteps { one, two, lifted_pair };
  static constexpr float kLift = Traits::kBScales == ScaleGranularity::nv16 ? core::kUe4m3Lift : core::kUe8m0Lift;

  template <ScaleSteps Steps, int Words, class Scale>
  __device__ __forceinline__ static void scale_rows(const std::uint32_t (&codes)[kSlabs][2][Words],
                                                    const Scale (&scale)[kSlabs][2], FragmentsOf<Words>& frag) {
#pragma unroll
    for (int slab = 0; slab < kSlabs; ++slab)
#pragma unroll
      for (int upper = 0; upper < 2; ++upper) {
        // Word i of code word h (positions 8 h + i and + 4) feeds step 2 h + i / 2, slots j = 2 (i % 2) + {0, 1}
        // (kernel_traits_swapped.cuh).
        std::uint32_t w[Words][4];
#pragma unroll
        for (int h = 0; h < Words; ++h) core::e2m1x8_to_tiny_bf16_pairs(codes[slab][upper][h], w[h]);
        if constexpr (Steps == ScaleSteps::lifted_pair) {
#pragma unroll
          for (int h = 0; h < Words; ++h)
#pragma unroll
            for (int i = 0; i < 4; ++i) w[h][i] = core::bf16x2_multiply(w[h][i], scale[slab][upper]);
        } else if constexpr (Steps == ScaleSteps::one) {
          const float lifted = scale[slab][upper] * kLift;
#pragma unroll
          for (int h = 0; h < Words; ++h) scale_bf16x2(w[h], lifted);
        } else {
#pragma unroll
          for (int h = 0; h < Words; ++h) scale_bf16x2(w[h], core::kUe8m0Lift);
#pragma unroll
          for (int h = 0; h < Words; ++h) scale_bf16x2(w[h], scale[slab][upper]);
        }
#pragma unroll
        for (int h = 0; h < Words; ++h)
#pragma unroll
          for (int i = 0; i < 4; ++i) frag[slab][2 * h + i / 2][(i % 2) * 2 + upper] = w[h][i];
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

  // The wgmma of one piece (the slice's tokens, a bf16 tile at `tokens`, from k16 step first_step on;
  // weight fragments frag) into acc, as one commit group.
  template <int Words = 2>
  __device__ __forceinline__ void issue_mma(const std::uint8_t* tokens, const FragmentsOf<Words>& frag,
                                            float (&acc)[kSlabs][kAcc], bool fresh, int first_step = 0) const {
    const std::uint64_t desc = ptx::make_smem_desc_sw128(tokens);
#pragma unroll
    for (int slab = 0; slab < kSlabs; ++slab) ptx::fence_accumulators(acc[slab]);
    ptx::wgmma_fence();
#pragma unroll
    for (int step = 0; step < 2 * Words; ++step)
#pragma unroll
      for (int slab = 0; slab < kSlabs; ++slab)
        Mma::mma(acc[slab], frag[slab][step], ptx::advance_desc(desc, 32 * (first_step + step)),
                 (fresh && step == 0) ? 0u : 1u);
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
      if (half == 1) {
        __syncwarp();
        if (release_lane) pipe.consumer_release(raw);
        raw.advance();
      }
    };
    const auto consume = [&](const Fragments& frag, bool fresh) {
      ptx::mbarrier_wait(&ss.decoded_full[read.index], read.phase);
      issue_mma(ss.decoded[read.index].a, frag, acc, fresh);
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
      if (kb + 1 < k_blocks) produce(kb + 1, 0, first_half);
      retire();
    }
    decoded = read;
  }

  // The column (token) of accumulator register i: m64nNk16's fragment holds columns 8 (i / 4) + 2 q + i % 2.
  __device__ int accumulator_token(int i) const { return 8 * (i / 4) + 2 * q + i % 2; }

  // accumulate_tile with staged tokens: each piece's wgmma read the tokens from the raw stage, which is
  // released once all its pieces' wgmma are done; each piece is decoded under the wgmma of the one before.
  // The next stage's first piece is decoded under the last one's wgmma, so a warpgroup holds two raw stages
  // for that long. fp8-block128 tokens (kPromoteTokens): each stage's wgmma start afresh in `partial`, added
  // into acc times its tokens' scales of that stage before the stage is released.
  // Codes: B's scale codes are in the stages' windows (decode_weights). The stages are the tile's k-blocks
  // [kb_begin, kb_begin + k_blocks) (a stream-K unit's, or the whole tile's from 0).
  template <bool Codes, int Stages>
  __device__ void accumulate_staged_tile(const Storage& ss, const StagePipeline<Stages>& pipe, PipelineState<Stages>& raw,
                                         int kb_begin, int k_blocks, float (&acc)[kSlabs][kAcc]) const {
    zero_accumulators(acc);
    if (k_blocks == 0) return;  // K = 0: the producers load nothing for this tile
    constexpr bool kPromote = Traits::kPromoteTokens;
    // The wgmma's accumulators: a stage's products apart (fp8-block128 tokens), else the tile's own. partial
    // goes unused, and is not kept, where nothing is promoted.
    float partial[kSlabs][kAcc];
    float(&products)[kSlabs][kAcc] = kPromote ? partial : acc;
    constexpr int kWords = kStagedPieceWords;
    constexpr int kPieces = 4 / kWords;  // per raw stage of two slices
    FragmentsOf<kWords> frag[2];
    const auto retire = [&] {
      ptx::wgmma_wait<0>();
#pragma unroll
      for (int slab = 0; slab < kSlabs; ++slab) ptx::fence_accumulators(products[slab]);
    };
    const auto issue = [&](int piece, bool fresh) {
      const int half = piece * kWords / 2;
      issue_mma<kWords>(ss.raw[raw.index].a + half * Traits::kTokenHalfBytes, frag[piece % 2], products, fresh,
                        (2 * kWords * piece) % kSteps);
    };

    pipe.consumer_wait(raw);
    decode_weights<kWords, Codes>(ss, raw.index, 0, frag[0], scale_window_col(kb_begin));
    for (int kb = 0; kb < k_blocks; ++kb) {
      PipelineState<Stages> next;
#pragma unroll
      for (int piece = 0; piece < kPieces; ++piece) {
        issue(piece, piece == 0 && (kPromote || kb == 0));
        if (piece + 1 < kPieces) {
          decode_weights<kWords, Codes>(ss, raw.index, piece + 1, frag[(piece + 1) % 2], scale_window_col(kb_begin + kb));
        } else {
          next = raw;
          next.advance();
          if (kb + 1 < k_blocks) {
            pipe.consumer_wait(next);
            decode_weights<kWords, Codes>(ss, next.index, 0, frag[0], scale_window_col(kb_begin + kb + 1));
          }
        }
        retire();
      }
      if constexpr (kPromote) {
        const float* scales = ss.sfa[raw.index][0];
#pragma unroll
        for (int i = 0; i < kAcc; ++i) {
          const float s = scales[accumulator_token(i)];
#pragma unroll
          for (int slab = 0; slab < kSlabs; ++slab) acc[slab][i] = fmaf(partial[slab][i], s, acc[slab][i]);
        }
      }
      __syncwarp();
      if (release_lane) pipe.consumer_release(raw);
      raw = next;
    }
  }
};

}  // namespace bsgemm::cuda
