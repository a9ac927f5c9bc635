// Running, timing and checking workloads for the tool's commands (see execution.hpp).
#include "tools/bsgemm/execution.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <utility>
#include <vector>

#include "src/cpu/host_groups.hpp"
#include "src/testing/json.hpp"
#include "tools/bsgemm/options.hpp"

namespace bsgemm::tool {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The fp64 reference's cost in thread-seconds (measured on the 2-core CI machine): about 0.5 ns a
// multiply-add and 1 ns a decoded value, of which it decodes B's columns once per block of rows of D and
// A's rows once per block of columns (cpu::kReferenceBlockRows, kReferenceBlockColumns). Up to 5
// thread-seconds it finishes in two or three seconds there, and in well under one on the GPU machine's 16
// cores.
constexpr double kSecondsPerMultiplyAdd = 0.5e-9, kSecondsPerDecode = 1e-9, kQuickExactThreadSeconds = 5.0;

// Cold-L2 timing: between two runs on the same copy, at least this many bytes of other copies are
// read (over 4x the 50 MB L2 of an H100 or H200), and all copies together stay under the budget.
constexpr double kColdL2RotationBytes = 256.0 * (1 << 20);
constexpr double kColdL2BudgetBytes = 16.0 * (1 << 30);

testing::Timing summarize(std::vector<double> samples_us) {
  testing::Timing timing;
  timing.iterations = static_cast<int>(samples_us.size());
  if (samples_us.empty()) return timing;
  std::sort(samples_us.begin(), samples_us.end());
  const std::size_t n = samples_us.size();
  timing.median_us = n % 2 ? samples_us[n / 2] : 0.5 * (samples_us[n / 2 - 1] + samples_us[n / 2]);
  timing.min_us = samples_us.front();
  timing.max_us = samples_us.back();
  return timing;
}

}  // namespace

// ---- Progress ---------------------------------------------------------------------------------------

Progress::Progress() : interactive_(isatty(STDERR_FILENO) != 0) {}

void Progress::begin(std::string_view step) {
  step_ = std::string(step);
  start_ = Clock::now();
  active_ = true;
  shown_percent_ = -1;
  if (interactive_) {
    std::fprintf(stderr, "\rbsgemm: %s...\033[K", step_.c_str());
    std::fflush(stderr);
  }
}

void Progress::update(std::int64_t done, std::int64_t total) {
  if (!interactive_ || !active_ || total <= 0) return;
  const int percent = static_cast<int>(100 * done / total);
  if (percent == shown_percent_) return;
  shown_percent_ = percent;
  std::fprintf(stderr, "\rbsgemm: %s... %3d%%\033[K", step_.c_str(), percent);
  std::fflush(stderr);
}

double Progress::end() {
  const double seconds = seconds_since(start_);
  if (active_) {
    std::fprintf(stderr, "%sbsgemm: %s: %.2f s%s\n", interactive_ ? "\r" : "", step_.c_str(), seconds,
                 interactive_ ? "\033[K" : "");
    std::fflush(stderr);
  }
  active_ = false;
  return seconds;
}

void Progress::abandon() {
  if (interactive_ && active_) std::fprintf(stderr, "\r\033[K");
  active_ = false;
}

void print_error(Progress& progress, const std::string& message) {
  progress.abandon();
  std::string line = message;
  std::replace(line.begin(), line.end(), '\n', ' ');
  std::fprintf(stderr, "bsgemm: error: %s\n", line.c_str());
  std::fflush(stderr);
}

int exit_code_for(const Status& status) {
  switch (status.code) {
    case StatusCode::invalid_argument:
    case StatusCode::not_supported:
    case StatusCode::device_error: return kExitUsage;
    default: return kExitRuntime;
  }
}

// ---- Executor ---------------------------------------------------------------------------------------

Executor::Executor() = default;
Executor::Executor(Executor&&) noexcept = default;
Executor& Executor::operator=(Executor&&) noexcept = default;
Executor::~Executor() = default;

