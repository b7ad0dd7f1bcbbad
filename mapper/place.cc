#include "mapper/place.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <functional>
#include <numeric>

namespace ddl::mapper {

namespace {

std::string plural(int n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string plural(int n, const std::string& one) {
  return plural(n, one, one + "s");
}

/// The package (OS index) a device or NUMA node belongs to, when known.
std::optional<int> package_of(const Inventory& inv, const Locality& where) {
  if (where.package) return where.package;
  if (where.numa_node) {
    for (const NumaNode& n : inv.numa_nodes) {
      if (n.os_index == *where.numa_node) return n.package;
    }
  }
  return std::nullopt;
}

const Package* find_package(const Inventory& inv, int os_index) {
  for (const Package& p : inv.packages) {
    if (p.os_index == os_index) return &p;
  }
  return nullptr;
}

/// Where a set of PUs sits: the package holding its first PU.
std::optional<int> package_of_pu(const Inventory& inv, int pu) {
  for (const Package& p : inv.packages) {
    for (const Core& c : p.cores) {
      if (std::find(c.pus.begin(), c.pus.end(), pu) != c.pus.end()) return p.os_index;
    }
  }
  return std::nullopt;
}

/// Hosts grouped by a value, for messages: "node01 and 16 more have 6 GPUs, node18 has 4".
std::string describe_groups(const std::vector<std::pair<std::string, std::string>>& host_values,
                            const std::string& what_one, const std::string& what_many) {
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;  // value -> hosts
  for (const auto& hv : host_values) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == hv.second; });
    if (it == groups.end()) {
      groups.push_back({hv.second, {hv.first}});
    } else {
      it->second.push_back(hv.first);
    }
  }
  std::string s;
  for (const auto& [value, names] : groups) {
    if (!s.empty()) s += ", ";
    if (names.size() == 1) {
      s += names[0] + " has " + value + " " + what_one;
    } else if (names.size() == 2) {
      s += names[0] + " and " + names[1] + " have " + value + " " + what_many;
    } else {
      s += names[0] + " and " + std::to_string(names.size() - 1) + " more have " + value + " " +
           what_many;
    }
  }
  return s;
}

/// Splits `cores` (in topology order) into `k` equal, consecutive CPU sets: whole cores when
/// there are enough, else hardware threads; nullopt when there are fewer threads than ranks.
std::optional<std::vector<comm::CpuSet>> carve(const std::vector<const Core*>& cores, int k) {
  std::vector<comm::CpuSet> sets(k);
  if (k == 0) return sets;
  if (static_cast<int>(cores.size()) >= k) {
    const size_t per = cores.size() / k;
    for (int i = 0; i < k; ++i) {
      for (size_t c = i * per; c < (i + 1) * per; ++c) {
        for (int pu : cores[c]->pus)
          sets[i].add(pu);
      }
    }
    return sets;
  }
  std::vector<int> pus;
  for (const Core* c : cores)
    pus.insert(pus.end(), c->pus.begin(), c->pus.end());
  if (static_cast<int>(pus.size()) < k) return std::nullopt;
  const size_t per = pus.size() / k;
  for (int i = 0; i < k; ++i) {
    for (size_t p = i * per; p < (i + 1) * per; ++p)
      sets[i].add(pus[p]);
  }
  return sets;
}

std::vector<const Core*> cores_of(const Package& p) {
  std::vector<const Core*> out;
  for (const Core& c : p.cores)
    out.push_back(&c);
  return out;
}

std::vector<const Core*> all_cores(const Inventory& inv) {
  std::vector<const Core*> out;
  for (const Package& p : inv.packages) {
    for (const Core& c : p.cores)
      out.push_back(&c);
  }
  return out;
}

/// A NIC a rank may use: an RDMA device, or one network interface.
struct NicChoice {
  const Nic* nic = nullptr;
  std::string name;  ///< the RDMA device, or the interface
  std::string kind;
  std::string address;
  int load = 0;
};

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

