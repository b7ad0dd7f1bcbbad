// Ring order: in which order the ranks of a host, and of the job, stand in the rings.
//
// How it works. Inside a host a ring should go from each GPU to a neighbour on NVLink, else
// on the same PCIe switch, else on the same package. hardware_ring_order() prices every edge
// (NVLink or a shared NVSwitch 1, one PCIe switch 2, one package 4, across packages 8) and
// takes the cycle of least cost: exact by Held-Karp over subsets up to 12 GPUs (2^12 x 12
// states), nearest neighbour beyond. The GPUs' own order wins whenever it is among the
// cheapest, so that the plan only departs from the obvious order for a reason, and the cycle
// found is turned to go from position 0 towards the lower of its two neighbours.
//
// make_topology() then gives ranks their coordinates host by host, each host's ranks in that
// order, so the innermost ring follows the hardware and rings across hosts join ranks at the
// same place on each host; comm::default_rings() draws the rings of every dimension over the
// coordinates, and the result is validated (each ring closes and holds each member once).
// socket_ring_size() says when the innermost ring should instead stay inside a socket.

#include "mapper/rings.h"

#include <algorithm>
#include <climits>
#include <numeric>
#include <optional>
#include <utility>

#include "base/check.h"
#include "mapper/locality.h"
#include "mapper/place.h"

namespace ddl::mapper {

namespace {

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

/// The cost of every edge between the GPUs of one ring, by position.
class RingCosts {
 public:
  RingCosts(const Inventory& inv, const std::vector<int>& gpus)
      : n_(static_cast<int>(gpus.size())), cost_(n_, std::vector<int>(n_)) {
    for (int i = 0; i < n_; ++i) {
      for (int j = 0; j < n_; ++j)
        cost_[i][j] = link_cost(inv.gpus[gpus[i]], inv.gpus[gpus[j]], inv);
    }
  }

  int size() const { return n_; }
  int operator()(int i, int j) const { return cost_[i][j]; }

  /// The cost of the cycle through `order` and back to its start.
  int cycle(const std::vector<int>& order) const {
    int c = 0;
    for (int i = 0; i < n_; ++i)
      c += cost_[order[i]][order[(i + 1) % n_]];
    return c;
  }

 private:
  int n_;
  std::vector<std::vector<int>> cost_;
};

/// The cheapest cycle from position 0, exactly (Held-Karp): dp[mask][j] is the cheapest path
/// from 0 through the positions in `mask`, ending at j; the cycle closes at the best last j.
std::vector<int> cheapest_cycle(const RingCosts& cost) {
  const int n = cost.size();
  const int full = 1 << n;
  const auto at = [n](int mask, int j) { return static_cast<size_t>(mask) * n + j; };
  std::vector<int> dp(static_cast<size_t>(full) * n, INT_MAX / 2);
  std::vector<signed char> from(static_cast<size_t>(full) * n, -1);
  dp[at(1, 0)] = 0;
  for (int mask = 1; mask < full; mask += 2) {
    for (int j = 0; j < n; ++j) {
      const int here = dp[at(mask, j)];
      if (!(mask & (1 << j)) || here >= INT_MAX / 2) continue;
      for (int k = 1; k < n; ++k) {
        if (mask & (1 << k)) continue;
        const size_t to = at(mask | (1 << k), k);
        if (here + cost(j, k) < dp[to]) {
          dp[to] = here + cost(j, k);
          from[to] = static_cast<signed char>(j);
        }
      }
    }
  }
  int last = 1;
  for (int j = 2; j < n; ++j) {
    if (dp[at(full - 1, j)] + cost(j, 0) < dp[at(full - 1, last)] + cost(last, 0)) last = j;
  }
  std::vector<int> best;
  int mask = full - 1;
  for (int j = last; j != -1;) {
    best.push_back(j);
    const int prev = from[at(mask, j)];
    mask &= ~(1 << j);
    j = prev;
  }
  std::reverse(best.begin(), best.end());
  return best;
}

/// A cheap cycle from position 0, greedily: the nearest unvisited position next, the lowest
/// on ties.
std::vector<int> nearest_neighbour_cycle(const RingCosts& cost) {
  const int n = cost.size();
  std::vector<int> best{0};
  std::vector<bool> used(n, false);
  used[0] = true;
  for (int step = 1; step < n; ++step) {
    int next = -1;
    for (int k = 0; k < n; ++k) {
      if (!used[k] && (next < 0 || cost(best.back(), k) < cost(best.back(), next))) next = k;
    }
    best.push_back(next);
    used[next] = true;
  }
  return best;
}

/// The package of each rank of `h`, in its ring order, when the innermost ring could stay
/// inside sockets: every rank has a GPU whose links NVML knows, none with NVLink to a CPU, an
/// NVSwitch or a GPU of another package. Nullopt otherwise.
std::optional<std::vector<int>> ring_packages(const Placement& placement, const HostUse& h) {
  const Inventory* inv = h.inventory;
  if (!inv) return std::nullopt;
  std::vector<int> package_at;
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
    package_at.push_back(*p);
  }
  return package_at;
}

/// The block size k >= 2 when `package_at` is blocks of k, one package each, every package
/// once, and at least two blocks; else nullopt.
std::optional<int> socket_block(const std::vector<int>& package_at) {
  int k = 1;
  while (k < static_cast<int>(package_at.size()) && package_at[k] == package_at[0])
    ++k;
  if (k < 2 || k == static_cast<int>(package_at.size()) || package_at.size() % k != 0)
    return std::nullopt;
  std::vector<int> seen;
  for (size_t b = 0; b < package_at.size(); b += k) {
    for (size_t i = b; i < b + k; ++i) {
      if (package_at[i] != package_at[b]) return std::nullopt;
    }
    if (std::find(seen.begin(), seen.end(), package_at[b]) != seen.end()) return std::nullopt;
    seen.push_back(package_at[b]);
  }
  return k;
}

}  // namespace

