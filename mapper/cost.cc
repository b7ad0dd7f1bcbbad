// The cost model: how long libddl's allreduce of a mode takes on a fabric of levels.
//
// How it works. The fabric has four levels, innermost first: `local` (between the ranks of one
// host, through shared memory), `host` (each host's NIC, one link each way), `rack` (each rack's
// uplink) and `aisle` (each aisle's). Each has a bandwidth per direction and a latency. A
// message from rank a to rank b crosses the highest level that separates them, and loads every
// link on its way: a's and b's NICs when they sit on different hosts, their racks' uplinks too
// when on different racks, and so on. Between hosts libddl speaks TCP, whose payload is about
// 94% of an Ethernet link's rate at MTU 1500 (1448 bytes in 1514, and the ACKs the other way),
// so network levels carry kTcpPayload of their bandwidth.
//
// The model follows what libddl does (comm/core/communicator.cc chooses; comm/collectives):
//
//   - one host and a 'p' mode: the direct shared-memory allreduce; each rank moves
//     2(n-1)/n S through its own pipe at the local rate.
//   - below DDL_SMALL_BYTES (16 KiB): recursive doubling, log2(n) rounds of S across the job's
//     widest level.
//   - the flat ring ('r', or fewer than two dimensions of more than one rank): ranks 0..n-1 in a
//     ring; every rank sends 2(n-1)/n S to the next in 2(n-1) steps.
//   - otherwise the multi-dimensional ring (multi_dim.cc): dimension j's rings (members a stride
//     of d0 x ... x d(j-1) apart) reduce-scatter and allgather the region left after the inner
//     dimensions, S / (d0 ... d(j-1)); each member sends 2(dj-1)/dj of it. A dimension takes as
//     long as its busiest link (the bytes every ring of the dimension puts on it, over its
//     bandwidth: two ranks of a host share its NIC, rings that cross a rack share its uplink),
//     or as one ring's chain of steps (each waits for the previous member's: steps times the
//     latency of the slowest hop, plus that ring's bytes at the link's full rate), whichever is
//     longer: rings that share a link fill each other's waits. The buffer goes through in
//     chunks, every dimension on its own thread, so the dimensions overlap: the time is the
//     slowest dimension, or the busiest link over all dimensions at once when that is longer,
//     plus the others' share of one chunk (the pipeline's fill). Each chunk pays every step of
//     its rings a latency, so the chunk is libddl's own, comm::pipeline_chunk_bytes: 1 MiB
//     (DDL_PIPELINE_BYTES) for rings of up to 3, growing with the longest ring's steps beyond
//     (256 KiB a step). A dimension longer than comm::kMaxRing (16) whose every hop leaves its
//     host runs as sub-rings, as libddl runs it (comm::ring_factors, run_dims): 4,608 hosts as
//     9 x 8 x 8 x 8, each a dimension of its own, the same bytes through each NIC in 58 steps
//     instead of 9,214, so the chunk stays at 4 MiB and the dimensions overlap.
//
// The bandwidth bound (bandwidth_bound_seconds) is the busiest link's bytes alone: no
// latency, no fill. Summit at 64 MiB is within 5% of it: p:6x4608x1x1 116.6 ms against
// 114.2 (one ring of 4,608 paid 9,214 x 30 us = 0.28 s in a row), p:6x18x256x1 119.1 ms.
//
// The prediction is as good as the levels: the inventory knows NIC speeds, not what lies
// between the hosts, so --link gives the rest.

#include "mapper/cost.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include "base/text.h"

