#pragma once

// Helpers shared by the hostfiles tests.

#include <string>
#include <vector>

#include "hostfiles/host_list.h"
#include "hostfiles/input_error.h"

namespace ddl::hostfiles::test {

/// Every field of a host on one line, for comparing whole lists with readable failures:
/// "node1 slots=4 max=8 given openmpi-hostfile hosts.txt:1".
inline std::string describe(const Host& h) {
  std::string s = h.name + " slots=" + std::to_string(h.slots);
  if (h.max_slots) s += " max=" + std::to_string(*h.max_slots);
  s += h.slots_given ? " given " : " counted ";
  return s + std::string(to_string(h.kind)) + " " + h.origin;
}

inline std::vector<std::string> describe(const HostList& list) {
  std::vector<std::string> out;
  for (const Host& h : list.hosts())
    out.push_back(describe(h));
  return out;
}

/// The what() of the InputError `f` throws, or "no error".
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace ddl::hostfiles::test
