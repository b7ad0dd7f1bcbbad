#include "comm/topology.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <utility>

namespace ddl::comm {

namespace {

// ---------------------------------------------------------------------------------------------
// Small helpers

std::string quote(std::string_view s) {
  return "'" + std::string(s) + "'";
}

std::string host_label(const Topology& t, int index) {
  const Host* host = t.find_host(index);
  std::string label = "host " + std::to_string(index);
  if (host && !host->name.empty()) label += " " + quote(host->name);
  return label;
}

// Parses a whole decimal integer (optional '-'); false on anything else or out of range.
bool parse_int(std::string_view s, int& value) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  return ec == std::errc() && end == s.data() + s.size();
}

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t");
  return s.substr(first, last - first + 1);
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The largest PU index a CPU set may hold; far above any machine, low enough that a set's size
// and its list of PUs stay small.
constexpr int kMaxPu = (1 << 20) - 1;

std::string pu_range_problem(int first, int last) {
  if (first < 0 || last < 0) return "PU indices cannot be negative";
  if (last > kMaxPu) return "PU " + std::to_string(last) + " is above " + std::to_string(kMaxPu);
  if (first > last)
    return "range " + std::to_string(first) + "-" + std::to_string(last) + " runs backwards";
  return {};
}

// "0-27,88-115" into `ranges`; false with `why` set on a malformed text.
bool parse_cpu_ranges(std::string_view text, std::vector<CpuSet::Range>& ranges, std::string& why) {
  ranges.clear();
  if (trim(text).empty()) return true;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string_view item =
        trim(text.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (item.empty()) {
      why = "an entry is empty";
      return false;
    }
    const size_t dash = item.find('-');
    const std::string_view first_text = trim(item.substr(0, dash));
    const std::string_view last_text =
        dash == std::string_view::npos ? first_text : trim(item.substr(dash + 1));
    CpuSet::Range range;
    for (const auto& [number, value] :
         {std::pair{first_text, &range.first}, {last_text, &range.last}}) {
      if (!parse_int(number, *value) || *value < 0) {
        why = quote(number) + " is not a PU index";
        return false;
      }
    }
    why = pu_range_problem(range.first, range.last);
    if (!why.empty()) return false;
    ranges.push_back(range);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return true;
}

// Sorts and merges overlapping or adjacent ranges.
void normalize(std::vector<CpuSet::Range>& ranges) {
  const bool sorted_disjoint =
      std::adjacent_find(ranges.begin(), ranges.end(), [](const auto& a, const auto& b) {
        return static_cast<int64_t>(a.last) + 1 >= b.first;
      }) == ranges.end();
  if (sorted_disjoint) return;
  std::sort(ranges.begin(), ranges.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  size_t out = 0;
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (static_cast<int64_t>(ranges[out].last) + 1 >= ranges[i].first) {
      ranges[out].last = std::max(ranges[out].last, ranges[i].last);
    } else {
      ranges[++out] = ranges[i];
    }
  }
  ranges.resize(out + 1);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// CpuSet

CpuSet CpuSet::of(const std::vector<int>& pus) {
  CpuSet set;
  for (int pu : pus) {
    const std::string problem = pu_range_problem(pu, pu);
    if (!problem.empty()) throw TopologyError("invalid CPU set: " + problem);
    set.ranges_.push_back({pu, pu});
  }
  normalize(set.ranges_);
  return set;
}

CpuSet CpuSet::parse(std::string_view text) {
  CpuSet set;
  std::string why;
  if (!parse_cpu_ranges(text, set.ranges_, why)) {
    throw TopologyError("invalid CPU set " + quote(text) + ": " + why);
  }
  normalize(set.ranges_);
  return set;
}

void CpuSet::add(int first, int last) {
  const std::string problem = pu_range_problem(first, last);
  if (!problem.empty()) throw TopologyError("invalid CPU set: " + problem);
  ranges_.push_back({first, last});
  normalize(ranges_);
}

int CpuSet::size() const {
  int count = 0;
  for (const Range& r : ranges_)
    count += r.last - r.first + 1;
  return count;
}

bool CpuSet::contains(int pu) const {
  const auto it = std::upper_bound(ranges_.begin(), ranges_.end(), pu,
                                   [](int value, const Range& r) { return value < r.first; });
  return it != ranges_.begin() && std::prev(it)->last >= pu;
}

std::optional<int> CpuSet::first_shared(const CpuSet& other) const {
  size_t i = 0, j = 0;
  while (i < ranges_.size() && j < other.ranges_.size()) {
    const Range& a = ranges_[i];
    const Range& b = other.ranges_[j];
    const int low = std::max(a.first, b.first);
    if (low <= std::min(a.last, b.last)) return low;
    if (a.last < b.last) {
      ++i;
    } else {
      ++j;
    }
  }
  return std::nullopt;
}

std::vector<int> CpuSet::pus() const {
  std::vector<int> out;
  out.reserve(static_cast<size_t>(size()));
  for (const Range& r : ranges_) {
    for (int pu = r.first; pu <= r.last; ++pu)
      out.push_back(pu);
  }
  return out;
}

std::string CpuSet::str() const {
  std::string out;
  for (const Range& r : ranges_) {
    if (!out.empty()) out += ',';
    out += std::to_string(r.first);
    if (r.last != r.first) out += "-" + std::to_string(r.last);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Topology

const RankPlacement* Topology::find_rank(int rank) const {
  if (rank >= 0 && static_cast<size_t>(rank) < ranks.size() && ranks[rank].rank == rank) {
    return &ranks[rank];
  }
  for (const RankPlacement& r : ranks) {
    if (r.rank == rank) return &r;
  }
  return nullptr;
}

const Host* Topology::find_host(int index) const {
  if (index >= 0 && static_cast<size_t>(index) < hosts.size() && hosts[index].index == index) {
    return &hosts[index];
  }
  for (const Host& h : hosts) {
    if (h.index == index) return &h;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Validation
//
// How it works: each check builds an index over global ranks (or hosts) once, so the whole
// validation is O(N log N) even for 100,000+ ranks. The checks run in dependency order: hosts,
// then ranks, then what refers to them (hosts of ranks, local ranks, GPUs, CPU sets), then the
// mode and the rings. Messages walk ranks in ascending order, so they do not depend on the order
// the lists are in. A ring is stored as its order and closes from its last member back to its
// first, so a ring is well formed when it is non-empty and holds each member once.

namespace {

void validate_hosts(const Topology& t) {
  const int count = static_cast<int>(t.hosts.size());
  std::vector<int> position(t.hosts.size(), -1);
  for (int i = 0; i < count; ++i) {
    const int index = t.hosts[i].index;
    const auto where = [i] { return "hosts[" + std::to_string(i) + "]: "; };
    if (index < 0 || index >= count) {
      throw TopologyError(where() + "index " + std::to_string(index) + " is out of range; with " +
                          std::to_string(count) + " hosts the indices are 0.." +
                          std::to_string(count - 1));
    }
    if (position[index] >= 0) {
      throw TopologyError(where() + "index " + std::to_string(index) +
                          " appears twice (also hosts[" + std::to_string(position[index]) +
                          "]); host indices must be a permutation of 0.." +
                          std::to_string(count - 1));
    }
    position[index] = i;
  }
}

// Returns by_rank: by_rank[r] is the placement of global rank r.
std::vector<const RankPlacement*> validate_ranks(const Topology& t) {
  const int count = static_cast<int>(t.ranks.size());
  if (count == 0) throw TopologyError("the topology has no ranks");
  std::vector<const RankPlacement*> by_rank(t.ranks.size(), nullptr);
  std::vector<int> position(t.ranks.size(), -1);
  for (int i = 0; i < count; ++i) {
    const int rank = t.ranks[i].rank;
    const auto where = [i] { return "ranks[" + std::to_string(i) + "]: "; };
    if (rank < 0 || rank >= count) {
      throw TopologyError(where() + "rank " + std::to_string(rank) + " is out of range; with " +
                          std::to_string(count) + " ranks they are 0.." +
                          std::to_string(count - 1));
    }
    if (position[rank] >= 0) {
      throw TopologyError(where() + "rank " + std::to_string(rank) + " appears twice (also ranks[" +
                          std::to_string(position[rank]) +
                          "]); ranks must be a permutation of 0.." + std::to_string(count - 1));
    }
    position[rank] = i;
    by_rank[rank] = &t.ranks[i];
  }
  return by_rank;
}

void validate_placements(const Topology& t, const std::vector<const RankPlacement*>& by_rank) {
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

  // Local ranks: a permutation of 0..n_h-1 on each host.
  std::vector<std::vector<int>> holder(t.hosts.size());
  for (int h = 0; h < hosts; ++h)
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

  // GPUs: sorted by (host, gpu, rank), a repeat is a shared GPU.
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

  // CPU sets: every range of a host, sorted by start; a range that starts at or before the
  // furthest end seen so far on that host overlaps it.
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

}  // namespace

void validate(const Topology& topology) {
  validate_hosts(topology);
  const auto by_rank = validate_ranks(topology);
  validate_placements(topology, by_rank);
  validate_mode(topology);
  validate_rings(topology);
}

// ---------------------------------------------------------------------------------------------
// Default rings
//
// How it works: with dims d0 x d1 x ... (innermost first) and ranks laid out host-major, rank r
// has coordinates i_k = (r / s_k) % d_k, where the stride s_k = d0 * ... * d(k-1) (s_0 = 1).
// The ranks that differ only in coordinate k are base + i * s_k for i = 0..d_k-1, where base is
// a rank whose coordinate k is 0. So dimension k has one ring per such base, taken in ascending
// order of base, each listing base, base + s_k, ..., base + (d_k - 1) * s_k. For 4x3: dimension
// 0 rings are {0,1,2,3} {4,5,6,7} {8,9,10,11}; dimension 1 rings are {0,4,8} {1,5,9} {2,6,10}
// {3,7,11}.

std::vector<std::vector<Ring>> default_rings(const std::vector<int>& dims) {
  int64_t total = 1;
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] < 1) {
      throw TopologyError("default_rings: dimension " + std::to_string(k) + " is " +
                          std::to_string(dims[k]) + "; each must be at least 1");
    }
    total *= dims[k];
    if (total > std::numeric_limits<int>::max()) {
      throw TopologyError("default_rings: the dimensions multiply to more than 2147483647 ranks");
    }
  }
  std::vector<std::vector<Ring>> rings(dims.size());
  int stride = 1;
  for (size_t k = 0; k < dims.size(); ++k) {
    const int size = dims[k];
    rings[k].reserve(static_cast<size_t>(total / size));
    for (int base = 0; base < total; ++base) {
      if ((base / stride) % size != 0) continue;
      Ring ring(static_cast<size_t>(size));
      for (int i = 0; i < size; ++i)
        ring[i] = base + i * stride;
      rings[k].push_back(std::move(ring));
    }
    stride *= size;
  }
  return rings;
}

// ---------------------------------------------------------------------------------------------
// Writer: one line per host, per rank and per ring, so that the fast reader below can take the
// file line by line. Every string is double-quoted, every number is decimal.

namespace {

void put_int(std::string& out, int value) {
  char buf[16];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  out.append(buf, end);
}

bool needs_escape(unsigned char c) {
  return c < 0x20 || c == '"' || c == '\\' || c >= 0x7f;
}

void put_quoted(std::string& out, std::string_view s) {
  out += '"';
  if (std::none_of(s.begin(), s.end(), [](char c) { return needs_escape(c); })) {
    out += s;
  } else {
    for (const char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      if (c == '"' || c == '\\') {
        out += '\\';
        out += ch;
      } else if (c < 0x20 || c == 0x7f) {
        constexpr std::string_view kHex = "0123456789abcdef";
        out += "\\x";
        out += kHex[c >> 4];
        out += kHex[c & 15];
      } else {
        out += ch;  // UTF-8 passes through
      }
    }
  }
  out += '"';
}

}  // namespace

std::string format_topology(const Topology& t) {
  std::string out;
  out.reserve(256 + t.hosts.size() * 160 + t.ranks.size() * (180 + 8 * t.rings.size()));
  out += "# ddlrun topology: where each rank runs and the rings it joins; see ddl-topology(5).\n";
  out += "version: \"" + std::to_string(kTopologyFormatMajor) + "." +
         std::to_string(kTopologyFormatMinor) + "\"\n";
  out += "job_id: ";
  put_quoted(out, t.job_id);
  out += "\nmode: ";
  put_quoted(out, t.mode.str());
  out += t.hosts.empty() ? "\nhosts: []\n" : "\nhosts:\n";
  for (const Host& h : t.hosts) {
    out += "  - {index: ";
    put_int(out, h.index);
    out += ", name: ";
    put_quoted(out, h.name);
    out += ", address: ";
    put_quoted(out, h.address);
    out += ", nics: [";
    for (size_t i = 0; i < h.nics.size(); ++i) {
      out += i ? ", {name: " : "{name: ";
      put_quoted(out, h.nics[i].name);
      out += ", kind: ";
      put_quoted(out, h.nics[i].kind);
      out += ", address: ";
      put_quoted(out, h.nics[i].address);
      out += '}';
    }
    out += "]}\n";
  }
  out += t.ranks.empty() ? "ranks: []\n" : "ranks:\n";
  for (const RankPlacement& r : t.ranks) {
    out += "  - {rank: ";
    put_int(out, r.rank);
    out += ", local_rank: ";
    put_int(out, r.local_rank);
    out += ", host: ";
    put_int(out, r.host);
    out += ", gpu: ";
    put_int(out, r.gpu);
    out += ", gpu_bus_id: ";
    put_quoted(out, r.gpu_bus_id);
    out += ", gpu_uuid: ";
    put_quoted(out, r.gpu_uuid);
    out += ", cpus: ";
    put_quoted(out, r.cpus.str());
    out += ", nic: ";
    put_quoted(out, r.nic);
    out += ", address: ";
    put_quoted(out, r.address);
    out += "}\n";
  }
  out += t.rings.empty() ? "ring_orders: []\n" : "ring_orders:\n";
  for (size_t d = 0; d < t.rings.size(); ++d) {
    out += "  - dimension: ";
    put_int(out, static_cast<int>(d));
    out += t.rings[d].empty() ? "\n    rings: []\n" : "\n    rings:\n";
    for (const Ring& ring : t.rings[d]) {
      out += "      - [";
      for (size_t i = 0; i < ring.size(); ++i) {
        if (i) out += ", ";
        put_int(out, ring[i]);
      }
      out += "]\n";
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Version

namespace {

struct FormatVersion {
  int major = 0;
  int minor = 0;
};

std::optional<FormatVersion> parse_version(std::string_view text) {
  const size_t dot = text.find('.');
  FormatVersion v;
  if (dot == std::string_view::npos || !parse_int(text.substr(0, dot), v.major) ||
      !parse_int(text.substr(dot + 1), v.minor) || v.major < 0 || v.minor < 0) {
    return std::nullopt;
  }
  return v;
}

void check_major(const FormatVersion& v, const std::string& source) {
  if (v.major == kTopologyFormatMajor) return;
  throw TopologyError(source + " was written by " +
                      (v.major > kTopologyFormatMajor ? "a newer" : "an older") +
                      " ddlrun (format " + std::to_string(v.major) + "." + std::to_string(v.minor) +
                      "); this libddl reads format " + std::to_string(kTopologyFormatMajor) +
                      ".x: use the same ddlrun and libddl");
}

void validate_read(const Topology& t, const std::string& source) {
  try {
    validate(t);
  } catch (const TopologyError& e) {
    throw TopologyError(source + ": " + e.what());
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Fast reader
//
// How it works: YAML is slow to read through a generic node tree (yaml-cpp needs seconds and
// hundreds of MiB for the 27,648 ranks of Summit), yet every rank reads the whole file at start.
// So the reader first tries the exact layout format_topology writes: the keys in their order, one
// flow mapping per host and per rank, one flow sequence per ring, double-quoted strings without
// escapes, decimal integers. It walks the text once, line by line, with a cursor that matches
// literal key text and reads values in place. Full-line comments and blank lines are skipped.
// At the first thing it does not expect (another layout, another key order, an escape, an unknown
// field from a newer minor version, a malformed value) it gives up and returns nothing, and the
// text goes to the yaml-cpp reader, which accepts any YAML spelling and words the errors. It also
// gives up on texts that only look like its layout: a key with no entries under it ("hosts:"
// alone is null to YAML, not an empty list) and a NUL among the first bytes (which yaml-cpp takes
// for UTF-16 or UTF-32), so that whatever it takes, both readers read alike. Before
// anything else, both readers look at the first line: one naming another major version (in any
// quoting) is refused at once, since such a file may not even be YAML this reader understands.

namespace {

class Cursor {
 public:
  explicit Cursor(std::string_view line) : s_(line) {}

  bool lit(std::string_view text) {
    if (s_.substr(pos_, text.size()) != text) return false;
    pos_ += text.size();
    return true;
  }

  bool integer(int& value) {
    const char* begin = s_.data() + pos_;
    const char* end = s_.data() + s_.size();
    if (begin == end || (*begin != '-' && (*begin < '0' || *begin > '9'))) return false;
    const auto [stop, ec] = std::from_chars(begin, end, value);
    if (ec != std::errc()) return false;
    pos_ += static_cast<size_t>(stop - begin);
    return true;
  }

  // A double-quoted string without escapes, control characters or non-ASCII bytes.
  bool quoted(std::string& value) {
    if (!lit("\"")) return false;
    const size_t start = pos_;
    while (pos_ < s_.size()) {
      const auto c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        value.assign(s_.substr(start, pos_ - start));
        ++pos_;
        return true;
      }
      if (c == '\\' || c < 0x20 || c >= 0x7f) return false;
      ++pos_;
    }
    return false;
  }

  bool at_end() const { return pos_ == s_.size(); }

 private:
  std::string_view s_;
  size_t pos_ = 0;
};

class Lines {
 public:
  explicit Lines(std::string_view text) : text_(text) {}

  // The next line that is not blank or a full-line comment; false at the end of the text.
  bool next(std::string_view& line) {
    while (pos_ < text_.size()) {
      const size_t nl = text_.find('\n', pos_);
      const size_t end = nl == std::string_view::npos ? text_.size() : nl;
      line = text_.substr(pos_, end - pos_);
      pos_ = nl == std::string_view::npos ? text_.size() : nl + 1;
      const size_t first = line.find_first_not_of(' ');
      if (first != std::string_view::npos && line[first] != '#') return true;
    }
    return false;
  }

  // Like next() but leaves the line to be read again.
  bool peek(std::string_view& line) {
    const size_t saved = pos_;
    const bool found = next(line);
    pos_ = saved;
    return found;
  }

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

bool quoted_field(std::string_view line, std::string_view key, std::string& value) {
  Cursor c(line);
  return c.lit(key) && c.quoted(value) && c.at_end();
}

bool fast_host(std::string_view line, Host& h) {
  Cursor c(line);
  if (!(c.lit("  - {index: ") && c.integer(h.index) && c.lit(", name: ") && c.quoted(h.name) &&
        c.lit(", address: ") && c.quoted(h.address) && c.lit(", nics: ["))) {
    return false;
  }
  if (!c.lit("]")) {
    do {
      Nic& n = h.nics.emplace_back();
      if (!(c.lit("{name: ") && c.quoted(n.name) && c.lit(", kind: ") && c.quoted(n.kind) &&
            c.lit(", address: ") && c.quoted(n.address) && c.lit("}"))) {
        return false;
      }
    } while (c.lit(", "));
    if (!c.lit("]")) return false;
  }
  return c.lit("}") && c.at_end();
}

bool fast_rank(std::string_view line, RankPlacement& r, std::string& scratch) {
  Cursor c(line);
  if (!(c.lit("  - {rank: ") && c.integer(r.rank) && c.lit(", local_rank: ") &&
        c.integer(r.local_rank) && c.lit(", host: ") && c.integer(r.host) && c.lit(", gpu: ") &&
        c.integer(r.gpu) && c.lit(", gpu_bus_id: ") && c.quoted(r.gpu_bus_id) &&
        c.lit(", gpu_uuid: ") && c.quoted(r.gpu_uuid) && c.lit(", cpus: ") && c.quoted(scratch) &&
        c.lit(", nic: ") && c.quoted(r.nic) && c.lit(", address: ") && c.quoted(r.address) &&
        c.lit("}") && c.at_end())) {
    return false;
  }
  if (scratch.empty()) return true;
  try {
    r.cpus = CpuSet::parse(scratch);
  } catch (const TopologyError&) {
    return false;
  }
  return true;
}

bool fast_ring(std::string_view line, Ring& ring) {
  Cursor c(line);
  if (!c.lit("      - [")) return false;
  do {
    int member = 0;
    if (!c.integer(member)) return false;
    ring.push_back(member);
  } while (c.lit(", "));
  return c.lit("]") && c.at_end();
}

// Reads "version: ..." in any quoting and throws when it names another major version.
void sniff_version(std::string_view line, const std::string& source) {
  if (!line.starts_with("version:")) return;
  std::string_view value = trim(line.substr(8));
  if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
      value.back() == value.front()) {
    value = value.substr(1, value.size() - 2);
  }
  if (const auto v = parse_version(value)) check_major(*v, source);
}

std::optional<Topology> parse_fast(std::string_view text, const std::string& source) {
  Lines lines(text);
  std::string_view line;
  if (!lines.next(line)) return std::nullopt;
  sniff_version(line, source);
  // yaml-cpp guesses the encoding from the first bytes and reads "#\0..." as UTF-16.
  if (text.substr(0, 4).find('\0') != std::string_view::npos) return std::nullopt;

  std::string scratch;
  if (!quoted_field(line, "version: ", scratch)) return std::nullopt;
  const auto version = parse_version(scratch);
  if (!version) return std::nullopt;

  Topology t;
  if (!lines.next(line) || !quoted_field(line, "job_id: ", t.job_id)) return std::nullopt;
  if (!lines.next(line) || !quoted_field(line, "mode: ", scratch)) return std::nullopt;
  try {
    t.mode = parse_mode(scratch);
  } catch (const ModeError&) {
    return std::nullopt;
  }

  if (!lines.next(line) || line != "hosts:") return std::nullopt;
  while (lines.peek(line) && line.starts_with("  - ")) {
    lines.next(line);
    if (!fast_host(line, t.hosts.emplace_back())) return std::nullopt;
  }
  // A key with no entries below it is null to YAML, not an empty list.
  if (t.hosts.empty()) return std::nullopt;

  if (!lines.next(line) || line != "ranks:") return std::nullopt;
  while (lines.peek(line) && line.starts_with("  - ")) {
    lines.next(line);
    if (!fast_rank(line, t.ranks.emplace_back(), scratch)) return std::nullopt;
  }
  if (t.ranks.empty()) return std::nullopt;

  if (!lines.next(line) || line != "ring_orders:") return std::nullopt;
  while (lines.next(line)) {
    Cursor c(line);
    int dimension = 0;
    if (!(c.lit("  - dimension: ") && c.integer(dimension) && c.at_end()) ||
        dimension != static_cast<int>(t.rings.size())) {
      return std::nullopt;
    }
    if (!lines.next(line) || line != "    rings:") return std::nullopt;
    auto& rings = t.rings.emplace_back();
    while (lines.peek(line) && line.starts_with("      - ")) {
      lines.next(line);
      if (!fast_ring(line, rings.emplace_back())) return std::nullopt;
    }
    if (rings.empty()) return std::nullopt;
  }
  if (t.rings.empty()) return std::nullopt;
  return t;
}

// ---------------------------------------------------------------------------------------------
// yaml-cpp reader: any YAML spelling; errors name the file, line, column and field.

class GenericReader {
 public:
  explicit GenericReader(const std::string& source) : source_(source) {}

  Topology read(std::string_view text) {
    // A file of another major version may not even be YAML that this reader understands.
    std::string_view first_line;
    if (Lines(text).next(first_line)) sniff_version(first_line, source_);
    YAML::Node root;
    try {
      root = YAML::Load(std::string(text));
    } catch (const YAML::Exception& e) {
      throw TopologyError(at(e.mark) + "not valid YAML: " + e.msg);
    }
    if (!root.IsMap()) {
      throw TopologyError(at(root.Mark()) + "expected a mapping with the keys version, job_id, " +
                          "mode, hosts, ranks and ring_orders, got " + describe(root) +
                          "; is this a ddlrun topology file?");
    }
    const YAML::Node version_node = root["version"];
    if (!version_node) {
      throw TopologyError(at(root.Mark()) + "version: missing; is this a ddlrun topology file?");
    }
    const std::string version_text = string(version_node, "version");
    const auto version = parse_version(version_text);
    if (!version) {
      fail(version_node, "version",
           "expected \"<major>.<minor>\" such as \"1.0\", got " + quote(version_text));
    }
    check_major(*version, source_);
    strict_ = version->minor <= kTopologyFormatMinor;

    check_keys(root, "", {"version", "job_id", "mode", "hosts", "ranks", "ring_orders"});
    Topology t;
    t.job_id = string(required(root, "", "job_id"), "job_id");
    const YAML::Node mode_node = required(root, "", "mode");
    try {
      t.mode = parse_mode(string(mode_node, "mode"));
    } catch (const ModeError& e) {
      fail(mode_node, "mode", e.what());
    }
    size_t i = 0;
    for (const YAML::Node& node : sequence(required(root, "", "hosts"), "hosts"))
      t.hosts.push_back(host(node, "hosts[" + std::to_string(i++) + "]"));
    i = 0;
    for (const YAML::Node& node : sequence(required(root, "", "ranks"), "ranks"))
      t.ranks.push_back(rank(node, "ranks[" + std::to_string(i++) + "]"));
    for (const YAML::Node& node : sequence(required(root, "", "ring_orders"), "ring_orders"))
      t.rings.push_back(dimension(node, t.rings.size()));
    return t;
  }

 private:
  std::string at(const YAML::Mark& mark) const {
    if (mark.is_null()) return source_ + ": ";
    return source_ + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1) +
           ": ";
  }

  static std::string describe(const YAML::Node& node) {
    switch (node.Type()) {
      case YAML::NodeType::Map:
        return "a mapping";
      case YAML::NodeType::Sequence:
        return "a sequence";
      case YAML::NodeType::Scalar:
        return quote(node.Scalar());
      default:
        return "nothing";
    }
  }

  [[noreturn]] void fail(const YAML::Node& node, const std::string& field,
                         const std::string& problem) const {
    throw TopologyError(at(node.Mark()) + field + ": " + problem);
  }

  static std::string join(const std::string& where, std::string_view key) {
    return where.empty() ? std::string(key) : where + "." + std::string(key);
  }

  void check_keys(const YAML::Node& map, const std::string& where,
                  std::initializer_list<std::string_view> known) const {
    for (const auto& entry : map) {
      const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : std::string();
      if (std::find(known.begin(), known.end(), key) != known.end() || !strict_) continue;
      std::string hint;
      size_t best = 3;
      for (std::string_view candidate : known) {
        const size_t distance = edit_distance(key, candidate);
        if (distance < best) {
          best = distance;
          hint = " (did you mean '" + std::string(candidate) + "'?)";
        }
      }
      throw TopologyError(at(entry.first.Mark()) + (where.empty() ? "" : where + ": ") +
                          "unknown field " + quote(key) + hint);
    }
  }

  YAML::Node required(const YAML::Node& map, const std::string& where, std::string_view key) const {
    YAML::Node node = map[std::string(key)];
    if (!node) fail(map, join(where, key), "missing");
    return node;
  }

  YAML::Node mapping(const YAML::Node& node, const std::string& field) const {
    if (!node.IsMap()) fail(node, field, "expected a mapping, got " + describe(node));
    return node;
  }

  YAML::Node sequence(const YAML::Node& node, const std::string& field) const {
    if (!node.IsSequence()) fail(node, field, "expected a sequence, got " + describe(node));
    return node;
  }

  int integer(const YAML::Node& node, const std::string& field) const {
    int value = 0;
    if (!node.IsScalar() || !parse_int(node.Scalar(), value)) {
      fail(node, field, "expected an integer, got " + describe(node));
    }
    return value;
  }

  std::string string(const YAML::Node& node, const std::string& field) const {
    if (node.IsNull()) return {};
    if (!node.IsScalar()) fail(node, field, "expected a string, got " + describe(node));
    return node.Scalar();
  }

  std::string optional_string(const YAML::Node& map, const std::string& where,
                              std::string_view key) const {
    const YAML::Node node = map[std::string(key)];
    return node ? string(node, join(where, key)) : std::string();
  }

  int required_int(const YAML::Node& map, const std::string& where, std::string_view key) const {
    return integer(required(map, where, key), join(where, key));
  }

  Host host(const YAML::Node& node, const std::string& where) const {
    mapping(node, where);
    check_keys(node, where, {"index", "name", "address", "nics"});
    Host h;
    h.index = required_int(node, where, "index");
    h.name = string(required(node, where, "name"), join(where, "name"));
    h.address = string(required(node, where, "address"), join(where, "address"));
    if (const YAML::Node nics = node["nics"]) {
      const std::string field = join(where, "nics");
      size_t i = 0;
      for (const YAML::Node& nic : sequence(nics, field)) {
        const std::string nic_where = field + "[" + std::to_string(i++) + "]";
        mapping(nic, nic_where);
        check_keys(nic, nic_where, {"name", "kind", "address"});
        Nic& n = h.nics.emplace_back();
        n.name = string(required(nic, nic_where, "name"), join(nic_where, "name"));
        n.kind = string(required(nic, nic_where, "kind"), join(nic_where, "kind"));
        n.address = optional_string(nic, nic_where, "address");
      }
    }
    return h;
  }

  RankPlacement rank(const YAML::Node& node, const std::string& where) const {
    mapping(node, where);
    check_keys(
        node, where,
        {"rank", "local_rank", "host", "gpu", "gpu_bus_id", "gpu_uuid", "cpus", "nic", "address"});
    RankPlacement r;
    r.rank = required_int(node, where, "rank");
    r.local_rank = required_int(node, where, "local_rank");
    r.host = required_int(node, where, "host");
    r.gpu = required_int(node, where, "gpu");
    r.gpu_bus_id = optional_string(node, where, "gpu_bus_id");
    r.gpu_uuid = optional_string(node, where, "gpu_uuid");
    const YAML::Node cpus = required(node, where, "cpus");
    try {
      r.cpus = CpuSet::parse(string(cpus, join(where, "cpus")));
    } catch (const TopologyError& e) {
      fail(cpus, join(where, "cpus"), e.what());
    }
    r.nic = optional_string(node, where, "nic");
    r.address = optional_string(node, where, "address");
    return r;
  }

  std::vector<Ring> dimension(const YAML::Node& node, size_t d) const {
    const std::string where = "ring_orders[" + std::to_string(d) + "]";
    mapping(node, where);
    check_keys(node, where, {"dimension", "rings"});
    const YAML::Node number = required(node, where, "dimension");
    if (integer(number, join(where, "dimension")) != static_cast<int>(d)) {
      fail(number, join(where, "dimension"),
           "expected " + std::to_string(d) + " (the dimensions come in order, innermost first), " +
               "got " + describe(number));
    }
    const std::string field = join(where, "rings");
    const YAML::Node rings = sequence(required(node, where, "rings"), field);
    std::vector<Ring> out;
    out.reserve(rings.size());
    for (const YAML::Node& members : rings) {
      const std::string ring_field = field + "[" + std::to_string(out.size()) + "]";
      sequence(members, ring_field);
      Ring& ring = out.emplace_back();
      ring.reserve(members.size());
      for (const YAML::Node& member : members)
        ring.push_back(integer(member, ring_field + "[" + std::to_string(ring.size()) + "]"));
    }
    return out;
  }

  const std::string& source_;
  bool strict_ = true;
};

}  // namespace

Topology parse_topology_generic(std::string_view text, const std::string& source) {
  Topology t = GenericReader(source).read(text);
  validate_read(t, source);
  return t;
}

std::optional<Topology> parse_topology_fast(std::string_view text, const std::string& source) {
  std::optional<Topology> t = parse_fast(text, source);
  if (t) validate_read(*t, source);
  return t;
}

Topology parse_topology(std::string_view text, const std::string& source) {
  if (std::optional<Topology> t = parse_topology_fast(text, source)) return std::move(*t);
  return parse_topology_generic(text, source);
}

// ---------------------------------------------------------------------------------------------
// Files

namespace {

std::string errno_text(int error) {
  return std::strerror(error);
}

// Writes all of `data`, retrying short writes and EINTR; false with errno set on failure.
bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

void write_topology_file(const Topology& topology, const std::string& path) {
  try {
    validate(topology);
  } catch (const TopologyError& e) {
    throw TopologyError("refusing to write topology file " + quote(path) + ": " + e.what());
  }
  const std::string text = format_topology(topology);
  const std::string fail = "cannot write topology file " + quote(path) + ": ";

  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash ? slash : 1);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);

  // A name nobody else uses, in the same directory so that rename() replaces atomically.
  std::random_device random;
  std::string temp;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    char suffix[24];
    std::snprintf(suffix, sizeof suffix, ".%08x%08x", random(), random());
    temp = (slash == std::string::npos ? "" : path.substr(0, slash + 1)) + "." + base + ".tmp" +
           suffix;
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && (errno != EEXIST || attempt == 100)) {
      throw TopologyError(fail + "cannot create a temporary file in " + quote(dir) + ": " +
                          errno_text(errno));
    }
  }

  const auto abandon = [&](const std::string& step, int error) {
    if (fd >= 0) ::close(fd);
    ::unlink(temp.c_str());
    throw TopologyError(fail + step + ": " + errno_text(error));
  };
  if (!write_all(fd, text)) abandon("write", errno);
  if (::fsync(fd) != 0) abandon("fsync", errno);
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) abandon("close", errno);
  if (::rename(temp.c_str(), path.c_str()) != 0) abandon("rename", errno);

  // Make the rename itself durable. Some file systems cannot fsync a directory (EINVAL).
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) {
    throw TopologyError(fail + "cannot open directory " + quote(dir) + ": " + errno_text(errno));
  }
  if (::fsync(dir_fd) != 0 && errno != EINVAL) {
    const int error = errno;
    ::close(dir_fd);
    throw TopologyError(fail + "fsync of directory " + quote(dir) + ": " + errno_text(error));
  }
  ::close(dir_fd);
}

Topology read_topology_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw TopologyError("cannot read topology file " + quote(path) + ": " + errno_text(errno));
  }
  std::string text;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) text.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd);
      throw TopologyError("cannot read topology file " + quote(path) + ": " + errno_text(error));
    }
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return parse_topology(text, path);
}

}  // namespace ddl::comm