namespace ddl::mapper {

namespace {

constexpr double kTcpPayload = 0.94;
constexpr double kSmallBytes = 16 * 1024;  // DDL_SMALL_BYTES' default

// Defaults where nothing better is known.
constexpr double kLocalBytesPerS = 8e9, kLocalLatency = 1e-6;
constexpr double kHostBytesPerS = 10e9 / 8, kHostLatency = 30e-6;

struct Unit {
  std::string_view name;
  double factor;
};

/// Splits "1.5Gbit" into 1.5 and "gbit" (lower case); nullopt without a leading number.
std::optional<std::pair<double, std::string>> number_and_unit(std::string_view text) {
  text = base::trim(text);
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  std::string unit(base::trim(std::string_view(end, text.data() + text.size() - end)));
  for (char& c : unit)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return std::make_pair(value, unit);
}

std::optional<double> with_unit(std::string_view text, std::span<const Unit> units) {
  const auto parsed = number_and_unit(text);
  if (!parsed) return std::nullopt;
  for (const Unit& u : units) {
    if (parsed->second == u.name) return parsed->first * u.factor;
  }
  return std::nullopt;
}

constexpr Unit kBandwidthUnits[] = {{"bit", 1 / 8.0},     {"kbit", 1e3 / 8},  {"mbit", 1e6 / 8},
                                    {"gbit", 1e9 / 8},    {"tbit", 1e12 / 8}, {"b", 1},
                                    {"kb", 1e3},          {"mb", 1e6},        {"gb", 1e9},
                                    {"tb", 1e12},         {"kib", 1024.0},    {"mib", 1048576.0},
                                    {"gib", 1073741824.0}};
constexpr Unit kLatencyUnits[] = {{"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1}};
constexpr Unit kSizeUnits[] = {{"", 1},
                               {"k", 1024.0},
                               {"kib", 1024.0},
                               {"m", 1048576.0},
                               {"mib", 1048576.0},
                               {"g", 1073741824.0},
                               {"gib", 1073741824.0},
                               {"t", 1099511627776.0},
                               {"tib", 1099511627776.0}};

std::optional<double> bandwidth(std::string_view text) {
  std::string t(base::trim(text));
  if (t.size() > 2 && t.compare(t.size() - 2, 2, "/s") == 0) t.resize(t.size() - 2);
  return with_unit(t, kBandwidthUnits);
}

/// The highest level a message from rank a to rank b crosses.
int crossing(const Layout& l, int a, int b) {
  if (l.aisle[a] != l.aisle[b]) return kAisle;
  if (l.rack[a] != l.rack[b]) return kRack;
  if (l.host[a] != l.host[b]) return kHost;
  return kLocal;
}

/// Bytes one way on each link: per level, at 2 x its host, rack or aisle (+1 for the way in).
struct Loads {
  std::vector<double> bytes[kAisle + 1];

  void add(int level, int group, int in, double b) {
    std::vector<double>& v = bytes[level];
    const size_t at = 2 * static_cast<size_t>(group) + static_cast<size_t>(in);
    if (v.size() <= at) v.resize(at + 1, 0);
    v[at] += b;
  }
  void add(const Loads& other) {
    for (int level = kHost; level <= kAisle; ++level) {
      for (size_t at = 0; at < other.bytes[level].size(); ++at)
        add(level, static_cast<int>(at / 2), static_cast<int>(at % 2), other.bytes[level][at]);
    }
  }
};

/// One dimension's (or the flat ring's) traffic.
struct Stage {
  Loads loads;
  double local_bytes = 0;  // the most one rank sends to a rank of its own host
  double latency = 0;      // the slowest hop's
  double steps = 0;
  double alone = 0;  // the slowest hop's bytes over its links, were they its alone
};

/// The rate of a message crossing `level`: the slowest link on its way.
double rate_across(const Fabric& f, int level) {
  if (level == kLocal) return f.levels[kLocal].bytes_per_s;
  double rate = f.levels[kHost].bytes_per_s;
  for (int lv = kRack; lv <= level; ++lv)
    rate = std::min(rate, f.levels[lv].bytes_per_s);
  return rate * kTcpPayload;
}

void add_hop(const Fabric& f, const Layout& l, int a, int b, double bytes, Stage& s) {
  const int level = crossing(l, a, b);
  s.latency = std::max(s.latency, f.levels[level].latency_s);
  s.alone = std::max(s.alone, bytes / rate_across(f, level));
  if (level == kLocal) {
    s.local_bytes = std::max(s.local_bytes, bytes);
    return;
  }
  const std::vector<int>* group[] = {nullptr, &l.host, &l.rack, &l.aisle};
  for (int lv = kHost; lv <= level; ++lv) {
    s.loads.add(lv, (*group[lv])[a], 0, bytes);
    s.loads.add(lv, (*group[lv])[b], 1, bytes);
  }
}

/// The seconds the busiest link needs for `loads` (and the local pipes for `local_bytes`).
double busiest(const Fabric& f, const Loads& loads, double local_bytes) {
  double t = local_bytes / f.levels[kLocal].bytes_per_s;
  for (int level = kHost; level <= kAisle; ++level) {
    for (double bytes : loads.bytes[level])
      t = std::max(t, bytes / (f.levels[level].bytes_per_s * kTcpPayload));
  }
  return t;
}

/// The busiest link's time, or one ring's chain of steps, whichever is longer.
double stage_seconds(const Fabric& f, const Stage& s) {
  return std::max(busiest(f, s.loads, s.local_bytes), s.steps * s.latency + s.alone);
}

/// The traffic of `rings`, each reducing `region` bytes `chunks` times over.
Stage ring_stage(const Fabric& f, const Layout& l, const std::vector<std::vector<int>>& rings,
                 double region, double chunks) {
  Stage s;
  for (const std::vector<int>& ring : rings) {
    const double n = static_cast<double>(ring.size());
    for (size_t i = 0; i < ring.size(); ++i)
      add_hop(f, l, ring[i], ring[(i + 1) % ring.size()], 2 * (n - 1) / n * region, s);
    s.steps = std::max(s.steps, chunks * 2 * (n - 1));
  }
  return s;
}

/// The rings of dimension j of `dims`: members `stride` apart, stride = d0 x ... x d(j-1).
std::vector<std::vector<int>> dimension_rings(const std::vector<int>& dims, size_t j, int ranks) {
  int stride = 1;
  for (size_t i = 0; i < j; ++i)
    stride *= dims[i];
  std::vector<std::vector<int>> rings;
  for (int r = 0; r < ranks; ++r) {
    if ((r / stride) % dims[j] != 0) continue;
    std::vector<int> ring;
    for (int k = 0; k < dims[j]; ++k)
      ring.push_back(r + k * stride);
    rings.push_back(std::move(ring));
  }
  return rings;
}

/// The flat ring's time and bound.
std::pair<double, double> flat_ring_seconds(const Fabric& f, const Layout& l, double bytes) {
  std::vector<int> ring(l.host.size());
  for (size_t r = 0; r < ring.size(); ++r)
    ring[r] = static_cast<int>(r);
  const Stage s = ring_stage(f, l, {ring}, bytes, 1);
  return {stage_seconds(f, s), busiest(f, s.loads, s.local_bytes)};
}

double recursive_doubling_seconds(const Fabric& f, const Layout& l, double bytes) {
  const int n = static_cast<int>(l.host.size());
  int widest = kLocal;
  for (int r = 1; r < n; ++r)
    widest = std::max(widest, crossing(l, 0, r));
  return std::ceil(std::log2(n)) * (f.levels[widest].latency_s + bytes / rate_across(f, widest));
}

bool every_hop_leaves_its_host(const Layout& l, const std::vector<std::vector<int>>& rings) {
  for (const std::vector<int>& ring : rings) {
    for (size_t i = 0; i < ring.size(); ++i)
      if (l.host[ring[i]] == l.host[ring[(i + 1) % ring.size()]]) return false;
  }
  return true;
}

/// The dimensions libddl's multi-dimensional ring runs for `dims`: a dimension longer than
/// comm::kMaxRing whose every hop leaves its host as its sub-rings (comm::ring_factors), each
/// a dimension of its own (they move the same bytes through each NIC; a ring with hops inside
/// hosts would not), the others whole.
std::vector<int> run_dims(const Layout& l, const std::vector<int>& dims) {
  const int n = static_cast<int>(l.host.size());
  std::vector<int> out;
  for (size_t j = 0; j < dims.size(); ++j) {
    const bool split =
        dims[j] > comm::kMaxRing && every_hop_leaves_its_host(l, dimension_rings(dims, j, n));
    const std::vector<int> f =
        split ? comm::ring_factors(dims[j], comm::kMaxRing) : std::vector<int>{dims[j]};
    out.insert(out.end(), f.begin(), f.end());
  }
  return out;
}

/// How many chunks libddl cuts an allreduce of `bytes` into over dimensions `dims`.
double pipeline_chunks(const std::vector<int>& dims, double bytes) {
  const size_t chunk = comm::pipeline_chunk_bytes(comm::kPipelineBytes, dims);
  const auto total = static_cast<size_t>(bytes);
  return std::ceil(bytes / static_cast<double>(comm::pipeline_chunk_elems(total, 1, chunk)));
}

/// The pipelined multi-dimensional ring (see the top of the file): its time, and its bound
/// (the busiest link's bytes over all dimensions).
std::pair<double, double> multi_dim_seconds(const Fabric& f, const Layout& l,
                                            const std::vector<int>& dims, double bytes) {
  const double chunks = pipeline_chunks(dims, bytes);
  const int n = static_cast<int>(l.host.size());
  double region = bytes, slowest = 0, sum = 0, local = 0;
  Loads all;
  for (size_t j = 0; j < dims.size(); ++j) {
    if (dims[j] > 1) {
      const Stage s = ring_stage(f, l, dimension_rings(dims, j, n), region, chunks);
      const double t = stage_seconds(f, s);
      slowest = std::max(slowest, t);
      sum += t;
      local = std::max(local, s.local_bytes);
      all.add(s.loads);
    }
    region /= dims[j];
  }
  const double bound = busiest(f, all, local);
  if (chunks == 1) return {sum, bound};
  return {std::max(slowest, bound) + (sum - slowest) / chunks, bound};
}

/// The time and bound of an allreduce the model covers; predict_seconds and
/// bandwidth_bound_seconds take one each.
std::pair<double, double> predict(const Fabric& fabric, const Layout& layout,
                                  const comm::Mode& mode, double bytes) {
  const int n = static_cast<int>(layout.host.size());
  if (n < 2 || bytes <= 0) return {0, 0};
  const bool one_host = std::all_of(layout.host.begin(), layout.host.end(),
                                    [&](int h) { return h == layout.host[0]; });
  if (one_host && mode.algorithm != comm::Algorithm::kRing) {
    const FabricLevel& local = fabric.levels[kLocal];
    const double bound = 2.0 * (n - 1) / n * bytes / local.bytes_per_s;
    return {bound + 2 * local.latency_s, bound};
  }
  if (bytes < kSmallBytes) {
    const double t = recursive_doubling_seconds(fabric, layout, bytes);
    return {t, t};
  }
  const std::vector<int> run = run_dims(layout, mode.dims);
  const auto dims = std::count_if(run.begin(), run.end(), [](int d) { return d > 1; });
  if (mode.algorithm == comm::Algorithm::kRing || dims < 2) {
    return flat_ring_seconds(fabric, layout, bytes);
  }
  return multi_dim_seconds(fabric, layout, run, bytes);
}

void apply(FabricLevel& level, const LinkSetting& s) {
  level.bytes_per_s = s.bytes_per_s;
  if (s.latency_s) level.latency_s = *s.latency_s;
  level.from = "--link";
}

/// The speed the inventory reports for a NIC, Mbit/s; 0: not known.
int nic_mbps(const Nic& nic) {
  int mbps = 0;
  for (const NetInterface& i : nic.interfaces)
    mbps = std::max(mbps, i.speed_mbps.value_or(0));
  for (const NicPort& p : nic.ports)
    mbps = std::max(mbps, p.speed_mbps.value_or(0));
  return mbps;
}

/// The slowest speed the inventories report for the NICs the ranks use, bytes/s; 0: none known.
double inventory_nic_speed(const Placement& placement) {
  double slowest = 0;
  for (const HostUse& h : placement.hosts) {
    for (int rank : h.ranks) {
      const std::string& name = placement.ranks.at(static_cast<size_t>(rank)).nic;
      const Nic* nic = h.inventory != nullptr ? h.inventory->find_nic(name) : nullptr;
      const double bytes_per_s = nic != nullptr ? nic_mbps(*nic) * 1e6 / 8 : 0;
      if (bytes_per_s > 0 && (slowest == 0 || bytes_per_s < slowest)) slowest = bytes_per_s;
    }
  }
  return slowest;
}

/// The largest count of distinct values of `inner` sharing one value of `outer`.
int most_per_group(const std::vector<int>& inner, const std::vector<int>& outer) {
  std::map<int, std::vector<int>> members;
  for (size_t r = 0; r < inner.size(); ++r)
    members[outer[r]].push_back(inner[r]);
  size_t most = 1;
  for (auto& [group, m] : members) {
    std::sort(m.begin(), m.end());
    most = std::max(most, static_cast<size_t>(std::unique(m.begin(), m.end()) - m.begin()));
  }
  return static_cast<int>(most);
}

std::string significant(double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", value);
  return buf;
}

}  // namespace

LinkSetting parse_link(std::string_view text) {
  const std::string quoted = "--link '" + std::string(text) + "'";
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos) {
    throw CostError(quoted + ": expected LEVEL=BW[,LAT], e.g. host=1Gbit,50us");
  }
  const std::string_view name = base::trim(text.substr(0, eq));
  LinkSetting s;
  const auto it = std::find(std::begin(kLevelNames), std::end(kLevelNames), name);
  if (it == std::end(kLevelNames)) {
    throw CostError(quoted + ": unknown level '" + std::string(name) + "'" +
                    base::did_you_mean(name, kLevelNames) +
                    "; the levels are local, host, rack and aisle");
  }
  s.level = static_cast<int>(it - std::begin(kLevelNames));
  const std::string_view rest = text.substr(eq + 1);
  const size_t comma = rest.find(',');
  const auto bw = bandwidth(rest.substr(0, comma));
  if (!bw || !(*bw > 0) || !std::isfinite(*bw)) {
    throw CostError(quoted + ": '" + std::string(base::trim(rest.substr(0, comma))) +
                    "' is not a bandwidth above 0; write a number and a unit: 1Gbit, 250Mbit, "
                    "10GB/s");
  }
  s.bytes_per_s = *bw;
  if (comma == std::string_view::npos) return s;
  const std::string_view lat_text = base::trim(rest.substr(comma + 1));
  const auto lat = with_unit(lat_text, kLatencyUnits);
  if (!lat || !(*lat >= 0) || !std::isfinite(*lat)) {
    throw CostError(quoted + ": '" + std::string(lat_text) +
                    "' is not a latency; write a number and a unit: 50us, 2ms, 800ns");
  }
  s.latency_s = *lat;
  return s;
}

double parse_size(std::string_view text, std::string_view option) {
  const auto size = with_unit(text, kSizeUnits);
  if (!size || !(*size >= 1) || !std::isfinite(*size)) {
    throw CostError(std::string(option) + " '" + std::string(text) +
                    "': not a size of at least 1 byte; write bytes or a number and K, M or G "
                    "(powers of 1024): 64M, 1G");
  }
  return std::floor(*size);
}

std::vector<FabricLevel> measured_levels(std::span<const comm::MeasuredLevel> levels) {
  std::vector<FabricLevel> out;
  for (const comm::MeasuredLevel& l : levels) {
    const std::string name = l.name == "nic" ? "host" : l.name == "uplink" ? "rack" : l.name;
    out.push_back({name, l.bytes_per_s / kTcpPayload, l.latency_s, "measured"});
  }
  return out;
}

Fabric make_fabric(const Placement& placement, const Layout& layout,
                   std::span<const LinkSetting> links, std::span<const FabricLevel> measured) {
  Fabric f;
  f.levels = {{"local", kLocalBytesPerS, kLocalLatency, "default"},
              {"host", kHostBytesPerS, kHostLatency, "default"},
              {"rack", 0, 0, "default"},
              {"aisle", 0, 0, "default"}};
  if (const double nic = inventory_nic_speed(placement); nic > 0) {
    f.levels[kHost].bytes_per_s = nic;
    f.levels[kHost].from = "inventory";
  }
  // Each level's links, in order, so that an outer default follows the inner level's value:
  // a rack's uplink as fast as all its hosts' NICs together, an aisle's as all its racks'.
  const int per_group[] = {1, 1, most_per_group(layout.host, layout.rack),
                           most_per_group(layout.rack, layout.aisle)};
  for (int level = kLocal; level <= kAisle; ++level) {
    if (level >= kRack) {
      f.levels[level].bytes_per_s = f.levels[level - 1].bytes_per_s * per_group[level];
      f.levels[level].latency_s = f.levels[level - 1].latency_s;
    }
    for (const FabricLevel& m : measured) {
      if (m.name == f.levels[level].name && m.bytes_per_s > 0) f.levels[level] = m;
    }
    for (const LinkSetting& s : links) {
      if (s.level == level) apply(f.levels[level], s);
    }
  }
  return f;
}

Layout make_layout(const Placement& placement, int hosts_per_rack, int racks_per_aisle) {
  Layout l;
  for (const comm::RankPlacement& r : placement.ranks) {
    l.host.push_back(r.host);
    l.rack.push_back(r.host / std::max(1, hosts_per_rack));
    l.aisle.push_back(l.rack.back() / std::max(1, racks_per_aisle));
  }
  return l;
}

double predict_seconds(const Fabric& fabric, const Layout& layout, const comm::Mode& mode,
                       double bytes) {
  return predict(fabric, layout, mode, bytes).first;
}

double bandwidth_bound_seconds(const Fabric& fabric, const Layout& layout, const comm::Mode& mode,
                               double bytes) {
  return predict(fabric, layout, mode, bytes).second;
}

double bus_bandwidth(double bytes, int ranks, double seconds) {
  if (seconds <= 0 || ranks < 2) return 0;
  return bytes / seconds * 2.0 * (ranks - 1) / ranks;
}

std::vector<comm::Mode> candidate_modes(const comm::Mode& levels) {
  std::vector<comm::Mode> modes = {levels};
  std::vector<int> wide;  // the dimensions of more than one rank
  for (int d : levels.dims) {
    if (d > 1) wide.push_back(d);
  }
  // Every way to merge neighbours, but merging all of them: that is the flat ring.
  const unsigned merges = wide.empty() ? 0 : (1u << (wide.size() - 1)) - 1;
  for (unsigned mask = 1; mask < merges; ++mask) {
    comm::Mode m{levels.algorithm, {wide[0]}};
    for (size_t i = 1; i < wide.size(); ++i) {
      if (mask & (1u << (i - 1))) {
        m.dims.back() *= wide[i];
      } else {
        m.dims.push_back(wide[i]);
      }
    }
    m.dims.resize(levels.dims.size(), 1);
    if (std::find(modes.begin(), modes.end(), m) == modes.end()) modes.push_back(std::move(m));
  }
  if (levels.ranks() > 1) modes.push_back(comm::Mode{comm::Algorithm::kRing, levels.dims});
  return modes;
}

Prediction predict_modes(const Fabric& fabric, const Layout& layout, std::vector<comm::Mode> modes,
                         std::vector<double> sizes, double pick_bytes) {
  Prediction p{fabric, std::move(sizes), pick_bytes, {}, 0};
  for (comm::Mode& m : modes) {
    ModePrediction mp{std::move(m), {}, 0, 0};
    for (double s : p.sizes)
      mp.seconds.push_back(predict_seconds(fabric, layout, mp.mode, s));
    std::tie(mp.seconds_at_pick, mp.bound_at_pick) = predict(fabric, layout, mp.mode, pick_bytes);
    if (!p.modes.empty() && mp.seconds_at_pick < p.modes[p.fastest].seconds_at_pick) {
      p.fastest = p.modes.size();
    }
    p.modes.push_back(std::move(mp));
  }
  return p;
}

std::string bandwidth_text(double bytes_per_s) {
  static constexpr std::string_view kUnits[] = {"B/s", "kB/s", "MB/s", "GB/s", "TB/s"};
  size_t u = 0;
  while (u + 1 < std::size(kUnits) && bytes_per_s >= 1000) {
    bytes_per_s /= 1000;
    ++u;
  }
  return significant(bytes_per_s) + " " + std::string(kUnits[u]);
}

std::string duration_text(double seconds) {
  if (seconds == 0) return "0 s";
  static constexpr std::pair<double, std::string_view> kUnits[] = {
      {1, "s"}, {1e-3, "ms"}, {1e-6, "us"}, {1e-9, "ns"}};
  for (const auto& [scale, name] : kUnits) {
    if (seconds >= scale) return significant(seconds / scale) + " " + std::string(name);
  }
  return significant(seconds / 1e-9) + " ns";
}

}  // namespace ddl::mapper
