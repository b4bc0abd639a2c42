// make_fuzz_seeds: writes the seed corpus of the GGUF parser fuzzer (six small GGUF files, each < 8 KiB)
// into a directory, creating it if needed. fuzz/run.sh calls it for every fuzz run; the seeds are not
// committed. The generator is snapkv::write_fuzz_seeds (include/support/fuzz_seeds.h).
//
//   make_fuzz_seeds <output dir>
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>

#include "snapkv/error.h"
#include "support/fuzz_seeds.h"

int main(int argc, char** argv) {
  std::string dir;
  CLI::App app{"Write the GGUF parser fuzzer's seed files (*.gguf) into a directory"};
  app.add_option("output_dir", dir, "directory to write the seeds into (created if missing)")->required();
  CLI11_PARSE(app, argc, argv);

  if (dir.empty()) {
    std::fprintf(stderr, "make_fuzz_seeds: the output directory must not be empty\n");
    return 2;
  }
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec)) {
    std::fprintf(stderr, "make_fuzz_seeds: output path '%s' exists and is not a directory\n", dir.c_str());
    return 2;
  }
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "make_fuzz_seeds: cannot create output directory '%s': %s\n", dir.c_str(),
                 ec.message().c_str());
    return 1;
  }
  try {
    for (const std::string& path : snapkv::write_fuzz_seeds(dir)) {
      std::printf("%s: %ju bytes\n", path.c_str(), static_cast<uintmax_t>(std::filesystem::file_size(path)));
    }
  } catch (const snapkv::Error& e) {
    std::fprintf(stderr, "make_fuzz_seeds: %s\n", e.what());
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    std::fprintf(stderr, "make_fuzz_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
