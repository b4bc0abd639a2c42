// AMX availability and the Linux permission request (attention/amx.h).
#include "attention/amx.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#if SNAPKV_ATTN_AMX
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace snapkv::attn {

namespace {

std::atomic<bool> g_disabled{false};

#if SNAPKV_ATTN_AMX
// arch_prctl codes of Linux's asm/prctl.h and the tile data feature number of XSAVE (18).
constexpr long kArchReqXcompPerm = 0x1023;
constexpr long kXfeatureXtiledata = 18;

bool request_tiles() {
  if (!__builtin_cpu_supports("avx512bf16")) return false;
  const char* env = std::getenv("SNAPKV_AMX");
  if (env != nullptr && std::strcmp(env, "0") == 0) return false;
  // The CPUID bits (leaf 7, EDX 22 AMX-BF16, 24 AMX-TILE); __builtin_cpu_supports knows no AMX in GCC 12.
  unsigned a = 0, b = 0, c = 0, d = 0;
  __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
  if ((d & (1u << 22)) == 0 || (d & (1u << 24)) == 0) return false;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}
#endif

}  // namespace

bool amx_usable() {
#if SNAPKV_ATTN_AMX
  static const bool granted = request_tiles();
  return granted && !g_disabled.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

void set_amx_disabled(bool disabled) { g_disabled.store(disabled, std::memory_order_relaxed); }

}  // namespace snapkv::attn
