// The fp64 reference against values computed by hand, and its three group descriptions against
// each other.
//
// The hand-built problems write element and scale codes directly (their values are in the
// comments) at the positions problem.hpp defines, so these tests check the reference against the
// definition, not against the library's own index helpers.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <ostream>
#include <vector>

#include <gtest/gtest.h>

#include "bsgemm/bsgemm.hpp"
#include "src/testing/workload.hpp"

namespace bsgemm {
namespace {

// Zeroed, 64-byte aligned bytes (every data pointer must be 16-byte aligned).
class Bytes {
 public:
  explicit Bytes(std::size_t count) : data_(static_cast<std::uint8_t*>(::operator new[](count, std::align_val_t{64}))) {
    std::memset(data_.get(), 0, count);
  }
  std::uint8_t* get() const { return data_.get(); }
  float* floats() const { return reinterpret_cast<float*>(data_.get()); }

 private:
  struct Free {
    void operator()(std::uint8_t* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::unique_ptr<std::uint8_t[], Free> data_;
};

RunOptions cpu_options() {
  RunOptions options;
  options.backend = Backend::cpu;
  return options;
}

// ---- 1 x 1 x 1 -----------------------------------------------------------------------------------

TEST(Reference, OneByOneByOne) {
  // A = e4m3 1.5 (0x3C) * ue8m0 2^1 (128); B = e4m3 -2 (0xC0) * ue8m0 2^-1 (126); alpha = 2.
  // D = 2 * (1.5 * 2) * (-2 * 0.5) = -6.
  Bytes a(16), b(16), sfa(16), sfb(16), d(16);
  a.get()[0] = 0x3C;
  b.get()[0] = 0xC0;
  sfa.get()[0] = 128;
  sfb.get()[0] = 126;
  GroupProblem p;
  p.m = p.n = p.k = 1;
  p.a = a.get();
  p.b = b.get();
  p.sfa = sfa.get();
  p.sfb = sfb.get();
  p.d = d.get();
  p.lda = p.ldb = 16;  // 16 bytes: the smallest leading dimension allowed
  p.ldd = 4;           // 4 floats = 16 bytes
  p.alpha = 2.0f;
  GemmArguments args;
  args.a_type = args.b_type = make_operand_type(Recipe::mxfp8);
  args.d_type = DataType::f32;
  args.num_groups = 1;
  args.groups = &p;
  ExpectedOutput out;
  ASSERT_TRUE(reference_gemm(args, &out).ok());
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].size(), 1u);
  EXPECT_EQ(out[0][0], -6.0);
}

// ---- 2 x 3 x 4, every major ---------------------------------------------------------------------------

// A (e4m3, ue8m0 scale per row), rows:
//   [1, 2, -0.5, 3]   codes 38 40 B0 44, scale 2^1  (128)
//   [0.25, -1, 4, 1.5] codes 28 B8 48 3C, scale 2^-2 (125)
// B (e5m2, ue8m0), rows:
//   [1, -1, 2, 0.5]    codes 3C BC 40 38, scale 2^0  (127)
//   [3, 0, -2, 1.5]    codes 42 00 C0 3E, scale 2^3  (130)
//   [-0.25, 4, 1, -3]  codes B4 44 3C C2, scale 2^-1 (126)
// Dot products of the element values: [[-0.5, 8.5, -1.75], [10, -5, -4.5625]]; times the scales
// [2, 0.25] x [1, 8, 0.5]: [[-1, 136, -1.75], [2.5, -10, -0.5703125]]; alpha = 0.5 and beta = -1
// with C = [[1, 2, 3], [4, 5, 6]] give the values below.
constexpr std::uint8_t kCodesA[2][4] = {{0x38, 0x40, 0xB0, 0x44}, {0x28, 0xB8, 0x48, 0x3C}};
constexpr std::uint8_t kScalesA[2] = {128, 125};
constexpr std::uint8_t kCodesB[3][4] = {{0x3C, 0xBC, 0x40, 0x38}, {0x42, 0x00, 0xC0, 0x3E}, {0xB4, 0x44, 0x3C, 0xC2}};
constexpr std::uint8_t kScalesB[3] = {127, 130, 126};
constexpr float kC[2][3] = {{1, 2, 3}, {4, 5, 6}};
constexpr double kExpected2x3x4[2][3] = {{-1.5, 66.0, -3.875}, {-2.75, -10.0, -6.28515625}};

struct Majors {
  Major a, b, d;
};

void PrintTo(const Majors& m, std::ostream* os) {
  *os << "A " << to_string(m.a) << "-major, B " << to_string(m.b) << "-major, D " << to_string(m.d) << "-major";
}

class ReferenceMajors : public ::testing::TestWithParam<Majors> {};

TEST_P(ReferenceMajors, TwoByThreeByFour) {
  const Majors majors = GetParam();
  constexpr int kLd = 16;    // elements of A and B (16 bytes); also enough rows for the m/n-major forms
  constexpr int kLdOut = 4;  // floats (16 bytes) of C and D
  Bytes a(kLd * 4), b(kLd * 4), sfa(16), sfb(16), c(kLdOut * 4 * 4), d(kLdOut * 4 * 4);
  for (int m = 0; m < 2; ++m)
    for (int k = 0; k < 4; ++k) a.get()[majors.a == Major::k ? m * kLd + k : k * kLd + m] = kCodesA[m][k];
  for (int n = 0; n < 3; ++n)
    for (int k = 0; k < 4; ++k) b.get()[majors.b == Major::k ? n * kLd + k : k * kLd + n] = kCodesB[n][k];
  for (int m = 0; m < 2; ++m) sfa.get()[m] = kScalesA[m];
  for (int n = 0; n < 3; ++n) sfb.get()[n] = kScalesB[n];
  for (int m = 0; m < 2; ++m)
    for (int n = 0; n < 3; ++n) c.floats()[majors.d == Major::n ? m * kLdOut + n : n * kLdOut + m] = kC[m][n];

  GroupProblem p;
  p.m = 2;
  p.n = 3;
  p.k = 4;
  p.a = a.get();
  p.b = b.get();
  p.c = c.get();
  p.d = d.get();
  p.sfa = sfa.get();
  p.sfb = sfb.get();
  p.lda = p.ldb = kLd;
  p.ldc = p.ldd = kLdOut;
  p.alpha = 0.5f;
  p.beta = -1.0f;
  GemmArguments args;
  args.a_type = make_operand_type(Recipe::mxfp8);
  args.b_type = make_operand_type(Recipe::mxfp8);
  args.b_type.element = DataType::e5m2;
  args.a_major = majors.a;
  args.b_major = majors.b;
  args.d_major = majors.d;
  args.d_type = DataType::f32;
  args.has_c = true;
  args.num_groups = 1;
  args.groups = &p;
  ExpectedOutput out;
  const Status s = reference_gemm(args, &out);
  ASSERT_TRUE(s.ok()) << s.message;
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].size(), 6u);
  for (int m = 0; m < 2; ++m)
    for (int n = 0; n < 3; ++n)
      EXPECT_EQ(out[0][static_cast<std::size_t>(m * 3 + n)], kExpected2x3x4[m][n]) << m << "," << n;
}