/// The NICs ranks on this host may use, best tier only. Throws when --nic matches none.
std::vector<NicChoice> nic_candidates(const Inventory& inv, const std::string& host,
                                      const PlaceRequest& request) {
  std::vector<NicChoice> out;
  if (!request.tcp) {
    for (const Nic& nic : inv.nics) {
      if (!rdma_usable(nic) || !filter_passes_rdma(nic, request.nic)) continue;
      std::vector<std::string> addresses;
      for (const NetInterface& i : nic.interfaces)
        addresses.insert(addresses.end(), i.addresses.begin(), i.addresses.end());
      out.push_back(NicChoice{&nic, nic.name, std::string(to_string(nic.kind)),
                              preferred_address(addresses)});
    }
    if (!out.empty()) return out;
  }
  std::vector<std::string> names;
  for (const Nic& nic : inv.nics) {
    for (const NetInterface& i : nic.interfaces)
      names.push_back(i.name);
  }
  for (const std::string& name : select_interfaces(names, request.nic)) {
    for (const Nic& nic : inv.nics) {
      for (const NetInterface& i : nic.interfaces) {
        if (i.name != name) continue;
        out.push_back(NicChoice{&nic, i.name, std::string(to_string(nic.kind)),
                                preferred_address(i.addresses)});
      }
    }
  }
  if (out.empty() && !request.nic.names.empty()) {
    std::string have;
    for (const Nic& nic : inv.nics) {
      have += (have.empty() ? "" : ", ") + nic.name;
      for (const NetInterface& i : nic.interfaces) {
        if (i.name != nic.name) have += ", " + i.name;
      }
    }
    throw PlacementError("--nic " + request.nic.str() + " lets no " +
                         (request.tcp ? "network interface" : "NIC") + " of " + host +
                         " through (it has " + (have.empty() ? "none" : have) +
                         "); change --nic or leave it out");
  }
  return out;
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

/// Which user inputs give slot counts that cap the ranks of a GPU host.
bool user_wrote_slots(const hostfiles::Host& h) {
  if (!h.slots_given) return false;
  switch (h.kind) {
    case hostfiles::SourceKind::kHostsOption:
    case hostfiles::SourceKind::kOpenMpiHostfile:
    case hostfiles::SourceKind::kMpichHostfile:
      return true;
    default:
      return false;
  }
}

/// GPUs for `k` ranks among `usable`: all of them, or round-robin over packages.
std::vector<int> choose_gpus(const Inventory& inv, const std::vector<int>& usable, int k) {
  if (k >= static_cast<int>(usable.size())) return usable;
  std::vector<std::pair<std::optional<int>, std::vector<int>>> by_package;
  for (int g : usable) {
    const std::optional<int> p = package_of(inv, inv.gpus[g].locality);
    auto it = std::find_if(by_package.begin(), by_package.end(),
                           [&](const auto& e) { return e.first == p; });
    if (it == by_package.end()) {
      by_package.push_back({p, {g}});
    } else {
      it->second.push_back(g);
    }
  }
  std::vector<int> chosen;
  for (size_t round = 0; static_cast<int>(chosen.size()) < k; ++round) {
    for (const auto& [p, gpus] : by_package) {
      if (round < gpus.size() && static_cast<int>(chosen.size()) < k) chosen.push_back(gpus[round]);
    }
  }
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

/// CPU sets for the ranks of one host from their GPUs (-1: none), in local-rank order.
std::vector<comm::CpuSet> cpu_sets(const Inventory& inv, const std::string& host,
                                   const std::vector<int>& gpus, std::vector<std::string>& notes) {
  const int k = static_cast<int>(gpus.size());
  std::vector<comm::CpuSet> sets(k);
  const auto unbound = [&](const std::string& where, int ranks) {
    notes.push_back(host + ": " + plural(ranks, "rank") + " for the " + where +
                    ": not bound to CPUs");
  };
  const bool with_gpus = k > 0 && gpus[0] >= 0;
  // Ranks grouped by package: by their GPU's, or spread evenly over packages without GPUs.
  std::vector<std::optional<int>> package(k);
  bool grouped = true;
  if (with_gpus) {
    for (int i = 0; i < k; ++i) {
      package[i] = package_of(inv, inv.gpus[gpus[i]].locality);
      if (!package[i] || !find_package(inv, *package[i])) grouped = false;
    }
  } else {
    std::vector<const Package*> with_cores;
    for (const Package& p : inv.packages) {
      if (!p.cores.empty()) with_cores.push_back(&p);
    }
    if (with_cores.empty() || k % with_cores.size() != 0) {
      grouped = false;
    } else {
      const int per = k / static_cast<int>(with_cores.size());
      for (int i = 0; i < k; ++i)
        package[i] = with_cores[i / per]->os_index;
    }
  }
  if (!grouped) {
    if (auto carved = carve(all_cores(inv), k)) return *carved;
    unbound(plural(inv.pu_count(), "hardware thread"), k);
    return sets;
  }
  std::vector<int> seen;
  for (int i = 0; i < k; ++i) {
    if (std::find(seen.begin(), seen.end(), *package[i]) != seen.end()) continue;
    seen.push_back(*package[i]);
    std::vector<int> members;
    for (int j = 0; j < k; ++j) {
      if (package[j] == package[i]) members.push_back(j);
    }
    const Package& p = *find_package(inv, *package[i]);
    auto carved = carve(cores_of(p), static_cast<int>(members.size()));
    if (!carved) {
      int threads = 0;
      for (const Core& c : p.cores)
        threads += static_cast<int>(c.pus.size());
      unbound(plural(threads, "hardware thread") + " of package " + std::to_string(p.os_index),
              static_cast<int>(members.size()));
      continue;
    }
    for (size_t m = 0; m < members.size(); ++m)
      sets[members[m]] = std::move((*carved)[m]);
  }
  return sets;
}

/// The CPUs a rankfile entry names on a host, checked against its inventory.
comm::CpuSet rankfile_cpus(const Inventory& inv, const hostfiles::RankfileEntry& e,
                           const std::string& where) {
  comm::CpuSet set;
  const auto fail = [&](const std::string& what) {
    throw PlacementError(where + ": rank " + std::to_string(e.rank) + " names " + what +
                         "; change the rankfile or leave it out");
  };
  const int cores = inv.core_count();
  for (const hostfiles::SlotSpec& s : e.slots) {
    if (s.socket) {
      const int sockets = static_cast<int>(inv.packages.size());
      if (*s.socket >= sockets) {
        fail("socket " + std::to_string(*s.socket) + " of " + e.host + ", which has " +
             plural(sockets, "socket") + " (0-" + std::to_string(sockets - 1) + ")");
      }
      const Package& p = inv.packages[*s.socket];
      const int n = static_cast<int>(p.cores.size());
      if (s.all_cores) {
        for (const Core& c : p.cores) {
          for (int pu : c.pus)
            set.add(pu);
        }
      }
      for (const hostfiles::CpuRange& r : s.cpus) {
        if (r.last >= n) {
          fail("core " + std::to_string(r.last) + " of socket " + std::to_string(*s.socket) +
               " on " + e.host + ", which has " + plural(n, "core") + " (0-" +
               std::to_string(n - 1) + ")");
        }
        for (int c = r.first; c <= r.last; ++c) {
          for (int pu : p.cores[c].pus)
            set.add(pu);
        }
      }
    } else {
      const std::vector<const Core*> all = all_cores(inv);
      for (const hostfiles::CpuRange& r : s.cpus) {
        if (r.last >= cores) {
          fail("core " + std::to_string(r.last) + " of " + e.host + ", which has " +
               plural(cores, "core") + " (0-" + std::to_string(cores - 1) + ")");
        }
        for (int c = r.first; c <= r.last; ++c) {
          for (int pu : all[c]->pus)
            set.add(pu);
        }
      }
    }
  }
  return set;
}

/// The cost of a ring edge between two GPUs.
int link_cost(const Gpu& a, const Gpu& b, const Inventory& inv) {
  if (std::find(a.nvlink_peers.begin(), a.nvlink_peers.end(), b.index) != a.nvlink_peers.end() ||
      (a.nvlink_switch && b.nvlink_switch)) {
    return 1;
  }
  if (!a.locality.pci_switch.empty() && a.locality.pci_switch == b.locality.pci_switch) return 2;
  const std::optional<int> pa = package_of(inv, a.locality);
  const std::optional<int> pb = package_of(inv, b.locality);
  if (pa && pb && *pa == *pb) return 4;
  return 8;
}

}  // namespace

SlotPlacement Placement::slots() const {
  SlotPlacement s;
  for (const HostUse& h : hosts) {
    s.hosts.push_back(HostRanks{h.name, h.first_rank, h.count});
    s.ranks += h.count;
  }
  return s;
}

std::vector<int> usable_gpus(const Inventory& inv) {
  std::vector<int> all(inv.gpus.size());
  std::iota(all.begin(), all.end(), 0);
  if (!inv.cuda_visible_devices) return all;
  std::vector<int> out;
  std::string_view rest = *inv.cuda_visible_devices;
  while (!rest.empty() || out.empty()) {
    const size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front())))
      item.remove_prefix(1);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back())))
      item.remove_suffix(1);
    std::optional<int> found;
    if (!item.empty() && std::all_of(item.begin(), item.end(), [](char c) {
          return std::isdigit(static_cast<unsigned char>(c));
        })) {
      if (item.size() < 6) {
        const int i = std::stoi(std::string(item));
        if (i < static_cast<int>(inv.gpus.size())) found = i;
      }
    } else if (item.size() > 4 && item.substr(0, 4) == "GPU-") {
      for (const Gpu& g : inv.gpus) {
        if (g.uuid.size() >= item.size() && g.uuid.compare(0, item.size(), item) == 0) {
          found = g.index;
          break;
        }
      }
    }
    if (!found || std::find(out.begin(), out.end(), *found) != out.end()) break;
    out.push_back(*found);
    if (rest.empty()) break;
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> hardware_ring_order(const Inventory& inv, const std::vector<int>& gpus) {
  const int n = static_cast<int>(gpus.size());
  std::vector<int> identity(n);
  std::iota(identity.begin(), identity.end(), 0);
  if (n <= 3) return identity;  // every cycle of 3 or fewer is the same ring
  std::vector<std::vector<int>> cost(n, std::vector<int>(n));
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j)
      cost[i][j] = link_cost(inv.gpus[gpus[i]], inv.gpus[gpus[j]], inv);
  }
  const auto cycle_cost = [&](const std::vector<int>& order) {
    int c = 0;
    for (int i = 0; i < n; ++i)
      c += cost[order[i]][order[(i + 1) % n]];
    return c;
  };
  std::vector<int> best;
  if (n <= 12) {
    // Held-Karp: dp[mask][j], the cheapest path from 0 through `mask` ending at j.
    const int full = 1 << n;
    std::vector<int> dp(static_cast<size_t>(full) * n, INT_MAX / 2);
    std::vector<signed char> from(static_cast<size_t>(full) * n, -1);
    dp[1 * n + 0] = 0;
    for (int mask = 1; mask < full; mask += 2) {
      for (int j = 0; j < n; ++j) {
        const int here = dp[static_cast<size_t>(mask) * n + j];
        if (!(mask & (1 << j)) || here >= INT_MAX / 2) continue;
        for (int k = 1; k < n; ++k) {
          if (mask & (1 << k)) continue;
          const size_t to = static_cast<size_t>(mask | (1 << k)) * n + k;
          if (here + cost[j][k] < dp[to]) {
            dp[to] = here + cost[j][k];
            from[to] = static_cast<signed char>(j);
          }
        }
      }
    }
    int last = 1;
    for (int j = 2; j < n; ++j) {
      if (dp[static_cast<size_t>(full - 1) * n + j] + cost[j][0] <
          dp[static_cast<size_t>(full - 1) * n + last] + cost[last][0]) {
        last = j;
      }
    }
    int mask = full - 1;
    for (int j = last; j != -1;) {
      best.push_back(j);
      const int prev = from[static_cast<size_t>(mask) * n + j];
      mask &= ~(1 << j);
      j = prev;
    }
    std::reverse(best.begin(), best.end());
  } else {
    // Greedy nearest neighbour, lowest position first on ties.
    std::vector<bool> used(n, false);
    best.push_back(0);
    used[0] = true;
    for (int step = 1; step < n; ++step) {
      int next = -1;
      for (int k = 0; k < n; ++k) {
        if (!used[k] && (next < 0 || cost[best.back()][k] < cost[best.back()][next])) next = k;
      }
      best.push_back(next);
      used[next] = true;
    }
  }
  if (cycle_cost(identity) <= cycle_cost(best)) return identity;
  if (best[1] > best[n - 1]) std::reverse(best.begin() + 1, best.end());
  return best;
}

