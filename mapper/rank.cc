// Ranking: which global ranks each host runs.
//
// How it works. Without a rankfile, ranks are numbered host-major: the first host takes ranks
// 0..room-1, the next host goes on from there, until -n ranks are placed (hosts left over run
// none). Consecutive ranks thus share a host, and the innermost ring stays inside hosts.
// With a rankfile, each entry puts its rank on the host it names; a host's local ranks follow
// the rankfile's order and its first_rank is the first rank listed for it. Which GPU and cores
// each rank gets is bind.cc's step.

#include "mapper/rank.h"

#include <algorithm>
#include <climits>

namespace ddl::mapper {

std::string rankfile_name(const PlaceRequest& request) {
  return request.rankfile_path.empty() ? "rankfile" : request.rankfile_path;
}

void number_ranks(const hostfiles::HostList& hosts, const Capacity& capacity,
                  const PlaceRequest& request, std::vector<HostUse>& uses) {
  const std::int64_t wanted = request.total_ranks.value_or(capacity.total);
  if (wanted > capacity.total) {
    const std::string per = request.ranks_per_host
                                ? " (-a " + std::to_string(*request.ranks_per_host) + " per host)"
                                : "";
    throw PlacementError("-n " + std::to_string(wanted) + " asks for more ranks than the " +
                         plural(static_cast<int>(hosts.size()), "host") +
                         (hosts.size() == 1 ? " has" : " have") +
                         " places for: " + std::to_string(capacity.total) + per + "; add hosts" +
                         (capacity.slots_count ? " or slots (-H host:N)" : "") + ", or lower -n");
  }
  if (capacity.total > INT_MAX / 2) {
    throw PlacementError("too many ranks: " + std::to_string(capacity.total));
  }
  int next = 0;
  for (size_t i = 0; i < hosts.size(); ++i) {
    HostUse& use = uses[i];
    use.first_rank = next;
    use.count = static_cast<int>(std::min<std::int64_t>(capacity.room[i], wanted - next));
    for (int l = 0; l < use.count; ++l)
      use.ranks.push_back(next + l);
    next += use.count;
  }
}

void rank_by_rankfile(const hostfiles::HostList& hosts, const PlaceRequest& request,
                      std::vector<HostUse>& uses) {
  const std::string file = rankfile_name(request);
  for (const hostfiles::RankfileEntry& e : request.rankfile->entries) {
    const std::string where = file + ":" + std::to_string(e.line);
    auto it = std::find_if(uses.begin(), uses.end(), [&](const HostUse& u) {
      return hosts.find(e.host) == hosts.find(u.name) && hosts.find(u.name) != nullptr;
    });
    if (e.host.empty() || it == uses.end()) {
      throw PlacementError(where + ": rank " + std::to_string(e.rank) + " is on host '" + e.host +
                           "', which is not among the job's hosts");
    }
    if (it->count == 0) it->first_rank = e.rank;
    it->ranks.push_back(e.rank);
    ++it->count;
    it->capacity_from = "rankfile";
  }
}

}  // namespace ddl::mapper