INSTANTIATE_TEST_SUITE_P(EveryMajor, ReferenceMajors,
                         ::testing::Values(Majors{Major::k, Major::k, Major::n}, Majors{Major::m, Major::k, Major::n},
                                           Majors{Major::k, Major::n, Major::n}, Majors{Major::k, Major::k, Major::m},
                                           Majors{Major::m, Major::n, Major::m}));

// ---- fp8-block128: B scales per 128 of N, a partial last K block --------------------------------------

TEST(Reference, Block128ScalesOfBCover128Rows) {
  // M = 1, N = 130, K = 129: every element is e4m3 1.0 (0x38). A scales (fp32, per row and 128 of
  // K): [1, 2]. B scales (fp32, per 128 of N and 128 of K): [[1, 10], [100, 1000]]. So
  //   D[0][n] = 128 * 1 * sb[n / 128][0] + 1 * 2 * sb[n / 128][1] = 148 (n < 128), 14800 (n >= 128).
  constexpr int kK = 129, kN = 130, kLd = 144;  // 144 = the next multiple of 16 above K
  Bytes a(kLd), b(static_cast<std::size_t>(kLd * kN)), sfa(8), sfb(16), d(4 * 132);
  for (int k = 0; k < kK; ++k) a.get()[k] = 0x38;
  for (int n = 0; n < kN; ++n)
    for (int k = 0; k < kK; ++k) b.get()[n * kLd + k] = 0x38;
  sfa.floats()[0] = 1.0f;
  sfa.floats()[1] = 2.0f;
  const float block_scales[4] = {1.0f, 10.0f, 100.0f, 1000.0f};
  std::memcpy(sfb.get(), block_scales, sizeof block_scales);
  GroupProblem p;
  p.m = 1;
  p.n = kN;
  p.k = kK;
  p.a = a.get();
  p.b = b.get();
  p.d = d.get();
  p.sfa = sfa.get();
  p.sfb = sfb.get();
  p.lda = p.ldb = kLd;
  p.ldd = 132;
  GemmArguments args;
  args.a_type = args.b_type = make_operand_type(Recipe::fp8_block128);
  args.d_type = DataType::f32;
  args.num_groups = 1;
  args.groups = &p;
  ExpectedOutput out;
  const Status s = reference_gemm(args, &out);
  ASSERT_TRUE(s.ok()) << s.message;
  ASSERT_EQ(out[0].size(), static_cast<std::size_t>(kN));
  for (int n = 0; n < kN; ++n) EXPECT_EQ(out[0][static_cast<std::size_t>(n)], n < 128 ? 148.0 : 14800.0) << n;

  // The same scales stored mn-major (column-major, ld = 2 rows of the [2, 2] matrix): [1, 100, 10, 1000].
  args.b_type.scale_layout = ScaleLayout::mn_major;
  const float mn_major_scales[4] = {1.0f, 100.0f, 10.0f, 1000.0f};
  std::memcpy(sfb.get(), mn_major_scales, sizeof mn_major_scales);
  ASSERT_TRUE(reference_gemm(args, &out).ok());
  for (int n = 0; n < kN; ++n) EXPECT_EQ(out[0][static_cast<std::size_t>(n)], n < 128 ? 148.0 : 14800.0) << n;
}

