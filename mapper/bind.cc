// Binding: the GPU and the cores of each rank on its host.
//
// How it works. Ranks sit near their GPU. Each rank's package is its GPU's (without GPUs,
// ranks are spread evenly over the packages that have cores), and each package's cores are
// cut into as many equal, consecutive CPU sets as it has ranks: whole cores when there are
// enough, hardware threads when there are fewer cores than ranks, nothing (noted) when there
// are fewer threads. A host whose GPUs' packages are unknown is cut as one package. With a
// rankfile the user has bound the ranks: each entry's sockets and cores are checked against
// the inventory and against the other ranks (no CPU shared), and each rank then takes the
// first free GPU on the package of its first CPU, else the first free one.

#include "mapper/bind.h"

#include <algorithm>
#include <optional>

#include "mapper/locality.h"
#include "mapper/rank.h"

namespace ddl::mapper {

namespace {

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

/// The package of each of the `k` ranks: their GPUs' (`gpus` not -1), else spread evenly over
/// the packages with cores. Nullopt when some rank's package is unknown or the ranks do not
/// divide evenly.
std::optional<std::vector<int>> rank_packages(const Inventory& inv, const std::vector<int>& gpus) {
  const int k = static_cast<int>(gpus.size());
  std::vector<int> package(k);
  if (k > 0 && gpus[0] >= 0) {
    for (int i = 0; i < k; ++i) {
      const std::optional<int> p = package_of(inv, inv.gpus[gpus[i]].locality);
      if (!p || !find_package(inv, *p)) return std::nullopt;
      package[i] = *p;
    }
    return package;
  }
  std::vector<const Package*> with_cores;
  for (const Package& p : inv.packages) {
    if (!p.cores.empty()) with_cores.push_back(&p);
  }
  if (with_cores.empty() || k % with_cores.size() != 0) return std::nullopt;
  const int per = k / static_cast<int>(with_cores.size());
  for (int i = 0; i < k; ++i)
    package[i] = with_cores[i / per]->os_index;
  return package;
}

std::string unbound_note(const std::string& host, int ranks, const std::string& where) {
  return host + ": " + plural(ranks, "rank") + " for the " + where + ": not bound to CPUs";
}

/// CPU sets for the ranks of one host from their GPUs (-1: none), in local-rank order.
std::vector<comm::CpuSet> cpu_sets(const Inventory& inv, const std::string& host,
                                   const std::vector<int>& gpus, std::vector<std::string>& notes) {
  const int k = static_cast<int>(gpus.size());
  std::vector<comm::CpuSet> sets(k);
  const std::optional<std::vector<int>> package = rank_packages(inv, gpus);
  if (!package) {
    if (auto carved = carve(all_cores(inv), k)) return *carved;
    notes.push_back(unbound_note(host, k, plural(inv.pu_count(), "hardware thread")));
    return sets;
  }
  std::vector<int> seen;
  for (int i = 0; i < k; ++i) {
    if (std::find(seen.begin(), seen.end(), (*package)[i]) != seen.end()) continue;
    seen.push_back((*package)[i]);
    std::vector<int> members;
    for (int j = 0; j < k; ++j) {
      if ((*package)[j] == (*package)[i]) members.push_back(j);
    }
    const Package& p = *find_package(inv, (*package)[i]);
    auto carved = carve(cores_of(p), static_cast<int>(members.size()));
    if (!carved) {
      notes.push_back(unbound_note(host, static_cast<int>(members.size()),
                                   plural(static_cast<int>(p.pus().size()), "hardware thread") +
                                       " of package " + std::to_string(p.os_index)));
      continue;
    }
    for (size_t m = 0; m < members.size(); ++m)
      sets[members[m]] = std::move((*carved)[m]);
  }
  return sets;
}

/// The CPUs one rankfile entry names on a host, checked against its inventory.
class RankfileCpus {
 public:
  RankfileCpus(const Inventory& inv, const hostfiles::RankfileEntry& e, const std::string& where)
      : inv_(inv), e_(e), where_(where) {}

  comm::CpuSet get() const {
    comm::CpuSet set;
    for (const hostfiles::SlotSpec& s : e_.slots) {
      if (s.socket) {
        add_socket_cores(s, set);
      } else {
        add_host_cores(s, set);
      }
    }
    return set;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw PlacementError(where_ + ": rank " + std::to_string(e_.rank) + " names " + what +
                         "; change the rankfile or leave it out");
  }

