// A small nvfp4 grouped GEMM built with nothing but bsgemm's installed public headers: random fp32
// inputs quantized by bsgemm::quantize, run on the CPU back end, checked against the fp64
// reference. Exits with 0 when check_output passes.
#include <bsgemm/bsgemm.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <new>
#include <vector>

namespace {

// Host memory aligned for bsgemm (16 bytes is required; 64 keeps whole cache lines).
struct AlignedFree {
  void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{64}); }
};
using AlignedBytes = std::unique_ptr<std::byte[], AlignedFree>;

AlignedBytes allocate(std::size_t bytes) {
  auto* p = static_cast<std::byte*>(::operator new[](bytes == 0 ? 1 : bytes, std::align_val_t{64}));
  return AlignedBytes(p);
}

// Deterministic values in [-1, 1).
class Random {
 public:
  float next() {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>(state_ >> 40) / static_cast<float>(1 << 23) - 1.0f;
  }

 private:
  std::uint64_t state_ = 12345;
};

// One operand (rows x k, k-major) quantized to nvfp4 with linear scales.
struct Operand {
  AlignedBytes data, scales;
  float global_scale = 1.0f;
};

bool quantize_operand(bsgemm::Operand which, std::int64_t rows, std::int64_t k, Random& random, Operand* out) {
  std::vector<float> values(static_cast<std::size_t>(rows * k));
  for (float& v : values) v = random.next();
  const bsgemm::OperandType type = bsgemm::make_operand_type(bsgemm::Recipe::nvfp4);
  const std::int64_t scale_count =
      bsgemm::scale_rows(type.recipe, which, rows) * bsgemm::scale_cols(type.recipe, k);
  out->data = allocate(static_cast<std::size_t>(bsgemm::bytes_for(type.element, rows * k)));
  out->scales = allocate(static_cast<std::size_t>(scale_count));  // ue4m3: one byte each

  bsgemm::QuantizedOperand dst;
  dst.type = type;
  dst.which = which;
  dst.rows = rows;
  dst.k = k;
  dst.major = bsgemm::Major::k;
  dst.data = out->data.get();
  dst.ld = k;
  dst.scales = out->scales.get();
  const bsgemm::Status s = bsgemm::quantize(values.data(), k, dst, {}, &out->global_scale);
  if (!s.ok()) std::fprintf(stderr, "quantize: %s\n", s.message.c_str());
  return s.ok();
}

}  // namespace

int main() {
  struct Shape {
    std::int32_t m, n, k;
  };
  // Ragged groups, an empty one included; K = 96 and 160 are multiples of 32, so rows of FP4
  // elements stay 16-byte aligned as bsgemm requires.
  const std::vector<Shape> shapes = {{33, 64, 96}, {0, 64, 96}, {1, 32, 160}, {70, 48, 160}};

  Random random;
  std::vector<Operand> a(shapes.size()), b(shapes.size());
  std::vector<AlignedBytes> d(shapes.size());
  std::vector<bsgemm::GroupProblem> groups(shapes.size());
  for (std::size_t g = 0; g < shapes.size(); ++g) {
    const Shape& s = shapes[g];
    // An empty group reads nothing: its A stays null.
    if (s.m > 0 && !quantize_operand(bsgemm::Operand::a, s.m, s.k, random, &a[g])) return 1;
    if (!quantize_operand(bsgemm::Operand::b, s.n, s.k, random, &b[g])) return 1;
    d[g] = allocate(static_cast<std::size_t>(s.m) * s.n * sizeof(std::uint16_t));  // bf16

    bsgemm::GroupProblem& p = groups[g];
    p.m = s.m;
    p.n = s.n;
    p.k = s.k;
    p.l = 1;
    p.a = a[g].data.get();
    p.b = b[g].data.get();
    p.d = d[g].get();
    p.sfa = a[g].scales.get();
    p.sfb = b[g].scales.get();
    p.alpha = a[g].global_scale * b[g].global_scale;  // nvfp4's per-tensor scales fold into alpha
  }

  bsgemm::GemmArguments args;
  args.a_type = args.b_type = bsgemm::make_operand_type(bsgemm::Recipe::nvfp4);
  args.d_type = bsgemm::DataType::bf16;
  args.layout = bsgemm::GroupLayout::pointer_array;
  args.num_groups = static_cast<std::int32_t>(groups.size());
  args.groups = groups.data();

  bsgemm::RunOptions options;
  options.backend = bsgemm::Backend::cpu;
  if (const bsgemm::Status s = bsgemm::can_implement(args, options); !s.ok()) {
    std::fprintf(stderr, "can_implement: %s\n", s.message.c_str());
    return 1;
  }
  const std::size_t workspace_bytes = bsgemm::workspace_size(args, options);
  AlignedBytes workspace = allocate(workspace_bytes);
  if (const bsgemm::Status s = bsgemm::run(args, options, workspace.get(), workspace_bytes); !s.ok()) {
    std::fprintf(stderr, "run: %s\n", s.message.c_str());
    return 1;
  }

  bsgemm::ExpectedOutput expected;
  if (const bsgemm::Status s = bsgemm::reference_gemm(args, &expected); !s.ok()) {
    std::fprintf(stderr, "reference_gemm: %s\n", s.message.c_str());
    return 1;
  }
  const bsgemm::CheckReport report = bsgemm::check_output(args, expected);
  std::printf("%s\n%s\n", report.summary().c_str(), report.pass ? "PASS" : "FAIL");
  return report.pass && report.checked > 0 ? 0 : 1;
}
