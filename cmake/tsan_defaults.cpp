// snapkv: ThreadSanitizer's built-in suppressions, compiled into every executable of a
// SNAPKV_TSAN build (CMakeLists.txt), so that each test binary and `snapkv serve` is checked the
// same way however it is started; TSAN_OPTIONS adds to them (scripts/test.sh: halt_on_error).
//
// The one suppression: interceptors (pthread_mutex_init/lock, malloc, memcpy, ...) called from
// inside LLVM's OpenMP runtime. libomp hands its internal locks and team structures from thread
// to thread with atomics TSan does not see; Archer (linked in too) annotates the OpenMP
// semantics the program relies on (a region's fork and join, barriers, schedules), not those
// internals. This ignores only the accesses libomp itself makes: its synchronization still
// counts, and every access of snapkv code, kernel bodies in parallel regions included, is
// checked. (TSan's ignore_noninstrumented_modules=1, which Archer's start-up warning suggests,
// is not used: it also drops the accesses libstdc++.so makes, e.g. std::string's, which would
// hide a race on a string shared without its lock. Archer's warning is therefore expected.)

extern "C" const char* __tsan_default_suppressions();

extern "C" const char* __tsan_default_suppressions() { return "called_from_lib:libomp.so\n"; }
