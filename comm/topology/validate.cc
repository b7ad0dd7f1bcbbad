// Looking up a plan's ranks and hosts, and validate().
//
// How it works: each check builds an index over global ranks (or hosts) once, so the whole
// validation is O(N log N) even for 100,000+ ranks. The checks run in dependency order: hosts,
// then ranks, then what refers to them (hosts of ranks, local ranks, GPUs, CPU sets), then the
// mode and the rings. Messages walk ranks in ascending order, so they do not depend on the order
// the lists are in. A ring is stored as its order and closes from its last member back to its
// first, so a ring is well formed when it is non-empty and holds each member once.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <tuple>

#include "comm/topology.h"
#include "comm/topology/internal.h"

namespace ddl::comm {

namespace {

using topology::quote;

// The entry of `items` whose `key` member is `value`: items[value] when the list is in order,
// else the first match; nullptr when none.
template <typename T>
const T* find_by_key(const std::vector<T>& items, int T::*key, int value) {
  if (value >= 0 && static_cast<size_t>(value) < items.size() && items[value].*key == value) {
    return &items[value];
  }
  for (const T& item : items) {
    if (item.*key == value) return &item;
  }
  return nullptr;
}

}  // namespace

const RankPlacement* Topology::find_rank(int rank) const {
  return find_by_key(ranks, &RankPlacement::rank, rank);
}

const Host* Topology::find_host(int index) const {
  return find_by_key(hosts, &Host::index, index);
}

namespace {

std::string host_label(const Topology& t, int index) {
  const Host* host = t.find_host(index);
  std::string label = "host " + std::to_string(index);
  if (host && !host->name.empty()) label += " " + quote(host->name);
  return label;
}

// How the messages of check_permutation name a list and its key.
struct KeyWords {
  const char* list;   // "hosts": the list, and what its entries are
  const char* key;    // "index": the key of an entry
  const char* range;  // "the indices are": the range of the keys, after "with N hosts"
  const char* all;    // "host indices": the keys together
};

// Throws unless the `key` members of `items` are a permutation of 0..count-1. Returns position:
// position[k] is the entry whose key is k.
template <typename T>
std::vector<int> check_permutation(const std::vector<T>& items, int T::*key, const KeyWords& w) {
  const int count = static_cast<int>(items.size());
  std::vector<int> position(items.size(), -1);
  for (int i = 0; i < count; ++i) {
    const int value = items[i].*key;
    const auto where = [&w, i] { return std::string(w.list) + "[" + std::to_string(i) + "]: "; };
    if (value < 0 || value >= count) {
      throw TopologyError(where() + w.key + " " + std::to_string(value) +
                          " is out of range; with " + std::to_string(count) + " " + w.list + " " +
                          w.range + " 0.." + std::to_string(count - 1));
    }
    if (position[value] >= 0) {
      throw TopologyError(where() + w.key + " " + std::to_string(value) + " appears twice (also " +
                          w.list + "[" + std::to_string(position[value]) + "]); " + w.all +
                          " must be a permutation of 0.." + std::to_string(count - 1));
    }
    position[value] = i;
  }
  return position;
}

void validate_hosts(const Topology& t) {
  check_permutation(t.hosts, &Host::index, {"hosts", "index", "the indices are", "host indices"});
}

// Returns by_rank: by_rank[r] is the placement of global rank r.
std::vector<const RankPlacement*> validate_ranks(const Topology& t) {
  if (t.ranks.empty()) throw TopologyError("the topology has no ranks");
  const std::vector<int> position =
      check_permutation(t.ranks, &RankPlacement::rank, {"ranks", "rank", "they are", "ranks"});
  std::vector<const RankPlacement*> by_rank(t.ranks.size());
  for (size_t rank = 0; rank < position.size(); ++rank)
    by_rank[rank] = &t.ranks[position[rank]];
  return by_rank;
}

// Checks each rank's host and GPU number; returns how many ranks each host runs.
std::vector<int> check_hosts_of_ranks(const Topology& t,
                                      const std::vector<const RankPlacement*>& by_rank) {
  const int hosts = static_cast<int>(t.hosts.size());
  std::vector<int> ranks_on_host(t.hosts.size(), 0);
  for (const RankPlacement* r : by_rank) {
    const auto where = [r] { return "rank " + std::to_string(r->rank) + ": "; };
    if (r->host < 0 || r->host >= hosts) {
      throw TopologyError(where() + "host " + std::to_string(r->host) + " is out of range; " +
                          (hosts == 0 ? std::string("the topology has no hosts")
                                      : "the hosts are 0.." + std::to_string(hosts - 1)));
    }
    if (r->gpu < -1) {
      throw TopologyError(where() + "GPU " + std::to_string(r->gpu) +
                          " is not valid; use -1 for a rank without a GPU");
    }
    ++ranks_on_host[r->host];
  }
  return ranks_on_host;
}

// Local ranks: a permutation of 0..n_h-1 on each host.
void check_local_ranks(const Topology& t, const std::vector<const RankPlacement*>& by_rank,
                       const std::vector<int>& ranks_on_host) {
  std::vector<std::vector<int>> holder(t.hosts.size());
  for (size_t h = 0; h < holder.size(); ++h)
    holder[h].assign(static_cast<size_t>(ranks_on_host[h]), -1);
  for (const RankPlacement* r : by_rank) {
    const int n = ranks_on_host[r->host];
    if (r->local_rank < 0 || r->local_rank >= n) {
      throw TopologyError("rank " + std::to_string(r->rank) + ": local rank " +
                          std::to_string(r->local_rank) + " is out of range on " +
                          host_label(t, r->host) + ", which runs " + std::to_string(n) +
                          (n == 1 ? " rank (local rank 0)"
                                  : " ranks (local ranks 0.." + std::to_string(n - 1) + ")"));
    }
    int& other = holder[r->host][r->local_rank];
    if (other >= 0) {
      throw TopologyError("ranks " + std::to_string(other) + " and " + std::to_string(r->rank) +
                          " both have local rank " + std::to_string(r->local_rank) + " on " +
                          host_label(t, r->host));
    }
    other = r->rank;
  }
}

// GPUs: sorted by (host, gpu, rank), a repeat is a shared GPU.
void check_gpus(const Topology& t, const std::vector<const RankPlacement*>& by_rank) {
  std::vector<std::tuple<int, int, int>> gpus;
  for (const RankPlacement* r : by_rank) {
    if (r->gpu >= 0) gpus.emplace_back(r->host, r->gpu, r->rank);
  }
  std::sort(gpus.begin(), gpus.end());
  for (size_t i = 1; i < gpus.size(); ++i) {
    const auto& [host, gpu, rank] = gpus[i];
    const auto& [prev_host, prev_gpu, prev_rank] = gpus[i - 1];
    if (host == prev_host && gpu == prev_gpu) {
      throw TopologyError("ranks " + std::to_string(prev_rank) + " and " + std::to_string(rank) +
                          " share GPU " + std::to_string(gpu) + " on " + host_label(t, host) +
                          "; each rank needs its own GPU");
    }
  }
}

// CPU sets: every range of a host, sorted by start; a range that starts at or before the
// furthest end seen so far on that host overlaps it.
void check_cpu_sets(const Topology& t, const std::vector<const RankPlacement*>& by_rank) {
  struct Piece {
    int host, first, last, rank;
  };
  std::vector<Piece> pieces;
  for (const RankPlacement* r : by_rank) {
    for (const CpuSet::Range& range : r->cpus.ranges())
      pieces.push_back({r->host, range.first, range.last, r->rank});
  }
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) {
    return std::tie(a.host, a.first, a.rank) < std::tie(b.host, b.first, b.rank);
  });
  for (size_t i = 0, reach = 0; i < pieces.size(); ++i) {
    const Piece& p = pieces[i];
    if (i > 0 && pieces[reach].host == p.host && pieces[reach].last >= p.first) {
      const int a = std::min(pieces[reach].rank, p.rank);
      const int b = std::max(pieces[reach].rank, p.rank);
      const CpuSet& set_a = by_rank[a]->cpus;
      const CpuSet& set_b = by_rank[b]->cpus;
      throw TopologyError("ranks " + std::to_string(a) + " and " + std::to_string(b) + " on " +
                          host_label(t, p.host) + " both hold PU " +
                          std::to_string(*set_a.first_shared(set_b)) + " (CPU sets " +
                          quote(set_a.str()) + " and " + quote(set_b.str()) +
                          "); CPU sets on one host must be disjoint");
    }
    if (i == 0 || pieces[reach].host != p.host || p.last > pieces[reach].last) reach = i;
  }
}