  /// "socket:cores" (or "socket:*"): cores numbered within the socket.
  void add_socket_cores(const hostfiles::SlotSpec& s, comm::CpuSet& set) const {
    const int sockets = static_cast<int>(inv_.packages.size());
    if (*s.socket >= sockets) {
      fail("socket " + std::to_string(*s.socket) + " of " + e_.host + ", which has " +
           plural(sockets, "socket") + " (0-" + std::to_string(sockets - 1) + ")");
    }
    const Package& p = inv_.packages[*s.socket];
    const int n = static_cast<int>(p.cores.size());
    if (s.all_cores) {
      for (const Core& c : p.cores) {
        for (int pu : c.pus)
          set.add(pu);
      }
    }
    for (const hostfiles::CpuRange& r : s.cpus) {
      if (r.last >= n) {
        fail("core " + std::to_string(r.last) + " of socket " + std::to_string(*s.socket) + " on " +
             e_.host + ", which has " + plural(n, "core") + " (0-" + std::to_string(n - 1) + ")");
      }
      for (int c = r.first; c <= r.last; ++c) {
        for (int pu : p.cores[c].pus)
          set.add(pu);
      }
    }
  }

  /// Cores numbered across the host.
  void add_host_cores(const hostfiles::SlotSpec& s, comm::CpuSet& set) const {
    const int cores = inv_.core_count();
    const std::vector<const Core*> all = all_cores(inv_);
    for (const hostfiles::CpuRange& r : s.cpus) {
      if (r.last >= cores) {
        fail("core " + std::to_string(r.last) + " of " + e_.host + ", which has " +
             plural(cores, "core") + " (0-" + std::to_string(cores - 1) + ")");
      }
      for (int c = r.first; c <= r.last; ++c) {
        for (int pu : all[c]->pus)
          set.add(pu);
      }
    }
  }

  const Inventory& inv_;
  const hostfiles::RankfileEntry& e_;
  const std::string& where_;
};

/// The rankfile entry of each local rank of `use`.
std::vector<const hostfiles::RankfileEntry*> entries_of(const HostUse& use,
                                                        const hostfiles::Rankfile& rankfile) {
  std::vector<const hostfiles::RankfileEntry*> entries(use.count);
  for (const hostfiles::RankfileEntry& e : rankfile.entries) {
    auto it = std::find(use.ranks.begin(), use.ranks.end(), e.rank);
    if (it != use.ranks.end()) entries[it - use.ranks.begin()] = &e;
  }
  return entries;
}

/// Binding from a rankfile: the CPUs it names, no CPU in two ranks, the free GPU nearest them.
HostBinding bind_rankfile(const Inventory& inv, const HostUse& use, const HostOffer& offer,
                          const PlaceRequest& request) {
  HostBinding b{std::vector<int>(use.count, -1), std::vector<comm::CpuSet>(use.count)};
  const std::vector<const hostfiles::RankfileEntry*> entries = entries_of(use, *request.rankfile);
  const std::string file = rankfile_name(request);
  std::vector<bool> taken(inv.gpus.size(), false);
  for (int l = 0; l < use.count; ++l) {
    const hostfiles::RankfileEntry& e = *entries[l];
    const std::string where = file + ":" + std::to_string(e.line);
    b.cpus[l] = RankfileCpus(inv, e, where).get();
    for (int j = 0; j < l; ++j) {
      if (auto shared = b.cpus[l].first_shared(b.cpus[j])) {
        throw PlacementError(where + ": rank " + std::to_string(e.rank) + " shares CPU " +
                             std::to_string(*shared) + " with rank " +
                             std::to_string(entries[j]->rank) + " on " + use.name +
                             "; give each rank its own cores");
      }
    }
    if (offer.gpus.empty()) continue;
    const int pick = gpu_near(inv, offer.gpus, taken, b.cpus[l]);
    if (pick < 0) {
      throw PlacementError(where + ": rank " + std::to_string(e.rank) + " is rank " +
                           std::to_string(l + 1) + " on " + use.name + ", which has " +
                           plural(static_cast<int>(offer.gpus.size()), "GPU") +
                           "; give it at most one rank per GPU");
    }
    taken[pick] = true;
    b.gpus[l] = pick;
  }
  return b;
}

}  // namespace

HostBinding bind_host(const HostUse& use, const HostOffer& offer, const PlaceRequest& request,
                      std::vector<std::string>& notes) {
  const Inventory* inv = offer.inventory;
  if (inv && request.rankfile) return bind_rankfile(*inv, use, offer, request);
  HostBinding b{std::vector<int>(use.count, -1), std::vector<comm::CpuSet>(use.count)};
  if (inv) {
    if (!offer.gpus.empty()) b.gpus = choose_gpus(*inv, offer.gpus, use.count);
    b.cpus = cpu_sets(*inv, use.name, b.gpus, notes);
  } else if (request.rankfile) {
    notes.push_back(use.name +
                    ": hardware unknown, so the rankfile's CPUs are not applied or checked");
  }
  return b;
}

}  // namespace ddl::mapper
