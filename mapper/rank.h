#pragma once

#include <string>
#include <vector>

#include "mapper/map.h"
#include "mapper/place.h"

namespace ddl::mapper {

// Private to mapper/: the ranking step of place(), which global ranks each host runs.

/// Numbers the ranks host by host, in host-list order: each host takes as many as its room
/// allows until -n ranks (else the whole capacity) are placed. Sets each use's first_rank,
/// count and ranks. Throws PlacementError when -n asks for more than the capacity.
void number_ranks(const hostfiles::HostList& hosts, const Capacity& capacity,
                  const PlaceRequest& request, std::vector<HostUse>& uses);

/// Puts each rank of the rankfile on the host it names, local ranks in rankfile order. Throws
/// PlacementError for a host that is not among the job's hosts.
void rank_by_rankfile(const hostfiles::HostList& hosts, const PlaceRequest& request,
                      std::vector<HostUse>& uses);

/// The rankfile's name in messages: its path, or "rankfile".
std::string rankfile_name(const PlaceRequest& request);

}  // namespace ddl::mapper