// ---- nvfp4: nibble order, partial block, alpha carrying the global scales ------------------------------

TEST(Reference, Nvfp4FoldsGlobalScalesIntoAlpha) {
  // M = N = 1, K = 17: two blocks of 16, the second holding one element.
  // A: k < 16 all e2m1 6 (bytes 0x77), k = 16 e2m1 0.5 (low nibble 0x1 of byte 8; its high nibble
  //    0xF = -6 lies past K and must be ignored). Block scales ue4m3 [0.5 (0x30), 2 (0x40)].
  // B: k < 16 all 1 (0x22), k = 16 1 (low nibble of 0x72; the high nibble 6 is past K). Block
  //    scales ue4m3 [1.5 (0x3C), 0.25 (0x28)].
  // Sum = 16 * (6 * 0.5) * (1 * 1.5) + (0.5 * 2) * (1 * 0.25) = 72.25. The global scales
  // s_g(A) = 0.5 and s_g(B) = 0.25 reach the result through alpha = 0.125: D = 9.03125.
  Bytes a(16), b(16), sfa(16), sfb(16), d(16);
  std::memset(a.get(), 0x77, 8);
  a.get()[8] = 0xF1;
  std::memset(b.get(), 0x22, 8);
  b.get()[8] = 0x72;
  sfa.get()[0] = 0x30;
  sfa.get()[1] = 0x40;
  sfb.get()[0] = 0x3C;
  sfb.get()[1] = 0x28;
  GroupProblem p;
  p.m = p.n = 1;
  p.k = 17;
  p.a = a.get();
  p.b = b.get();
  p.d = d.get();
  p.sfa = sfa.get();
  p.sfb = sfb.get();
  p.lda = p.ldb = 32;  // 32 FP4 elements = 16 bytes
  p.ldd = 8;           // 8 bf16 = 16 bytes
  p.alpha = 0.5f * 0.25f;
  GemmArguments args;
  args.a_type = args.b_type = make_operand_type(Recipe::nvfp4);
  args.d_type = DataType::bf16;
  args.num_groups = 1;
  args.groups = &p;
  ExpectedOutput out;
  const Status s = reference_gemm(args, &out);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(out[0][0], 9.03125);
}

// ---- L = 2, an empty group, beta * C in bf16 -----------------------------------------------------------

