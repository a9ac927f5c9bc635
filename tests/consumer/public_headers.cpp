// Compiled with -fsyntax-only by the consumer.headers_without_cuda test: the whole public API must
// compile with a plain C++20 compiler and no CUDA headers anywhere on the include path.
#include <bsgemm/bsgemm.hpp>

#if defined(__CUDA_RUNTIME_H__) || defined(__CUDA_RUNTIME_API_H__) || defined(__cuda_cuda_h__)
#error "a public bsgemm header pulled in a CUDA header"
#endif

// The one CUDA type of the API is usable without the CUDA headers.
static_assert(sizeof(cudaStream_t) == sizeof(void*));
