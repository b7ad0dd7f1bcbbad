#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mapper/inventory.h"
#include "mapper/place.h"

namespace ddl::mapper {

// Private to mapper/: the mapping step of place(), which GPU slots each host offers and in
// what order ranks take them.

/// What one host of the job offers: its hardware and the GPUs ranks may use there.
struct HostOffer {
  const Inventory* inventory = nullptr;  ///< null when its hardware is unknown
  std::vector<int> gpus;                 ///< usable_gpus(), ascending; empty without inventory
};

/// Each host's offer, in host-list order (`inventories` by host name, as place() takes them).
std::vector<HostOffer> host_offers(const hostfiles::HostList& hosts,
                                   const std::map<std::string, const Inventory*>& inventories);

/// Hosts whose layouts differ: GPU counts must agree unless -a or a rankfile says what to run
/// (throws PlacementError); differences in GPUs or in cores per package are added to `notes`.
void check_layouts(const hostfiles::HostList& hosts, const std::vector<HostOffer>& offers,
                   const PlaceRequest& request, std::vector<std::string>& notes);

/// How many ranks the hosts have room for, without a rankfile.
struct Capacity {
  std::vector<int> room;     ///< per host, in host-list order
  std::int64_t total = 0;    ///< the sum of `room`
  bool slots_count = false;  ///< some host's room is its slots: more slots would help
};

/// Each host's room: -a, else its usable GPUs (capped by slots the user wrote), else its slots.
/// Sets each use's `capacity_from`. Throws PlacementError for -a beyond a host's GPUs.
Capacity host_capacity(const hostfiles::HostList& hosts, const std::vector<HostOffer>& offers,
                       const PlaceRequest& request, std::vector<HostUse>& uses);

/// GPUs for `k` ranks among `usable`: all of them, or round-robin over packages, ascending.
std::vector<int> choose_gpus(const Inventory& inventory, const std::vector<int>& usable, int k);

/// The first GPU of `usable` not `taken` on the package of `cpus`' first hardware thread, else
/// the first one not taken; -1 when all are taken.
int gpu_near(const Inventory& inventory, const std::vector<int>& usable,
             const std::vector<bool>& taken, const comm::CpuSet& cpus);

}  // namespace ddl::mapper