TEST(Reference, BatchesAndEmptyGroups) {
  // Group 0: M = 0 (empty; its pointers are never read). Group 1: M = N = K = 1, L = 2, mxfp8:
  //   batch 0: A = 1 (0x38) * 2^0, B = 3 (0x44) * 2^2 (129)   -> 12
  //   batch 1: A = -0.5 (0xB0) * 2^1 (128), B = 4 (0x48) * 2^0 -> -4
  // alpha = 1, beta = 2, C (bf16) = [0.5 (0x3F00), -1.5 (0xBFC0)]: D = [13, -7].
  Bytes a(32), b(32), sfa(2), sfb(2), c(32), d(32);
  a.get()[0] = 0x38;
  a.get()[16] = 0xB0;  // batch stride 16 elements
  b.get()[0] = 0x44;
  b.get()[16] = 0x48;
  sfa.get()[0] = 127;
  sfa.get()[1] = 128;  // scale batch stride 1 (the dense default)
  sfb.get()[0] = 129;
  sfb.get()[1] = 127;
  auto* c_bits = reinterpret_cast<std::uint16_t*>(c.get());
  c_bits[0] = 0x3F00;
  c_bits[8] = 0xBFC0;  // batch stride 8 bf16 = 16 bytes
  GroupProblem groups[2];
  groups[0].m = 0;
  groups[0].n = groups[0].k = 1;
  GroupProblem& p = groups[1];
  p.m = p.n = p.k = 1;
  p.l = 2;
  p.a = a.get();
  p.b = b.get();
  p.c = c.get();
  p.d = d.get();
  p.sfa = sfa.get();
  p.sfb = sfb.get();
  p.lda = p.ldb = 16;
  p.ldc = p.ldd = 8;
  p.batch_stride_a = p.batch_stride_b = 16;
  p.batch_stride_c = p.batch_stride_d = 8;
  p.beta = 2.0f;
  GemmArguments args;
  args.a_type = args.b_type = make_operand_type(Recipe::mxfp8);
  args.d_type = DataType::bf16;
  args.has_c = true;
  args.num_groups = 2;
  args.groups = groups;
  ExpectedOutput out;
  const Status s = reference_gemm(args, &out);
  ASSERT_TRUE(s.ok()) << s.message;
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[0].empty());
  ASSERT_EQ(out[1].size(), 2u);
  EXPECT_EQ(out[1][0], 13.0);
  EXPECT_EQ(out[1][1], -7.0);
}

// ---- invalid arguments ---------------------------------------------------------------------------------

TEST(Reference, InvalidArgumentsLeaveNoOutput) {
  Bytes buffer(64);
  GroupProblem p;
  p.m = p.n = p.k = 1;
  p.a = nullptr;  // invalid: A is read
  p.b = p.sfa = p.sfb = buffer.get();
  p.d = buffer.get();
  p.lda = p.ldb = 16;
  p.ldd = 8;
  GemmArguments args;
  args.a_type = args.b_type = make_operand_type(Recipe::mxfp8);
  args.num_groups = 1;
  args.groups = &p;
  ExpectedOutput out{{1.0, 2.0}};
  const Status s = reference_gemm(args, &out);
  EXPECT_EQ(s.code, StatusCode::invalid_argument);
  EXPECT_EQ(s.field, "a");
  EXPECT_EQ(s.group, 0);
  EXPECT_TRUE(out.empty());

  args.descriptions = MemoryLocation::device;  // the CPU reference cannot read device memory
  p.a = buffer.get();
  EXPECT_FALSE(reference_gemm(args, &out).ok());
  EXPECT_TRUE(out.empty());
}

// ---- the MoE forms against the pointer-array form of the same tensors -----------------------------------

// Bytes of `elements` scale elements of type t.
std::int64_t scale_bytes(DataType t, std::int64_t elements) { return elements * (t == DataType::f32 ? 4 : 1); }

