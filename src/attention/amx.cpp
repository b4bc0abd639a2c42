// AMX availability and the Linux permission request (attention/amx.h).
#include "attention/amx.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#if SNAPKV_ATTN_AMX && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define SNAPKV_AMX_LINUX 1
#endif

namespace snapkv::attn {

namespace {

std::atomic<bool> g_disabled{false};

#if SNAPKV_AMX_LINUX
// arch_prctl codes of Linux's asm/prctl.h and the tile data feature number of XSAVE (18).
constexpr long kArchReqXcompPerm = 0x1023;
constexpr long kXfeatureXtiledata = 18;

bool request_tiles() {
  if (!__builtin_cpu_supports("avx512bf16")) return false;
  const char* env = std::getenv("SNAPKV_AMX");
  if (env != nullptr && std::strcmp(env, "0") == 0) return false;
  // CPUID leaf 7, sub-leaf 0: EDX bit 22 AMX-BF16, bit 24 AMX-TILE.
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  if ((d & (1u << 22)) == 0 || (d & (1u << 24)) == 0) return false;
  // Fails (ENOSPC) when a thread already has an alternate signal stack too small for the tile
  // state: the kernel then runs on AVX512-BF16 vectors.
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}
#endif

}  // namespace

bool amx_usable() {
#if SNAPKV_AMX_LINUX
  static const bool granted = request_tiles();
  return granted && !g_disabled.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

void set_amx_disabled(bool disabled) { g_disabled.store(disabled, std::memory_order_relaxed); }

}  // namespace snapkv::attn
