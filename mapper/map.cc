// Mapping: which GPU slots each host offers, and in what order ranks take them.
//
// How it works. Each host offers the GPUs its processes may use (usable_gpus: all, or those
// $CUDA_VISIBLE_DEVICES names). Hosts must offer the same number unless -a or a rankfile says
// how many ranks each runs; other differences (cores per package) are only noted. A host's
// room is then -a, else its GPUs (capped by slots the user wrote on -H or in a hostfile, not
// by a batch system's), else, without GPUs, its slots. When a host runs fewer ranks than it
// has GPUs, choose_gpus takes them round-robin over packages, so that the ranks spread over
// the sockets and their cores; with a rankfile, gpu_near gives each rank a free GPU on the
// package of its CPUs. Numbering the ranks (rank.cc) and binding them to cores (bind.cc)
// come after.

#include "mapper/map.h"

#include <algorithm>
#include <cctype>
#include <numeric>
#include <optional>
#include <string_view>

#include "mapper/locality.h"

namespace ddl::mapper {

namespace {

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

/// "6+6": the cores of each package.
std::string cores_per_package(const Inventory& inv) {
  std::string cores;
  for (const Package& p : inv.packages)
    cores += (cores.empty() ? "" : "+") + std::to_string(p.cores.size());
  return cores;
}

template <typename T>
void add_distinct(std::vector<T>& values, const T& value) {
  if (std::find(values.begin(), values.end(), value) == values.end()) values.push_back(value);
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

/// One host's room under -a; throws when -a asks for more ranks than it has GPUs.
int room_under_a(const hostfiles::Host& h, int gpus, int a, HostUse& use) {
  use.capacity_from = "-a " + std::to_string(a);
  if (gpus > 0 && a > gpus) {
    throw PlacementError("-a " + std::to_string(a) + " asks for " + plural(a, "rank") +
                         " per host, but " + h.name + " has " + plural(gpus, "GPU") +
                         "; lower -a to " + std::to_string(gpus) + " or leave out " + h.name);
  }
  return a;
}

/// One host's room without -a: its GPUs, capped by slots the user wrote; else its slots.
int room_of(const hostfiles::Host& h, int gpus, HostUse& use, bool& slots_count) {
  if (gpus == 0) {
    use.capacity_from = plural(h.slots, "slot");
    slots_count = true;
    return h.slots;
  }
  if (user_wrote_slots(h) && h.slots < gpus) {
    use.capacity_from = plural(h.slots, "slot") + " of " + plural(gpus, "GPU");
    return h.slots;
  }
  use.capacity_from = plural(gpus, "GPU");
  return gpus;
}

}  // namespace

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

std::vector<HostOffer> host_offers(const hostfiles::HostList& hosts,
                                   const std::map<std::string, const Inventory*>& inventories) {
  std::vector<HostOffer> offers(hosts.size());
  for (size_t i = 0; i < hosts.size(); ++i) {
    auto it = inventories.find(hosts.hosts()[i].name);
    if (it == inventories.end() || !it->second) continue;
    offers[i].inventory = it->second;
    offers[i].gpus = usable_gpus(*it->second);
  }
  return offers;
}

void check_layouts(const hostfiles::HostList& hosts, const std::vector<HostOffer>& offers,
                   const PlaceRequest& request, std::vector<std::string>& notes) {
  std::vector<std::pair<std::string, std::string>> gpu_counts, core_counts;
  std::vector<int> distinct_gpus;
  std::vector<std::string> distinct_cores;
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (!offers[i].inventory) continue;
    const int g = static_cast<int>(offers[i].gpus.size());
    const std::string cores = cores_per_package(*offers[i].inventory);
    gpu_counts.push_back({hosts.hosts()[i].name, std::to_string(g)});
    core_counts.push_back({hosts.hosts()[i].name, cores});
    add_distinct(distinct_gpus, g);
    add_distinct(distinct_cores, cores);
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
    notes.push_back("hosts differ in GPUs: " + groups);
  }
  if (distinct_cores.size() > 1) {
    notes.push_back(
        "hosts differ in cores per package: " + describe_groups(core_counts, "cores", "cores") +
        "; each host's CPU sets follow its own cores");
  }
}

Capacity host_capacity(const hostfiles::HostList& hosts, const std::vector<HostOffer>& offers,
                       const PlaceRequest& request, std::vector<HostUse>& uses) {
  Capacity c;
  c.room.resize(hosts.size());
  for (size_t i = 0; i < hosts.size(); ++i) {
    const hostfiles::Host& h = hosts.hosts()[i];
    const int gpus = static_cast<int>(offers[i].gpus.size());
    c.room[i] = request.ranks_per_host ? room_under_a(h, gpus, *request.ranks_per_host, uses[i])
                                       : room_of(h, gpus, uses[i], c.slots_count);
    c.total += c.room[i];
  }
  return c;
}

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

int gpu_near(const Inventory& inv, const std::vector<int>& usable, const std::vector<bool>& taken,
             const comm::CpuSet& cpus) {
  const std::optional<int> near =
      cpus.empty() ? std::nullopt : package_of_pu(inv, cpus.ranges()[0].first);
  int pick = -1;
  for (int g : usable) {
    if (taken[g]) continue;
    if (pick < 0) pick = g;
    if (near && package_of(inv, inv.gpus[g].locality) == near) return g;
  }
  return pick;
}

}  // namespace ddl::mapper
