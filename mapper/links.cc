// Measuring the fabric's levels (--probe-links): which pairs, how long, and the racks.
//
// How it works:
//  1. Rounds (link_rounds): each host with its successor in job order first, in two rounds;
//     those pairs alone find racks listed together (a slow pair between successors is a rack
//     boundary). Then the other pairs, round-robin: in each round of the circle method every
//     host takes part in at most one pair, so no host's link is shared within a round.
//  2. Time bound (sample_links): the two rounds of successors always run; each later round
//     runs only while the time spent plus the longest round so far fits the budget. On many
//     hosts the later rounds are a sample, spread over all hosts.
//  3. Racks (cluster_racks): the bandwidths sorted, cut at their largest ratio gap; a gap below
//     kRackGap means one level (flat). Above the cut, pairs join hosts into racks (union-find).
//     Racks are usable for the rings only when each is contiguous in job order, all are the
//     same size, and no measured pair inside a rack is slow; otherwise the pairs are measured
//     once more (a busy host only slows a transfer down, so each pair keeps its best), and
//     racks that are still unusable give one rack and a note.
//  4. Levels (link_levels): "nic" inside racks (median), "uplink" between them (the fastest
//     pair: pairs measured together may share the uplink).

#include "mapper/links.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "mapper/cost.h"