void validate_placements(const Topology& t, const std::vector<const RankPlacement*>& by_rank) {
  const std::vector<int> ranks_on_host = check_hosts_of_ranks(t, by_rank);
  check_local_ranks(t, by_rank, ranks_on_host);
  check_gpus(t, by_rank);
  check_cpu_sets(t, by_rank);
}

void validate_mode(const Topology& t) {
  const Mode& mode = t.mode;
  if (mode.dims.empty()) {
    throw TopologyError("mode " + quote(mode.str()) +
                        " has no dimensions; a topology needs them, e.g. '" +
                        std::string(1, static_cast<char>(mode.algorithm)) + ":" +
                        std::to_string(t.ranks.size()) + "' for one ring of all ranks");
  }
  int64_t product = 1;
  std::string factors;
  for (size_t d = 0; d < mode.dims.size(); ++d) {
    if (mode.dims[d] < 1) {
      throw TopologyError("mode " + quote(mode.str()) + ": dimension " + std::to_string(d) +
                          " is " + std::to_string(mode.dims[d]) + "; each must be at least 1");
    }
    product = std::min<int64_t>(product * mode.dims[d], int64_t{1} << 32);
    factors += (d ? " x " : "") + std::to_string(mode.dims[d]);
  }
  if (product != static_cast<int64_t>(t.ranks.size())) {
    const std::string count = product > std::numeric_limits<int>::max()
                                  ? "more than " + std::to_string(std::numeric_limits<int>::max())
                                  : std::to_string(product);
    throw TopologyError("mode " + quote(mode.str()) + " describes " + count + " ranks" +
                        (mode.dims.size() > 1 ? " (" + factors + ")" : "") +
                        ", but the topology has " + std::to_string(t.ranks.size()));
  }
}

