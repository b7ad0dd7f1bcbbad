#pragma once

#include <string>
#include <vector>

#include "base/check.h"

namespace ddl::mapper {

/// The ranks one host runs: [first_rank, first_rank + count).
struct HostRanks {
  std::string host;
  int first_rank = 0;
  int count = 0;
};

/// How many ranks each host runs (place() in place.h decides): hosts are filled in order, each
/// up to its capacity, until -n ranks are placed. Consecutive ranks share a host, so the
/// innermost ring dimension stays inside hosts.
struct SlotPlacement {
  std::vector<HostRanks> hosts;  ///< one per host of the list, in order; count 0 when unused
  int ranks = 0;

  /// "2 hosts x 4" when every used host runs the same number, else "3 hosts: 4+4+2".
  std::string describe() const;
};

/// "1 rank", "6 ranks": a count and its noun, as placement messages write them.
std::string plural(int n, const std::string& noun);

/// A request the hosts cannot satisfy; what() says why and what to change.
using PlacementError = base::Error<struct PlacementErrorTag>;

}  // namespace ddl::mapper
