// TMA (cp.async.bulk.tensor) loads and stores, and device-side tensor-map edits (PTX ISA 8.0 / 8.3, sm_90 / sm_90a).
#pragma once

#include <cuda.h>
#include <cuda/ptx>

#include <cstdint>

namespace bsgemm::ptx {

// cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
//     [dstMem], [tensorMap, {c0, c1, c2}], [mbar];
// Elements outside the tensor are written as zeros; the barrier is credited with the whole box.
__device__ __forceinline__ void tma_load_3d(void* smem_dst, const CUtensorMap* map, std::int32_t c0, std::int32_t c1,
                                            std::int32_t c2, std::uint64_t* bar) {
  const std::int32_t coords[3] = {c0, c1, c2};
  ::cuda::ptx::cp_async_bulk_tensor(::cuda::ptx::space_cluster, ::cuda::ptx::space_global, smem_dst, map, coords, bar);
}

// cp.async.bulk.prefetch.tensor.3d.L2.global.tile [tensorMap, {c0, c1, c2}];
// Brings a box of the tensor into L2 for a load that follows; completes on its own, with nothing to wait for.
__device__ __forceinline__ void tma_prefetch_3d(const CUtensorMap* map, std::int32_t c0, std::int32_t c1, std::int32_t c2) {
  asm volatile("cp.async.bulk.prefetch.tensor.3d.L2.global.tile [%0, {%1, %2, %3}];" ::"l"(reinterpret_cast<std::uint64_t>(map)),
               "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}

// cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [tensorMap, {c0, c1, c2}], [srcMem];
// Stores a box from shared memory (laid out as the map's swizzle) into the tensor; elements outside the
// tensor are skipped. Completes asynchronously: commit it to a bulk group and wait before the source is
// written again (bulk_wait_group_read) or before the thread exits (bulk_wait_group).
__device__ __forceinline__ void tma_store_3d(const CUtensorMap* map, std::int32_t c0, std::int32_t c1, std::int32_t c2,
                                             const void* smem_src) {
  const std::int32_t coords[3] = {c0, c1, c2};
  ::cuda::ptx::cp_async_bulk_tensor(::cuda::ptx::space_global, ::cuda::ptx::space_shared, map, coords, smem_src);
}

// cp.async.bulk.commit_group;  closes this thread's bulk async-group of the stores issued since the last one.
__device__ __forceinline__ void bulk_commit_group() { ::cuda::ptx::cp_async_bulk_commit_group(); }

// cp.async.bulk.wait_group.read N;  until at most N of this thread's bulk groups still read their sources.
template <int N>
__device__ __forceinline__ void bulk_wait_group_read() {
  ::cuda::ptx::cp_async_bulk_wait_group_read(::cuda::ptx::n32_t<N>{});
}

// cp.async.bulk.wait_group N;  until at most N of this thread's bulk groups are incomplete (writes visible).
template <int N>
__device__ __forceinline__ void bulk_wait_group() {
  ::cuda::ptx::cp_async_bulk_wait_group(::cuda::ptx::n32_t<N>{});
}

// prefetch.tensormap [addr];  pulls a tensor map into the descriptor cache ahead of its first use.
__device__ __forceinline__ void prefetch_tensormap(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<std::uint64_t>(map)) : "memory");
}

// tensormap.replace.tile.global_address.global.b1024.b64 [map], address;
__device__ __forceinline__ void tensormap_replace_address(CUtensorMap* map, const void* address) {
  ::cuda::ptx::tensormap_replace_global_address(::cuda::ptx::space_global, map,
                                               static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(address)));
}

// tensormap.replace.tile.global_dim.global.b1024.b32 [map], ord, extent;
template <int Ordinal>
__device__ __forceinline__ void tensormap_replace_dim(CUtensorMap* map, std::uint32_t extent) {
  ::cuda::ptx::tensormap_replace_global_dim(::cuda::ptx::space_global, map, ::cuda::ptx::n32_t<Ordinal>{},
                                           static_cast<std::int32_t>(extent));
}

// tensormap.replace.tile.global_stride.global.b1024.b64 [map], ord, stride_bytes;
// Ordinal 0 is the stride of dimension 1 (dimension 0 is contiguous). The value is in bytes.
template <int Ordinal>
__device__ __forceinline__ void tensormap_replace_stride(CUtensorMap* map, std::uint64_t stride_bytes) {
  ::cuda::ptx::tensormap_replace_global_stride(::cuda::ptx::space_global, map, ::cuda::ptx::n32_t<Ordinal>{},
                                              static_cast<std::int64_t>(stride_bytes));
}

// fence.proxy.tensormap::generic.release.gpu;  orders this thread's edits of tensor maps in global memory
// before their use through the tensormap proxy by any thread of the GPU.
__device__ __forceinline__ void fence_tensormap_release() {
  ::cuda::ptx::fence_proxy_tensormap_generic(::cuda::ptx::sem_release, ::cuda::ptx::scope_gpu);
}

// fence.proxy.tensormap::generic.acquire.gpu [map], 128;  before the first TMA that uses an edited map.
__device__ __forceinline__ void fence_tensormap_acquire(const CUtensorMap* map) {
  ::cuda::ptx::fence_proxy_tensormap_generic(::cuda::ptx::sem_acquire, ::cuda::ptx::scope_gpu, map, ::cuda::ptx::n32_t<128>{});
}

}  // namespace bsgemm::ptx