Placement place(const hostfiles::HostList& hosts,
                const std::map<std::string, const Inventory*>& inventories,
                const PlaceRequest& request) {
  if (hosts.empty())
    throw PlacementError("no hosts to place ranks on; name them with -H or --hostfile");
  Placement out;
  const auto inventory_of = [&](const std::string& name) -> const Inventory* {
    auto it = inventories.find(name);
    return it == inventories.end() ? nullptr : it->second;
  };
  std::vector<std::vector<int>> usable(hosts.size());
  for (size_t i = 0; i < hosts.size(); ++i) {
    const hostfiles::Host& h = hosts.hosts()[i];
    HostUse use;
    use.name = h.name;
    use.inventory = inventory_of(h.name);
    if (use.inventory) usable[i] = usable_gpus(*use.inventory);
    out.hosts.push_back(std::move(use));
  }

  // Layouts that differ: GPU counts must agree unless -a or a rankfile says what to run.
  {
    std::vector<std::pair<std::string, std::string>> gpu_counts, core_counts;
    std::vector<int> distinct_gpus;
    std::vector<std::string> distinct_cores;
    for (size_t i = 0; i < hosts.size(); ++i) {
      const Inventory* inv = out.hosts[i].inventory;
      if (!inv) continue;
      const int g = static_cast<int>(usable[i].size());
      gpu_counts.push_back({hosts.hosts()[i].name, std::to_string(g)});
      std::string cores;
      for (const Package& p : inv->packages)
        cores += (cores.empty() ? "" : "+") + std::to_string(p.cores.size());
      core_counts.push_back({hosts.hosts()[i].name, cores});
      if (std::find(distinct_gpus.begin(), distinct_gpus.end(), g) == distinct_gpus.end())
        distinct_gpus.push_back(g);
      if (std::find(distinct_cores.begin(), distinct_cores.end(), cores) == distinct_cores.end())
        distinct_cores.push_back(cores);
    }
    if (distinct_gpus.size() > 1) {
      const std::string groups = describe_groups(gpu_counts, "GPUs", "GPUs");
      if (!request.ranks_per_host && !request.rankfile) {
        const int fewest = *std::min_element(distinct_gpus.begin(), distinct_gpus.end());
        throw PlacementError(
            "the hosts have different numbers of GPUs: " + groups + "; give -a " +
            std::to_string(std::max(fewest, 1)) +
            " to run that many ranks on every host, or leave out the hosts that differ");
      }
      out.notes.push_back("hosts differ in GPUs: " + groups);
    }
    if (distinct_cores.size() > 1) {
      out.notes.push_back(
          "hosts differ in cores per package: " + describe_groups(core_counts, "cores", "cores") +
          "; each host's CPU sets follow its own cores");
    }
  }

  // How many ranks each host runs, and which.
  if (request.rankfile) {
    const std::string file = request.rankfile_path.empty() ? "rankfile" : request.rankfile_path;
    for (const hostfiles::RankfileEntry& e : request.rankfile->entries) {
      const std::string where = file + ":" + std::to_string(e.line);
      auto it = std::find_if(out.hosts.begin(), out.hosts.end(), [&](const HostUse& u) {
        return hosts.find(e.host) == hosts.find(u.name) && hosts.find(u.name) != nullptr;
      });
      if (e.host.empty() || it == out.hosts.end()) {
        throw PlacementError(where + ": rank " + std::to_string(e.rank) + " is on host '" + e.host +
                             "', which is not among the job's hosts");
      }
      if (it->count == 0) it->first_rank = e.rank;
      it->ranks.push_back(e.rank);
      ++it->count;
      it->capacity_from = "rankfile";
    }
  } else {
    int64_t capacity = 0;
    bool slots_count = false;  // some host's capacity is its slots: more slots would help
    std::vector<int> room(hosts.size());
    for (size_t i = 0; i < hosts.size(); ++i) {
      const hostfiles::Host& h = hosts.hosts()[i];
      HostUse& use = out.hosts[i];
      const int gpus = static_cast<int>(usable[i].size());
      if (request.ranks_per_host) {
        room[i] = *request.ranks_per_host;
        use.capacity_from = "-a " + std::to_string(room[i]);
        if (gpus > 0 && room[i] > gpus) {
          throw PlacementError("-a " + std::to_string(room[i]) + " asks for " +
                               plural(room[i], "rank") + " per host, but " + h.name + " has " +
                               plural(gpus, "GPU") + (gpus == 1 ? "" : "") + "; lower -a to " +
                               std::to_string(gpus) + " or leave out " + h.name);
        }
      } else if (gpus > 0) {
        room[i] = gpus;
        use.capacity_from = plural(gpus, "GPU");
        if (user_wrote_slots(h) && h.slots < gpus) {
          room[i] = h.slots;
          use.capacity_from = plural(h.slots, "slot") + " of " + plural(gpus, "GPU");
        }
      } else {
        room[i] = h.slots;
        use.capacity_from = plural(h.slots, "slot");
        slots_count = true;
      }
      capacity += room[i];
    }
    const int64_t wanted = request.total_ranks.value_or(capacity);
    if (wanted > capacity) {
      const std::string per = request.ranks_per_host
                                  ? " (-a " + std::to_string(*request.ranks_per_host) + " per host)"
                                  : "";
      throw PlacementError("-n " + std::to_string(wanted) + " asks for more ranks than the " +
                           plural(static_cast<int>(hosts.size()), "host") +
                           (hosts.size() == 1 ? " has" : " have") +
                           " places for: " + std::to_string(capacity) + per + "; add hosts" +
                           (slots_count ? " or slots (-H host:N)" : "") + ", or lower -n");
    }
    if (capacity > INT_MAX / 2) throw PlacementError("too many ranks: " + std::to_string(capacity));
    int next = 0;
    for (size_t i = 0; i < hosts.size(); ++i) {
      HostUse& use = out.hosts[i];
      use.first_rank = next;
      use.count = static_cast<int>(std::min<int64_t>(room[i], wanted - next));
      for (int l = 0; l < use.count; ++l)
        use.ranks.push_back(next + l);
      next += use.count;
    }
  }

  // What each rank owns on its host.
  int total = 0;
  for (const HostUse& u : out.hosts)
    total += u.count;
  out.ranks.resize(total);
  std::map<std::pair<const Inventory*, std::vector<int>>, std::vector<int>> ring_cache;
  const std::string file = request.rankfile_path.empty() ? "rankfile" : request.rankfile_path;
  for (size_t i = 0; i < hosts.size(); ++i) {
    HostUse& use = out.hosts[i];
    if (use.count == 0) continue;
    const int host_index = static_cast<int>(out.topology_hosts.size());
    comm::Host th;
    th.index = host_index;
    th.name = use.name;
    th.address = use.name;
    const Inventory* inv = use.inventory;

    std::vector<int> gpus(use.count, -1);
    std::vector<comm::CpuSet> cpus(use.count);
    if (inv && request.rankfile) {
      std::vector<const hostfiles::RankfileEntry*> entries(use.count);
      for (const hostfiles::RankfileEntry& e : request.rankfile->entries) {
        auto it = std::find(use.ranks.begin(), use.ranks.end(), e.rank);
        if (it != use.ranks.end()) entries[it - use.ranks.begin()] = &e;
      }
      std::vector<bool> taken(inv->gpus.size(), false);
      for (int l = 0; l < use.count; ++l) {
        const hostfiles::RankfileEntry& e = *entries[l];
        const std::string where = file + ":" + std::to_string(e.line);
        cpus[l] = rankfile_cpus(*inv, e, where);
        for (int j = 0; j < l; ++j) {
          if (auto shared = cpus[l].first_shared(cpus[j])) {
            throw PlacementError(where + ": rank " + std::to_string(e.rank) + " shares CPU " +
                                 std::to_string(*shared) + " with rank " +
                                 std::to_string(entries[j]->rank) + " on " + use.name +
                                 "; give each rank its own cores");
          }
        }
        if (usable[i].empty()) continue;
        const std::optional<int> near =
            cpus[l].empty() ? std::nullopt : package_of_pu(*inv, cpus[l].ranges()[0].first);
        int pick = -1;
        for (int g : usable[i]) {
          if (taken[g]) continue;
          if (pick < 0) pick = g;
          if (near && package_of(*inv, inv->gpus[g].locality) == near) {
            pick = g;
            break;
          }
        }
        if (pick < 0) {
          throw PlacementError(where + ": rank " + std::to_string(e.rank) + " is rank " +
                               std::to_string(l + 1) + " on " + use.name + ", which has " +
                               plural(static_cast<int>(usable[i].size()), "GPU") +
                               "; give it at most one rank per GPU");
        }
        taken[pick] = true;
        gpus[l] = pick;
      }
    } else if (inv) {
      if (!usable[i].empty()) gpus = choose_gpus(*inv, usable[i], use.count);
      cpus = cpu_sets(*inv, use.name, gpus, out.notes);
    } else if (request.rankfile) {
      out.notes.push_back(use.name +
                          ": hardware unknown, so the rankfile's CPUs are not applied or checked");
    }

    std::vector<NicChoice> nics;
    if (inv) nics = nic_candidates(*inv, use.name, request);
    for (const NicChoice& c : nics) {
      if (std::none_of(th.nics.begin(), th.nics.end(),
                       [&](const comm::Nic& n) { return n.name == c.name; })) {
        th.nics.push_back(comm::Nic{c.name, c.kind, c.address});
      }
    }
    for (int l = 0; l < use.count; ++l) {
      comm::RankPlacement& r = out.ranks[use.ranks[l]];
      r.rank = use.ranks[l];
      r.local_rank = l;
      r.host = host_index;
      r.gpu = gpus[l];
      if (inv && gpus[l] >= 0) {
        r.gpu_bus_id = inv->gpus[gpus[l]].pci_bus_id;
        r.gpu_uuid = inv->gpus[gpus[l]].uuid;
      }
      r.cpus = cpus[l];
      if (!nics.empty()) {
        Locality from;
        if (gpus[l] >= 0) {
          from = inv->gpus[gpus[l]].locality;
        } else if (!cpus[l].empty()) {
          from.package = package_of_pu(*inv, cpus[l].ranges()[0].first);
        }
        NicChoice* best = nullptr;
        int best_distance = 0;
        for (NicChoice& c : nics) {
          const int d = nic_distance(*inv, from, *c.nic);
          if (!best || d < best_distance || (d == best_distance && c.load < best->load)) {
            best = &c;
            best_distance = d;
          }
        }
        ++best->load;
        r.nic = best->name;
        r.address = best->address;
      }
    }
    // The hardware ring order of the host's ranks.
    use.ring_order.resize(use.count);
    std::iota(use.ring_order.begin(), use.ring_order.end(), 0);
    if (inv && use.count > 0 && gpus[0] >= 0) {
      auto key = std::make_pair(inv, gpus);
      auto it = ring_cache.find(key);
      if (it == ring_cache.end())
        it = ring_cache.emplace(key, hardware_ring_order(*inv, gpus)).first;
      use.ring_order = it->second;
    }
    out.topology_hosts.push_back(std::move(th));
  }
  return out;
}

