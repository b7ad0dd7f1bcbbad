#pragma once

#include <string>
#include <vector>

#include "mapper/map.h"
#include "mapper/place.h"

namespace ddl::mapper {

// Private to mapper/: the binding step of place(), the GPU and cores of each rank of a host.

/// What each local rank of one host owns, by local rank.
struct HostBinding {
  std::vector<int> gpus;           ///< index into inventory.gpus; -1 for none
  std::vector<comm::CpuSet> cpus;  ///< empty when not bound
};

/// Binds the ranks of one used host (`use` numbered, `offer` its hardware): with a rankfile,
/// the CPUs it names (checked against the hardware) and the free GPU nearest them; else the
/// GPUs choose_gpus() picks and cores carved per package by cpu_sets(). A host whose hardware
/// is unknown gets neither. What the user should know goes to `notes`. Throws PlacementError
/// for rankfile entries the hardware cannot satisfy.
HostBinding bind_host(const HostUse& use, const HostOffer& offer, const PlaceRequest& request,
                      std::vector<std::string>& notes);

}  // namespace ddl::mapper
