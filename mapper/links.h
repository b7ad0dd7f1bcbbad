#pragma once

#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "comm/comm.h"

namespace ddl::mapper {

// The fabric's levels measured, not only declared (--probe-links): a short bandwidth and latency
// test between the job's hosts, and the racks that follow from it. What is measured and how
// long it may take is decided here, with no socket in sight; the transfers themselves run
// behind LinkTester (link_probe.h: ddlrun's agents over ssh; a fake in tests).

/// One level of the fabric: "nic" (between the hosts of one rack) or "uplink" (between racks),
/// a bandwidth and a latency. The cost model takes these as its measured levels.
using MeasuredLevel = comm::MeasuredLevel;
/// One measured pair of hosts (indices in job order, a < b).
using LinkSample = comm::LinkSample;
/// Everything measured: the samples, the racks, the levels, how long it took.
using LinkMeasurement = comm::LinkMeasurement;

/// Pairs of hosts measured at the same time; no host is in two of them.
using LinkRound = std::vector<std::pair<int, int>>;

/// A measurement that could not be made at all (no agent started, ...); what() says why and
/// what to do.
class LinkError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Runs the transfers.
class LinkTester {
 public:
  virtual ~LinkTester() = default;
  /// Measures every pair of `round` at the same time: one sample per pair that could be
  /// measured (a < b); a pair that failed is left out and its reason added to `notes`.
  virtual std::vector<LinkSample> measure(const LinkRound& round,
                                          std::vector<std::string>& notes) = 0;
};

/// Seconds since a fixed point (steady): the clock the time bound is kept by.
using LinkClock = std::function<double()>;

/// The rounds that measure all pairs of `hosts` hosts, in the order they are run: first each
/// host with its successor in job order ((0,1),(2,3),... then (1,2),(3,4),...), which alone
/// find racks listed together, then every other pair once, round-robin (the circle method:
/// each round pairs every host at most once, so hosts' links are never shared).
std::vector<LinkRound> link_rounds(int hosts);

/// What sample_links measured.
struct LinkSampling {
  std::vector<LinkSample> pairs;
  int rounds_run = 0;
  int rounds_total = 0;
  int pairs_total = 0;  ///< pairs of hosts there are: hosts (hosts - 1) / 2
  double seconds = 0;   ///< from the first round's start to the last one's end
};

/// Runs link_rounds(hosts) through `tester` while they fit `budget_s` seconds: the two rounds
/// of successive hosts always, each later one only while the time so far plus the longest
/// round so far stays within the budget. Pairs beyond are not measured (a sample).
LinkSampling sample_links(int hosts, LinkTester& tester, const LinkClock& clock, double budget_s,
                          std::vector<std::string>& notes);

/// How much faster the links inside a rack must be than those between racks: the gap between
/// the slowest fast pair and the fastest slow pair, as a ratio.
inline constexpr double kRackGap = 2.0;

/// Racks of `hosts` hosts from measured pairs. How it works: the pairs' bandwidths are sorted
/// and cut at their largest ratio gap; without a gap of kRackGap the fabric is flat (one
/// rack). Otherwise hosts joined by pairs above the cut form racks (connected components).
/// Racks that would not serve the rings (a host between two of one rack's hosts in job order,
/// racks of different sizes, a slow pair inside a rack) give one rack and a note saying why.
/// Racks are host index lists in job order.
std::vector<std::vector<int>> cluster_racks(int hosts, std::span<const LinkSample> pairs,
                                            std::vector<std::string>& notes);

/// The levels of the measured fabric: "nic", the median of the pairs inside racks, and, with
/// more than one rack, "uplink", the fastest pair between racks (pairs measured at once may
/// share an uplink, so the fastest shows what one uplink carries) with their median latency.
std::vector<MeasuredLevel> link_levels(const std::vector<std::vector<int>>& racks,
                                       std::span<const LinkSample> pairs);

/// The whole measurement of `hosts` hosts: sample_links, cluster_racks, link_levels. When the
/// racks come out unusable, sample_links runs a second time (within its own budget) and each
/// pair keeps its best (highest bandwidth, lowest latency) before the racks are found again.
LinkMeasurement measure_links(int hosts, LinkTester& tester, const LinkClock& clock,
                              double budget_s, std::vector<std::string>& notes);

}  // namespace ddl::mapper
