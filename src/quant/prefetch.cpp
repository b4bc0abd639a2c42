// snapkv: whether the matmuls prefetch their weight rows (quant/prefetch.h).
#include "quant/prefetch.h"

#include <cstdlib>
#include <cstring>

namespace snapkv::quant {

bool matmul_prefetch() {
  static const bool on = [] {
    if (const char* e = std::getenv("SNAPKV_MATMUL_PREFETCH")) {
      if (std::strcmp(e, "1") == 0) return true;
      if (std::strcmp(e, "0") == 0) return false;
    }
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_cpu_is("intel") != 0;
#else
    return false;
#endif
  }();
  return on;
}

}  // namespace snapkv::quant
