// The tool's commands. Each takes the arguments after its name and returns the process exit code
// (options.hpp); a bad command line throws UsageError.
#pragma once

#include <span>
#include <string_view>

namespace bsgemm::tool {

int run_command(std::span<const std::string_view> args);
int bench_command(std::span<const std::string_view> args);

}  // namespace bsgemm::tool
