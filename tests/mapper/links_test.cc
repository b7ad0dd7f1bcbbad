#include "mapper/links.h"

#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "mapper/cost.h"

namespace ddl::mapper {
namespace {

constexpr double kGbit = 125e6;  // bytes per second of 1 Gbit/s

/// Answers every pair from a bandwidth function, and advances a fake clock by `round_s` per
/// round; records the rounds it was given.
class FakeTester : public LinkTester {
 public:
  FakeTester(std::function<double(int, int)> bandwidth, double& now, double round_s)
      : bandwidth_(std::move(bandwidth)), now_(now), round_s_(round_s) {}

  std::vector<LinkSample> measure(const LinkRound& round, std::vector<std::string>&) override {
    rounds.push_back(round);
    now_ += round_s_;
    std::vector<LinkSample> out;
    for (const auto& [a, b] : round)
      out.push_back({a, b, bandwidth_(a, b), 50e-6});
    return out;
  }

  std::vector<LinkRound> rounds;

 private:
  std::function<double(int, int)> bandwidth_;
  double& now_;
  double round_s_;
};

/// Samples: every pair of `hosts`, at the bandwidth the function gives.
std::vector<LinkSample> all_pairs(int hosts, const std::function<double(int, int)>& bw) {
  std::vector<LinkSample> out;
  for (int a = 0; a < hosts; ++a) {
    for (int b = a + 1; b < hosts; ++b)
      out.push_back({a, b, bw(a, b), 50e-6});
  }
  return out;
}

/// Racks of `per` hosts: 1 Gbit/s inside, `uplink` between.
std::function<double(int, int)> racks_of(int per, double uplink) {
  return [per, uplink](int a, int b) { return a / per == b / per ? kGbit : uplink; };
}

TEST(LinkRoundsTest, EveryPairOnceAndNoHostTwiceInARound) {
  for (int hosts = 1; hosts <= 19; ++hosts) {
    std::set<std::pair<int, int>> seen;
    for (const LinkRound& round : link_rounds(hosts)) {
      std::set<int> in_round;
      for (const auto& [a, b] : round) {
        EXPECT_LT(a, b);
        EXPECT_TRUE(in_round.insert(a).second && in_round.insert(b).second) << hosts;
        EXPECT_TRUE(seen.insert({a, b}).second) << hosts << ": " << a << "-" << b;
      }
    }
    EXPECT_EQ(static_cast<int>(seen.size()), hosts * (hosts - 1) / 2) << hosts;
  }
}

TEST(LinkRoundsTest, SuccessorsComeFirst) {
  const std::vector<LinkRound> rounds = link_rounds(5);
  ASSERT_GE(rounds.size(), 2u);
  EXPECT_EQ(rounds[0], (LinkRound{{0, 1}, {2, 3}}));
  EXPECT_EQ(rounds[1], (LinkRound{{1, 2}, {3, 4}}));
}

TEST(SampleLinksTest, AllPairsWhenTheyFit) {
  double now = 0;
  FakeTester tester(racks_of(2, kGbit / 4), now, 0.1);
  std::vector<std::string> notes;
  const LinkSampling s = sample_links(
      4, tester, [&] { return now; }, 2.0, notes);
  EXPECT_EQ(s.pairs.size(), 6u);
  EXPECT_EQ(s.rounds_run, s.rounds_total);
  EXPECT_EQ(s.pairs_total, 6);
  EXPECT_DOUBLE_EQ(s.seconds, 0.1 * s.rounds_run);
}

TEST(SampleLinksTest, EighteenHostsStayWithinTheBudgetAndSample) {
  double now = 0;
  FakeTester tester(racks_of(18, kGbit), now, 0.15);
  std::vector<std::string> notes;
  const LinkSampling s = sample_links(
      18, tester, [&] { return now; }, 1.5, notes);
  EXPECT_LE(s.seconds, 1.5 + 1e-9);
  EXPECT_EQ(s.rounds_run, 10);  // 10 x 0.15 s
  EXPECT_EQ(s.rounds_total, 19);
  EXPECT_LT(static_cast<int>(s.pairs.size()), s.pairs_total);
  EXPECT_EQ(s.pairs_total, 153);
  // Every host was measured with its successor.
  std::set<std::pair<int, int>> got;
  for (const LinkSample& p : s.pairs)
    got.insert({p.a, p.b});
  for (int h = 0; h + 1 < 18; ++h)
    EXPECT_TRUE(got.contains({h, h + 1})) << h;
}

TEST(SampleLinksTest, TheSuccessorRoundsRunEvenPastTheBudget) {
  double now = 0;
  FakeTester tester(racks_of(4, kGbit), now, 5.0);
  std::vector<std::string> notes;
  const LinkSampling s = sample_links(
      8, tester, [&] { return now; }, 1.0, notes);
  EXPECT_EQ(s.rounds_run, 2);
  EXPECT_EQ(s.pairs.size(), 7u);
}

TEST(ClusterRacksTest, FlatFabricIsOneRack) {
  std::vector<std::string> notes;
  const auto pairs = all_pairs(3, [](int a, int b) { return kGbit * (1 + 0.05 * (a + b)); });
  EXPECT_EQ(cluster_racks(3, pairs, notes), (std::vector<std::vector<int>>{{0, 1, 2}}));
  EXPECT_TRUE(notes.empty());
}

TEST(ClusterRacksTest, TwoRacksBehindASlowUplink) {
  std::vector<std::string> notes;
  const auto pairs = all_pairs(4, racks_of(2, kGbit / 4));
  EXPECT_EQ(cluster_racks(4, pairs, notes), (std::vector<std::vector<int>>{{0, 1}, {2, 3}}));
  EXPECT_TRUE(notes.empty());
  const std::vector<MeasuredLevel> levels = link_levels({{0, 1}, {2, 3}}, pairs);
  ASSERT_EQ(levels.size(), 2u);
  EXPECT_EQ(levels[0], (MeasuredLevel{"nic", kGbit, 50e-6}));
  EXPECT_EQ(levels[1], (MeasuredLevel{"uplink", kGbit / 4, 50e-6}));
}

TEST(ClusterRacksTest, NoisyMeasurementsStillFindTheRacks) {
  // Up to 30% noise either way, uplink pairs measured two at a time (half the uplink each).
  const double noise[] = {0.7, 1.3, 0.9, 1.1, 0.8, 1.2, 1.0, 0.75, 1.25};
  std::vector<std::string> notes;
  int i = 0;
  const auto pairs = all_pairs(6, [&](int a, int b) {
    const double bw = a / 3 == b / 3 ? kGbit : (a + b) % 2 ? kGbit / 4 : kGbit / 8;
    return bw * noise[i++ % 9];
  });
  EXPECT_EQ(cluster_racks(6, pairs, notes), (std::vector<std::vector<int>>{{0, 1, 2}, {3, 4, 5}}));
  EXPECT_TRUE(notes.empty());
  // A flat fabric with the same noise stays flat.
  i = 0;
  const auto flat = all_pairs(6, [&](int, int) { return kGbit * noise[i++ % 9]; });
  EXPECT_EQ(cluster_racks(6, flat, notes).size(), 1u);
  EXPECT_TRUE(notes.empty());
}

TEST(ClusterRacksTest, RacksNotListedTogetherAreRefusedWithANote) {
  std::vector<std::string> notes;
  // Hosts 0 and 2 in one rack, 1 and 3 in the other.
  const auto pairs = all_pairs(4, [](int a, int b) { return a % 2 == b % 2 ? kGbit : kGbit / 4; });
  EXPECT_EQ(cluster_racks(4, pairs, notes), (std::vector<std::vector<int>>{{0, 1, 2, 3}}));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0],
            "--probe-links: links split the hosts 2 ways, but hosts 0 and 2 share a rack but hosts "
            "listed between them do not; list each rack's hosts together; planning as one rack");
}

