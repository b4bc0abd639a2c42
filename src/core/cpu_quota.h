// snapkv: the CPU bandwidth limit of this process's cgroup (a container's `--cpus`), which the
// default thread count must respect: the affinity mask (omp_get_num_procs) shows every core of a
// large host to a container limited to 2 CPUs, and 64 threads sharing 2 CPUs' worth of time wait
// for each other at every barrier of every kernel.
#pragma once

#include <string>

namespace snapkv {

/// CPUs this process's cgroup may use per scheduling period, rounded up (at least 1), or 0 when
/// no limit is set or none can be read (no cgroup file system, unreadable or malformed files:
/// never an error). The limit is the smallest over the process's cgroup and its ancestors up to
/// the mount point: cgroup v2 `cpu.max` ("QUOTA PERIOD" or "max PERIOD", microseconds) or, when
/// the v1 `cpu` controller is mounted, `cpu.cfs_quota_us` / `cpu.cfs_period_us` (quota -1 = no
/// limit). The cgroup is found from /proc/self/cgroup, its directory from /proc/self/mountinfo
/// (mount root and mount point). Source: the kernel's Documentation/admin-guide/cgroup-v2.rst
/// ("cpu.max") and scheduler/sched-bwc.rst (CFS bandwidth control).
/// `root` prefixes every path read (empty = the real file system), so tests can use a fake tree.
int cgroup_cpu_limit(const std::string& root = "");

}  // namespace snapkv