void validate_rings(const Topology& t) {
  const Mode& mode = t.mode;
  const auto plural = [](size_t n, const char* word) {
    return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
  };
  if (t.rings.size() != mode.dims.size()) {
    throw TopologyError("the ring orders cover " + plural(t.rings.size(), "dimension") +
                        ", but mode " + quote(mode.str()) + " has " +
                        std::to_string(mode.dims.size()));
  }
  const int count = static_cast<int>(t.ranks.size());
  std::vector<int> ring_of(t.ranks.size());
  for (size_t d = 0; d < t.rings.size(); ++d) {
    std::fill(ring_of.begin(), ring_of.end(), -1);
    const std::string dim = "dimension " + std::to_string(d);
    for (size_t k = 0; k < t.rings[d].size(); ++k) {
      const Ring& ring = t.rings[d][k];
      const auto where = [&dim, k] { return dim + ", ring " + std::to_string(k); };
      if (ring.size() != static_cast<size_t>(mode.dims[d])) {
        throw TopologyError(where() + " has " + plural(ring.size(), "rank") + "; mode " +
                            quote(mode.str()) + " makes rings of " + std::to_string(mode.dims[d]) +
                            " in " + dim);
      }
      for (int member : ring) {
        if (member < 0 || member >= count) {
          throw TopologyError(where() + ": rank " + std::to_string(member) +
                              " is out of range; the ranks are 0.." + std::to_string(count - 1));
        }
        int& owner = ring_of[member];
        if (owner == static_cast<int>(k)) {
          throw TopologyError(where() + " holds rank " + std::to_string(member) +
                              " twice; a ring holds each rank once");
        }
        if (owner >= 0) {
          throw TopologyError(dim + ": rank " + std::to_string(member) + " is in ring " +
                              std::to_string(owner) + " and ring " + std::to_string(k) +
                              "; each rank is in exactly one ring of a dimension");
        }
        owner = static_cast<int>(k);
      }
    }
    const auto missing = std::find(ring_of.begin(), ring_of.end(), -1);
    if (missing != ring_of.end()) {
      throw TopologyError(dim + ": rank " + std::to_string(missing - ring_of.begin()) +
                          " is in no ring; each rank is in exactly one ring of a dimension");
    }
  }
}

// Measured links name hosts that exist, pairs of two different hosts, and each host in at most
// one rack.
void validate_links(const Topology& t) {
  if (!t.links) return;
  const auto host = [&](int index, const std::string& what) {
    if (t.find_host(index) == nullptr) {
      throw TopologyError("links: " + what + " names host " + std::to_string(index) +
                          ", which is not among the hosts");
    }
  };
  std::vector<int> rack_of(t.hosts.size(), -1);
  for (size_t r = 0; r < t.links->racks.size(); ++r) {
    for (int index : t.links->racks[r]) {
      host(index, "rack " + std::to_string(r));
      if (rack_of[static_cast<size_t>(index)] >= 0) {
        throw TopologyError("links: host " + std::to_string(index) + " is in rack " +
                            std::to_string(rack_of[static_cast<size_t>(index)]) + " and in rack " +
                            std::to_string(r));
      }
      rack_of[static_cast<size_t>(index)] = static_cast<int>(r);
    }
  }
  for (const LinkSample& pair : t.links->pairs) {
    const std::string what = "the pair " + std::to_string(pair.a) + "-" + std::to_string(pair.b);
    host(pair.a, what);
    host(pair.b, what);
    if (pair.a == pair.b) throw TopologyError("links: " + what + " joins a host to itself");
  }
}

}  // namespace

void validate(const Topology& topology) {
  validate_hosts(topology);
  const auto by_rank = validate_ranks(topology);
  validate_placements(topology, by_rank);
  validate_mode(topology);
  validate_rings(topology);
  validate_links(topology);
}

namespace topology {

void validate_read(const Topology& t, const std::string& source) {
  try {
    validate(t);
  } catch (const TopologyError& e) {
    throw TopologyError(source + ": " + e.what());
  }
}

}  // namespace topology

}  // namespace ddl::comm
