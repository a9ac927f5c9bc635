// Probe: how much of the register-operand kernel's decode can hide under its wgmma on one SM?
//
// bench/NOTES.md (session 15) reads the FP4 decode kernels' time as tensor time plus most of the decode's
// issue time. This probe measures that on the GPU without memory traffic: one persistent CTA of four
// warpgroups per SM, each iteration a "stage" per warpgroup as the staged-token kernel runs it at 64 tokens
// (64 weight rows x 128 of K): one batch of wgmma (8 x m64n64k16 BF16, or 4 x m64n64k32 e4m3: the same
// multiplies at FP8's rate) and/or one piece of ALU work on the 32 fragment registers (the kernel's own
// nv16 decode: src/core/fp4_to_fp8.hpp and an HMUL2 per register; or 256 instructions of one class).
// Placements: "same" warps (the kernel's loop: issue the batch, make the next piece, wait), or "split"
// (warpgroups 0-1 make two pieces per iteration, 2-3 issue two batches; no data passes between them).
// It prints SM cycles per iteration (clock64, the slowest CTA): one iteration is 1024 tensor cycles of
// BF16 work at full rate (512 for e4m3).
//
// Built with the tool (build/bsgemm_probe_wgmma_overlap); scripts/device-check.sh runs it in its probes step.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "src/core/fp4_to_fp8.hpp"
#include "src/cuda/ptx/wgmma.cuh"

namespace {

using namespace bsgemm;

enum class Alu { none, lop3, imad, ffma, hmul2, nv16_decode };
enum class Mma { none, rs_bf16, rs_e4m3, ss_bf16 };
enum class Placement { same, split };

constexpr int kThreads = 512;
constexpr int kIterations = 2048;

struct SharedTiles {
  alignas(1024) std::uint8_t tokens[64 * 256];       // wgmma B: 64 tokens x 128 of K (bf16) or x 256 (e4m3)
  alignas(1024) std::uint8_t weights[4][64 * 256];   // wgmma A of the SS form: each warpgroup's 64 rows
  alignas(16) uint4 codes[1024];                     // e2m1 codes the decode reads, as the kernel's LDS do
};

// The k-th 16-deep (BF16) or 32-deep (e4m3) step of a 128-byte-swizzled tile of two 8 KB halves.
__device__ std::uint64_t step_desc(const void* tile, int k) {
  const auto* base = static_cast<const std::uint8_t*>(tile) + (k / 4) * 8192;
  return ptx::advance_desc(ptx::make_smem_desc_sw128(base), 32 * (k % 4));
}

template <Alu A>
__device__ __forceinline__ void alu_instruction(std::uint32_t& x, std::uint32_t y, std::uint32_t z) {
  // One instruction each (asm volatile: not folded across rounds); y and z are run-time values.
  if constexpr (A == Alu::lop3) asm volatile("lop3.b32 %0, %0, %1, %2, 0x96;" : "+r"(x) : "r"(y), "r"(z));
  if constexpr (A == Alu::imad) asm volatile("mad.lo.u32 %0, %0, %1, %2;" : "+r"(x) : "r"(y), "r"(z));
  if constexpr (A == Alu::ffma) asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+r"(x) : "r"(y), "r"(z));
  if constexpr (A == Alu::hmul2) asm volatile("mul.rn.bf16x2 %0, %0, %1;" : "+r"(x) : "r"(y));
}

// One piece of work on the 32 fragment registers (64 rows x 128 of K of bf16 per warpgroup).
template <Alu A>
__device__ __forceinline__ void make_piece(const SharedTiles& s, int iteration, std::uint32_t y, std::uint32_t z,
                                           std::uint32_t (&f)[32]) {
  if constexpr (A == Alu::nv16_decode) {
    const int t = threadIdx.x % 128;
    const uint4 c0 = s.codes[(iteration * 37 + 2 * t) & 1023];
    const uint4 c1 = s.codes[(iteration * 37 + 2 * t + 1) & 1023];
    const std::uint32_t loaded[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
    // z is zero at run time: one LOP3 per word ties each piece to the last, so none is dead code.
    std::uint32_t words[8];
#pragma unroll
    for (int w = 0; w < 8; ++w) words[w] = loaded[w] ^ (f[4 * w] & z);
    const __nv_bfloat162 scale = *reinterpret_cast<const __nv_bfloat162*>(&y);
#pragma unroll
    for (int w = 0; w < 8; ++w) {
      std::uint32_t pairs[4];
      core::e2m1x8_to_tiny_bf16_pairs(words[w], pairs);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const __nv_bfloat162 v = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&pairs[i]), scale);
        f[4 * w + i] = *reinterpret_cast<const std::uint32_t*>(&v);
      }
    }
  } else if constexpr (A != Alu::none) {
#pragma unroll
    for (int round = 0; round < 8; ++round)
#pragma unroll
      for (int i = 0; i < 32; ++i) alu_instruction<A>(f[i], y, z);
  }
}

