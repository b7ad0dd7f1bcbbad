#include "mapper/placement.h"

#include <algorithm>

namespace ddl::mapper {

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

SlotPlacement place_by_slots(const hostfiles::HostList& hosts, const PlacementRequest& request) {
  if (hosts.empty())
    throw PlacementError("no hosts to place ranks on; name them with -H or --hostfile");
  int64_t capacity = 0;
  for (const hostfiles::Host& h : hosts.hosts()) {
    capacity += request.ranks_per_host.value_or(h.slots);
  }
  const int64_t wanted = request.total_ranks.value_or(capacity);
  if (wanted > capacity) {
    const std::string per = request.ranks_per_host
                                ? " (-a " + std::to_string(*request.ranks_per_host) + " per host)"
                                : "";
    throw PlacementError("-n " + std::to_string(wanted) + " asks for more ranks than the " +
                         std::to_string(hosts.size()) + (hosts.size() == 1 ? " host" : " hosts") +
                         (hosts.size() == 1 ? " has" : " have") +
                         " places for: " + std::to_string(capacity) + per +
                         "; add hosts or slots (-H host:N), or lower -n");
  }
  SlotPlacement placement;
  int next = 0;
  for (const hostfiles::Host& h : hosts.hosts()) {
    const int room = request.ranks_per_host.value_or(h.slots);
    const int count = static_cast<int>(std::min<int64_t>(room, wanted - next));
    placement.hosts.push_back(HostRanks{h.name, next, count});
    next += count;
  }
  placement.ranks = next;
  return placement;
}

}  // namespace ddl::mapper
