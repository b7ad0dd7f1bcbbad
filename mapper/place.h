#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "hostfiles/hostfiles.h"
#include "mapper/inventory.h"
#include "mapper/nic_filter.h"
#include "mapper/placement.h"

namespace ddl::mapper {

// Hardware-aware placement: one rank per GPU, each bound to the cores of its GPU's package and
// to the NIC nearest its GPU, then the rings of the mode, ordered along the hardware. The result
// is a comm::Topology, the file every rank reads at init. place.cc outlines the steps; each lives
// in a file of its own: map.cc, rank.cc, bind.cc, nic.cc and rings.cc.

/// What the user asked for, beyond the hosts.
struct PlaceRequest {
  std::optional<int> ranks_per_host;  ///< -a/--accelerators
  std::optional<int> total_ranks;     ///< -n/--np: caps the total, filling hosts in order
  bool tcp = false;                   ///< --tcp: sockets over network interfaces, no RDMA
  NicFilter nic;                      ///< --nic
  /// --rankfile: places every rank itself (hosts and CPUs); GPUs and NICs are still chosen.
  const hostfiles::Rankfile* rankfile = nullptr;
  std::string rankfile_path;  ///< names the rankfile in errors ("ranks.txt")
};

/// How one host of the job is used.
struct HostUse {
  std::string name;
  const Inventory* inventory = nullptr;  ///< null when its hardware is unknown (not probed)
  int first_rank = 0;                    ///< with host-major numbering; see `ranks`
  int count = 0;                         ///< ranks on it
  std::string capacity_from;             ///< "6 GPUs", "4 slots", "-a 2", "rankfile"
  std::vector<int> ranks;                ///< its global ranks, by local rank
  /// Its local ranks in hardware ring order: neighbours on NVLink or one PCIe switch adjacent.
  std::vector<int> ring_order;
};

/// Where every rank goes, before the mode's rings are drawn.
struct Placement {
  std::vector<HostUse> hosts;  ///< every host of the list, in order; count 0 when unused
  std::vector<comm::RankPlacement> ranks;  ///< by global rank
  std::vector<comm::Host> topology_hosts;  ///< used hosts, with the NICs the ranks may use
  std::vector<std::string> notes;          ///< what the user should know (heterogeneity, binding)

  /// The counts per host (for the mode and the report).
  SlotPlacement slots() const;
};

/// Places ranks on `hosts` using each host's inventory (`inventories` by host name; a host
/// missing there, or mapped to null, is placed by slots without GPUs, CPUs or NICs).
///  - Capacity per host: -a, else the GPUs it may use ($CUDA_VISIBLE_DEVICES honoured), capped by
///    slots written by the user on -H or in a hostfile; a host without GPUs gets its slots.
///  - GPUs: with fewer ranks than GPUs, taken round-robin over packages, lowest index first.
///  - CPUs: each package's cores split evenly among the ranks whose GPUs hang off it (7 cores
///    each for 21 usable cores and 3 GPUs); hosts without GPUs split all cores over their ranks.
///    Ranks are bound to whole cores, to hardware threads when there are fewer cores than ranks,
///    and not at all when there are fewer threads than ranks (noted).
///  - NIC: RDMA devices with an active port first (not with --tcp), then network interfaces;
///    nearest the GPU (same PCIe switch, same host bridge, same package, any), fewest ranks
///    first; virtual interfaces only when --nic names them.
/// Throws PlacementError when the hosts cannot satisfy the request: layouts that differ without
/// -a, -a beyond a host's GPUs, -n beyond the capacity, a rankfile naming sockets, cores or hosts
/// that do not exist, overlapping rankfile CPUs, more ranks on a host than GPUs.
Placement place(const hostfiles::HostList& hosts,
                const std::map<std::string, const Inventory*>& inventories,
                const PlaceRequest& request);

/// The topology of the job: the placement, `mode` (its dimensions resolved, multiplying to the
/// rank count) and the rings of every dimension. Ranks get coordinates host by host, in each
/// host's hardware ring order, so that rings inside a host follow NVLink/PCIe neighbours and
/// rings across hosts join the ranks at the same place on each host. Validated before return.
comm::Topology make_topology(const Placement& placement, const comm::Mode& mode,
                             const std::string& job_id);
/// make_topology() that moves the ranks and the used hosts out of `placement` (left empty:
/// its hosts, counts and ring orders stay) instead of copying them: a plan then holds each
/// rank's placement once (168 bytes and its strings a rank, a million ranks in a large plan).
comm::Topology take_topology(Placement& placement, const comm::Mode& mode,
                             const std::string& job_id);

/// The GPUs per socket, when the innermost ring should stay inside a socket rather than span the
/// host: every used host runs the same number k >= 2 of GPU ranks on each of two or more
/// sockets, its ring order keeps each socket's ranks together, and the probe knows the GPUs'
/// links (NVML) and found no NVLink between sockets, to the CPUs (POWER's NVLink and X-Bus join
/// the sockets) or to an NVSwitch. Otherwise nullopt: one innermost ring per host.
std::optional<int> socket_ring_size(const Placement& placement);

/// The order in which a ring should visit `gpus` (indexes into inventory.gpus): the cycle of
/// least cost, where NVLink (or a shared NVSwitch) costs 1, the same PCIe switch 2, the same
/// package 4 and crossing packages 8; the given order when it is among the cheapest. Exact up to
/// 12 GPUs, greedy beyond. Returns positions into `gpus`, starting with 0.
std::vector<int> hardware_ring_order(const Inventory& inventory, const std::vector<int>& gpus);

/// The GPUs $CUDA_VISIBLE_DEVICES lets a process use (indexes, by PCI order), or all of them
/// when it is unset. Entries are indexes or UUID prefixes ("GPU-5e4b"); like CUDA, the list
/// stops at the first entry that names no GPU.
std::vector<int> usable_gpus(const Inventory& inventory);

}  // namespace ddl::mapper
