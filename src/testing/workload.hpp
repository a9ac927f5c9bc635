// Random grouped-GEMM workloads for the tests, the tool and the benchmarks (not installed).
//
// A HostWorkload owns host buffers for every tensor of every group (each buffer 16-byte aligned),
// filled with random fp32 data quantized by the library's own quantizers, and a GemmArguments
// that points into them. DeviceWorkload (device_workload.hpp) mirrors one on a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bsgemm/problem.hpp"
#include "bsgemm/quantize.hpp"
#include "bsgemm/reference.hpp"
#include "bsgemm/status.hpp"

namespace bsgemm::testing {

struct GroupShape {
  std::int32_t m = 0, n = 0, k = 0, l = 1;
};

struct WorkloadSpec {
  OperandType a_type = make_operand_type(Recipe::nvfp4);
  OperandType b_type = make_operand_type(Recipe::nvfp4);
  Major a_major = Major::k, b_major = Major::k, d_major = Major::n;
  DataType d_type = DataType::bf16;
  GroupLayout layout = GroupLayout::pointer_array;

  // pointer_array: every group's shape. contiguous / masked: (m_g, n, k, 1), n and k equal in all.
  std::vector<GroupShape> groups;

  // MoE forms: the `rows` of MoeGroups; 0 means sum of m_g (contiguous) or max m_g (masked).
  std::int64_t moe_rows = 0;
  bool offsets_start_with_zero = false;
  IndexType offsets_type = IndexType::i32;

  // A and B are drawn times 2^a_exponent and 2^b_exponent: the ends of the scale range (block scales at
  // the ue8m0 limits, decoded elements that are bf16 subnormals).
  int a_exponent = 0, b_exponent = 0;
  float alpha = 1.0f;  // nvfp4 global scales are folded in per group
  float beta = 0.0f;   // nonzero: C is drawn and has_c is set
  // Leading dimensions larger than needed (and batch strides with gaps), to exercise strides.
  bool padded_strides = false;
  std::uint64_t seed = 1;
  QuantizeOptions quantize;
  int threads = 0;  // 0: all hardware threads
};

// A host buffer, 64-byte aligned.
struct Buffer {
  std::string name;  // "A[3]", "SFB[0]", "offsets", ...
  std::size_t bytes = 0;
  std::shared_ptr<std::uint8_t[]> data;
  std::uint8_t* get() const { return data.get(); }
};

// The fp32 values of A and B that workloads draw, kept for later workloads of the same shapes and seed. A row's
// values depend only on the seed, the operand, its group, batch and row, K and the operand's exponent, never on the
// recipe, the scale layout or the group layout, so the benchmark's recipes of one case draw them once and only
// quantize them again (drawing is most of a workload's making). Holds at most `max_bytes` of values: an operand
// matrix that does not fit is drawn each time. Not thread-safe: one create() at a time.
class DrawCache {
 public:
  explicit DrawCache(std::int64_t max_bytes) : max_bytes_(max_bytes) {}
  DrawCache(const DrawCache&) = delete;
  DrawCache& operator=(const DrawCache&) = delete;

  std::int64_t bytes() const { return bytes_; }
  // Matrices served from the cache and matrices drawn into it, over every create() so far.
  std::int64_t hits() const { return hits_; }
  std::int64_t stores() const { return stores_; }

 private:
  friend class HostWorkload;
  // One operand matrix's identity: everything its values depend on.
  struct Key {
    std::uint64_t seed = 0;
    int operand = 0;  // Operand as an int
    int group = 0;
    std::int64_t batch = 0, k = 0;
    int exponent = 0;
    bool operator==(const Key&) const = default;
  };
  struct Entry {
    Key key;
    std::int64_t rows = 0;  // rows [0, rows) are held, row-major with ld key.k
    // Left uninitialised until the draw's threads write it, so that they, not one thread, touch its pages first.
    std::unique_ptr<float[]> values;
    bool complete = false;  // false while the create() that draws it runs, and if it fails
  };
  // The complete entry of `key`, or null.
  const Entry* find(const Key& key) const;
  // A new entry of `rows` x key.k values for `key`, or null when the key is held already or the values do not fit.
  Entry* reserve(const Key& key, std::int64_t rows);
  static std::int64_t bytes_of(const Entry& entry) {
    return entry.rows * entry.key.k * static_cast<std::int64_t>(sizeof(float));
  }
  // After the create() that reserved entries: keeps them when it drew them all, else gives them back.
  void finish(bool drawn);

  std::vector<Entry> entries_;
  std::int64_t max_bytes_ = 0, bytes_ = 0, hits_ = 0, stores_ = 0;
};

class HostWorkload {
 public:
  HostWorkload() = default;
  // Move-only: args() points into this object's own tables (the group array, the per-group alpha
  // and masked_m arrays), which a move carries along and a copy would not.
  HostWorkload(HostWorkload&&) noexcept = default;
  HostWorkload& operator=(HostWorkload&&) noexcept = default;
  HostWorkload(const HostWorkload&) = delete;
  HostWorkload& operator=(const HostWorkload&) = delete;

  // Draws and quantizes every tensor; fails (with can_implement's message) on a bad spec. With a cache, A's and B's
  // values come from it where it holds them and go into it where they fit; the workload is byte for byte the one
  // made without.
  static Status create(const WorkloadSpec& spec, HostWorkload* out, DrawCache* cache = nullptr);

  const WorkloadSpec& spec() const { return spec_; }
  // Host-resident arguments pointing into this workload's buffers.
  const GemmArguments& args() const { return args_; }
  // Every buffer; outputs are those named "D[...]" (or "D" for the MoE forms).
  const std::vector<Buffer>& buffers() const { return buffers_; }
  std::vector<Buffer>& buffers() { return buffers_; }

  // Fills D with NaN (all bits set, a NaN in f32, f16 and bf16), so unwritten elements fail.
  void poison_output();
  // 2 * sum of M_g * N_g * K_g * L_g.
  double flops() const;
  // Bytes a perfect kernel moves: A, B and their scales read once, C read, D written.
  double min_bytes() const;

 private:
  WorkloadSpec spec_;
  GemmArguments args_;
  std::vector<Buffer> buffers_;
  std::vector<GroupProblem> groups_;  // pointer_array table that args_.groups points to
  std::vector<float> moe_alpha_;      // per-group alpha of the MoE forms
  std::vector<std::int32_t> masked_m_;
};

// Whether a buffer holds D (named "D" or "D[g]").
bool is_output_buffer(const Buffer& buffer);

// After poison_output() and a run: the bytes of the D buffers that belong to no element of any group
// but no longer hold the poison. Empty when there are none, otherwise a sentence naming the buffer,
// the count and the first such byte.
std::string written_outside_groups(const HostWorkload& workload);

// The expected output of a workload: from the fp64 reference when `exact`, otherwise from the CPU
// back end run with fp32 output (fast enough for the largest benchmark cases; its own error,
// K * 2^-24 at worst, is far below every tolerance check_output uses).
Status expected_output(const HostWorkload& workload, bool exact, int threads, ExpectedOutput* out);

}  // namespace bsgemm::testing
