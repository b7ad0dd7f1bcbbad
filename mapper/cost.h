#pragma once

#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "comm/comm.h"
#include "mapper/place.h"

namespace ddl::mapper {

// The cost model of the dry run: how long libddl's allreduce of a mode takes on a fabric of
// levels, so that ddlrun can print the prediction and `--mode auto` can pick the fastest mode.
// cost.cc says how it works.

/// One level of the fabric, innermost first: "local" (between the ranks of one host: shared
/// memory), "host" (each host's NIC), "rack" (each rack's uplink), "aisle" (each aisle's).
struct FabricLevel {
  std::string name;
  double bytes_per_s = 0;  ///< each direction of one link of this level
  double latency_s = 0;    ///< one message across this level
  std::string from;        ///< "inventory", "measured", "--link", "default"
};

/// The levels, innermost first: kLevelNames, one each.
struct Fabric {
  std::vector<FabricLevel> levels;
};

/// The level names, innermost first; Fabric::levels has one of each, in this order.
inline constexpr std::string_view kLevelNames[] = {"local", "host", "rack", "aisle"};
inline constexpr int kLocal = 0, kHost = 1, kRack = 2, kAisle = 3;

/// A malformed --link or --predict-bytes value; what() names it, the fault and the fix.
class CostError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// One --link value, "LEVEL=BW[,LAT]": "host=1Gbit,50us", "rack=250Mbit", "local=10GB/s".
struct LinkSetting {
  int level = kHost;  ///< index into kLevelNames
  double bytes_per_s = 0;
  std::optional<double> latency_s;
};

/// Parses one --link value. BW: a number and a unit, bits (bit, kbit, Mbit, Gbit, Tbit) or
/// bytes (B, kB, MB, GB, TB; KiB, MiB, GiB) per second, "/s" optional, case ignored. LAT: a
/// number and ns, us, ms or s. Throws CostError: unknown level (with a suggestion), missing
/// '=', a bandwidth or latency without a number or unit, or not above 0 (latency: at least 0).
LinkSetting parse_link(std::string_view text);

/// Parses a size in bytes: "67108864", "64M", "64MiB", "1G" (K, M, G, T: powers of 1024).
/// Throws CostError naming `option` when it is not a size of at least 1 byte.
double parse_size(std::string_view text, std::string_view option);

/// Where each rank sits (indexes by global rank): its host, its host's rack, its rack's aisle.
struct Layout {
  std::vector<int> host, rack, aisle;
};

/// The fabric of a placement: defaults (local 8 GB/s and 1 us, host 10 Gbit/s and 30 us; a rack's
/// uplink as fast as its hosts' NICs together, an aisle's as its racks'), the slowest speed the
/// inventories report for the NICs the ranks use, then `measured` (levels found by measuring
/// the links, matched by name; a bandwidth of 0 leaves the level as it was), then the user's
/// --link settings (a later one for a level wins).
Fabric make_fabric(const Placement& placement, const Layout& layout,
                   std::span<const LinkSetting> links, std::span<const FabricLevel> measured = {});

/// The levels --probe-links measured (comm::MeasuredLevel "nic" and "uplink") as the model's
/// "host" and "rack" levels, "measured": their TCP payload rates turned back into link rates.
std::vector<FabricLevel> measured_levels(std::span<const comm::MeasuredLevel> levels);

/// The layout of a placement whose hosts form racks of `hosts_per_rack` and aisles of
/// `racks_per_aisle` in job order (both at least 1).
Layout make_layout(const Placement& placement, int hosts_per_rack, int racks_per_aisle);

/// Predicted seconds of one allreduce of `bytes` on the ranks of `layout` with `mode` (its
/// dimensions resolved), over `fabric`.
double predict_seconds(const Fabric& fabric, const Layout& layout, const comm::Mode& mode,
                       double bytes);

/// The bound of predict_seconds' allreduce: the busiest link's bytes over its rate (for the
/// multi-dimensional ring, over all dimensions at once), with no latency and no pipeline fill;
/// recursive doubling (below DDL_SMALL_BYTES) is its own bound.
double bandwidth_bound_seconds(const Fabric& fabric, const Layout& layout, const comm::Mode& mode,
                               double bytes);

/// nccl-tests' bus bandwidth, bytes/s: bytes / seconds x 2(n-1)/n.
double bus_bandwidth(double bytes, int ranks, double seconds);

/// The modes to compare for a job whose natural dimensions are `levels` (ranks per host x hosts
/// per rack x ..., as ddlrun resolves them): `levels` itself first, then every mode that merges
/// neighbouring dimensions of more than one rank (the same number of fields, 1s last), then the
/// flat ring ('r' with `levels`' dimensions).
std::vector<comm::Mode> candidate_modes(const comm::Mode& levels);

/// One mode's predictions, at each of the sizes asked.
struct ModePrediction {
  comm::Mode mode;
  std::vector<double> seconds;  ///< per size
  double seconds_at_pick = 0;   ///< at the size the pick is made for
  double bound_at_pick = 0;     ///< bandwidth_bound_seconds at that size
};

/// The modes compared and which is fastest.
struct Prediction {
  Fabric fabric;
  std::vector<double> sizes;  ///< bytes
  double pick_bytes = 0;      ///< --predict-bytes
  std::vector<ModePrediction> modes;
  size_t fastest = 0;  ///< index into modes: the lowest time at pick_bytes, the first on ties
};

/// Predicts every mode of `modes` at `sizes` and at `pick_bytes`.
Prediction predict_modes(const Fabric& fabric, const Layout& layout, std::vector<comm::Mode> modes,
                         std::vector<double> sizes, double pick_bytes);

/// "125 MB/s", "10 GB/s", "31.25 MB/s": decimal units, up to 4 significant digits.
std::string bandwidth_text(double bytes_per_s);
/// "50 us", "1.5 ms", "0 s".
std::string duration_text(double seconds);

}  // namespace ddl::mapper