std::optional<int> socket_ring_size(const Placement& placement) {
  std::optional<int> size;
  bool any = false;
  for (const HostUse& h : placement.hosts) {
    if (h.count == 0) continue;
    any = true;
    const Inventory* inv = h.inventory;
    if (!inv) return std::nullopt;
    std::vector<std::optional<int>> package_at;  // of each rank, in ring order
    for (int local : h.ring_order) {
      const int g = placement.ranks[h.ranks[local]].gpu;
      if (g < 0) return std::nullopt;
      const Gpu& gpu = inv->gpus[g];
      const bool nvml = std::any_of(gpu.os_devices.begin(), gpu.os_devices.end(),
                                    [](const std::string& d) { return d.rfind("nvml", 0) == 0; });
      if (!nvml && gpu.nvlink_peers.empty()) return std::nullopt;  // links unknown
      if (gpu.nvlink_cpu || gpu.nvlink_switch) return std::nullopt;
      const std::optional<int> p = package_of(*inv, gpu.locality);
      if (!p) return std::nullopt;
      for (int peer : gpu.nvlink_peers) {
        if (peer < static_cast<int>(inv->gpus.size()) &&
            package_of(*inv, inv->gpus[peer].locality) != p) {
          return std::nullopt;
        }
      }
      package_at.push_back(p);
    }
    // Blocks of equal size, one package each, every package once.
    int k = 1;
    while (k < static_cast<int>(package_at.size()) && package_at[k] == package_at[0])
      ++k;
    if (k < 2 || k == static_cast<int>(package_at.size()) || package_at.size() % k != 0)
      return std::nullopt;
    std::vector<std::optional<int>> seen;
    for (size_t b = 0; b < package_at.size(); b += k) {
      for (size_t i = b; i < b + k; ++i) {
        if (package_at[i] != package_at[b]) return std::nullopt;
      }
      if (std::find(seen.begin(), seen.end(), package_at[b]) != seen.end()) return std::nullopt;
      seen.push_back(package_at[b]);
    }
    if (size && *size != k) return std::nullopt;
    size = k;
  }
  return any ? size : std::nullopt;
}

