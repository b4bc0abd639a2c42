// snapkv: ThreadSanitizer's built-in suppressions, compiled into every executable of a
// SNAPKV_TSAN build (CMakeLists.txt), so that each test binary and `snapkv serve` is checked the
// same way however it is started; TSAN_OPTIONS adds to them (scripts/test.sh: halt_on_error).
//
// Each one is `called_from_lib`: the interceptors (pthread_mutex_init/lock, malloc, memcpy, send,
// ...) that an uninstrumented library calls ignore the memory accesses they make; the library's
// synchronization still counts, and every access of snapkv code is checked.
//  - libomp (LLVM's OpenMP runtime) hands its internal locks and team structures from thread to
//    thread with atomics TSan does not see; Archer (linked in too) annotates the OpenMP semantics
//    the program relies on (a region's fork and join, barriers, schedules), not those internals.
//    Kernel bodies in parallel regions are instrumented code and checked in full.
//  - libcpp-httplib (Debian's cpp-httplib is a compiled library, not header-only, so it is not
//    instrumented): a function-local static it initializes on one worker thread (the chunked
//    encoding's end marker, copied with memcpy) and sends from another is reported, because the
//    other thread's check of the static's guard is uninstrumented code. Whatever the handlers
//    give it (response bodies, stream chunks) is theirs alone: each handler's own strings.
// (TSan's ignore_noninstrumented_modules=1, which Archer's start-up warning suggests, is not
// used: it also drops the accesses libstdc++.so makes, e.g. std::string's, which would hide a
// race on a string shared without its lock. Archer's warning is therefore expected.)

extern "C" const char* __tsan_default_suppressions();

extern "C" const char* __tsan_default_suppressions() {
  return "called_from_lib:libomp.so\n"
         "called_from_lib:libcpp-httplib.so\n";
}
