// Test support: ThreadContexts for tests that call kernels directly (one per thread count and
// test thread, kept for the process).
#pragma once

#include <map>
#include <memory>

#include "core/thread_context.h"

namespace snapkv::test {

/// The calling thread's ThreadContext of `n` threads.
inline ThreadContext& threads(int n = 2) {
  thread_local std::map<int, std::unique_ptr<ThreadContext>> ctx;
  auto& p = ctx[n];
  if (!p) p = std::make_unique<ThreadContext>(n);
  return *p;
}

}  // namespace snapkv::test
