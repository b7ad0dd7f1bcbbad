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
  // A few hosts count by count ("6+6+4"); beyond that, runs of equal counts ("43690 x 6 +
  // 1 x 4"), so that the text stays short for a million ranks.
  constexpr size_t kListed = 36;
  for (size_t i = 0; i < counts.size();) {
    size_t run = 1;
    while (counts.size() > kListed && i + run < counts.size() && counts[i + run] == counts[i])
      ++run;
    if (counts.size() <= kListed) {
      s += (i ? "+" : "") + std::to_string(counts[i]);
    } else {
      s += (i ? " + " : "") + std::to_string(run) + " x " + std::to_string(counts[i]);
    }
    i += run;
  }
  return s;
}

}  // namespace ddl::mapper
