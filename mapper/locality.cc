#include "mapper/locality.h"

#include <algorithm>

namespace ddl::mapper {

std::optional<int> package_of(const Inventory& inv, const Locality& where) {
  if (where.package) return where.package;
  if (where.numa_node) {
    for (const NumaNode& n : inv.numa_nodes) {
      if (n.os_index == *where.numa_node) return n.package;
    }
  }
  return std::nullopt;
}

std::optional<int> package_of_pu(const Inventory& inv, int pu) {
  for (const Package& p : inv.packages) {
    for (const Core& c : p.cores) {
      if (std::find(c.pus.begin(), c.pus.end(), pu) != c.pus.end()) return p.os_index;
    }
  }
  return std::nullopt;
}

const Package* find_package(const Inventory& inv, int os_index) {
  for (const Package& p : inv.packages) {
    if (p.os_index == os_index) return &p;
  }
  return nullptr;
}

std::vector<const Core*> cores_of(const Package& p) {
  std::vector<const Core*> out;
  for (const Core& c : p.cores)
    out.push_back(&c);
  return out;
}

std::vector<const Core*> all_cores(const Inventory& inv) {
  std::vector<const Core*> out;
  for (const Package& p : inv.packages) {
    for (const Core& c : p.cores)
      out.push_back(&c);
  }
  return out;
}

}  // namespace ddl::mapper
