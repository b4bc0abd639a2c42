// core/cpu_quota.h: a container's CPU limit read from fake cgroup v1 / v2 trees (the
// /proc/self/cgroup and /proc/self/mountinfo of real hosts, cut down), and the default thread
// count on this host.
#include <gtest/gtest.h>
#include <omp.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/cpu_quota.h"
#include "core/thread_context.h"

namespace snapkv {
namespace {

namespace fs = std::filesystem;

/// A temporary directory standing for `/`, removed at the end of the test.
class FakeRoot {
 public:
  FakeRoot() {
    dir_ = fs::temp_directory_path() /
           ("snapkv_cpu_quota_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~FakeRoot() { fs::remove_all(dir_); }
  /// Writes `text` to `rel` (an absolute path inside the fake root), making its directories.
  void write(const std::string& rel, const std::string& text) const {
    const fs::path p = dir_ / rel.substr(1);
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::string root() const { return dir_.string(); }

 private:
  fs::path dir_;
};

const char* kV2Mount = "30 24 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw\n";

TEST(CgroupCpuLimit, V2QuotaRoundsUpAndTheSmallestAncestorBinds) {
  FakeRoot r;
  r.write("/proc/self/cgroup", "0::/kubepods/pod1/ctr\n");
  r.write("/proc/self/mountinfo", std::string("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n") + kV2Mount);
  r.write("/sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "max 100000\n");
  r.write("/sys/fs/cgroup/kubepods/pod1/cpu.max", "250000 100000\n");  // 2.5 CPUs -> 3
  r.write("/sys/fs/cgroup/kubepods/cpu.max", "800000 100000\n");
  EXPECT_EQ(cgroup_cpu_limit(r.root()), 3);
  r.write("/sys/fs/cgroup/kubepods/cpu.max", "150000 100000\n");  // an ancestor below: 1.5 -> 2
  EXPECT_EQ(cgroup_cpu_limit(r.root()), 2);
  r.write("/sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "5000 100000\n");  // 0.05 CPUs -> 1
  EXPECT_EQ(cgroup_cpu_limit(r.root()), 1);
}

TEST(CgroupCpuLimit, V2WithoutALimitOrFilesIsZero) {
  FakeRoot r;
  r.write("/proc/self/cgroup", "0::/user.slice\n");
  r.write("/proc/self/mountinfo", kV2Mount);
  EXPECT_EQ(cgroup_cpu_limit(r.root()), 0);  // no cpu.max anywhere (controller not enabled)
  r.write("/sys/fs/cgroup/user.slice/cpu.max", "max 100000\n");
  EXPECT_EQ(cgroup_cpu_limit(r.root()), 0);
  r.write("/sys/fs/cgroup/cpu.max", "max\n");
  EXPECT_EQ(cgroup_cpu_limit(r.root()), 0);
}

TEST(CgroupCpuLimit, ANamespacedContainerSeesItsCgroupAsTheRoot) {
  // Docker with a cgroup namespace: /proc/self/cgroup says "/", the mount point holds the limit.
  FakeRoot r;
  r.write("/proc/self/cgroup", "0::/\n");
  r.write("/proc/self/mountinfo", kV2Mount);
  r.write("/sys/fs/cgroup/cpu.max", "200000 100000\n");
  EXPECT_EQ(cgroup_cpu_limit(r.root()), 2);
}

TEST(CgroupCpuLimit, V1CpuControllerWithAMountRootAndAnEscapedMountPoint) {
  // Docker without a namespace on cgroup v1: the mount's root is the container's cgroup, so the
  // path below it is empty; the mount point holds a comma and an escaped space.
  FakeRoot r;
  r.write("/proc/self/cgroup", "12:cpuset:/docker/abc\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n0::/\n");
  r.write("/proc/self/mountinfo",
          "35 25 0:30 /docker/abc /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset\n"
          "36 25 0:31 /docker/abc /sys/fs/cgroup/cpu\\040x,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n");
  r.write("/sys/fs/cgroup/cpu x,cpuacct/cpu.cfs_quota_us", "350000\n");
  r.write("/sys/fs/cgroup/cpu x,cpuacct/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(cgroup_cpu_limit(r.root()), 4);
  r.write("/sys/fs/cgroup/cpu x,cpuacct/cpu.cfs_quota_us", "-1\n");
  EXPECT_EQ(cgroup_cpu_limit(r.root()), 0);
}

TEST(CgroupCpuLimit, V1DecidesOnAHybridHostAndAncestorsCount) {
  // systemd's hybrid layout: v2 mounted without controllers, v1 holds `cpu`.
  FakeRoot r;
  r.write("/proc/self/cgroup", "3:cpuacct:/a/b\n2:cpu:/a/b\n0::/a/b\n");
  r.write("/proc/self/mountinfo",
          "30 24 0:26 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
          "31 24 0:27 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n"
          "32 24 0:28 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n");
  r.write("/sys/fs/cgroup/unified/a/b/cpu.max", "100000 100000\n");  // ignored: v1 has the controller
  r.write("/sys/fs/cgroup/cpu/a/b/cpu.cfs_quota_us", "-1\n");
  r.write("/sys/fs/cgroup/cpu/a/b/cpu.cfs_period_us", "100000\n");
  r.write("/sys/fs/cgroup/cpu/a/cpu.cfs_quota_us", "600000\n");
  r.write("/sys/fs/cgroup/cpu/a/cpu.cfs_period_us", "200000\n");
  EXPECT_EQ(cgroup_cpu_limit(r.root()), 3);
}

TEST(CgroupCpuLimit, MalformedOrMissingInputIsNoLimit) {
  FakeRoot r;
  EXPECT_EQ(cgroup_cpu_limit(r.root()), 0);  // nothing at all
  r.write("/proc/self/cgroup", "garbage\n\n::\n0::relative/path\n");
  r.write("/proc/self/mountinfo", kV2Mount);
  r.write("/sys/fs/cgroup/cpu.max", "100000 100000\n");
  EXPECT_EQ(cgroup_cpu_limit(r.root()), 0);  // the cgroup path is not absolute
  r.write("/proc/self/cgroup", "0::/x\n");
  r.write("/proc/self/mountinfo", "30 24 0:26 / /sys/fs/cgroup rw cgroup2\n");  // no " - " field
  EXPECT_EQ(cgroup_cpu_limit(r.root()), 0);
  r.write("/proc/self/mountinfo", kV2Mount);
  r.write("/sys/fs/cgroup/cpu.max", "");
  for (const char* bad :
       {"12x 100000", "100000 0", "-5 100000", "100000", "1 2 3", "0 100000", "99999999999999999999 1"}) {
    r.write("/sys/fs/cgroup/x/cpu.max", bad);
    EXPECT_EQ(cgroup_cpu_limit(r.root()), 0) << bad;
  }
  r.write("/sys/fs/cgroup/x/cpu.max", "9223372036854775807 1");  // absurdly large: capped, not wrapped
  EXPECT_GT(cgroup_cpu_limit(r.root()), 0);
}

TEST(CgroupCpuLimit, ACgroupNoMountShowsHasNoLimitToRead) {
  // The mount shows only /mine's subtree: a cgroup outside it, or one that climbs out with "..",
  // cannot be read, and the mount point's own limit (another cgroup's) must not be taken.
  FakeRoot r;
  r.write("/proc/self/mountinfo", "30 24 0:26 /mine /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  r.write("/sys/fs/cgroup/cpu.max", "100000 100000\n");
  for (const char* path : {"/other", "/minecraft", "/mine/../x", "/other/../../etc"}) {
    r.write("/proc/self/cgroup", std::string("0::") + path + "\n");
    EXPECT_EQ(cgroup_cpu_limit(r.root()), 0) << path;
  }
  r.write("/proc/self/cgroup", "0::/mine/sub\n");  // below the mount's root: read from there
  r.write("/sys/fs/cgroup/sub/cpu.max", "300000 100000\n");
  EXPECT_EQ(cgroup_cpu_limit(r.root()), 1);  // the mount point is /mine itself: 1 CPU binds
  r.write("/sys/fs/cgroup/cpu.max", "max 100000\n");
  EXPECT_EQ(cgroup_cpu_limit(r.root()), 3);
}

TEST(CgroupCpuLimit, OfStackedMountsTheOneShowingTheCgroupWins) {
  // Two cgroup2 mounts on one point (roots /other, then /): /other's does not show /mine.
  FakeRoot r;
  r.write("/proc/self/cgroup", "0::/mine\n");
  r.write("/proc/self/mountinfo",
          "30 24 0:26 /other /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
          "31 24 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  r.write("/sys/fs/cgroup/mine/cpu.max", "200000 100000\n");
  EXPECT_EQ(cgroup_cpu_limit(r.root()), 2);              // read through mount 31, at /sys/fs/cgroup/mine
  r.write("/sys/fs/cgroup/cpu.max", "100000 100000\n");  // mount 31's root: /mine's ancestor, binds
  EXPECT_EQ(cgroup_cpu_limit(r.root()), 1);
  // Mount 32 shows /mine as its root, at another point: the longest root is taken.
  r.write("/proc/self/mountinfo",
          "30 24 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
          "32 24 0:26 /mine /ctr/cgroup rw - cgroup2 cgroup2 rw\n");
  r.write("/ctr/cgroup/cpu.max", "200000 100000\n");
  EXPECT_EQ(cgroup_cpu_limit(r.root()), 2);
}

TEST(CgroupCpuLimit, DotsInNamesAndEscapesAreTakenLiterally) {
  FakeRoot r;
  r.write("/proc/self/cgroup", "0::/a/..b\n");  // "..b" is a name, not a climb
  r.write("/proc/self/mountinfo", "30 24 0:26 / /sys/fs/c\\-01g rw - cgroup2 cgroup2 rw\n");
  r.write("/sys/fs/c\\-01g/a/..b/cpu.max", "200000 100000\n");  // "\-01" is no octal escape
  EXPECT_EQ(cgroup_cpu_limit(r.root()), 2);
}

TEST(AvailableCores, TheAffinityCappedByThisHostsCgroupLimit) {
  const int procs = omp_get_num_procs();
  const int limit = cgroup_cpu_limit();
  const int cores = available_cores();
  EXPECT_GE(cores, 1);
  EXPECT_EQ(cores, limit > 0 && limit < procs ? limit : procs);
}

}  // namespace
}  // namespace snapkv
