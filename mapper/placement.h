#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "hostfiles/host_list.h"

namespace ddl::mapper {

/// What the user asked for: -a (ranks per host) and -n (total ranks).
struct PlacementRequest {
  std::optional<int> ranks_per_host;  ///< -a/--accelerators; overrides each host's slots
  std::optional<int> total_ranks;     ///< -n/--np; caps the total, filling hosts in order
};

/// The ranks one host runs: [first_rank, first_rank + count).
struct HostRanks {
  std::string host;
  int first_rank = 0;
  int count = 0;
};

/// Ranks placed on hosts by slot count, before any hardware is known: hosts are filled in
/// order, each up to its capacity (its slots, or -a), until -n ranks are placed. Consecutive
/// ranks share a host, so the innermost ring dimension stays inside hosts.
struct SlotPlacement {
  std::vector<HostRanks> hosts;  ///< one per host of the list, in order; count 0 when unused
  int ranks = 0;

  /// "2 hosts x 4" when every used host runs the same number, else "3 hosts: 4+4+2".
  std::string describe() const;
};

/// A request the hosts cannot satisfy; what() says why and what to change.
class PlacementError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Places ranks by slots. Throws PlacementError when -n asks for more ranks than the hosts
/// have places for, or when the list is empty.
SlotPlacement place_by_slots(const hostfiles::HostList& hosts, const PlacementRequest& request);

}  // namespace ddl::mapper
