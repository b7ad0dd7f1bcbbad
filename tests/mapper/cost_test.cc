#include "mapper/cost.h"

#include <gtest/gtest.h>

namespace ddl::mapper {
namespace {

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const CostError& e) {
    return e.what();
  }
  return "no error";
}

/// `hosts` hosts of `per_host` ranks each, numbered host by host; their inventories unknown.
Placement hosts_of(int hosts, int per_host) {
  Placement p;
  for (int h = 0; h < hosts; ++h) {
    HostUse use;
    use.name = "node" + std::to_string(h + 1);
    use.first_rank = h * per_host;
    use.count = per_host;
    for (int k = 0; k < per_host; ++k) {
      comm::RankPlacement r;
      r.rank = h * per_host + k;
      r.local_rank = k;
      r.host = h;
      use.ranks.push_back(r.rank);
      p.ranks.push_back(r);
    }
    p.hosts.push_back(use);
  }
  return p;
}

std::vector<LinkSetting> links(std::initializer_list<std::string_view> texts) {
  std::vector<LinkSetting> s;
  for (std::string_view t : texts)
    s.push_back(parse_link(t));
  return s;
}

std::vector<std::string> names(const std::vector<comm::Mode>& modes) {
  std::vector<std::string> out;
  for (const comm::Mode& m : modes)
    out.push_back(m.str());
  return out;
}

constexpr double kMiB = 1048576;

