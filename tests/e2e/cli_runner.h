// Runs the snapkv CLI from the build tree and captures its output (end-to-end tests).
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace snapkv::test {

struct CliResult {
  int rc = -1;
  std::string out;
  std::string err;
};

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

/// Runs `build/snapkv <args...>` (in directory `cwd` when given); stdout and stderr are captured
/// separately.
inline CliResult run_cli(const std::vector<std::string>& args, const std::filesystem::path& cwd = {}) {
  namespace fs = std::filesystem;
  const fs::path tmp = fs::temp_directory_path() / ("snapkv_e2e_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  std::string cmd = cwd.empty() ? std::string() : "cd " + shell_quote(cwd.string()) + " && ";
  cmd += shell_quote((binary_dir() / "snapkv").string());
  for (const auto& a : args) cmd += " " + shell_quote(a);
  cmd += " >" + shell_quote((tmp / "out").string()) + " 2>" + shell_quote((tmp / "err").string()) + " </dev/null";
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  auto slurp = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  r.out = slurp(tmp / "out");
  r.err = slurp(tmp / "err");
  fs::remove_all(tmp);
  return r;
}

}  // namespace snapkv::test