namespace ddl::mapper {

namespace {

/// The pairs (i, i+1) for i = first, first + 2, ... below hosts - 1.
LinkRound successors(int hosts, int first) {
  LinkRound round;
  for (int i = first; i + 1 < hosts; i += 2)
    round.emplace_back(i, i + 1);
  return round;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

/// Connected components of the pairs at or above `cut`, each in ascending order, ordered by
/// their first host.
std::vector<std::vector<int>> components(int hosts, std::span<const LinkSample> pairs, double cut) {
  std::vector<int> parent(static_cast<size_t>(hosts));
  std::iota(parent.begin(), parent.end(), 0);
  const auto root = [&](int h) {
    while (parent[static_cast<size_t>(h)] != h)
      h = parent[static_cast<size_t>(h)] =
          parent[static_cast<size_t>(parent[static_cast<size_t>(h)])];
    return h;
  };
  for (const LinkSample& p : pairs) {
    if (p.bytes_per_s >= cut) parent[static_cast<size_t>(root(p.b))] = root(p.a);
  }
  std::vector<std::vector<int>> groups;
  std::vector<int> group_of_root(static_cast<size_t>(hosts), -1);
  for (int h = 0; h < hosts; ++h) {
    int& g = group_of_root[static_cast<size_t>(root(h))];
    if (g < 0) {
      g = static_cast<int>(groups.size());
      groups.emplace_back();
    }
    groups[static_cast<size_t>(g)].push_back(h);
  }
  return groups;
}

/// Why `racks` cannot serve the rings, or "" when they can.
std::string unusable(const std::vector<std::vector<int>>& racks, std::span<const LinkSample> pairs,
                     double cut) {
  std::vector<int> rack_of;
  for (size_t r = 0; r < racks.size(); ++r) {
    for (int h : racks[r]) {
      rack_of.resize(std::max(rack_of.size(), static_cast<size_t>(h) + 1));
      rack_of[static_cast<size_t>(h)] = static_cast<int>(r);
    }
  }
  for (const std::vector<int>& rack : racks) {
    if (rack.back() - rack.front() + 1 != static_cast<int>(rack.size())) {
      return "hosts " + std::to_string(rack.front()) + " and " + std::to_string(rack.back()) +
             " share a rack but hosts listed between them do not; list each rack's hosts together";
    }
    if (rack.size() != racks.front().size()) {
      return "racks of different sizes (" + std::to_string(racks.front().size()) + " and " +
             std::to_string(rack.size()) + " hosts); the rings need equal racks";
    }
  }
  for (const LinkSample& p : pairs) {
    if (rack_of[static_cast<size_t>(p.a)] == rack_of[static_cast<size_t>(p.b)] &&
        p.bytes_per_s < cut) {
      return "hosts " + std::to_string(p.a) + " and " + std::to_string(p.b) +
             " share a rack but their link is slow (" + bandwidth_text(p.bytes_per_s) +
             "); the measurement is noisy";
    }
  }
  return "";
}

/// Each pair of `pairs` at its best of both measurements: the higher bandwidth, the lower
/// latency; pairs only `again` has are added.
void keep_best(std::vector<LinkSample>& pairs, std::span<const LinkSample> again) {
  for (const LinkSample& p : again) {
    const auto same = std::find_if(pairs.begin(), pairs.end(),
                                   [&](const LinkSample& q) { return q.a == p.a && q.b == p.b; });
    if (same == pairs.end()) {
      pairs.push_back(p);
      continue;
    }
    same->bytes_per_s = std::max(same->bytes_per_s, p.bytes_per_s);
    same->latency_s = std::min(same->latency_s, p.latency_s);
  }
}

}  // namespace

std::vector<LinkRound> link_rounds(int hosts) {
  std::vector<LinkRound> rounds;
  for (int first : {0, 1}) {
    if (LinkRound r = successors(hosts, first); !r.empty()) rounds.push_back(std::move(r));
  }
  // The circle method: host 0 stays, the others turn one place a round; an odd count gets a
  // stand-in host (-1) whose partner sits the round out.
  std::vector<int> circle(static_cast<size_t>(hosts + hosts % 2));
  std::iota(circle.begin(), circle.end(), 0);
  if (hosts % 2) circle.back() = -1;
  const size_t n = circle.size();
  for (size_t turn = 0; n >= 2 && turn + 1 < n; ++turn) {
    LinkRound round;
    for (size_t i = 0; i < n / 2; ++i) {
      int a = circle[i], b = circle[n - 1 - i];
      if (a > b) std::swap(a, b);
      if (a >= 0 && b != a + 1) round.emplace_back(a, b);  // successors ran already
    }
    if (!round.empty()) rounds.push_back(std::move(round));
    std::rotate(circle.begin() + 1, circle.end() - 1, circle.end());
  }
  return rounds;
}

LinkSampling sample_links(int hosts, LinkTester& tester, const LinkClock& clock, double budget_s,
                          std::vector<std::string>& notes) {
  const std::vector<LinkRound> rounds = link_rounds(hosts);
  LinkSampling s;
  s.rounds_total = static_cast<int>(rounds.size());
  s.pairs_total = hosts * (hosts - 1) / 2;
  const int always = std::min(s.rounds_total, hosts > 2 ? 2 : 1);
  const double start = clock();
  double longest = 0;
  for (const LinkRound& round : rounds) {
    const double begin = clock();
    if (s.rounds_run >= always && begin - start + longest > budget_s) break;
    std::vector<LinkSample> got = tester.measure(round, notes);
    s.pairs.insert(s.pairs.end(), got.begin(), got.end());
    longest = std::max(longest, clock() - begin);
    ++s.rounds_run;
  }
  s.seconds = clock() - start;
  return s;
}

std::vector<std::vector<int>> cluster_racks(int hosts, std::span<const LinkSample> pairs,
                                            std::vector<std::string>& notes) {
  std::vector<std::vector<int>> flat(1);
  for (int h = 0; h < hosts; ++h)
    flat[0].push_back(h);
  std::vector<double> bw;
  for (const LinkSample& p : pairs)
    bw.push_back(p.bytes_per_s);
  std::sort(bw.begin(), bw.end());
  double best_gap = 0, cut = 0;
  for (size_t i = 0; i + 1 < bw.size(); ++i) {
    const double gap = bw[i] > 0 ? bw[i + 1] / bw[i] : 0;
    if (gap > best_gap) {
      best_gap = gap;
      cut = std::sqrt(bw[i] * bw[i + 1]);
    }
  }
  if (best_gap < kRackGap) return flat;
  std::vector<std::vector<int>> racks = components(hosts, pairs, cut);
  if (racks.size() == 1) return flat;
  if (const std::string why = unusable(racks, pairs, cut); !why.empty()) {
    notes.push_back("--probe-links: links split the hosts " + std::to_string(racks.size()) +
                    " ways, but " + why + "; planning as one rack");
    return flat;
  }
  return racks;
}

std::vector<MeasuredLevel> link_levels(const std::vector<std::vector<int>>& racks,
                                       std::span<const LinkSample> pairs) {
  std::vector<int> rack_of;
  for (size_t r = 0; r < racks.size(); ++r) {
    for (int h : racks[r]) {
      rack_of.resize(std::max(rack_of.size(), static_cast<size_t>(h) + 1));
      rack_of[static_cast<size_t>(h)] = static_cast<int>(r);
    }
  }
  std::vector<double> nic_bw, nic_lat, up_lat;
  double up_bw = 0;
  for (const LinkSample& p : pairs) {
    if (rack_of.at(static_cast<size_t>(p.a)) == rack_of.at(static_cast<size_t>(p.b))) {
      nic_bw.push_back(p.bytes_per_s);
      nic_lat.push_back(p.latency_s);
    } else {
      up_bw = std::max(up_bw, p.bytes_per_s);
      up_lat.push_back(p.latency_s);
    }
  }
  std::vector<MeasuredLevel> levels;
  if (!nic_bw.empty()) levels.push_back({"nic", median(nic_bw), median(nic_lat)});
  if (!up_lat.empty()) levels.push_back({"uplink", up_bw, median(up_lat)});
  return levels;
}

LinkMeasurement measure_links(int hosts, LinkTester& tester, const LinkClock& clock,
                              double budget_s, std::vector<std::string>& notes) {
  LinkSampling s = sample_links(hosts, tester, clock, budget_s, notes);
  LinkMeasurement m;
  std::vector<std::string> unclear;
  m.racks = cluster_racks(hosts, s.pairs, unclear);
  if (!unclear.empty()) {  // noise only slows a pair down: measure again, keep each one's best
    const LinkSampling again = sample_links(hosts, tester, clock, budget_s, notes);
    keep_best(s.pairs, again.pairs);
    s.seconds += again.seconds;
    unclear.clear();
    m.racks = cluster_racks(hosts, s.pairs, unclear);
  }
  notes.insert(notes.end(), unclear.begin(), unclear.end());
  m.seconds = s.seconds;
  m.levels = link_levels(m.racks, s.pairs);
  m.pairs = std::move(s.pairs);
  return m;
}

}  // namespace ddl::mapper
