// Status: what every bsgemm call returns. Errors name the group and the field they concern.
#pragma once

#include <cstdint>
#include <string>

namespace bsgemm {

enum class StatusCode : std::uint8_t {
  success,
  invalid_argument,  // the description is wrong (shape, stride, alignment, pointer, type mismatch)
  not_supported,     // valid, but this back end cannot run it (the message says what can)
  cuda_error,        // a CUDA runtime or driver call failed
  device_error,      // the device-side validation of a device-resident description failed
  internal_error,
};

const char* to_string(StatusCode c);

struct Status {
  StatusCode code = StatusCode::success;
  std::string message;  // full sentence, e.g. "group 3, lda: 100 is smaller than k = 128 (A is k-major)"
  int group = -1;       // the offending group, or -1 when the error is not about one group
  std::string field;    // the offending field ("lda", "sfa", "offsets", "a_type.scale", ...), or empty

  bool ok() const { return code == StatusCode::success; }

  static Status success() { return {}; }
  // message is the explanation only; the group and field are prefixed to it.
  static Status error(StatusCode code, int group, std::string field, const std::string& explanation);
};

}  // namespace bsgemm
