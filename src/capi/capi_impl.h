// snapkv C API internals: the structs behind the opaque handles, the workspace pool of an
// engine, and the exception barrier every entry point runs its body in.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "snapkv/batch.h"
#include "snapkv/cold_tier.h"
#include "snapkv/engine.h"
#include "snapkv/error.h"
#include "snapkv/sampling.h"
#include "snapkv/sequence.h"
#include "snapkv/snapkv_c.h"
#include "snapkv/workspace.h"

namespace snapkv::capi {

/// What an engine handle and all its sequences share: the engine and a pool of workspaces.
/// Each model call borrows a workspace (WorkspaceLease), so concurrent calls on different
/// sequences never share scratch memory; the pool grows to the number of concurrent calls.
struct EngineCore {
  std::shared_ptr<const Engine> engine;
  std::mutex mu;
  std::vector<std::unique_ptr<Workspace>> idle;  ///< guarded by mu
};

/// A workspace taken from the pool for the duration of one call (made if none is idle).
class WorkspaceLease {
 public:
  explicit WorkspaceLease(EngineCore& core) : core_(core) {
    {
      std::lock_guard<std::mutex> lock(core_.mu);
      if (!core_.idle.empty()) {
        ws_ = std::move(core_.idle.back());
        core_.idle.pop_back();
      }
    }
    if (!ws_) ws_ = std::make_unique<Workspace>(*core_.engine);
  }
  ~WorkspaceLease() {
    try {
      std::lock_guard<std::mutex> lock(core_.mu);
      core_.idle.push_back(std::move(ws_));
    } catch (...) {
      // Out of memory while returning it: the workspace is simply freed.
    }
  }
  WorkspaceLease(const WorkspaceLease&) = delete;
  WorkspaceLease& operator=(const WorkspaceLease&) = delete;
  Workspace& get() { return *ws_; }

 private:
  EngineCore& core_;
  std::unique_ptr<Workspace> ws_;
};

/// The int a C caller passed as an enum. C allows any int there, but loading an enum object whose
/// value is outside the enumerators' range is undefined in C++, so the bytes are read instead.
template <class E>
int enum_value(const E& e) noexcept {
  static_assert(std::is_enum_v<E> && sizeof(E) == sizeof(int));
  int v = 0;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

/// Records `msg` as this thread's last error and returns `status`. Never throws.
snapkv_status fail(snapkv_status status, const char* fn, const std::string& msg) noexcept;

/// Runs `body` (returning snapkv_status) and turns every exception into a status:
/// snapkv::Error -> `on_error` (what the function's failures mean: invalid argument, or I/O for
/// a load), std::bad_alloc -> out of memory, anything else -> internal.
template <class F>
snapkv_status guarded(const char* fn, snapkv_status on_error, F&& body) noexcept {
  try {
    return body();
  } catch (const ColdTierIOError& e) {  // the cold tier's directory (a full disk), not the input
    return fail(SNAPKV_ERR_IO, fn, e.what());
  } catch (const Error& e) {
    return fail(on_error, fn, e.what());
  } catch (const std::bad_alloc&) {
    return fail(SNAPKV_ERR_OUT_OF_MEMORY, fn, "out of memory");
  } catch (const std::length_error& e) {
    return fail(SNAPKV_ERR_OUT_OF_MEMORY, fn, std::string("out of memory (") + e.what() + ")");
  } catch (const std::system_error& e) {
    return fail(on_error == SNAPKV_ERR_IO ? SNAPKV_ERR_IO : SNAPKV_ERR_INTERNAL, fn, e.what());
  } catch (const std::exception& e) {
    return fail(SNAPKV_ERR_INTERNAL, fn, e.what());
  } catch (...) {
    return fail(SNAPKV_ERR_INTERNAL, fn, "unknown exception");
  }
}

/// A handle starts with a tag saying its kind; free clears it. A handle of the wrong kind (easy
/// to pass from a binding, where every handle is a void*) or one already freed (while its memory
/// is not reused) is refused with a status instead of being used.
template <class H>
bool valid(const H* h) {
  return h != nullptr && h->tag == H::kTag;
}

/// Deletes a valid handle (clearing its tag first); ignores NULL and invalid ones.
template <class H>
void destroy(H* h) {
  if (!valid(h)) return;
  h->tag = 0;
  delete h;
}

}  // namespace snapkv::capi

struct snapkv_engine {
  static constexpr uint64_t kTag = 0x454e47494e45564bULL;  // "KVENGINE"
  uint64_t tag = kTag;
  std::shared_ptr<snapkv::capi::EngineCore> core;
};

struct snapkv_sequence {
  static constexpr uint64_t kTag = 0x5351454e4345564bULL;  // "KVSEQNCE"
  uint64_t tag = kTag;
  std::shared_ptr<snapkv::capi::EngineCore> core;  ///< keeps the engine alive
  std::unique_ptr<snapkv::Sequence> seq;
  snapkv::Batch batch;  ///< of snapkv_decode: its logits are what *logits points to
};

struct snapkv_sampler {
  static constexpr uint64_t kTag = 0x504d4153564b4b56ULL;  // "VKKVSAMP"
  explicit snapkv_sampler(const snapkv::SamplerOptions& o) : sampler(o) {}
  uint64_t tag = kTag;
  snapkv::Sampler sampler;
};