// One batch: the multiplies of 64 rows x 64 tokens x 128 of K, committed as one group.
template <Mma M>
__device__ __forceinline__ void issue_batch(const SharedTiles& s, int warpgroup, const std::uint32_t (&f)[32],
                                            float (&acc)[32]) {
  ptx::wgmma_fence();
  if constexpr (M == Mma::rs_bf16) {
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const std::uint32_t a[4] = {f[4 * k], f[4 * k + 1], f[4 * k + 2], f[4 * k + 3]};
      ptx::WgmmaBf16RegisterA<64>::mma(acc, a, step_desc(s.tokens, k), 1u);
    }
  } else if constexpr (M == Mma::rs_e4m3) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const std::uint32_t a[4] = {f[4 * k], f[4 * k + 1], f[4 * k + 2], f[4 * k + 3]};
      ptx::WgmmaFp8RegisterA<64>::mma(acc, a, step_desc(s.tokens, 2 * k), 1u);
    }
  } else if constexpr (M == Mma::ss_bf16) {
#pragma unroll
    for (int k = 0; k < 8; ++k)
      ptx::WgmmaBf16<64>::mma(acc, step_desc(s.weights[warpgroup], k), step_desc(s.tokens, k), 1u);
  }
  ptx::wgmma_commit();
}

template <Mma M>
__device__ __forceinline__ void finish_batch(float (&acc)[32]) {
  if constexpr (M != Mma::none) {
    ptx::wgmma_wait<0>();
    ptx::fence_accumulators(acc);
  }
}

template <Alu A, Mma M, Placement P>
__global__ void __launch_bounds__(kThreads, 1) overlap_kernel(std::uint32_t seed, float* sink, long long* cycles) {
  extern __shared__ std::uint8_t shared_bytes[];
  const auto address = reinterpret_cast<std::uintptr_t>(shared_bytes);
  auto& s = *reinterpret_cast<SharedTiles*>(shared_bytes + (1024 - address % 1024) % 1024);
  // Finite bf16 and e4m3 values everywhere (the tensor cores' time does not depend on them).
  for (int i = threadIdx.x; i < static_cast<int>(sizeof(SharedTiles) / 4); i += kThreads)
    reinterpret_cast<std::uint32_t*>(&s)[i] = (i * 2654435761u) & 0x3C003C00u;
  __syncthreads();

  const int warpgroup = threadIdx.x / 128;
  // y: a bf16 pair (the decode's scale) and the ALU classes' other operand; z: zero (seed < 2^16).
  const std::uint32_t y = 0x3F803F81u ^ seed ^ threadIdx.x, z = seed >> 16;
  float acc[32];
  std::uint32_t f0[32], f1[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    acc[i] = 0.0f;
    f0[i] = 0x3F803F80u + threadIdx.x + i;
    f1[i] = f0[i] ^ 1u;
  }
  const long long start = clock64();
  if constexpr (P == Placement::same) {
    // The staged-token loop: the batch of one fragment set runs while the other set is made.
    for (int it = 0; it < kIterations; it += 2) {
      if constexpr (M != Mma::none) issue_batch<M>(s, warpgroup, f0, acc);
      make_piece<A>(s, it + 1, y, z, f1);
      finish_batch<M>(acc);
      if constexpr (M != Mma::none) issue_batch<M>(s, warpgroup, f1, acc);
      make_piece<A>(s, it + 2, y, z, f0);
      finish_batch<M>(acc);
    }
  } else if (warpgroup < 2) {
    for (int it = 0; it < 2 * kIterations; it += 2) {
      make_piece<A>(s, it, y, z, f0);
      make_piece<A>(s, it + 1, y, z, f1);
    }
  } else if constexpr (M != Mma::none) {
    for (int it = 0; it < kIterations; ++it) {
      issue_batch<M>(s, warpgroup, f0, acc);
      issue_batch<M>(s, warpgroup, f1, acc);
      finish_batch<M>(acc);
    }
  }
  __syncthreads();
  const long long stop = clock64();

  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < 32; ++i) sum += acc[i] + __uint_as_float((f0[i] ^ f1[i]) & 0x3FFFFFFFu);
  if (sum == 1.2345f) sink[threadIdx.x] = sum;  // keeps every result live; never true in practice
  if (threadIdx.x == 0) cycles[blockIdx.x] = stop - start;
}

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "wgmma_overlap: %s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

