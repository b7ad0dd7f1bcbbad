#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/check.h"
#include "comm/mode.h"

namespace ddl::comm {

/// The topology file format this libddl writes. A reader accepts any 1.x file (newer minors add
/// fields it ignores) and rejects other majors. The format is described in ddl-topology(5).
inline constexpr int kTopologyFormatMajor = 1;
/// Format 1.1 adds `links:` (what --probe-links measured); a file without them is written as 1.0.
inline constexpr int kTopologyFormatMinor = 1;
/// The most bytes a topology file may have: ddlrun writes a few hundred bytes a rank, so that
/// this is room for about a million ranks, and a larger file is refused before it is read.
inline constexpr size_t kMaxTopologyBytes = size_t{256} << 20;

/// A malformed, inconsistent or unreadable topology file, or a plan that fails validate().
/// what() names the file (when there is one), the field or the rank/host/dimension concerned.
using TopologyError = base::Error<struct TopologyErrorTag>;

/// A set of OS processing-unit (PU) indices, the CPUs a rank is bound to. Kept as sorted,
/// disjoint, non-adjacent ranges and written as "0-27,88-115" ("" for none: not bound).
class CpuSet {
 public:
  /// An inclusive range of PU indices.
  struct Range {
    int first = 0;
    int last = 0;
    bool operator==(const Range&) const = default;
  };

  CpuSet() = default;
  /// The set of these PU indices (any order, repeats allowed). Throws TopologyError on an
  /// index below 0 or above 1048575.
  static CpuSet of(const std::vector<int>& pus);
  /// Parses "0-27,88-115", "5", "" (the empty set). Ranges may come in any order and overlap;
  /// spaces around entries are ignored. Throws TopologyError: "invalid CPU set '3-x': 'x' is not
  /// a PU index".
  static CpuSet parse(std::string_view text);

  /// Adds the PUs first..last (inclusive). Throws TopologyError when first > last, first < 0 or
  /// last > 1048575.
  void add(int first, int last);
  /// Adds one PU.
  void add(int pu) { add(pu, pu); }

  bool empty() const { return ranges_.empty(); }
  /// The number of PUs in the set.
  int size() const;
  bool contains(int pu) const;
  /// The smallest PU in both sets, or nullopt when they are disjoint.
  std::optional<int> first_shared(const CpuSet& other) const;
  /// Every PU, ascending.
  std::vector<int> pus() const;
  const std::vector<Range>& ranges() const { return ranges_; }
  /// Canonical text: "0-27,88-115", "" when empty.
  std::string str() const;

  bool operator==(const CpuSet&) const = default;

 private:
  std::vector<Range> ranges_;
};

/// A network interface of a host.
struct Nic {
  std::string name;     ///< the OS or verbs name: "ib0", "mlx5_0", "eth0"
  std::string kind;     ///< what the probe found: "infiniband", "roce", "ethernet", ...
  std::string address;  ///< its IPv4 or IPv6 address, empty when it has none

  bool operator==(const Nic&) const = default;
};

/// One host of the job.
struct Host {
  int index = 0;        ///< 0..H-1, what RankPlacement::host refers to
  std::string name;     ///< the name the user gave ("node01")
  std::string address;  ///< the address to reach it at (launch, bootstrap)
  std::vector<Nic> nics;

  bool operator==(const Host&) const = default;
};

/// Where one rank runs and what it owns there.
struct RankPlacement {
  int rank = 0;            ///< global rank, 0..N-1
  int local_rank = 0;      ///< 0..n_h-1 among the ranks of its host
  int host = 0;            ///< Host::index of its host
  int gpu = -1;            ///< the GPU's index on its host (CUDA order), -1 for none
  std::string gpu_bus_id;  ///< the GPU's PCI bus id ("0004:04:00.0"), may be empty
  std::string gpu_uuid;    ///< the GPU's UUID ("GPU-5e4b..."), may be empty
  CpuSet cpus;             ///< the PUs it is bound to; empty: not bound
  std::string nic;         ///< Nic::name of the NIC it uses, may be empty
  std::string address;     ///< the network address it listens on, may be empty

  bool operator==(const RankPlacement&) const = default;
};

/// A ring: global ranks in ring order; the last one sends to the first.
using Ring = std::vector<int>;

/// One level of the fabric as `ddlrun --probe-links` measured it: "nic" between the hosts of
/// one rack (their NICs and the rack's switch), "uplink" between hosts of different racks.
struct MeasuredLevel {
  std::string name;
  double bytes_per_s = 0;  ///< the median of its pairs' bandwidths
  double latency_s = 0;    ///< the median of its pairs' one-way latencies

