// The public entry points: pick the back end, validate, dispatch.
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "bsgemm/gemm.hpp"
#include "src/core/validate.hpp"
#include "src/cpu/backend.hpp"
#include "src/cpu/parallel_for.hpp"
#if defined(BSGEMM_WITH_CUDA)
#include "src/cuda/cuda_backend.hpp"
#endif

namespace bsgemm {

bool cuda_backend_built() {
#if defined(BSGEMM_WITH_CUDA)
  return true;
#else
  return false;
#endif
}

bool cuda_device_available() {
#if defined(BSGEMM_WITH_CUDA)
  return cuda::device_available();
#else
  return false;
#endif
}

Backend resolve_backend(Backend requested) {
  if (requested != Backend::automatic) return requested;
  return cuda_device_available() ? Backend::cuda : Backend::cpu;
}

namespace {

Status check_backend(const GemmArguments& args, const RunOptions& options, Backend backend) {
  if (backend == Backend::cuda && !cuda_backend_built())
    return Status::error(StatusCode::not_supported, -1, "backend",
                         "this build of bsgemm has no CUDA back end (it was built without nvcc)");
  if (backend == Backend::cuda && !cuda_device_available())
    return Status::error(StatusCode::not_supported, -1, "backend",
                         "the CUDA back end needs a compute-capability 9.0 GPU (H100/H200), and none is visible");
  if (backend == Backend::cpu) {
    if (args.descriptions == MemoryLocation::device)
      return Status::error(StatusCode::not_supported, -1, "descriptions",
                           "device-resident descriptions need the cuda back end; the cpu back end reads host memory");
    if (options.tile_m != 0 || options.tile_n != 0)
      return Status::error(StatusCode::invalid_argument, -1, "tile",
                           "a tile shape (--mma-tiler-mn) applies to the cuda back end only");
    if (options.cluster_m != 1 || options.cluster_n != 1)
      return Status::error(StatusCode::invalid_argument, -1, "cluster",
                           "a cluster shape (--cluster-shape-mn) applies to the cuda back end only");
    if (options.path != KernelPath::automatic)
      return Status::error(StatusCode::invalid_argument, -1, "path",
                           "a kernel path (--kernel-path) applies to the cuda back end only");
  }
  if (options.cpu_threads < 0)
    return Status::error(StatusCode::invalid_argument, -1, "cpu_threads", "must not be negative");
  return Status::success();
}

int cpu_threads(const RunOptions& options) { return cpu::resolve_thread_count(options.cpu_threads); }

}  // namespace

Status can_implement(const GemmArguments& args, const RunOptions& options) {
  const Backend backend = resolve_backend(options.backend);
  if (Status s = check_backend(args, options, backend); !s.ok()) return s;
  if (Status s = core::validate(args); !s.ok()) return s;
#if defined(BSGEMM_WITH_CUDA)
  if (backend == Backend::cuda) return cuda::can_implement(args, options);
#endif
  return Status::success();
}

std::size_t workspace_size(const GemmArguments& args, const RunOptions& options) {
#if defined(BSGEMM_WITH_CUDA)
  if (resolve_backend(options.backend) == Backend::cuda) return cuda::workspace_size(args, options);
#else
  (void)args;
  (void)options;
#endif
  return 0;
}

Status run(const GemmArguments& args, const RunOptions& options, void* workspace, std::size_t workspace_bytes,
           cudaStream_t stream) {
  if (Status s = can_implement(args, options); !s.ok()) return s;
  const Backend backend = resolve_backend(options.backend);
  if (const char* print = std::getenv("BSGEMM_PRINT_CONFIG"); print && std::strcmp(print, "0") != 0)
    std::cerr << "bsgemm: " << describe_plan(args, options) << "\n";
#if defined(BSGEMM_WITH_CUDA)
  if (backend == Backend::cuda) return cuda::run(args, options, workspace, workspace_bytes, stream);
#else
  (void)workspace;
  (void)workspace_bytes;
  (void)stream;
#endif
  (void)backend;
  return cpu::run(args, cpu_threads(options));
}

Status device_status(const void* workspace, cudaStream_t stream) {
#if defined(BSGEMM_WITH_CUDA)
  return cuda::device_status(workspace, stream);
#else
  (void)workspace;
  (void)stream;
  return Status::error(StatusCode::not_supported, -1, "backend", "this build of bsgemm has no CUDA back end");
#endif
}

std::string describe_plan(const GemmArguments& args, const RunOptions& options) {
#if defined(BSGEMM_WITH_CUDA)
  if (resolve_backend(options.backend) == Backend::cuda) return cuda::describe_plan(args, options);
#else
  (void)args;
#endif
  return "cpu back end, " + std::to_string(cpu_threads(options)) + " threads, fp32 panels";
}

}  // namespace bsgemm
