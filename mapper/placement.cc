#include "mapper/placement.h"

#include <algorithm>

namespace ddl::mapper {

std::string plural(int n, const std::string& noun) {
  return std::to_string(n) + " " + (n == 1 ? noun : noun + "s");
}

std::string SlotPlacement::describe() const {
  std::vector<int> counts;
  for (const HostRanks& h : hosts) {
    if (h.count > 0) counts.push_back(h.count);
  }
  const std::string n_hosts =
      std::to_string(counts.size()) + (counts.size() == 1 ? " host" : " hosts");
  if (counts.empty()) return "no hosts";
  if (std::all_of(counts.begin(), counts.end(), [&](int c) { return c == counts[0]; })) {
    return n_hosts + " x " + std::to_string(counts[0]);
  }
  std::string s = n_hosts + ": ";
  for (size_t i = 0; i < counts.size(); ++i)
    s += (i ? "+" : "") + std::to_string(counts[i]);
  return s;
}

}  // namespace ddl::mapper
