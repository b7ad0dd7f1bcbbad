// rank_list(): the ranks a bootstrap failure names, as compact text.

#include <string>
#include <vector>

#include "comm/bootstrap/bootstrap.h"

namespace ddl::comm {

namespace {

/// "rank 3", "ranks 1, 4 and 5-7".
std::string plain_list(const std::vector<int>& ranks) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1)
      ++j;
    parts.push_back(j > i + 1 ? std::to_string(ranks[i]) + "-" + std::to_string(ranks[j])
                              : std::to_string(ranks[i]));
    if (j == i + 1) parts.push_back(std::to_string(ranks[j]));
    i = j + 1;
  }
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) s += i + 1 == parts.size() ? " and " : ", ";
    s += parts[i];
  }
  return s;
}

}  // namespace

std::string rank_list(const std::vector<int>& ranks, const std::vector<std::string>& hosts) {
  bool known = !hosts.empty();
  for (int r : ranks)
    known = known && r >= 0 && static_cast<size_t>(r) < hosts.size() && !hosts[r].empty();
  if (!known) return plain_list(ranks);
  // Grouped by host, hosts in the order of their first rank.
  std::vector<std::string> order;
  std::vector<std::vector<int>> groups;
  for (int r : ranks) {
    size_t g = 0;
    while (g < order.size() && order[g] != hosts[r])
      ++g;
    if (g == order.size()) {
      order.push_back(hosts[r]);
      groups.emplace_back();
    }
    groups[g].push_back(r);
  }
  std::string s;
  for (size_t g = 0; g < order.size(); ++g)
    s += (g > 0 ? ", " : "") + plain_list(groups[g]) + " (" + order[g] + ")";
  return s;
}

}  // namespace ddl::comm