Status Executor::create(testing::HostWorkload* host, const RunOptions& options, MemoryLocation descriptions, int copies,
                        AutoBackend auto_backend, Executor* out) {
  Executor executor;
  executor.host_ = host;
  executor.options_ = options;
  executor.options_.backend = resolve_backend(options.backend);
  executor.descriptions_ = descriptions;

  // The host-resident form of the problem: can_implement() on it names the group and field of an
  // error, and it runs before any device memory is allocated.
  GemmArguments host_args = host->args();
  host_args.descriptions = MemoryLocation::host;
  Status host_check = can_implement(host_args, executor.options_);
  if (options.backend == Backend::automatic && executor.options_.backend == Backend::cuda &&
      auto_backend == AutoBackend::fall_back_to_cpu && descriptions == MemoryLocation::host &&
      host_check.code == StatusCode::not_supported) {
    executor.options_.backend = Backend::cpu;
    executor.note_ = "the cuda back end cannot run this problem (" + host_check.message + ")";
    host_check = can_implement(host_args, executor.options_);
  }
  executor.backend_ = executor.options_.backend;
  if (!host_check.ok()) return host_check;

#if defined(BSGEMM_WITH_CUDA)
  if (executor.backend_ == Backend::cuda) {
    auto device = std::make_unique<testing::DeviceWorkload>();
    if (Status s = testing::DeviceWorkload::create(*host, descriptions, executor.options_, std::max(copies, 1),
                                                   device.get());
        !s.ok())
      return s;
    if (Status s = can_implement(device->args(0), executor.options_); !s.ok()) return s;
    executor.device_ = std::move(device);
    *out = std::move(executor);
    return Status::success();
  }
#else
  (void)copies;
#endif
  // Device-resident descriptions on the CPU back end: can_implement explains why not.
  if (descriptions == MemoryLocation::device) {
    GemmArguments args = host_args;
    args.descriptions = descriptions;
    if (Status s = can_implement(args, executor.options_); !s.ok()) return s;
  }
  *out = std::move(executor);
  return Status::success();
}

const GemmArguments& Executor::args() const {
#if defined(BSGEMM_WITH_CUDA)
  if (device_) return device_->args(0);
#endif
  return host_->args();
}

std::size_t workload_bytes(const testing::HostWorkload& host) {
  std::size_t bytes = 0;
  for (const testing::Buffer& buffer : host.buffers()) bytes += buffer.bytes;
  return bytes;
}

Status Executor::run_once() {
#if defined(BSGEMM_WITH_CUDA)
  if (device_) {
    if (Status s = device_->poison_output(); !s.ok()) return s;
    if (Status s = device_->run(options_); !s.ok()) return s;
    // Device-resident descriptions are validated by the kernels themselves; ask what they found.
    if (descriptions_ == MemoryLocation::device) {
      if (Status s = device_status(device_->workspace()); !s.ok()) return s;
    }
    return device_->download_output(*host_);
  }
#endif
  host_->poison_output();
  return run(host_->args(), options_, nullptr, 0);
}

Status Executor::time(int warmup, int iterations, bool rotate, Progress* progress, testing::Timing* out) const {
  *out = testing::Timing{};
  if (iterations <= 0) return Status::success();
#if defined(BSGEMM_WITH_CUDA)
  if (device_) return device_->time_runs(options_, warmup, iterations, rotate, out);
#else
  (void)rotate;
#endif
  // The CPU back end returns when done, so a wall clock around each call times it.
  const int total = warmup + iterations;
  std::vector<double> samples_us;
  samples_us.reserve(static_cast<std::size_t>(iterations));
  for (int i = 0; i < total; ++i) {
    const Clock::time_point start = Clock::now();
    if (Status s = run(host_->args(), options_, nullptr, 0); !s.ok()) return s;
    if (i >= warmup) samples_us.push_back(seconds_since(start) * 1e6);
    if (progress) progress->update(i + 1, total);
  }
  *out = summarize(std::move(samples_us));
  return Status::success();
}