  bool operator==(const MeasuredLevel&) const = default;
};

/// One pair of hosts (Host::index, a < b) as measured: a timed bulk TCP transfer from a to b
/// and a small ping-pong.
struct LinkSample {
  int a = 0;
  int b = 0;
  double bytes_per_s = 0;
  double latency_s = 0;  ///< half the median round trip

  bool operator==(const LinkSample&) const = default;
};

/// What `ddlrun --probe-links` measured between the job's hosts (format 1.1).
struct LinkMeasurement {
  double seconds = 0;  ///< how long the measurement took
  /// The racks found: Host::index lists, each in job order, the racks in job order; one rack
  /// holding every host when the fabric is flat.
  std::vector<std::vector<int>> racks;
  std::vector<MeasuredLevel> levels;  ///< innermost first: "nic", then "uplink" when racks > 1
  std::vector<LinkSample> pairs;      ///< the pairs measured (all of them, or a sample)

  bool operator==(const LinkMeasurement&) const = default;
};

/// The plan of one job: the mapper writes it, the launcher and every rank read it.
struct Topology {
  std::string job_id;
  std::vector<Host> hosts;           ///< any order; their indices are a permutation of 0..H-1
  std::vector<RankPlacement> ranks;  ///< any order; their ranks are a permutation of 0..N-1
  Mode mode;                         ///< with dimensions, innermost first; they multiply to N
  /// rings[d] holds the rings of dimension d (innermost first): each has mode.dims[d] ranks,
  /// and together they hold every rank once.
  std::vector<std::vector<Ring>> rings;
  /// What --probe-links measured; absent otherwise (and in files of format 1.0).
  std::optional<LinkMeasurement> links;

  /// The placement of global rank `rank`, or nullptr when there is none.
  const RankPlacement* find_rank(int rank) const;
  /// The host with index `index`, or nullptr when there is none.
  const Host* find_host(int index) const;

  bool operator==(const Topology&) const = default;
};

/// Throws TopologyError unless the plan is consistent: ranks are a permutation of 0..N-1, host
/// indices a permutation of 0..H-1, every rank's host exists, local ranks on each host are a
/// permutation of 0..n_h-1, no two ranks of a host share a GPU or a PU, the mode's dimensions
/// multiply to N, and each dimension's rings have the dimension's size and partition the ranks;
/// measured links name existing hosts, each in at most one rack. The message names the rank,
/// host or dimension concerned.
void validate(const Topology& topology);

/// The default ring orders for `dims` (innermost first) when ranks are laid out host-major:
/// rank = ((... * d1 + i1) * d0 + i0). Dimension k's rings group the ranks that differ only in
/// coordinate k, each ring in ascending order, rings ordered by their first rank.
/// default_rings({4, 3}) = {{{0,1,2,3}, {4,5,6,7}, {8,9,10,11}}, {{0,4,8}, {1,5,9}, {2,6,10},
/// {3,7,11}}}. Throws TopologyError when a dimension is below 1.
std::vector<std::vector<Ring>> default_rings(const std::vector<int>& dims);

/// The text of the topology file, in the layout write_topology_file writes (one flow mapping per
/// host and per rank, one flow sequence per ring). Does not validate.
std::string format_topology(const Topology& topology);

/// Validates the plan, then writes it to `path` atomically: a temporary file in the same
/// directory, created with mode 0600, written, fsynced, renamed over `path`, and the directory
/// fsynced. Throws TopologyError naming `path` and the system's reason.
void write_topology_file(const Topology& topology, const std::string& path);

/// Reads and validates the topology file at `path`. Throws TopologyError naming `path`: it
/// cannot be read, it is from another major format version, a field is missing or malformed,
/// or the plan fails validate().
Topology read_topology_file(const std::string& path);

/// Parses and validates topology text; `source` names it in messages (usually its path). Text
/// in the layout format_topology writes is read by a fast line parser; anything else that is
/// valid YAML goes through yaml-cpp. Both give the same result and the same errors.
Topology parse_topology(std::string_view text, const std::string& source);

/// parse_topology through the fast line parser alone: nullopt when the text is not exactly in
/// the layout format_topology writes. Exposed so tests can check that written files take it.
std::optional<Topology> parse_topology_fast(std::string_view text, const std::string& source);

/// parse_topology through yaml-cpp alone, whatever the layout. Slow on large files; exposed so
/// tests and the benchmark can compare it with the fast path.
Topology parse_topology_generic(std::string_view text, const std::string& source);

}  // namespace ddl::comm
