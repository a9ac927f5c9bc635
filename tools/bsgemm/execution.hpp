// What `bsgemm run` and `bsgemm bench` share: progress on stderr, running a workload on the CPU or
// CUDA back end, timing it, and checking its output.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bsgemm/gemm.hpp"
#include "bsgemm/reference.hpp"
#include "bsgemm/status.hpp"
#include "src/testing/device_workload.hpp"
#include "src/testing/workload.hpp"

namespace bsgemm::tool {

// Step-by-step progress on stderr. When stderr is a terminal, a step shows as it starts and is
// updated with a percentage; otherwise each step is printed once, when it has finished, so that a
// log stays short and a step that fails leaves nothing on stderr but its error line.
class Progress {
 public:
  Progress();
  void begin(std::string_view step);
  void update(std::int64_t done, std::int64_t total);
  // Prints "bsgemm: <step>: <seconds> s" and returns the step's duration in seconds.
  double end();
  // Clears a half-written interactive line, so that an error message starts on a clean line.
  void abandon();

 private:
  bool interactive_ = false;
  bool active_ = false;
  int shown_percent_ = -1;  // the percentage on screen, so that a line is redrawn only when it changes
  std::string step_;
  std::chrono::steady_clock::time_point start_;
};

// "bsgemm: error: <message>" on stderr (one line), after clearing any progress line.
void print_error(Progress& progress, const std::string& message);

// The exit code a failed Status stands for: a description or back end the user chose that bsgemm
// cannot run is a usage error (2), anything else a runtime error (3).
int exit_code_for(const Status& status);

// What --backend auto does when a GPU is usable but the CUDA back end cannot run the problem
// (can_implement says not_supported, e.g. a recipe it has no kernel for).
enum class AutoBackend {
  fall_back_to_cpu,  // run on the CPU and say why (bsgemm run: "no options" must always work)
  keep_cuda,         // report the error (bsgemm bench: a benchmark of the GPU must not time the CPU)
};

// Runs a HostWorkload on one back end: in place for the CPU, through a DeviceWorkload for CUDA.
class Executor {
 public:
  Executor();
  Executor(Executor&&) noexcept;
  Executor& operator=(Executor&&) noexcept;
  ~Executor();

  // Picks the back end (see AutoBackend), checks that it can run the workload (can_implement,
  // before any device memory is allocated) and, for CUDA, mirrors the workload on the device in
  // `copies` copies (timing rotates through them for a cold L2). `host` must outlive the executor.
  static Status create(testing::HostWorkload* host, const RunOptions& options, MemoryLocation descriptions, int copies,
                       AutoBackend auto_backend, Executor* out);

  Backend backend() const { return backend_; }
  // The options run() receives: those given, with the back end resolved.
  const RunOptions& options() const { return options_; }
  // Why the back end differs from what --backend auto would pick, or empty.
  const std::string& note() const { return note_; }
  // The arguments run() receives (device pointers for CUDA).
  const GemmArguments& args() const;

  // Poisons D (NaN), runs once and leaves D in the host workload's buffers.
  Status run_once();
  // `warmup` untimed runs, then the median of `iterations` timed ones. With `rotate` (CUDA), run i
  // uses copy i % copies. Returns the samples in microseconds through `out`.
  Status time(int warmup, int iterations, bool rotate, Progress* progress, testing::Timing* out) const;

 private:
  testing::HostWorkload* host_ = nullptr;
  RunOptions options_;
  MemoryLocation descriptions_ = MemoryLocation::host;
  Backend backend_ = Backend::cpu;
  std::string note_;
#if defined(BSGEMM_WITH_CUDA)
  std::unique_ptr<testing::DeviceWorkload> device_;
#endif
};

// Bytes of every buffer of a workload (one copy of its inputs and outputs).
std::size_t workload_bytes(const testing::HostWorkload& host);

// Copies of a workload needed so that each timed run reads inputs no earlier run left in L2, bounded
// by the number of runs and by a memory budget.
int cold_l2_copies(std::size_t bytes_per_copy, int runs);

// Sum of M * N * K * L over the groups.
double multiply_adds(const testing::WorkloadSpec& spec);

// Whether the fp64 reference checks this workload in a few seconds on the 2-core CI machine.
bool exact_reference_is_quick(const testing::WorkloadSpec& spec);

struct CheckOutcome {
  CheckReport report;
  bool exact = false;  // expected values from the fp64 reference (else the CPU back end, fp32 output)
};

// Expected values (exact or fast) and check_output of the D now in the host workload's buffers.
// `tolerance` 0 means exactly that (every element equal to the expected value), unlike
// CheckOptions::tolerance, where 0 selects the default bound. list_failures: CheckOptions::list_failures.
Status check_workload(const testing::HostWorkload& host, bool exact, std::optional<double> tolerance, int threads, int list_failures,
                      Progress& progress, CheckOutcome* out);

// One JSON object built member by member, for the --json outputs. The member functions have
// distinct names so that a string literal can never pick the boolean overload.
class JsonObject {
 public:
  JsonObject& string(std::string_view key, std::string_view value);
  JsonObject& number(std::string_view key, double value);  // NaN and inf are written as null
  JsonObject& boolean(std::string_view key, bool value);
  JsonObject& raw(std::string_view key, std::string json);  // an already rendered JSON value
  // The object on one line per member, members indented by `indent` + 2 spaces.
  std::string render(int indent = 0) const;

 private:
  std::vector<std::pair<std::string, std::string>> members_;
};

// Writes `text` to `path`; false when the file cannot be written.
bool write_text_file(const std::string& path, const std::string& text);

// `value` printed with the printf `format` (one double); "-" when it is not finite (a timing or rate
// that does not exist).
std::string format_number(double value, const char* format);

}  // namespace bsgemm::tool
