#pragma once

#include <string>
#include <vector>

#include "mapper/inventory.h"
#include "mapper/place.h"

namespace ddl::mapper {

// Private to mapper/: the NIC step of place(), which NIC each rank uses.

/// A NIC a rank may use: an RDMA device, or one network interface.
struct NicChoice {
  const Nic* nic = nullptr;
  std::string name;  ///< the RDMA device, or the interface
  std::string kind;
  std::string address;
  int load = 0;  ///< ranks given it so far
};

/// The NICs ranks on `host` may use, best tier only: RDMA devices with an active port (not with
/// --tcp), else network interfaces, as --nic lets them through. Throws PlacementError when
/// --nic lets none through.
std::vector<NicChoice> nic_candidates(const Inventory& inventory, const std::string& host,
                                      const PlaceRequest& request);

/// The topology file's NICs of a host: each candidate's name once, in order.
std::vector<comm::Nic> host_nics(const std::vector<NicChoice>& candidates);

/// The candidate for a rank with GPU `gpu` (-1: none) and CPUs `cpus`: the nearest to the GPU,
/// else to the package of the CPUs; the least loaded among the nearest, the first among
/// those. Counts the rank in its load. `candidates` must not be empty.
NicChoice& choose_nic(const Inventory& inventory, std::vector<NicChoice>& candidates, int gpu,
                      const comm::CpuSet& cpus);

}  // namespace ddl::mapper
