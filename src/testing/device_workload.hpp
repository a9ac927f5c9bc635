// A HostWorkload mirrored on the GPU, with the workspace and timing the tool and GPU tests need.
// Only built with the CUDA back end (BSGEMM_WITH_CUDA).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "bsgemm/gemm.hpp"
#include "src/testing/workload.hpp"

namespace bsgemm::testing {

struct Timing {
  double median_us = 0, min_us = 0, max_us = 0;
  int iterations = 0;
};

class DeviceWorkload {
 public:
  DeviceWorkload() = default;
  DeviceWorkload(const DeviceWorkload&) = delete;
  DeviceWorkload& operator=(const DeviceWorkload&) = delete;
  DeviceWorkload(DeviceWorkload&& other) noexcept;
  DeviceWorkload& operator=(DeviceWorkload&& other) noexcept;
  ~DeviceWorkload();

  // Copies `host` to the device `copies` times (a benchmark rotates through them so that its
  // inputs are cold in L2), places the descriptions (group table, offsets, masked_m, alpha
  // arrays) in `descriptions` memory, and allocates the workspace `options` needs.
  static Status create(const HostWorkload& host, MemoryLocation descriptions, const RunOptions& options, int copies,
                       DeviceWorkload* out);

  const GemmArguments& args(int copy = 0) const { return copies_[copy].args; }
  void* workspace() const { return workspace_; }
  std::size_t workspace_bytes() const { return workspace_bytes_; }

  // Fills every copy's D with NaN.
  Status poison_output(cudaStream_t stream = nullptr);
  // Copies D of `copy` into the host workload's D buffers.
  Status download_output(HostWorkload& host, int copy = 0) const;
  // Runs once on copy `copy`.
  Status run(const RunOptions& options, int copy = 0, cudaStream_t stream = nullptr) const;
  // Median of `iterations` timed runs (CUDA events around each) after `warmup` runs; with
  // rotate, run i uses copy i % copies().
  Status time_runs(const RunOptions& options, int warmup, int iterations, bool rotate, Timing* out) const;

 private:
  struct Copy {
    GemmArguments args;
    std::vector<void*> allocations;  // one per host buffer, in the host workload's order
  };
  // Host-side descriptions of one copy (its pointer-array table with device pointers, and the MoE
  // arrays): what args points to when descriptions are host-resident, and the source of the device
  // copies otherwise.
  struct HostTables {
    std::vector<GroupProblem> groups;
    std::vector<float> alpha, beta;
    std::vector<std::int32_t> masked_m;
    std::vector<std::uint8_t> offsets;
  };
  std::vector<Copy> copies_;
  std::vector<HostTables> host_tables_;
  std::vector<std::size_t> outputs_;       // indices of the D buffers
  std::vector<std::size_t> output_bytes_;
  std::vector<void*> description_allocations_;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  void release();
};

}  // namespace bsgemm::testing
