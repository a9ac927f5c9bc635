// Host-side validation shared by every back end (can_implement's first half).
#pragma once

#include <string>

#include "bsgemm/gemm.hpp"
#include "bsgemm/problem.hpp"
#include "bsgemm/status.hpp"
#include "src/core/group_checks.hpp"

namespace bsgemm::core {

// Everything any back end requires: recipe/element/scale consistency, supported A x B recipe
// pairs, majors, output type, layout-level fields, and, when the descriptions are host-resident,
// every group (shapes, pointers, strides, alignment, offsets, masked_m). Back-end-specific
// limits are checked by the back end afterwards.
Status validate(const GemmArguments& args);

// The explanation of a failed GroupCheck, written to follow "FIELD: " in a Status message (see
// to_status), e.g. "100 is smaller than 128, the extent of the contiguous dimension (K, since A is k-major)".
std::string describe(const GroupCheck& check, const CallSpec& spec);

// Name of a field as the user sees it ("lda", "batch_stride_b", "offsets", ...).
const char* field_name(Field field);

// A failed check as a Status naming the group (-1: a field every group shares) and the field.
Status to_status(const GroupCheck& check, int group, const CallSpec& spec, StatusCode code = StatusCode::invalid_argument);

}  // namespace bsgemm::core
