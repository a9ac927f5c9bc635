// The FP8 element kinds wgmma takes (shared by host dispatch and device code).
#pragma once

namespace bsgemm::ptx {

enum class Fp8Kind { e4m3, e5m2 };

}  // namespace bsgemm::ptx
