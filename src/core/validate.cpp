// Host-side validation: the call-level rules, then every host-resident group.
//
// The order of the checks is the order a user reads the description in: operand types, the A x B
// recipe pair, majors and output type, the layout's own fields, then the groups one by one. The
// first failure is reported, so the message always concerns the earliest thing to fix. The
// per-group rules live in group_checks.hpp, shared with the device-side validation; this file only
// calls them and turns their verdict (field, violation, value, limit) into a sentence.
#include "src/core/validate.hpp"

#include <cstdint>
#include <string>

#include "bsgemm/formats.hpp"
#include "bsgemm/recipe.hpp"
#include "src/core/resolved_group.hpp"

namespace bsgemm::core {
namespace {

// ---- enum values cast from bad integers ----------------------------------------------------------
// Each switch names every enumerator and has no default, so that -Wswitch flags a new enumerator
// that these functions do not know yet.

bool is_known(Recipe r) {
  switch (r) {
    case Recipe::mxfp8:
    case Recipe::mxfp4:
    case Recipe::nvfp4:
    case Recipe::fp8_block128: return true;
  }
  return false;
}

bool is_known(DataType t) {
  switch (t) {
    case DataType::e4m3:
    case DataType::e5m2:
    case DataType::e2m1:
    case DataType::ue8m0:
    case DataType::ue4m3:
    case DataType::f32:
    case DataType::f16:
    case DataType::bf16: return true;
  }
  return false;
}

bool is_known(ScaleLayout l) {
  switch (l) {
    case ScaleLayout::linear:
    case ScaleLayout::blocked_128x4:
    case ScaleLayout::mn_major: return true;
  }
  return false;
}

bool is_known(Major m) {
  switch (m) {
    case Major::m:
    case Major::n:
    case Major::k: return true;
  }
  return false;
}

bool is_known(GroupLayout l) {
  switch (l) {
    case GroupLayout::pointer_array:
    case GroupLayout::contiguous:
    case GroupLayout::masked: return true;
  }
  return false;
}

bool is_known(MemoryLocation l) {
  switch (l) {
    case MemoryLocation::host:
    case MemoryLocation::device: return true;
  }
  return false;
}

bool is_known(IndexType t) {
  switch (t) {
    case IndexType::i32:
    case IndexType::i64: return true;
  }
  return false;
}

// The name of a value for a message; a value outside its enum is shown by its number.
template <typename Enum>
std::string spelled(Enum value) {
  if (is_known(value)) return to_string(value);
  return "an unknown value (" + std::to_string(static_cast<int>(value)) + ")";
}

// ---- what each recipe holds ----------------------------------------------------------------------

bool is_fp8_recipe(Recipe r) { return r == Recipe::mxfp8 || r == Recipe::fp8_block128; }
bool is_fp4_recipe(Recipe r) { return r == Recipe::mxfp4 || r == Recipe::nvfp4; }

Status invalid(const std::string& field, const std::string& explanation) {
  return Status::error(StatusCode::invalid_argument, -1, field, explanation);
}

// Rule 1: the element and scale types are those of the recipe. `prefix` is "a_type" or "b_type".
Status check_operand_type(const OperandType& type, const std::string& prefix) {
  if (!is_known(type.recipe))
    return invalid(prefix + ".recipe",
                   spelled(type.recipe) + " is not a recipe; expected mxfp8, mxfp4, nvfp4 or fp8-block128");
  const std::string recipe = to_string(type.recipe);
  if (!element_allowed(type.recipe, type.element))
    return invalid(prefix + ".element", spelled(type.element) + " is not an element type of " + recipe +
                                            ", which stores " + allowed_elements(type.recipe));
  if (!scale_allowed(type.recipe, type.scale))
    return invalid(prefix + ".scale", spelled(type.scale) + " is not a scale type of " + recipe +
                                          ", which scales with " + allowed_scales(type.recipe));
  if (!is_known(type.scale_layout))
    return invalid(prefix + ".scale_layout",
                   spelled(type.scale_layout) + " is not a scale layout; expected linear, blocked128x4 or mn-major");
  return Status::success();
}

// Rule 3 for one operand: the major is one of the operand's two dimensions, and FP4 is k-major.
Status check_operand_major(Major major, Major other, DataType element, const char* field, const char* operand,
                           const char* dims) {
  if (major != other && major != Major::k)
    return invalid(field, spelled(major) + " is not a dimension of " + operand + ", which is " + dims + ": " + field +
                              " is " + to_string(other) + " or k");
  if (bits_of(element) == 4 && major != Major::k)
    return invalid(field, std::string(operand) + " holds " + to_string(element) +
                              " (FP4), which packs two values per byte along K, so it must be k-major");
  return Status::success();
}

// Everything that does not depend on the groups.
Status check_call(const GemmArguments& args) {
  if (Status s = check_operand_type(args.a_type, "a_type"); !s.ok()) return s;
  if (Status s = check_operand_type(args.b_type, "b_type"); !s.ok()) return s;

  // Rule 2: the A x B recipe pairs the back ends implement.
  const Recipe a = args.a_type.recipe, b = args.b_type.recipe;
  if (a != b && !(is_fp8_recipe(a) && is_fp4_recipe(b)))
    return Status::error(StatusCode::not_supported, -1, "b_type.recipe",
                         std::string("A is ") + to_string(a) + " and B is " + to_string(b) +
                             "; supported pairs are A and B of the same recipe, or FP8 activations with FP4 weights "
                             "(A mxfp8 or fp8-block128, B mxfp4 or nvfp4)");

  // Rule 3: majors and the output type.
  if (Status s = check_operand_major(args.a_major, Major::m, args.a_type.element, "a_major", "A", "M x K"); !s.ok())
    return s;
  if (Status s = check_operand_major(args.b_major, Major::n, args.b_type.element, "b_major", "B", "N x K"); !s.ok())
    return s;
  if (args.d_major != Major::m && args.d_major != Major::n)
    return invalid("d_major", spelled(args.d_major) + " is not a dimension of D, which is M x N: d_major is m or n");
  if (args.d_type != DataType::f32 && args.d_type != DataType::f16 && args.d_type != DataType::bf16)
    return invalid("d_type", spelled(args.d_type) + " is not an output type; D (and C) are f32, f16 or bf16");
  if (args.expected_m < 0)
    return invalid("expected_m",
                   std::to_string(args.expected_m) + " is negative; it is the typical rows per group (0 when unknown)");

  if (!is_known(args.layout))
    return invalid("layout", spelled(args.layout) + " is not a group layout; expected ptr-array, contiguous or masked");
  if (!is_known(args.descriptions))
    return invalid("descriptions", "an unknown value (" + std::to_string(static_cast<int>(args.descriptions)) +
                                       "); the descriptions are host- or device-resident");
  return Status::success();
}

// Rule 4, pointer-array form.
Status check_pointer_array(const GemmArguments& args, const CallSpec& spec) {
  if (args.num_groups < 1)
    return to_status(fail(Field::num_groups, Violation::not_positive, args.num_groups, 1), -1, spec);
  if (args.groups == nullptr) return to_status(fail(Field::groups, Violation::null_pointer, 0), -1, spec);
  // Device-resident GroupProblem entries cannot be read here; the device checks them.
  if (args.descriptions == MemoryLocation::device) return Status::success();
  for (int g = 0; g < args.num_groups; ++g) {
    const GroupCheck check = check_group(spec, resolve_pointer_array(spec, args.groups[g]));
    if (!check.ok()) return to_status(check, g, spec);
  }
  return Status::success();
}

// Rule 4, contiguous and masked forms: the shared tensors first (group -1), then each group's rows.
Status check_moe_layout(const GemmArguments& args, const CallSpec& spec) {
  const MoeGroups& moe = args.moe;
  if (spec.layout == GroupLayout::contiguous && !is_known(moe.offsets_type))
    return invalid("offsets_type", "an unknown value (" + std::to_string(static_cast<int>(moe.offsets_type)) +
                                       "); offsets are i32 or i64");
  if (const GroupCheck check = check_moe(spec, moe, resolve_moe_whole(spec, moe)); !check.ok())
    return to_status(check, -1, spec);
  if (args.descriptions == MemoryLocation::device) return Status::success();
  for (int g = 0; g < moe.num_groups; ++g) {
    GroupCheck check;
    if (spec.layout == GroupLayout::contiguous) {
      std::int64_t begin = 0, end = 0;
      contiguous_bounds(moe, g, &begin, &end);
      check = check_contiguous_bounds(begin, end, moe.rows);
    } else {
      check = check_masked_rows(moe.masked_m[g], moe.rows);
    }
    if (!check.ok()) return to_status(check, g, spec);
  }
  return Status::success();
}

// ---- describe() ------------------------------------------------------------------------------------

enum class Tensor { a, b, c, d, sfa, sfb, none };

Tensor tensor_of(Field f) {
  switch (f) {
    case Field::a:
    case Field::lda:
    case Field::batch_stride_a: return Tensor::a;
    case Field::b:
    case Field::ldb:
    case Field::batch_stride_b: return Tensor::b;
    case Field::c:
    case Field::ldc:
    case Field::batch_stride_c: return Tensor::c;
    case Field::d:
    case Field::ldd:
    case Field::batch_stride_d: return Tensor::d;
    case Field::sfa:
    case Field::sfa_ld:
    case Field::sfa_batch_stride: return Tensor::sfa;
    case Field::sfb:
    case Field::sfb_ld:
    case Field::sfb_batch_stride: return Tensor::sfb;
    default: return Tensor::none;
  }
}

bool is_batch_stride(Field f) {
  return f == Field::batch_stride_a || f == Field::batch_stride_b || f == Field::batch_stride_c ||
         f == Field::batch_stride_d || f == Field::sfa_batch_stride || f == Field::sfb_batch_stride;
}

const char* tensor_name(Tensor t) {
  switch (t) {
    case Tensor::a: return "A";
    case Tensor::b: return "B";
    case Tensor::c: return "C";
    case Tensor::d: return "D";
    case Tensor::sfa: return "SFA";
    case Tensor::sfb: return "SFB";
    case Tensor::none: break;
  }
  return "";
}

bool is_scale(Tensor t) { return t == Tensor::sfa || t == Tensor::sfb; }

DataType type_of(Tensor t, const CallSpec& s) {
  switch (t) {
    case Tensor::a: return s.a_type.element;
    case Tensor::b: return s.b_type.element;
    case Tensor::sfa: return s.a_type.scale;
    case Tensor::sfb: return s.b_type.scale;
    default: return s.d_type;
  }
}

// The contiguous dimension of a data matrix and why: "K, since A is k-major".
std::string contiguous_dimension(Tensor t, const CallSpec& s) {
  switch (t) {
    case Tensor::a: return a_k_contiguous(s) ? "K, since A is k-major" : "M, since A is m-major";
    case Tensor::b: return b_k_contiguous(s) ? "K, since B is k-major" : "N, since B is n-major";
    case Tensor::c: return d_n_contiguous(s) ? "N, since C has D's major, n" : "M, since C has D's major, m";
    default: return d_n_contiguous(s) ? "N, since D is n-major" : "M, since D is m-major";
  }
}

// What a scale matrix's leading dimension must cover, e.g. "the scale columns, ceil(K / 32), in
// the linear layout" or "the scale rows, ceil(N / 128), in the mn-major layout".
std::string scale_extent_text(Tensor t, const CallSpec& s) {
  const OperandType& type = t == Tensor::sfa ? s.a_type : s.b_type;
  const std::string layout = std::string(" in the ") + to_string(type.scale_layout) + " layout";
  if (type.scale_layout == ScaleLayout::linear)
    return "the scale columns, ceil(K / " + std::to_string(block_k(type.recipe)) + ")," + layout;
  if (t == Tensor::sfa) return "the scale rows, M," + layout;
  return std::string("the scale rows, ") + (type.recipe == Recipe::fp8_block128 ? "ceil(N / 128)," : "N,") + layout;
}

// What a batch stride steps between: the L batches of one group, or the groups of a MoE form.
const char* batch_word(const CallSpec& s) { return s.layout == GroupLayout::pointer_array ? "batch" : "group"; }
const char* batches_word(const CallSpec& s) { return s.layout == GroupLayout::pointer_array ? "batches" : "groups"; }

std::string describe_null(Field f, const CallSpec& s) {
  const bool moe = s.layout != GroupLayout::pointer_array;
  switch (f) {
    case Field::c: return "null pointer, but has_c is set, so C is read";
    case Field::d:
      return moe ? "null pointer; D is written whenever rows > 0"
                 : "null pointer; D is written by every group with M > 0";
    case Field::groups: return "null pointer; the ptr-array layout needs num_groups GroupProblem entries";
    case Field::offsets: return "null pointer; the contiguous layout needs the group offsets";
    case Field::masked_m: return "null pointer; the masked layout needs the valid rows of every group";
    default: break;
  }
  const std::string name = tensor_name(tensor_of(f));
  return moe ? "null pointer; " + name + " is read whenever rows > 0"
             : "null pointer; " + name + " is read by every group with M > 0";
}

std::string describe_negative(const GroupCheck& c) {
  const std::string value = std::to_string(c.value);
  switch (c.field) {
    case Field::m: return value + " is negative (M = 0 describes an empty group)";
    case Field::offsets: return "group begins at row " + value + ", and rows cannot be negative";
    case Field::masked_m: return value + " is negative; a group's valid rows are 0 to max_m";
    case Field::rows: return value + " is negative";
    default: return value + " is negative; strides count forward (0 means dense)";
  }
}

std::string describe_not_positive(const GroupCheck& c) {
  const std::string value = std::to_string(c.value) + " is smaller than " + std::to_string(c.limit);
  switch (c.field) {
    case Field::n: return value + ": N must be at least 1 (a group with nothing to compute has M = 0)";
    case Field::k: return value + ": K must be at least 1";
    case Field::l: return value + ": the batch count L must be at least 1";
    case Field::num_groups: return value + ": a call needs at least one group";
    default: return value;
  }
}

std::string describe_too_large(const GroupCheck& c, const CallSpec& s) {
  const std::string value = std::to_string(c.value), limit = std::to_string(c.limit);
  if (c.field == Field::rows)
    return value + " is larger than " + limit + ", the most rows a call accepts (M is 32-bit)";
  if (c.limit == kMaxElements) return value + " is larger than 2^48 = " + limit + ", the largest stride bsgemm accepts";
  const std::string name = tensor_name(tensor_of(c.field));
  if (is_batch_stride(c.field))
    return value + " is too large: the " + batches_word(s) + " of " + name +
           " would span more than 2^48 elements (the most this shape allows is " + limit + ")";
  return value + " is too large: one " + name +
         " matrix would span more than 2^48 elements (the most this shape allows is " + limit + ")";
}

std::string describe_smaller(const GroupCheck& c, const CallSpec& s) {
  const std::string head = std::to_string(c.value) + " is smaller than " + std::to_string(c.limit);
  const Tensor t = tensor_of(c.field);
  if (is_batch_stride(c.field))
    return head + ", the elements one " + batch_word(s) + " of " + tensor_name(t) + " spans, so consecutive " +
           batches_word(s) + " would overlap";
  if (is_scale(t)) return head + ", " + scale_extent_text(t, s);
  return head + ", the extent of the contiguous dimension (" + contiguous_dimension(t, s) + ")";
}

std::string describe_misaligned_pointer(const GroupCheck& c, const CallSpec& s) {
  const std::string align = std::to_string(c.limit);
  const std::string head =
      "not " + align + "-byte aligned (address % " + align + " = " + std::to_string(c.value) + "); ";
  const Tensor t = tensor_of(c.field);
  if (is_scale(t)) return head + to_string(type_of(t, s)) + " scales need " + align + "-byte alignment";
  return head + "TMA needs 16-byte aligned tensors";
}

std::string describe_misaligned_stride(const GroupCheck& c, const CallSpec& s) {
  return std::to_string(c.value) + " elements is not a multiple of 16 bytes (" + std::to_string(c.limit) +
         " elements of " + to_string(type_of(tensor_of(c.field), s)) + "); TMA needs 16-byte aligned strides";
}

std::string describe_beyond_rows(const GroupCheck& c) {
  const std::string value = std::to_string(c.value), limit = std::to_string(c.limit);
  if (c.field == Field::offsets)
    return "group ends at row " + value + ", beyond the " + limit + " rows of A and D (rows)";
  return value + " is larger than max_m = " + limit + ", the rows of each group's A and D (rows)";
}

}  // namespace

const char* field_name(Field field) {
  switch (field) {
    case Field::none: return "";
    case Field::m: return "m";
    case Field::n: return "n";
    case Field::k: return "k";
    case Field::l: return "l";
    case Field::a: return "a";
    case Field::b: return "b";
    case Field::c: return "c";
    case Field::d: return "d";
    case Field::sfa: return "sfa";
    case Field::sfb: return "sfb";
    case Field::lda: return "lda";
    case Field::ldb: return "ldb";
    case Field::ldc: return "ldc";
    case Field::ldd: return "ldd";
    case Field::batch_stride_a: return "batch_stride_a";
    case Field::batch_stride_b: return "batch_stride_b";
    case Field::batch_stride_c: return "batch_stride_c";
    case Field::batch_stride_d: return "batch_stride_d";
    case Field::sfa_ld: return "sfa_ld";
    case Field::sfb_ld: return "sfb_ld";
    case Field::sfa_batch_stride: return "sfa_batch_stride";
    case Field::sfb_batch_stride: return "sfb_batch_stride";
    case Field::num_groups: return "num_groups";
    case Field::groups: return "groups";
    case Field::rows: return "rows";
    case Field::offsets: return "offsets";
    case Field::masked_m: return "masked_m";
  }
  return "unknown field";
}

std::string describe(const GroupCheck& check, const CallSpec& spec) {
  switch (check.violation) {
    case Violation::none: return "valid";
    case Violation::negative: return describe_negative(check);
    case Violation::not_positive: return describe_not_positive(check);
    case Violation::null_pointer: return describe_null(check.field, spec);
    case Violation::misaligned_pointer: return describe_misaligned_pointer(check, spec);
    case Violation::misaligned_stride: return describe_misaligned_stride(check, spec);
    case Violation::smaller_than_extent: return describe_smaller(check, spec);
    case Violation::too_large: return describe_too_large(check, spec);
    case Violation::decreasing:
      return "group ends at row " + std::to_string(check.value) + ", before it begins at row " +
             std::to_string(check.limit);
    case Violation::beyond_rows: return describe_beyond_rows(check);
    case Violation::too_many_tiles:
      return "M x N x L make " + std::to_string(check.value) + " output tiles of the chosen kernel in this group, more than " +
             std::to_string(check.limit) + " (2^31 - 1), the most one group may have; split the group";
  }
  return "an unknown violation (" + std::to_string(static_cast<int>(check.violation)) + ")";
}

Status to_status(const GroupCheck& check, int group, const CallSpec& spec, StatusCode code) {
  if (check.ok()) return Status::success();
  return Status::error(code, group, field_name(check.field), describe(check, spec));
}

Status validate(const GemmArguments& args) {
  if (Status s = check_call(args); !s.ok()) return s;
  const CallSpec spec = make_call_spec(args);
  if (args.layout == GroupLayout::pointer_array) return check_pointer_array(args, spec);
  return check_moe_layout(args, spec);
}

}  // namespace bsgemm::core