// The pointer-array description of the groups of a contiguous or masked workload, derived from
// problem.hpp's text: group g's rows of A, C and D start at row begin_g (contiguous) or at
// g * batch stride (masked); B and SFB step by their batch strides; a blocked SFA of the
// contiguous form starts group g at row sum_{h<g} round_up(M_h, 128). The workloads use
// padded strides, so every stride is given explicitly (no dense defaults to work out here).
std::vector<GroupProblem> equivalent_pointer_array(const testing::WorkloadSpec& spec, const GemmArguments& args) {
  const MoeGroups& moe = args.moe;
  const bool masked = args.layout == GroupLayout::masked;
  const std::int64_t a_cols = scale_cols(args.a_type.recipe, moe.k);
  std::vector<GroupProblem> groups;
  std::int64_t begin = 0, block_row0 = 0;
  for (std::size_t g = 0; g < spec.groups.size(); ++g) {
    const std::int32_t m = spec.groups[g].m;
    const std::int64_t gi = static_cast<std::int64_t>(g);
    GroupProblem p;
    p.m = m;
    p.n = moe.n;
    p.k = moe.k;
    // Element offsets of the group's first row in A and in C / D.
    const std::int64_t a_row = masked ? gi * moe.batch_stride_a : (args.a_major == Major::k ? begin * moe.lda : begin);
    const std::int64_t d_row = masked ? gi * moe.batch_stride_d : (args.d_major == Major::n ? begin * moe.ldd : begin);
    const std::int64_t c_row = masked ? gi * moe.batch_stride_c : (args.d_major == Major::n ? begin * moe.ldc : begin);
    const int d_bytes = bits_of(args.d_type) / 8;
    p.a = static_cast<const std::uint8_t*>(moe.a) + bytes_for(args.a_type.element, a_row);
    p.b = static_cast<const std::uint8_t*>(moe.b) + bytes_for(args.b_type.element, gi * moe.batch_stride_b);
    p.d = static_cast<std::uint8_t*>(moe.d) + d_row * d_bytes;
    if (args.has_c) p.c = static_cast<const std::uint8_t*>(moe.c) + c_row * d_bytes;
    std::int64_t sfa_offset = 0;
    if (masked) {
      sfa_offset = gi * moe.sfa_batch_stride;
    } else if (args.a_type.scale_layout == ScaleLayout::linear) {
      sfa_offset = begin * moe.sfa_ld;
    } else if (args.a_type.scale_layout == ScaleLayout::mn_major) {
      sfa_offset = begin;
    } else {
      sfa_offset = block_row0 * ((a_cols + 3) / 4 * 4);
    }
    p.sfa = static_cast<const std::uint8_t*>(moe.sfa) + scale_bytes(args.a_type.scale, sfa_offset);
    p.sfb = static_cast<const std::uint8_t*>(moe.sfb) + scale_bytes(args.b_type.scale, gi * moe.sfb_batch_stride);
    p.lda = moe.lda;
    p.ldb = moe.ldb;
    p.ldc = moe.ldc;
    p.ldd = moe.ldd;
    p.sfa_ld = moe.sfa_ld;
    p.sfb_ld = moe.sfb_ld;
    p.alpha = moe.alpha ? moe.alpha[g] : moe.alpha_value;
    p.beta = moe.beta ? moe.beta[g] : moe.beta_value;
    groups.push_back(p);
    begin += m;
    block_row0 += (m + 127) / 128 * 128;
  }
  return groups;
}

struct MoeCase {
  GroupLayout layout;
  Recipe recipe;
  Major a_major;
  ScaleLayout sfa_layout;
  IndexType offsets_type;
  bool offsets_start_with_zero;
};

void PrintTo(const MoeCase& c, std::ostream* os) {
  *os << to_string(c.layout) << ", " << to_string(c.recipe) << ", A " << to_string(c.a_major) << "-major, SFA "
      << to_string(c.sfa_layout);
}

class ReferenceMoeForms : public ::testing::TestWithParam<MoeCase> {};