TEST(CostTest, ParsesLinks) {
  LinkSetting s = parse_link("host=1Gbit,50us");
  EXPECT_EQ(s.level, kHost);
  EXPECT_DOUBLE_EQ(s.bytes_per_s, 125e6);
  EXPECT_DOUBLE_EQ(*s.latency_s, 50e-6);
  s = parse_link("rack=250mbit");
  EXPECT_EQ(s.level, kRack);
  EXPECT_DOUBLE_EQ(s.bytes_per_s, 31.25e6);
  EXPECT_FALSE(s.latency_s);
  s = parse_link("local = 10 GB/s , 2ms");
  EXPECT_EQ(s.level, kLocal);
  EXPECT_DOUBLE_EQ(s.bytes_per_s, 10e9);
  EXPECT_DOUBLE_EQ(*s.latency_s, 2e-3);
  EXPECT_DOUBLE_EQ(parse_link("aisle=1.5GiB").bytes_per_s, 1.5 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(*parse_link("host=100Gbit/s,800ns").latency_s, 800e-9);
}

TEST(CostTest, LinkErrorsNameTheValueAndTheFix) {
  EXPECT_EQ(error_of([] { parse_link("1Gbit"); }),
            "--link '1Gbit': expected LEVEL=BW[,LAT], e.g. host=1Gbit,50us");
  EXPECT_EQ(error_of([] { parse_link("hots=1Gbit"); }),
            "--link 'hots=1Gbit': unknown level 'hots' (did you mean 'host'?); the levels are "
            "local, host, rack and aisle");
  EXPECT_EQ(error_of([] { parse_link("switch=1Gbit"); }),
            "--link 'switch=1Gbit': unknown level 'switch'; the levels are local, host, rack and "
            "aisle");
  EXPECT_EQ(error_of([] { parse_link("host=1G"); }),
            "--link 'host=1G': '1G' is not a bandwidth above 0; write a number and a unit: 1Gbit, "
            "250Mbit, 10GB/s");
  EXPECT_EQ(error_of([] { parse_link("host=0Gbit"); }),
            "--link 'host=0Gbit': '0Gbit' is not a bandwidth above 0; write a number and a unit: "
            "1Gbit, 250Mbit, 10GB/s");
  EXPECT_EQ(error_of([] { parse_link("host=,50us"); }),
            "--link 'host=,50us': '' is not a bandwidth above 0; write a number and a unit: "
            "1Gbit, 250Mbit, 10GB/s");
  EXPECT_EQ(error_of([] { parse_link("host=1Gbit,50"); }),
            "--link 'host=1Gbit,50': '50' is not a latency; write a number and a unit: 50us, 2ms, "
            "800ns");
  EXPECT_EQ(error_of([] { parse_link("host=1Gbit,-1us"); }),
            "--link 'host=1Gbit,-1us': '-1us' is not a latency; write a number and a unit: 50us, "
            "2ms, 800ns");
}

TEST(CostTest, ParsesSizes) {
  EXPECT_EQ(parse_size("64M", "--predict-bytes"), 64 * kMiB);
  EXPECT_EQ(parse_size("64MiB", "--predict-bytes"), 64 * kMiB);
  EXPECT_EQ(parse_size("1g", "--predict-bytes"), 1024 * kMiB);
  EXPECT_EQ(parse_size("4096", "--predict-bytes"), 4096);
  EXPECT_EQ(error_of([] { parse_size("64MB", "--predict-bytes"); }),
            "--predict-bytes '64MB': not a size of at least 1 byte; write bytes or a number and "
            "K, M or G (powers of 1024): 64M, 1G");
  EXPECT_EQ(error_of([] { parse_size("0", "--predict-bytes"); }).substr(0, 36),
            "--predict-bytes '0': not a size of a");
}

TEST(CostTest, FabricFromDefaultsInventoryAndLinks) {
  Placement p = hosts_of(4, 2);
  const Layout l = make_layout(p, 2, 2);
  Fabric f = make_fabric(p, l, {});
  ASSERT_EQ(f.levels.size(), 4u);
  EXPECT_EQ(f.levels[kHost].name, "host");
  EXPECT_DOUBLE_EQ(f.levels[kHost].bytes_per_s, 1.25e9);
  EXPECT_EQ(f.levels[kHost].from, "default");
  EXPECT_DOUBLE_EQ(f.levels[kRack].bytes_per_s, 2.5e9);  // two hosts' NICs
  EXPECT_DOUBLE_EQ(f.levels[kAisle].bytes_per_s, 5e9);   // two racks
  EXPECT_DOUBLE_EQ(f.levels[kRack].latency_s, 30e-6);

  Inventory inv;
  Nic nic;
  nic.name = "eth0";
  nic.interfaces.push_back({"eth0", "", {}, 25000});
  inv.nics.push_back(nic);
  for (HostUse& h : p.hosts)
    h.inventory = &inv;
  for (comm::RankPlacement& r : p.ranks)
    r.nic = "eth0";
  f = make_fabric(p, l, {});
  EXPECT_DOUBLE_EQ(f.levels[kHost].bytes_per_s, 25e9 / 8);
  EXPECT_EQ(f.levels[kHost].from, "inventory");

  const FabricLevel measured[] = {{"rack", 50e6, 80e-6, "measured"}, {"aisle", 0, 0, "measured"}};
  f = make_fabric(p, l, {}, measured);
  EXPECT_DOUBLE_EQ(f.levels[kRack].bytes_per_s, 50e6);
  EXPECT_EQ(f.levels[kRack].from, "measured");
  EXPECT_DOUBLE_EQ(f.levels[kAisle].bytes_per_s, 100e6);  // from the measured rack
  EXPECT_EQ(f.levels[kAisle].from, "default");
  f = make_fabric(p, l, links({"rack=1Gbit"}), measured);
  EXPECT_EQ(f.levels[kRack].from, "--link");  // the user's word over a measurement

  f = make_fabric(p, l, links({"host=1Gbit,50us", "rack=250Mbit", "host=2Gbit"}));
  EXPECT_DOUBLE_EQ(f.levels[kHost].bytes_per_s, 250e6);  // the later one wins
  EXPECT_DOUBLE_EQ(f.levels[kHost].latency_s, 50e-6);    // kept from the first
  EXPECT_EQ(f.levels[kHost].from, "--link");
  EXPECT_DOUBLE_EQ(f.levels[kRack].bytes_per_s, 31.25e6);
  EXPECT_DOUBLE_EQ(f.levels[kRack].latency_s, 50e-6);  // the host's
  EXPECT_DOUBLE_EQ(f.levels[kAisle].bytes_per_s, 62.5e6);
  EXPECT_EQ(f.levels[kAisle].from, "default");
}

TEST(CostTest, CandidatesMergeNeighbouringLevels) {
  EXPECT_EQ(names(candidate_modes(comm::parse_mode("p:2x3x1x1"))),
            (std::vector<std::string>{"p:2x3x1x1", "r:2x3x1x1"}));
  EXPECT_EQ(names(candidate_modes(comm::parse_mode("p:2x2x2x1"))),
            (std::vector<std::string>{"p:2x2x2x1", "p:4x2x1x1", "p:2x4x1x1", "r:2x2x2x1"}));
  EXPECT_EQ(names(candidate_modes(comm::parse_mode("p:1x2x1x1"))),
            (std::vector<std::string>{"p:1x2x1x1", "r:1x2x1x1"}));
  EXPECT_EQ(names(candidate_modes(comm::parse_mode("p:1x1x1x1"))),
            (std::vector<std::string>{"p:1x1x1x1"}));
  EXPECT_EQ(candidate_modes(comm::parse_mode("p:3x2x18x2x1")).size(),
            8u);  // itself, 6 merges, the ring
}

// The namespace cluster of the tests: 3 hosts x 2 ranks, every host's link at 1 Gbit/s.
TEST(CostTest, ThreeHostsAtOneGbit) {
  const Placement p = hosts_of(3, 2);
  const Layout l = make_layout(p, 3, 1);
  const Fabric f = make_fabric(p, l, links({"host=1Gbit,50us"}));
  const double s = 16 * kMiB, link = 125e6 * 0.94;
  // Two ranks share each NIC; each sends 2/3 of its half: 4/3 S per NIC. Plus the pipeline's
  // fill and 16 chunks x 4 steps x 50 us.
  const double hierarchy = predict_seconds(f, l, comm::parse_mode("p:2x3x1x1"), s);
  EXPECT_NEAR(hierarchy, 4.0 / 3 * s / link, 0.01);
  // The flat ring: one rank per host sends 2(n-1)/n S = 5/3 S over its NIC, 10 steps.
  EXPECT_NEAR(predict_seconds(f, l, comm::parse_mode("r:2x3x1x1"), s),
              5.0 / 3 * s / link + 10 * 50e-6, 1e-6);
  EXPECT_NEAR(predict_seconds(f, l, comm::parse_mode("p:6x1x1x1"), s),
              predict_seconds(f, l, comm::parse_mode("r"), s), 1e-12);
  // Below 16 KiB: recursive doubling, 3 rounds across hosts.
  EXPECT_NEAR(predict_seconds(f, l, comm::parse_mode("p:2x3x1x1"), 8), 3 * (50e-6 + 8 / link),
              1e-12);
  const Prediction pr = predict_modes(f, l, candidate_modes(comm::parse_mode("p:2x3x1x1")),
                                      {kMiB, 16 * kMiB}, 64 * kMiB);
  ASSERT_EQ(pr.modes.size(), 2u);
  EXPECT_EQ(pr.fastest, 0u);
  EXPECT_EQ(pr.modes[1].seconds.size(), 2u);
}

// 2 racks x 2 hosts x 2 ranks, hosts at 1 Gbit/s, the racks joined by 250 Mbit/s.
TEST(CostTest, TwoRacksPickTheHierarchy) {
  const Placement p = hosts_of(4, 2);
  const Layout l = make_layout(p, 2, 2);
  const Fabric f = make_fabric(p, l, links({"host=1Gbit,50us", "rack=250Mbit"}));
  const double s = 16 * kMiB, uplink = 31.25e6 * 0.94;
  // p:2x2x2x1: the outer dimension's 4 ranks per rack each send S/4 across: S per uplink.
  EXPECT_NEAR(predict_seconds(f, l, comm::parse_mode("p:2x2x2x1"), s), s / uplink, 0.03);
  // The flat ring crosses the uplink once each way with 2(n-1)/n S = 7/4 S.
  EXPECT_NEAR(predict_seconds(f, l, comm::parse_mode("r:2x2x2x1"), s),
              7.0 / 4 * s / uplink + 14 * 50e-6, 1e-6);
  const Prediction pr =
      predict_modes(f, l, candidate_modes(comm::parse_mode("p:2x2x2x1")), {16 * kMiB}, 64 * kMiB);
  EXPECT_EQ(pr.modes[pr.fastest].mode.str(), "p:2x2x2x1");
  // Without the slow uplink (a non-blocking rack), the racks do not matter.
  const Fabric fast = make_fabric(p, l, links({"host=1Gbit,50us"}));
  EXPECT_LT(predict_seconds(fast, l, comm::parse_mode("p:2x4x1x1"), s),
            predict_seconds(fast, l, comm::parse_mode("r:2x2x2x1"), s));
}

TEST(CostTest, OneHostIsSharedMemory) {
  const Placement p = hosts_of(1, 4);
  const Layout l = make_layout(p, 1, 1);
  const Fabric f = make_fabric(p, l, links({"local=4GB/s,1us"}));
  EXPECT_NEAR(predict_seconds(f, l, comm::parse_mode("p:4x1x1x1"), 4e6), 1.5 * 4e6 / 4e9 + 2e-6,
              1e-12);
  const Placement one = hosts_of(1, 1);
  EXPECT_EQ(predict_seconds(f, make_layout(one, 1, 1), comm::parse_mode("p:1"), 4e6), 0);
  EXPECT_NEAR(bus_bandwidth(4e6, 4, 1e-3), 6e9, 1e-3);
}

// Summit's two layouts at 64 MiB on the default fabric (local 8 GB/s and 1 us; host 10 Gbit/s
// and 30 us, TCP's 94% of it; non-blocking racks). A ring longer than 16 that leaves its host
// runs as sub-rings (comm::ring_factors): 18 hosts of a rack as 6 x 3, 256 racks as 16 x 16,
// 4,608 hosts as 9 x 8 x 8 x 8, each a dimension of its own. They move the same bytes through
// each NIC as the long ring (the bound does not change) and pay 2(d-1) latencies per chunk for
// rings of 16 or less, so the chunk stays small (comm::pipeline_chunk_bytes: 7.5 MiB, 4 MiB),
// the dimensions overlap, and the time is the bound plus the other dimensions' share of one
// chunk: within 5% of the bound. Before the split these were 1.21x and 2.71x (one chunk, a
// ring of 256 or 4,608 paying 510 or 9,214 latencies in a row); before the chunk grew, with
// 1 MiB chunks, 0.98 s and 17.7 s.
constexpr double kLocal = 8e9, kNic = 1.25e9 * 0.94, kSummitBytes = 64 * kMiB;

/// The innermost dimension, 6 ranks of a host in a ring, `chunks` times 10 steps at 1 us and
/// each rank's 2 x 5/6 of the buffer through shared memory.
double six_gpus_seconds(double s, double chunks = 1) {
  return chunks * 10 * 1e-6 + 2 * 5.0 / 6 * s / kLocal;
}

/// A ring of d whose time is its chain of steps: `chunks` x 2(d-1) latencies of 30 us, and one
/// hop's 2(d-1)/d of `region` at a NIC's rate.
double chain_seconds(int d, double region, double chunks) {
  return chunks * 2 * (d - 1) * 30e-6 + 2.0 * (d - 1) / d * region / kNic;
}

TEST(CostTest, SummitInRacksOf18RunsSubRings) {
  const Placement p = hosts_of(4608, 6);
  const Layout l = make_layout(p, 18, 256);  // ddlrun --nodes 18
  const Fabric f = make_fabric(p, l, {});
  const comm::Mode mode = comm::parse_mode("p:6x18x256x1");
  const double s = kSummitBytes;
  // Runs 6 x (6 x 3) x (16 x 16): 7.5 MiB chunks (30 steps of 16), 9 of them.
  const double chunks = 9;
  // The bound: each NIC's bytes of every dimension outside the host, 2 x 4607/4608 x S/6 for
  // each of its 6 ranks, as before the split.
  const double bound = (2 * 17.0 / 18 + 2 * 255.0 / 256 / 18) * s / kNic;
  EXPECT_NEAR(bandwidth_bound_seconds(f, l, mode, s), bound, 1e-12);
  EXPECT_NEAR(bandwidth_bound_seconds(f, l, mode, s), 0.11420, 1e-5);
  // The slowest dimension is the rack's 6 neighbours (its NIC carries 6 x 2 x 5/6 x S/6,
  // 95 ms); the bound is longer, and every other dimension adds its time over 9: the host's
  // ring, the rack's 3 (busiest: its NIC, 6 x 2 x 2/3 x S/36) and the racks' 16 and 16 (their
  // chains of steps).
  const double others = six_gpus_seconds(s, chunks) + 6 * 2 * 2.0 / 3 * s / 36 / kNic +
                        chain_seconds(16, s / 108, chunks) + chain_seconds(16, s / 1728, chunks);
  EXPECT_NEAR(predict_seconds(f, l, mode, s), bound + others / chunks, 1e-12);
  EXPECT_NEAR(predict_seconds(f, l, mode, s), 0.11909, 1e-5);
  EXPECT_LE(predict_seconds(f, l, mode, s), 1.10 * bound);  // the goal
  // Without the split (DDL_MAX_RING=0 in libddl) the racks' 256 paid 510 latencies in a row.
  EXPECT_LE(predict_seconds(f, l, mode, s), 0.13823 - 0.019);
}

TEST(CostTest, SummitInOneRingRunsSubRingsAndBeatsTheFlatRing) {
  const Placement p = hosts_of(4608, 6);
  const Layout l = make_layout(p, 4608, 1);  // no racks named: one rack
  const Fabric f = make_fabric(p, l, {});
  const double s = kSummitBytes;
  const comm::Mode mode = comm::parse_mode("p:6x4608x1x1");
  // Runs 6 x (9 x 8 x 8 x 8): 4 MiB chunks (16 steps of 9), 16 of them.
  const double chunks = 16;
  const double bound = 2 * 4607.0 / 4608 * s / kNic;
  EXPECT_NEAR(bandwidth_bound_seconds(f, l, mode, s), bound, 1e-12);
  // The 9 is the slowest (6 x 2 x 8/9 x S/6 through each NIC, 101 ms), the bound longer; the
  // others over 16: the host's ring, the first 8 (its NIC: 6 x 2 x 7/8 x S/54) and the two
  // outer 8s (their chains).
  const double others = six_gpus_seconds(s, chunks) + 6 * 2 * 7.0 / 8 * s / 54 / kNic +
                        chain_seconds(8, s / 432, chunks) + chain_seconds(8, s / 3456, chunks);
  EXPECT_NEAR(predict_seconds(f, l, mode, s), bound + others / chunks, 1e-12);
  EXPECT_NEAR(predict_seconds(f, l, mode, s), 0.11664, 1e-5);
  EXPECT_LE(predict_seconds(f, l, mode, s), 1.10 * bound);  // the goal
  // The flat ring: 55,294 steps at 30 us, then 2 x 27647/27648 S over a NIC.
  const comm::Mode flat = comm::parse_mode("r:6x4608x1x1");
  EXPECT_NEAR(predict_seconds(f, l, flat, s), 55294 * 30e-6 + 2 * 27647.0 / 27648 * s / kNic,
              1e-12);
  const Prediction pr = predict_modes(f, l, candidate_modes(mode), {}, s);
  ASSERT_EQ(pr.modes.size(), 2u);
  EXPECT_EQ(pr.modes[pr.fastest].mode.str(), "p:6x4608x1x1");
  EXPECT_NEAR(pr.modes[0].bound_at_pick, bound, 1e-12);
}

// Two ranks a host, d hosts in one ring, links at 1 Gbit/s and 50 us (the namespace cluster of
// bench/predict_check.sh --only ring): the chunk grows with d, so the ring's steps cost at most
// 4 S / 1 MiB + 2(d-1) latencies whatever d, and DDL's layout stays ahead of the flat ring.
TEST(CostTest, RingStepsStayBoundedAtEveryRingLength) {
  for (int d : {3, 4, 8, 32, 128, 512}) {
    const Placement p = hosts_of(d, 2);
    const Layout l = make_layout(p, d, 1);
    const Fabric f = make_fabric(p, l, links({"host=1Gbit,50us"}));
    const std::string dims = "2x" + std::to_string(d) + "x1x1";
    const double s = 64 * kMiB;
    const double t = predict_seconds(f, l, comm::parse_mode("p:" + dims), s);
    const double bound = bandwidth_bound_seconds(f, l, comm::parse_mode("p:" + dims), s);
    const double steps = 4 * s / kMiB + 2 * (d - 1);
    EXPECT_LE(t, bound + steps * 50e-6 + six_gpus_seconds(s)) << d << " hosts";
    EXPECT_LT(t, predict_seconds(f, l, comm::parse_mode("r:" + dims), s)) << d << " hosts";
  }
}

TEST(CostTest, Texts) {
  EXPECT_EQ(bandwidth_text(125e6), "125 MB/s");
  EXPECT_EQ(bandwidth_text(31.25e6), "31.25 MB/s");
  EXPECT_EQ(bandwidth_text(1.25e9), "1.25 GB/s");
  EXPECT_EQ(bandwidth_text(800), "800 B/s");
  EXPECT_EQ(duration_text(50e-6), "50 us");
  EXPECT_EQ(duration_text(0.5716), "571.6 ms");
  EXPECT_EQ(duration_text(2.5), "2.5 s");
  EXPECT_EQ(duration_text(0), "0 s");
}

}  // namespace
}  // namespace ddl::mapper
