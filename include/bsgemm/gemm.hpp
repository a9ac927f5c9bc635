// Planning and running a grouped block-scaled GEMM.
//
//   bsgemm::GemmArguments args = ...;            // problem.hpp
//   bsgemm::RunOptions opts;                      // back end, optional tile override
//   if (auto s = bsgemm::can_implement(args, opts); !s.ok()) { print(s.message); }
//   std::size_t bytes = bsgemm::workspace_size(args, opts);   // fixed for a group count (plus, where the
//                                                             // staged path runs, bf16 copies of A and B)
//   bsgemm::run(args, opts, workspace, bytes, stream);
//
// The CUDA back end needs no host synchronisation and no device allocation inside run(). With
// host-resident descriptions run() builds the groups' records on the host and copies them, and
// the GEMM kernel is the only launch; with device-resident descriptions (MemoryLocation::device)
// a small prepare kernel builds them first, and the call can be captured in a CUDA graph and
// replayed with new sizes written to the same device arrays.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "bsgemm/problem.hpp"
#include "bsgemm/status.hpp"

// The one CUDA type of the API, declared exactly as the CUDA runtime declares it, so that this
// header compiles without the CUDA toolkit.
struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;

namespace bsgemm {

enum class Backend : std::uint8_t { automatic, cpu, cuda };

const char* to_string(Backend b);
bool parse(std::string_view text, Backend* out);  // "auto", "cpu", "cuda"

// How the CUDA back end multiplies block-scaled operands on Hopper (which has FP8 tensor cores only).
enum class KernelPath : std::uint8_t {
  automatic,  // the planner's choice (the faster one measured): staged for the MX and NV recipes where
              // groups are large and the workspace holds the copies, else fp8 for fp8-block128, mxfp8 and
              // mxfp8 x mxfp4, bf16 for the rest
  fp8,        // FP8 wgmma, scales applied in fp32 per scale block; FP4 widened exactly to e4m3 (MX only):
              // fp8-block128, mxfp8, mxfp4, mxfp8 x mxfp4
  bf16,       // operands decoded to bf16 with their scales folded in (exact), BF16 wgmma: mxfp8 and the
              // recipes with FP4 weights (nvfp4, mxfp4, mxfp8 or fp8-block128 x mxfp4 or nvfp4); at
              // decode shapes FP4 weights go straight into wgmma's registers, and fp8-block128 tokens are
              // staged as f16 with their scales folded in (each product rounded to f16: README "Accuracy")
  staged,     // mxfp8, mxfp4, nvfp4, mxfp8 x FP4 in the MoE forms: A and B staged in the workspace
              // as bf16 with their scales folded in (exact, by a memory-bound pass), then BF16 wgmma over the
              // whole K in fp32 (no promotion)
};

const char* to_string(KernelPath p);
bool parse(std::string_view text, KernelPath* out);  // "auto", "fp8", "bf16", "staged"

struct RunOptions {
  Backend backend = Backend::automatic;
  KernelPath path = KernelPath::automatic;  // CUDA
  int tile_m = 0, tile_n = 0;        // CUDA: output tile per CTA; 0 lets the planner choose
  int cluster_m = 1, cluster_n = 1;  // CUDA: thread-block cluster shape; this version runs 1x1 only
  int cpu_threads = 0;               // CPU: worker threads; 0 = all hardware threads
};

// True when this build contains the sm_90a kernels.
bool cuda_backend_built();
// True when the CUDA back end is built and a compute-capability 9.0 GPU is visible.
bool cuda_device_available();
// Back end that `requested` means here: automatic picks cuda when available, else cpu.
Backend resolve_backend(Backend requested);

// Checks everything that can be checked on the host, before anything is launched or written.
// Host-resident descriptions are checked group by group; the error names the group and field.
Status can_implement(const GemmArguments& args, const RunOptions& options);

// Bytes of workspace for the plan run() would take. It depends on the group count and the device only
// (never on M, N, K), so one allocation serves every later call with as many groups or fewer, except
// where the staged path runs (KernelPath::staged, or automatic where the planner stages: the MX and NV
// recipes with large groups in the MoE forms): there it adds 2 bytes per element of A and B for their
// bf16 copies; and where the register-operand kernel stages the tokens (decode-sized groups with FP4
// weights in the MoE forms): 2 bytes per element of A, rows padded to 64 of K. Under automatic (and bf16),
// run() given fewer bytes than that (but at least the unstaged plan's) takes the unstaged kernels.
std::size_t workspace_size(const GemmArguments& args, const RunOptions& options);

// Runs the grouped GEMM. Calls can_implement() first and writes nothing when it fails. For the
// CUDA back end the call is asynchronous on `stream`; for the CPU back end it returns when done.
Status run(const GemmArguments& args, const RunOptions& options, void* workspace, std::size_t workspace_bytes,
           cudaStream_t stream = nullptr);

// For the CUDA back end with device-resident descriptions: waits for `stream` and reports what
// the device-side validation of the last run() that used this workspace found. When it failed,
// the kernels wrote nothing, and the status names the group and field.
Status device_status(const void* workspace, cudaStream_t stream = nullptr);

// One line that describes the kernel configuration run() would use (tile, cluster, stages, path).
// Setting the environment variable BSGEMM_PRINT_CONFIG=1 prints it on every run().
std::string describe_plan(const GemmArguments& args, const RunOptions& options);

}  // namespace bsgemm
