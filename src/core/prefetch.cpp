// snapkv: the default of the software prefetch switches (core/prefetch.h).
#include "core/prefetch.h"

#include <cstdlib>
#include <cstring>

namespace snapkv {

bool software_prefetch_enabled(const char* env) {
  if (const char* e = std::getenv(env)) {
    if (std::strcmp(e, "1") == 0) return true;
    if (std::strcmp(e, "0") == 0) return false;
  }
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_is("intel") != 0 || __builtin_cpu_is("amd") != 0;
#else
  return false;
#endif
}

}  // namespace snapkv