TEST_P(ReferenceMoeForms, AgreeWithPointerArray) {
  const MoeCase& c = GetParam();
  testing::WorkloadSpec spec;
  spec.a_type = make_operand_type(c.recipe, c.sfa_layout);
  spec.b_type = make_operand_type(c.recipe);
  spec.a_major = c.a_major;
  spec.d_type = DataType::f16;
  spec.layout = c.layout;
  // An m-major A of the contiguous form is split at group boundaries into pointer-array groups,
  // whose pointers must be 16-byte aligned: there the groups start on multiples of 16 rows.
  if (c.a_major == Major::m && c.layout == GroupLayout::contiguous) {
    spec.groups = {{16, 40, 96, 1}, {0, 40, 96, 1}, {128, 40, 96, 1}, {1, 40, 96, 1}};
  } else {
    spec.groups = {{5, 40, 96, 1}, {0, 40, 96, 1}, {130, 40, 96, 1}, {1, 40, 96, 1}};
  }
  spec.moe_rows = c.layout == GroupLayout::contiguous ? 150 : 131;  // a few rows beyond every group
  spec.offsets_type = c.offsets_type;
  spec.offsets_start_with_zero = c.offsets_start_with_zero;
  spec.alpha = 0.75f;
  spec.beta = 0.5f;
  spec.padded_strides = true;
  spec.seed = 0x5EED0000u + static_cast<std::uint64_t>(c.layout) * 64 + static_cast<std::uint64_t>(c.recipe) * 16 +
              static_cast<std::uint64_t>(c.sfa_layout) * 4 + static_cast<std::uint64_t>(c.a_major);
  testing::HostWorkload workload;
  const Status created = testing::HostWorkload::create(spec, &workload);
  ASSERT_TRUE(created.ok()) << created.message;
  const GemmArguments& moe_args = workload.args();
  // equivalent_pointer_array() reads every stride from the arguments: padded strides are explicit.
  const MoeGroups& moe = moe_args.moe;
  for (const std::int64_t stride : {moe.lda, moe.ldb, moe.ldc, moe.ldd, moe.batch_stride_b, moe.sfb_batch_stride}) {
    ASSERT_NE(stride, 0);
  }
  if (c.layout == GroupLayout::masked) {
    for (const std::int64_t stride :
         {moe.batch_stride_a, moe.batch_stride_c, moe.batch_stride_d, moe.sfa_batch_stride}) {
      ASSERT_NE(stride, 0);
    }
  }
  if (c.sfa_layout != ScaleLayout::blocked_128x4) {
    ASSERT_NE(moe.sfa_ld, 0);
  }

  std::vector<GroupProblem> groups = equivalent_pointer_array(spec, moe_args);
  GemmArguments pointer_args = moe_args;
  pointer_args.layout = GroupLayout::pointer_array;
  pointer_args.num_groups = static_cast<std::int32_t>(groups.size());
  pointer_args.groups = groups.data();
  pointer_args.moe = MoeGroups{};

  ExpectedOutput from_moe, from_pointers;
  const Status s1 = reference_gemm(moe_args, &from_moe);
  ASSERT_TRUE(s1.ok()) << s1.message;
  const Status s2 = reference_gemm(pointer_args, &from_pointers);
  ASSERT_TRUE(s2.ok()) << s2.message;
  ASSERT_EQ(from_moe.size(), spec.groups.size());
  for (std::size_t g = 0; g < spec.groups.size(); ++g) {
    EXPECT_EQ(from_moe[g].size(), static_cast<std::size_t>(spec.groups[g].m) * 40) << "group " << g;
    // Same decoded values summed in the same order: bit-identical.
    EXPECT_EQ(from_moe[g], from_pointers[g]) << "group " << g;
  }
  // The values are not all zero, which would make the comparison vacuous.
  double largest = 0;
  for (double v : from_moe[2]) largest = std::max(largest, std::fabs(v));
  EXPECT_GT(largest, 1.0);
}

INSTANTIATE_TEST_SUITE_P(
    Forms, ReferenceMoeForms,
    ::testing::Values(
        MoeCase{GroupLayout::contiguous, Recipe::mxfp8, Major::k, ScaleLayout::linear, IndexType::i32, false},
        MoeCase{GroupLayout::contiguous, Recipe::mxfp8, Major::m, ScaleLayout::blocked_128x4, IndexType::i64, true},
        MoeCase{GroupLayout::contiguous, Recipe::fp8_block128, Major::k, ScaleLayout::mn_major, IndexType::i32, true},
        MoeCase{GroupLayout::contiguous, Recipe::nvfp4, Major::k, ScaleLayout::blocked_128x4, IndexType::i64, false},
        MoeCase{GroupLayout::masked, Recipe::mxfp4, Major::k, ScaleLayout::linear, IndexType::i32, false},
        MoeCase{GroupLayout::masked, Recipe::fp8_block128, Major::m, ScaleLayout::mn_major, IndexType::i32, false},
        MoeCase{GroupLayout::masked, Recipe::nvfp4, Major::k, ScaleLayout::blocked_128x4, IndexType::i32, false}));

}  // namespace
}  // namespace bsgemm
