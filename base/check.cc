#include "base/check.h"

#include <cstring>

namespace ddl::base {

void fail_check(std::string_view condition, std::string_view message, std::string_view file,
                int line) {
  const size_t slash = file.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? file : file.substr(slash + 1);
  throw InternalError("internal error: " + std::string(message) + " (" + std::string(name) + ":" +
                      std::to_string(line) + ": " + std::string(condition) +
                      " failed; please report this)");
}

std::string errno_text(int err) {
  return std::strerror(err);
}

}  // namespace ddl::base