TEST(ClusterRacksTest, UnequalRacksAndSlowPairsInsideARackGiveOneRack) {
  std::vector<std::string> notes;
  const auto unequal =
      all_pairs(3, [](int a, int b) { return a < 2 && b < 2 ? kGbit : kGbit / 4; });
  EXPECT_EQ(cluster_racks(3, unequal, notes).size(), 1u);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0],
            "--probe-links: links split the hosts 2 ways, but racks of different sizes (2 and 1 "
            "hosts); the rings need equal racks; planning as one rack");
  notes.clear();
  // 0-1 and 1-2 fast, 0-2 slow: one rack by the fast pairs, but a slow pair inside it; a
  // second rack (3-4) makes the split count.
  auto pairs = all_pairs(6, racks_of(3, kGbit / 4));
  for (LinkSample& p : pairs) {
    if (p.a == 0 && p.b == 2) p.bytes_per_s = kGbit / 5;
  }
  EXPECT_EQ(cluster_racks(6, pairs, notes).size(), 1u);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0],
            "--probe-links: links split the hosts 2 ways, but hosts 0 and 2 share a rack but their "
            "link is slow (25 MB/s); the measurement is noisy; planning as one rack");
}

TEST(MeasureLinksTest, TwoRacksEndToEnd) {
  double now = 0;
  FakeTester tester(racks_of(2, kGbit / 4), now, 0.07);
  std::vector<std::string> notes;
  const LinkMeasurement m = measure_links(
      4, tester, [&] { return now; }, 1.5, notes);
  EXPECT_EQ(m.racks, (std::vector<std::vector<int>>{{0, 1}, {2, 3}}));
  ASSERT_EQ(m.levels.size(), 2u);
  EXPECT_EQ(m.levels[1].name, "uplink");
  EXPECT_EQ(m.pairs.size(), 6u);
  EXPECT_GT(m.seconds, 0);
}

