// Build-wide macros shared by host and device code.
#pragma once

#if defined(__CUDACC__)
#define BSGEMM_HD __host__ __device__
#else
#define BSGEMM_HD
#endif

#define BSGEMM_VERSION_MAJOR 0
#define BSGEMM_VERSION_MINOR 1
#define BSGEMM_VERSION_PATCH 0