int cold_l2_copies(std::size_t bytes_per_copy, int runs) {
  const double bytes = std::max<double>(static_cast<double>(bytes_per_copy), 1.0);
  double copies = 1.0 + std::ceil(kColdL2RotationBytes / bytes);
  copies = std::min(copies, static_cast<double>(std::max(runs, 1)));
  copies = std::min(copies, std::floor(kColdL2BudgetBytes / bytes));
  return static_cast<int>(std::max(copies, 1.0));
}

double multiply_adds(const testing::WorkloadSpec& spec) {
  double total = 0;
  for (const testing::GroupShape& g : spec.groups) total += static_cast<double>(g.m) * g.n * g.k * g.l;
  return total;
}

bool exact_reference_is_quick(const testing::WorkloadSpec& spec) {
  double decodes = 0;
  for (const testing::GroupShape& g : spec.groups) {
    const double m = g.m, n = g.n, k = g.k, l = g.l;
    const double b_passes = std::ceil(m / cpu::kReferenceBlockRows);
    const double a_passes = std::ceil(n / cpu::kReferenceBlockColumns);
    if (g.m > 0) decodes += l * (b_passes * n * k + a_passes * m * k);
  }
  return multiply_adds(spec) * kSecondsPerMultiplyAdd + decodes * kSecondsPerDecode <= kQuickExactThreadSeconds;
}

Status check_workload(const testing::HostWorkload& host, bool exact, std::optional<double> tolerance, int threads, int list_failures,
                      Progress& progress, CheckOutcome* out) {
  progress.begin(exact ? "computing expected values (fp64 reference)" : "computing expected values (CPU back end, fp32)");
  ExpectedOutput expected;
  if (Status s = testing::expected_output(host, exact, threads, &expected); !s.ok()) return s;
  progress.end();

  std::int64_t elements = 0;
  for (const std::vector<double>& group : expected) elements += static_cast<std::int64_t>(group.size());
  progress.begin("checking " + std::to_string(elements) + " elements");
  CheckOptions options;
  options.threads = threads;
  options.list_failures = list_failures;
  // check_output reads a tolerance of 0 as "the default"; the smallest positive double keeps the
  // user's 0 meaning "no error at all" (a normalised error is either 0 or far above it).
  if (tolerance) options.tolerance = *tolerance > 0 ? *tolerance : std::numeric_limits<double>::denorm_min();
  out->report = check_output(host.args(), expected, options);
  if (tolerance && *tolerance == 0) out->report.tolerance = 0;
  out->exact = exact;
  progress.end();
  return Status::success();
}

// ---- JSON output -------------------------------------------------------------------------------------

JsonObject& JsonObject::string(std::string_view key, std::string_view value) { return raw(key, testing::json::quote(value)); }

JsonObject& JsonObject::number(std::string_view key, double value) { return raw(key, testing::json::number(value)); }

JsonObject& JsonObject::boolean(std::string_view key, bool value) { return raw(key, value ? "true" : "false"); }

JsonObject& JsonObject::raw(std::string_view key, std::string json) {
  members_.emplace_back(testing::json::quote(key), std::move(json));
  return *this;
}

std::string JsonObject::render(int indent) const {
  const std::string outer(static_cast<std::size_t>(indent), ' ');
  const std::string inner = outer + "  ";
  std::string text = "{";
  for (std::size_t i = 0; i < members_.size(); ++i)
    text += (i ? ",\n" : "\n") + inner + members_[i].first + ": " + members_[i].second;
  text += members_.empty() ? "}" : "\n" + outer + "}";
  return text;
}

bool write_text_file(const std::string& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << text;
  file.close();
  return !file.fail();
}

std::string format_number(double value, const char* format) {
  if (!std::isfinite(value)) return "-";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, value);
  return buffer;
}

}  // namespace bsgemm::tool
