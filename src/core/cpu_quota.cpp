// snapkv: cgroup_cpu_limit (see core/cpu_quota.h).
#include "core/cpu_quota.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

namespace snapkv {
namespace {

/// Whitespace-separated words of `line`.
std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

/// `s` split at every `sep` (empty parts kept).
std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t at = s.find(sep, start);
    out.emplace_back(s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

/// A path field of /proc/self/mountinfo with its octal escapes (`\040` for a space: a backslash
/// and exactly three digits 0-7) undone.
std::string unescape(const std::string& s) {
  std::string out;
  auto octal = [](char c) { return c >= '0' && c <= '7'; };
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && octal(s[i + 1]) && octal(s[i + 2]) && octal(s[i + 3])) {
      const int v = (s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0');
      if (v < 256) {
        out.push_back(static_cast<char>(v));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

/// A whole decimal integer (an optional '-' and digits, nothing else), or false.
bool parse_int(const std::string& s, int64_t& v) {
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && !s.empty();
}

/// The first line of file `path`, or false when it cannot be read.
bool first_line(const std::string& path, std::string& line) {
  std::ifstream in(path);
  return static_cast<bool>(in) && static_cast<bool>(std::getline(in, line));
}

/// ceil(quota / period) (at least 1), or 0 when the pair is not a limit.
int cpus_of(int64_t quota, int64_t period) {
  if (quota <= 0 || period <= 0) return 0;
  const int64_t cpus = std::max<int64_t>(1, quota / period + (quota % period != 0 ? 1 : 0));
  return static_cast<int>(std::min<int64_t>(cpus, 1 << 20));
}

/// The limit set in one cgroup directory, or 0.
int limit_in(const std::string& dir, bool v2) {
  std::string line;
  if (v2) {
    if (!first_line(dir + "/cpu.max", line)) return 0;
    const std::vector<std::string> w = words(line);
    int64_t quota = 0, period = 0;
    if (w.size() != 2 || !parse_int(w[0], quota) || !parse_int(w[1], period)) return 0;  // "max ..." too
    return cpus_of(quota, period);
  }
  int64_t quota = 0, period = 0;
  std::vector<std::string> w;
  if (!first_line(dir + "/cpu.cfs_quota_us", line) || (w = words(line)).size() != 1 || !parse_int(w[0], quota))
    return 0;
  if (!first_line(dir + "/cpu.cfs_period_us", line) || (w = words(line)).size() != 1 || !parse_int(w[0], period))
    return 0;
  return cpus_of(quota, period);
}

/// Whether `path` has a ".." segment (a cgroup outside the process's cgroup namespace shows so).
bool climbs(const std::string& path) {
  for (const std::string& seg : split(path, '/'))
    if (seg == "..") return true;
  return false;
}

/// The directory of cgroup `path` (absolute, as /proc/self/cgroup gives it) in the mounted
/// hierarchy that holds the CPU controller, from /proc/self/mountinfo: among the mounts of that
/// hierarchy whose root (the directory of the hierarchy they show) is `path` or one of its
/// ancestors, the one with the longest root (the last listed of equal ones: it is mounted over
/// the others); `mount_point` + `rel` is then the directory, `rel` empty or starting with '/'.
/// False when no mount shows the cgroup: its limit cannot be read (guessing another cgroup's
/// could cap a large machine at a small one's share).
bool find_cgroup_dir(const std::string& root, bool v2, const std::string& path, std::string& mount_point,
                     std::string& rel) {
  std::ifstream in(root + "/proc/self/mountinfo");
  size_t best_root = 0;
  bool found = false;
  for (std::string line; std::getline(in, line);) {
    // ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS
    const std::vector<std::string> w = words(line);
    const auto dash = std::find(w.begin(), w.end(), "-");
    if (w.size() < 6 || dash == w.end() || w.end() - dash < 4 || dash - w.begin() < 6) continue;
    const std::string& fstype = dash[1];
    bool match = false;
    if (v2) {
      match = fstype == "cgroup2";
    } else if (fstype == "cgroup") {
      const std::vector<std::string> opts = split(dash[3], ',');
      match = std::find(opts.begin(), opts.end(), "cpu") != opts.end();
    }
    if (!match) continue;
    std::string mroot = unescape(w[3]);
    while (mroot.size() > 1 && mroot.back() == '/') mroot.pop_back();
    const bool shows = mroot == "/" || (path.compare(0, mroot.size(), mroot) == 0 &&
                                        (path.size() == mroot.size() || path[mroot.size()] == '/'));
    const size_t len = mroot == "/" ? 0 : mroot.size();
    if (!shows || (found && len < best_root)) continue;
    found = true;
    best_root = len;
    mount_point = unescape(w[4]);
    rel = path.substr(len);
  }
  return found;
}

}  // namespace

int cgroup_cpu_limit(const std::string& root) {
  // /proc/self/cgroup: "ID:CONTROLLERS:PATH"; v2's line is "0::PATH". A v1 hierarchy with the
  // `cpu` controller decides where one exists (hybrid hosts mount v2 without controllers).
  std::ifstream in(root + "/proc/self/cgroup");
  std::string v1_path, v2_path;
  bool have_v1 = false, have_v2 = false;
  for (std::string line; std::getline(in, line);) {
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? std::string::npos : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    if (line.compare(0, a, "0") == 0 && controllers.empty()) {
      have_v2 = true;
      v2_path = path;
    } else {
      const std::vector<std::string> c = split(controllers, ',');
      if (std::find(c.begin(), c.end(), "cpu") != c.end()) {
        have_v1 = true;
        v1_path = path;
      }
    }
  }
  if (!have_v1 && !have_v2) return 0;
  const bool v2 = !have_v1;
  const std::string& path = v2 ? v2_path : v1_path;
  std::string mount_point, rel;
  if (path.empty() || path[0] != '/' || climbs(path) || !find_cgroup_dir(root, v2, path, mount_point, rel)) return 0;
  while (!rel.empty() && rel.back() == '/') rel.pop_back();

  // Walk from the cgroup up to the mount point: the smallest limit on the way binds.
  int best = 0;
  for (;;) {
    const int lim = limit_in(root + mount_point + rel, v2);
    if (lim > 0 && (best == 0 || lim < best)) best = lim;
    if (rel.empty()) break;
    rel.erase(rel.rfind('/'));
  }
  return best;
}

}  // namespace snapkv
