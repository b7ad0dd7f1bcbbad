// NIC choice: which NIC each rank sends through.
//
// How it works. A host's candidates are one tier: RDMA devices with an active port (unless
// --tcp), and only when there are none, network interfaces, both as --nic lets them through
// (virtual interfaces only when --nic names them); --nic that lets nothing through is an
// error naming what the host has. Each rank then takes the candidate nearest its GPU (same
// PCIe switch, same host bridge, same package, anywhere), or without a GPU the one nearest
// its CPUs' package, and among equally near ones the one with the fewest ranks so far, so
// that ranks spread over the NICs of a switch or socket.

#include "mapper/nic.h"

#include <algorithm>
#include <optional>

#include "mapper/locality.h"
#include "mapper/nic_filter.h"

namespace ddl::mapper {

namespace {

std::string preferred_address(const std::vector<std::string>& addresses) {
  for (const std::string& a : addresses) {
    if (a.find(':') == std::string::npos) return a;  // IPv4 first
  }
  return addresses.empty() ? "" : addresses.front();
}

bool rdma_usable(const Nic& nic) {
  if (nic.kind == NicKind::kEthernet) return false;
  if (nic.ports.empty()) return true;
  return std::any_of(nic.ports.begin(), nic.ports.end(), [](const NicPort& p) {
    return p.state.empty() || p.state == "active" || p.state == "active_defer";
  });
}

bool filter_passes_rdma(const Nic& nic, const NicFilter& filter) {
  if (filter.names.empty()) return true;
  if (filter.exclude) {
    if (!filter.matches(nic.name)) return false;
    return std::all_of(nic.interfaces.begin(), nic.interfaces.end(),
                       [&](const NetInterface& i) { return filter.matches(i.name); });
  }
  if (filter.matches(nic.name)) return true;
  return std::any_of(nic.interfaces.begin(), nic.interfaces.end(),
                     [&](const NetInterface& i) { return filter.matches(i.name); });
}

/// RDMA devices with an active port that --nic lets through.
std::vector<NicChoice> rdma_candidates(const Inventory& inv, const NicFilter& filter) {
  std::vector<NicChoice> out;
  for (const Nic& nic : inv.nics) {
    if (!rdma_usable(nic) || !filter_passes_rdma(nic, filter)) continue;
    std::vector<std::string> addresses;
    for (const NetInterface& i : nic.interfaces)
      addresses.insert(addresses.end(), i.addresses.begin(), i.addresses.end());
    out.push_back(
        NicChoice{&nic, nic.name, std::string(to_string(nic.kind)), preferred_address(addresses)});
  }
  return out;
}

/// Network interfaces that --nic lets through, in select_interfaces' order.
std::vector<NicChoice> interface_candidates(const Inventory& inv, const NicFilter& filter) {
  std::vector<NicChoice> out;
  std::vector<std::string> names;
  for (const Nic& nic : inv.nics) {
    for (const NetInterface& i : nic.interfaces)
      names.push_back(i.name);
  }
  for (const std::string& name : select_interfaces(names, filter)) {
    for (const Nic& nic : inv.nics) {
      for (const NetInterface& i : nic.interfaces) {
        if (i.name != name) continue;
        out.push_back(NicChoice{&nic, i.name, std::string(to_string(nic.kind)),
                                preferred_address(i.addresses)});
      }
    }
  }
  return out;
}

/// "mlx5_0, ib0, eth0": the host's NICs and their interfaces, for messages.
std::string nic_names(const Inventory& inv) {
  std::string have;
  for (const Nic& nic : inv.nics) {
    have += (have.empty() ? "" : ", ") + nic.name;
    for (const NetInterface& i : nic.interfaces) {
      if (i.name != nic.name) have += ", " + i.name;
    }
  }
  return have;
}

/// How far a NIC is from a rank's device: 0 same PCIe switch, 1 same host bridge, 2 same
/// package, 3 farther.
int nic_distance(const Inventory& inv, const Locality& from, const Nic& nic) {
  if (!from.pci_switch.empty() && from.pci_switch == nic.locality.pci_switch) return 0;
  if (!from.host_bridge.empty() && from.host_bridge == nic.locality.host_bridge) return 1;
  const std::optional<int> a = package_of(inv, from);
  const std::optional<int> b = package_of(inv, nic.locality);
  if (a && b && *a == *b) return 2;
  return 3;
}

}  // namespace

std::vector<NicChoice> nic_candidates(const Inventory& inv, const std::string& host,
                                      const PlaceRequest& request) {
  if (!request.tcp) {
    std::vector<NicChoice> rdma = rdma_candidates(inv, request.nic);
    if (!rdma.empty()) return rdma;
  }
  std::vector<NicChoice> out = interface_candidates(inv, request.nic);
  if (out.empty() && !request.nic.names.empty()) {
    const std::string have = nic_names(inv);
    throw PlacementError("--nic " + request.nic.str() + " lets no " +
                         (request.tcp ? "network interface" : "NIC") + " of " + host +
                         " through (it has " + (have.empty() ? "none" : have) +
                         "); change --nic or leave it out");
  }
  return out;
}

std::vector<comm::Nic> host_nics(const std::vector<NicChoice>& candidates) {
  std::vector<comm::Nic> nics;
  for (const NicChoice& c : candidates) {
    if (std::none_of(nics.begin(), nics.end(),
                     [&](const comm::Nic& n) { return n.name == c.name; })) {
      nics.push_back(comm::Nic{c.name, c.kind, c.address});
    }
  }
  return nics;
}

NicChoice& choose_nic(const Inventory& inv, std::vector<NicChoice>& candidates, int gpu,
                      const comm::CpuSet& cpus) {
  Locality from;
  if (gpu >= 0) {
    from = inv.gpus[gpu].locality;
  } else if (!cpus.empty()) {
    from.package = package_of_pu(inv, cpus.ranges()[0].first);
  }
  NicChoice* best = nullptr;
  int best_distance = 0;
  for (NicChoice& c : candidates) {
    const int d = nic_distance(inv, from, *c.nic);
    if (!best || d < best_distance || (d == best_distance && c.load < best->load)) {
      best = &c;
      best_distance = d;
    }
  }
  ++best->load;
  return *best;
}

}  // namespace ddl::mapper