struct Buffers {
  int sms;
  float* sink;
  long long* cycles;
};

// SM cycles per iteration of the slowest CTA, after one warm-up launch.
template <Alu A, Mma M, Placement P>
double cycles_per_iteration(const Buffers& b) {
  constexpr int kBytes = sizeof(SharedTiles) + 1024;
  auto kernel = overlap_kernel<A, M, P>;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes), "shared memory size");
  long long slowest = 0;
  for (int launch = 0; launch < 2; ++launch) {
    kernel<<<b.sms, kThreads, kBytes>>>(7u + launch, b.sink, b.cycles);
    check(cudaGetLastError(), "launch");
    check(cudaDeviceSynchronize(), "run");
  }
  std::vector<long long> per_cta(b.sms);
  check(cudaMemcpy(per_cta.data(), b.cycles, sizeof(long long) * b.sms, cudaMemcpyDeviceToHost), "copy");
  for (const long long c : per_cta) slowest = c > slowest ? c : slowest;
  return static_cast<double>(slowest) / kIterations;
}

template <Alu A>
void alu_row(const Buffers& b, const char* name) {
  std::printf("| %-22s | %6.0f | %6.0f | %6.0f | %6.0f | %6.0f |\n", name, cycles_per_iteration<A, Mma::none, Placement::same>(b),
              cycles_per_iteration<A, Mma::rs_bf16, Placement::same>(b), cycles_per_iteration<A, Mma::rs_bf16, Placement::split>(b),
              cycles_per_iteration<A, Mma::ss_bf16, Placement::same>(b), cycles_per_iteration<A, Mma::rs_e4m3, Placement::same>(b));
}

}  // namespace

int main() {
  Buffers b{};
  check(cudaDeviceGetAttribute(&b.sms, cudaDevAttrMultiProcessorCount, 0), "SM count");
  check(cudaMalloc(&b.sink, sizeof(float) * kThreads), "sink");
  check(cudaMalloc(&b.cycles, sizeof(long long) * b.sms), "cycles");
  std::printf("SM cycles per iteration (four warpgroups of one CTA per SM; 1024 tensor cycles = 32 m64n64k16 at full rate)\n\n");
  std::printf("| wgmma alone            | RS bf16 %6.0f | SS bf16 %6.0f | RS e4m3 %6.0f |\n\n",
              cycles_per_iteration<Alu::none, Mma::rs_bf16, Placement::same>(b),
              cycles_per_iteration<Alu::none, Mma::ss_bf16, Placement::same>(b),
              cycles_per_iteration<Alu::none, Mma::rs_e4m3, Placement::same>(b));
  std::printf("| ALU work per piece     |  alone | + RS bf16 | split RS bf16 | + SS bf16 | + RS e4m3 |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: |\n");
  alu_row<Alu::nv16_decode>(b, "nv16 decode (kernel's)");
  alu_row<Alu::lop3>(b, "256 LOP3");
  alu_row<Alu::imad>(b, "256 IMAD");
  alu_row<Alu::ffma>(b, "256 FFMA");
  alu_row<Alu::hmul2>(b, "256 HMUL2.BF16");
  check(cudaFree(b.sink), "free");
  check(cudaFree(b.cycles), "free");
  return 0;
}
