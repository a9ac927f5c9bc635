// The CPU back end against the fp64 reference: wall time of each at M = N = K = 1024 (one group,
// bf16 output), per recipe, the back end on every hardware thread and on one. The reference runs on
// every hardware thread whatever --threads says. Results: bench/results/cpu.md.
//
//   build/bsgemm_cpu_bench [--size S] [--runs R] [--reference-runs Q] [--threads T]
//
// Each time is the median of its runs (std::chrono::steady_clock around one call). Before timing,
// the back end's output is checked against the reference, so a fast wrong answer cannot pass.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bsgemm/bsgemm.hpp"
#include "src/testing/workload.hpp"

namespace {

using bsgemm::Status;

struct Settings {
  int size = 1024;
  int runs = 7;
  int reference_runs = 3;
  int threads = 0;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

template <class Fn>
double seconds(Fn&& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

bool parse_settings(int argc, char** argv, Settings* s) {
  for (int i = 1; i < argc; ++i) {
    const std::string name = argv[i];
    if (i + 1 >= argc) return false;
    const int value = std::atoi(argv[++i]);
    if (name == "--size" && value > 0) {
      s->size = value;
    } else if (name == "--runs" && value > 0) {
      s->runs = value;
    } else if (name == "--reference-runs" && value > 0) {
      s->reference_runs = value;
    } else if (name == "--threads" && value >= 0) {
      s->threads = value;
    } else {
      return false;
    }
  }
  return true;
}

int fail(const char* what, const Status& s) {
  std::fprintf(stderr, "bsgemm_cpu_bench: %s: %s\n", what, s.message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Settings settings;
  if (!parse_settings(argc, argv, &settings)) {
    std::fprintf(stderr, "usage: %s [--size S] [--runs R] [--reference-runs Q] [--threads T]\n", argv[0]);
    return 2;
  }
  const unsigned hardware = std::thread::hardware_concurrency();
  const int threads = settings.threads > 0 ? settings.threads : static_cast<int>(hardware == 0 ? 1 : hardware);
  std::printf(
      "M = N = K = %d, one group, bf16 output, %d threads; median of %d back-end runs and %d reference runs\n\n",
      settings.size, threads, settings.runs, settings.reference_runs);
  std::printf("| recipe | reference (fp64, %u threads) | back end, %d threads | GFLOP/s | speed-up | back end, 1 thread |"
              " GFLOP/s | speed-up |\n",
              hardware == 0 ? 1u : hardware, threads);
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");

  for (const bsgemm::Recipe recipe : {bsgemm::Recipe::nvfp4, bsgemm::Recipe::mxfp8, bsgemm::Recipe::fp8_block128}) {
    bsgemm::testing::WorkloadSpec spec;
    spec.a_type = spec.b_type = bsgemm::make_operand_type(recipe);
    spec.d_type = bsgemm::DataType::bf16;
    spec.groups = {{settings.size, settings.size, settings.size, 1}};
    spec.seed = 1024;
    spec.threads = threads;
    bsgemm::testing::HostWorkload workload;
    if (Status s = bsgemm::testing::HostWorkload::create(spec, &workload); !s.ok())
      return fail("creating the workload", s);

    bsgemm::RunOptions options;
    options.backend = bsgemm::Backend::cpu;
    options.cpu_threads = threads;
    Status status;
    bsgemm::ExpectedOutput expected;
    std::vector<double> reference_times;
    for (int r = 0; r < settings.reference_runs; ++r)
      reference_times.push_back(seconds([&] { status = bsgemm::reference_gemm(workload.args(), &expected); }));
    if (!status.ok()) return fail("the reference", status);

    // One untimed run, checked, then the timed runs.
    workload.poison_output();
    if (Status s = bsgemm::run(workload.args(), options, nullptr, 0); !s.ok()) return fail("the cpu back end", s);
    bsgemm::CheckOptions check_options;
    check_options.threads = threads;
    const bsgemm::CheckReport report = bsgemm::check_output(workload.args(), expected, check_options);
    if (!report.pass) {
      std::fprintf(stderr, "bsgemm_cpu_bench: %s: the cpu back end's output is wrong: %s\n", bsgemm::to_string(recipe),
                   report.summary().c_str());
      return 1;
    }
    // The median time of `runs` back-end runs on `thread_count` threads (a failed run is kept in
    // `failure`).
    Status failure;
    auto time_backend = [&](int thread_count) {
      bsgemm::RunOptions timed = options;
      timed.cpu_threads = thread_count;
      std::vector<double> times;
      for (int r = 0; r < settings.runs; ++r)
        times.push_back(seconds([&] {
          if (Status s = bsgemm::run(workload.args(), timed, nullptr, 0); !s.ok()) failure = s;
        }));
      return median(times);
    };
    const double backend = time_backend(threads);
    const double backend_one_thread = time_backend(1);
    if (!failure.ok()) return fail("the cpu back end", failure);

    const double reference = median(reference_times), flops = workload.flops();
    std::printf("| %s | %.2f s | %.1f ms | %.1f | %.0fx | %.1f ms | %.1f | %.0fx |\n", bsgemm::to_string(recipe),
                reference, backend * 1e3, flops / backend * 1e-9, reference / backend, backend_one_thread * 1e3,
                flops / backend_one_thread * 1e-9, reference / backend_one_thread);
    std::fflush(stdout);
  }
  return 0;
}
