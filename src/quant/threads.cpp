// snapkv: the compiled SIMD level of the kernels.
#include "quant/quant.h"
#include "quant/simd.h"

namespace snapkv {

const char* kernel_isa() { return quant::isa_name(); }

}  // namespace snapkv
