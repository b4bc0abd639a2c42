// snapkv: the kernels' thread count (OpenMP) and compiled SIMD level.
#include <fmt/format.h>
#include <omp.h>

#include "quant/quant.h"
#include "quant/simd.h"
#include "snapkv/error.h"

namespace snapkv {

void set_num_threads(int n) {
  if (n < 1) throw Error(fmt::format("set_num_threads: thread count {} must be >= 1", n));
  omp_set_num_threads(n);
}

int num_threads() { return omp_get_max_threads(); }

const char* kernel_isa() { return quant::isa_name(); }

}  // namespace snapkv
