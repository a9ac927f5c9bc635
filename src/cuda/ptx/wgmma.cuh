// wgmma: warpgroup matrix multiply-accumulate (PTX ISA 8.0, sm_90a).
#pragma once

#include <cstdint>

#include "src/cuda/ptx/fp8_kind.hpp"
#include "src/cuda/ptx/mbarrier.cuh"

namespace bsgemm::ptx {

// wgmma.fence.sync.aligned;  before the first wgmma of a batch, after registers it reads were written.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }

// wgmma.commit_group.sync.aligned;  closes the batch of wgmma issued since the last commit.
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }

// wgmma.wait_group.sync.aligned N;  waits until at most N committed batches are still in flight.
template <int Pending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(Pending) : "memory");
}

// Tells the compiler that the accumulators are read and written here, so that no access to them moves
// across an asynchronous wgmma or its wait (the asm statements above do not name the registers).
template <int Count>
__device__ __forceinline__ void fence_accumulators(float (&d)[Count]) {
#pragma unroll
  for (int i = 0; i < Count; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Shared-memory matrix descriptor of a K-major operand tile stored with the 128-byte swizzle: rows of
// 128 bytes, 8-row swizzle atoms of 1024 bytes (the stride-dimension byte offset), the tile 1024-byte
// aligned (base offset 0). The leading-dimension offset is unused by K-major swizzled layouts.
//   bits  0-13: start address >> 4     bits 16-29: leading byte offset >> 4
//   bits 32-45: stride byte offset >> 4 bits 49-51: base offset        bits 62-63: swizzle (1 = 128B)
__device__ __forceinline__ std::uint64_t make_smem_desc_sw128(const void* tile) {
  const std::uint64_t address = smem_address(tile);
  return ((address & 0x3FFFFu) >> 4) | (std::uint64_t{1} << 16) | (std::uint64_t{1024 >> 4} << 32) |
         (std::uint64_t{1} << 62);
}

// The descriptor of the same tile advanced by `bytes` along K inside the 128-byte rows (the hardware
// applies the swizzle to the absolute address, so a K step is a plain start-address step).
__device__ __forceinline__ std::uint64_t advance_desc(std::uint64_t desc, std::uint32_t bytes) {
  return desc + (bytes >> 4);
}

template <int N, Fp8Kind A, Fp8Kind B>
struct WgmmaFp8;

template <int N>
struct WgmmaFp8RegisterA;

#include "src/cuda/ptx/wgmma_fp8.inc"

template <int N>
struct WgmmaBf16;

template <int N>
struct WgmmaBf16RegisterA;

#include "src/cuda/ptx/wgmma_bf16.inc"

template <int N>
struct WgmmaF16RegisterA;

#include "src/cuda/ptx/wgmma_f16.inc"

}  // namespace bsgemm::ptx
