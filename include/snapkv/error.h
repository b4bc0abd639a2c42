// snapkv: the one exception type the library throws for bad input or failed I/O.
#pragma once

#include <stdexcept>
#include <string>

namespace snapkv {

/// Thrown for every recoverable failure (bad file, bad metadata, bad argument,
/// prompt too long, ...). what() is one line that names the file/field/value at fault.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

}  // namespace snapkv