comm::Topology make_topology(const Placement& placement, const comm::Mode& mode,
                             const std::string& job_id) {
  comm::Topology t;
  t.job_id = job_id;
  t.hosts = placement.topology_hosts;
  t.ranks = placement.ranks;
  t.mode = mode;
  // Coordinates: host by host, each host's ranks in hardware ring order.
  std::vector<int> rank_at;
  rank_at.reserve(placement.ranks.size());
  for (const HostUse& h : placement.hosts) {
    for (int local : h.ring_order)
      rank_at.push_back(h.ranks[local]);
  }
  int64_t product = 1;
  for (int d : mode.dims)
    product *= d;
  if (mode.dims.empty() || product != static_cast<int64_t>(rank_at.size())) {
    throw PlacementError("mode " + mode.str() + " does not cover the " +
                         plural(static_cast<int>(rank_at.size()), "rank") + " of the job");
  }
  t.rings = comm::default_rings(mode.dims);
  for (auto& dimension : t.rings) {
    for (comm::Ring& ring : dimension) {
      for (int& member : ring)
        member = rank_at[member];
    }
  }
  try {
    comm::validate(t);
  } catch (const comm::TopologyError& e) {
    throw PlacementError(std::string("internal error: the plan is inconsistent: ") + e.what());
  }
  return t;
}

}  // namespace ddl::mapper
