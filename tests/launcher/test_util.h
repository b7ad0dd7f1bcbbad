#pragma once

// Helpers shared by the launcher's tests (and lsf's): expected command lines written in
// pieces, and the text of a LaunchError.

#include <initializer_list>
#include <string>
#include <vector>

#include "launcher/backend.h"

namespace ddl::launcher::test {

/// The words of `parts`, one part after the other.
inline std::vector<std::string> words(std::initializer_list<std::vector<std::string>> parts) {
  std::vector<std::string> out;
  for (const std::vector<std::string>& p : parts)
    out.insert(out.end(), p.begin(), p.end());
  return out;
}

/// `flag NAME` for each of `names`: how mpirun and prterun (-x) or jsrun (-E) forward a
/// variable to the ranks.
inline std::vector<std::string> each(const std::string& flag,
                                     const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const std::string& n : names)
    out.insert(out.end(), {flag, n});
  return out;
}

/// The what() of the LaunchError `f` throws, or "(no error)".
template <typename F>
std::string launch_error_of(F&& f) {
  try {
    f();
  } catch (const LaunchError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace ddl::launcher::test
