// bsgemm: grouped GEMM on block-scaled FP8 and FP4 inputs. The whole public API.
#pragma once

#include "bsgemm/config.hpp"
#include "bsgemm/formats.hpp"
#include "bsgemm/gemm.hpp"
#include "bsgemm/problem.hpp"
#include "bsgemm/quantize.hpp"
#include "bsgemm/recipe.hpp"
#include "bsgemm/reference.hpp"
#include "bsgemm/status.hpp"
