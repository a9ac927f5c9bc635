// The bsgemm command-line tool: `bsgemm run`, `bsgemm bench`, `bsgemm info`.
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <iostream>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bsgemm/bsgemm.hpp"
#include "tools/bsgemm/commands.hpp"
#include "tools/bsgemm/options.hpp"

#if defined(BSGEMM_WITH_CUDA)
#include <cuda_runtime.h>
#endif

namespace bsgemm::tool {
namespace {

constexpr std::string_view kUsage =
    "usage: bsgemm <command> [options]\n"
    "\n"
    "Grouped GEMM on block-scaled FP8/FP4 inputs (MXFP8, MXFP4, NVFP4, fp8-block128).\n"
    "\n"
    "commands:\n"
    "  run     draw, quantize, run, check and time one grouped GEMM (no options: the reference\n"
    "          system's nvfp4 example)\n"
    "  bench   time the benchmark cases of bench/cases.json\n"
    "  info    version, back ends and devices\n"
    "\n"
    "`bsgemm <command> --help` lists a command's options.\n";

std::string version() {
  return std::to_string(BSGEMM_VERSION_MAJOR) + "." + std::to_string(BSGEMM_VERSION_MINOR) + "." +
         std::to_string(BSGEMM_VERSION_PATCH);
}

// The GPUs the CUDA runtime sees, one line each, with whether the CUDA back end can use them.
void print_devices() {
#if defined(BSGEMM_WITH_CUDA)
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::cout << "gpus            none visible\n";
    return;
  }
  for (int device = 0; device < count; ++device) {
    cudaDeviceProp properties{};
    if (cudaGetDeviceProperties(&properties, device) != cudaSuccess) continue;
    std::cout << "gpu " << device << "           " << properties.name << ", compute capability " << properties.major << "."
              << properties.minor << ", " << properties.multiProcessorCount << " SMs, "
              << properties.totalGlobalMem / (1 << 20) << " MiB\n";
  }
#endif
}

int info_command(std::span<const std::string_view> args) {
  for (std::string_view arg : args) {
    if (arg == "--help" || arg == "-h") {
      std::cout << "usage: bsgemm info\n\nPrints the version, whether the CUDA back end is built, the GPUs and the CPU threads.\n";
      return kExitPass;
    }
    throw UsageError("bsgemm info takes no arguments (got '" + std::string(arg) + "')");
  }
  std::cout << "bsgemm          " << version() << "\n";
  std::cout << "cuda back end   " << (cuda_backend_built() ? "built (sm_90a kernels)" : "not built (no nvcc at build time)") << "\n";
  print_devices();
  std::cout << "usable gpu      " << (cuda_device_available() ? "yes" : "no (the CUDA back end needs an sm_90 GPU)") << "\n";
  std::cout << "default backend " << to_string(resolve_backend(Backend::automatic)) << "\n";
  std::cout << "cpu threads     " << std::thread::hardware_concurrency() << "\n";
  return kExitPass;
}

int dispatch(std::span<const std::string_view> args) {
  if (args.empty()) {
    std::cerr << kUsage;
    return kExitUsage;
  }
  const std::string_view command = args.front();
  const std::span<const std::string_view> rest = args.subspan(1);
  if (command == "run") return run_command(rest);
  if (command == "bench") return bench_command(rest);
  if (command == "info") return info_command(rest);
  if (command == "help" || command == "--help" || command == "-h") {
    std::cout << kUsage;
    return kExitPass;
  }
  if (command == "--version" || command == "version") {
    std::cout << "bsgemm " << version() << "\n";
    return kExitPass;
  }
  throw UsageError("unknown command '" + std::string(command) + "' (commands: run, bench, info; see bsgemm --help)");
}

// Errors end any progress line on a terminal first, so that they stand on a line of their own.
void print_fatal(const char* message) {
  if (isatty(STDERR_FILENO)) std::fputs("\r\033[K", stderr);
  std::fprintf(stderr, "bsgemm: error: %s\n", message);
}

}  // namespace
}  // namespace bsgemm::tool

int main(int argc, char** argv) {
  using namespace bsgemm::tool;
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  try {
    return dispatch(args);
  } catch (const UsageError& e) {
    print_fatal(e.what());
    return kExitUsage;
  } catch (const std::bad_alloc&) {
    print_fatal("out of host memory");
    return kExitRuntime;
  } catch (const std::exception& e) {
    print_fatal(e.what());
    return kExitRuntime;
  }
}