TEST(MeasureLinksTest, AMeasurementSlowedByNoiseIsTakenAgain) {
  // The first time, host 0 -> 1 runs at a third of its speed (a busy host): the racks come out
  // unequal, so every pair is measured again and keeps its best.
  double now = 0;
  int calls_0_1 = 0;
  FakeTester tester(
      [&](int a, int b) {
        if (a == 0 && b == 1 && calls_0_1++ == 0) return kGbit / 3;
        return racks_of(2, kGbit / 4)(a, b);
      },
      now, 0.07);
  std::vector<std::string> notes;
  const LinkMeasurement m = measure_links(
      4, tester, [&] { return now; }, 1.5, notes);
  EXPECT_EQ(m.racks, (std::vector<std::vector<int>>{{0, 1}, {2, 3}}));
  EXPECT_TRUE(notes.empty()) << notes.front();
  EXPECT_EQ(calls_0_1, 2);
  EXPECT_EQ(m.pairs.size(), 6u);
  EXPECT_EQ(m.pairs.front().bytes_per_s, kGbit);
}

TEST(MeasureLinksTest, RacksStillUnusableAfterTheSecondPassGiveANote) {
  double now = 0;
  FakeTester tester([](int a, int b) { return a % 2 == b % 2 ? kGbit : kGbit / 4; }, now, 0.07);
  std::vector<std::string> notes;
  const LinkMeasurement m = measure_links(
      4, tester, [&] { return now; }, 1.5, notes);
  EXPECT_EQ(m.racks.size(), 1u);
  EXPECT_EQ(notes.size(), 1u);
  EXPECT_EQ(tester.rounds.size(), 2 * link_rounds(4).size());
}

TEST(LinkTextTest, Units) {
  EXPECT_EQ(bandwidth_text(117.2e6), "117.2 MB/s");
  EXPECT_EQ(bandwidth_text(1.25e9), "1.25 GB/s");
  EXPECT_EQ(bandwidth_text(31.25e6), "31.25 MB/s");
  EXPECT_EQ(duration_text(85e-6), "85 us");
  EXPECT_EQ(duration_text(1.3e-3), "1.3 ms");
}

}  // namespace
}  // namespace ddl::mapper
