// Placement: where every rank of the job runs, with what it owns there.
//
// How it works, in the steps PRRTE also separates (rmaps: map, rank, bind):
//  1. Map (map.cc): what each host offers, the GPUs its processes may use; hosts whose layouts
//     differ are refused or noted; each host's room for ranks.
//  2. Rank (rank.cc): global ranks numbered host by host up to -n, or as a rankfile says.
//  3. Bind (bind.cc), host by host: each rank's GPU and the cores near it.
//  4. NIC (nic.cc): each rank's NIC, the nearest to its GPU, spread over equally near ones.
//  5. Ring order (rings.cc): each host's ranks in the order a ring should visit them.
// make_topology() (rings.cc) then draws the mode's rings over that order.

#include "mapper/place.h"

#include <algorithm>

#include "mapper/bind.h"
#include "mapper/map.h"
#include "mapper/nic.h"
#include "mapper/rank.h"
#include "mapper/rings.h"

namespace ddl::mapper {

namespace {

/// Steps 3 to 5 for one used host: binds its ranks, gives each its NIC, orders its ring and
/// adds the host to the topology's hosts.
void place_host(HostUse& use, const HostOffer& offer, const PlaceRequest& request,
                RingOrders& rings, Placement& out) {
  const Inventory* inv = offer.inventory;
  const HostBinding binding = bind_host(use, offer, request, out.notes);
  std::vector<NicChoice> nics;
  if (inv) nics = nic_candidates(*inv, use.name, request);
  comm::Host host;
  host.index = static_cast<int>(out.topology_hosts.size());
  host.name = use.name;
  host.address = use.name;
  host.nics = host_nics(nics);
  for (int l = 0; l < use.count; ++l) {
    comm::RankPlacement& r = out.ranks[use.ranks[l]];
    r.rank = use.ranks[l];
    r.local_rank = l;
    r.host = host.index;
    r.gpu = binding.gpus[l];
    if (inv && r.gpu >= 0) {
      r.gpu_bus_id = inv->gpus[r.gpu].pci_bus_id;
      r.gpu_uuid = inv->gpus[r.gpu].uuid;
    }
    r.cpus = binding.cpus[l];
    if (!nics.empty()) {
      const NicChoice& nic = choose_nic(*inv, nics, r.gpu, r.cpus);
      r.nic = nic.name;
      r.address = nic.address;
    }
  }
  use.ring_order = rings.of(inv, binding.gpus);
  out.topology_hosts.push_back(std::move(host));
}

}  // namespace

SlotPlacement Placement::slots() const {
  SlotPlacement s;
  s.hosts.reserve(hosts.size());
  for (const HostUse& h : hosts) {
    s.hosts.push_back(HostRanks{h.name, h.first_rank, h.count});
    s.ranks += h.count;
  }
  return s;
}

Placement place(const hostfiles::HostList& hosts,
                const std::map<std::string, const Inventory*>& inventories,
                const PlaceRequest& request) {
  if (hosts.empty())
    throw PlacementError("no hosts to place ranks on; name them with -H or --hostfile");
  Placement out;
  const std::vector<HostOffer> offers = host_offers(hosts, inventories);
  out.hosts.reserve(hosts.size());
  for (size_t i = 0; i < hosts.size(); ++i) {
    HostUse use;
    use.name = hosts.hosts()[i].name;
    use.inventory = offers[i].inventory;
    out.hosts.push_back(std::move(use));
  }
  check_layouts(hosts, offers, request, out.notes);
  if (request.rankfile) {
    rank_by_rankfile(hosts, request, out.hosts);
  } else {
    number_ranks(hosts, host_capacity(hosts, offers, request, out.hosts), request, out.hosts);
  }
  int total = 0;
  for (const HostUse& u : out.hosts)
    total += u.count;
  out.ranks.resize(total);
  RingOrders rings;
  out.topology_hosts.reserve(static_cast<size_t>(std::count_if(
      out.hosts.begin(), out.hosts.end(), [](const HostUse& u) { return u.count > 0; })));
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (out.hosts[i].count > 0) place_host(out.hosts[i], offers[i], request, rings, out);
  }
  return out;
}

}  // namespace ddl::mapper