std::vector<int> hardware_ring_order(const Inventory& inv, const std::vector<int>& gpus) {
  const int n = static_cast<int>(gpus.size());
  std::vector<int> identity(n);
  std::iota(identity.begin(), identity.end(), 0);
  if (n <= 3) return identity;  // every cycle of 3 or fewer is the same ring
  const RingCosts cost(inv, gpus);
  std::vector<int> best = n <= 12 ? cheapest_cycle(cost) : nearest_neighbour_cycle(cost);
  if (cost.cycle(identity) <= cost.cycle(best)) return identity;
  if (best[1] > best[n - 1]) std::reverse(best.begin() + 1, best.end());
  return best;
}

std::vector<int> RingOrders::of(const Inventory* inv, const std::vector<int>& gpus) {
  if (!inv || gpus.empty() || gpus[0] < 0) {
    std::vector<int> order(gpus.size());
    std::iota(order.begin(), order.end(), 0);
    return order;
  }
  auto key = std::make_pair(inv, gpus);
  auto it = cache_.find(key);
  if (it == cache_.end()) it = cache_.emplace(key, hardware_ring_order(*inv, gpus)).first;
  return it->second;
}

std::optional<int> socket_ring_size(const Placement& placement) {
  std::optional<int> size;
  bool any = false;
  for (const HostUse& h : placement.hosts) {
    if (h.count == 0) continue;
    any = true;
    const std::optional<std::vector<int>> package_at = ring_packages(placement, h);
    if (!package_at) return std::nullopt;
    const std::optional<int> k = socket_block(*package_at);
    if (!k || (size && *size != *k)) return std::nullopt;
    size = k;
  }
  return any ? size : std::nullopt;
}

namespace {

/// make_topology()'s rings, into `t` (its hosts and ranks already there): coordinates host by
/// host (`hosts`), each host's ranks in hardware ring order; validated.
void draw_rings(const std::vector<HostUse>& hosts, const comm::Mode& mode, comm::Topology& t) {
  t.mode = mode;
  std::vector<int> rank_at;
  rank_at.reserve(t.ranks.size());
  for (const HostUse& h : hosts) {
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
    DDL_FAIL(std::string("the plan is inconsistent: ") + e.what());
  }
}

}  // namespace

comm::Topology make_topology(const Placement& placement, const comm::Mode& mode,
                             const std::string& job_id) {
  comm::Topology t;
  t.job_id = job_id;
  t.hosts = placement.topology_hosts;
  t.ranks = placement.ranks;
  draw_rings(placement.hosts, mode, t);
  return t;
}

comm::Topology take_topology(Placement& placement, const comm::Mode& mode,
                             const std::string& job_id) {
  comm::Topology t;
  t.job_id = job_id;
  t.hosts = std::exchange(placement.topology_hosts, {});
  t.ranks = std::exchange(placement.ranks, {});
  draw_rings(placement.hosts, mode, t);
  return t;
}

}  // namespace ddl::mapper
