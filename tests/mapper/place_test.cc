#include "mapper/place.h"

#include <gtest/gtest.h>

#include "mapper/probe_hwloc.h"

namespace ddl::mapper {
namespace {

using hostfiles::Host;
using hostfiles::HostList;
using hostfiles::Position;
using hostfiles::SourceKind;
using Strings = std::vector<std::string>;

const Inventory& recording(const std::string& name) {
  static std::map<std::string, Inventory> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    ProbeOptions o;
    o.xml_path = std::string(DDL_TEST_DATA_DIR) + "/topologies/" + name;
    it = cache.emplace(name, probe_hwloc(o)).first;
  }
  return it->second;
}

HostList hosts(const std::vector<std::string>& names, int slots = 1, bool given = false,
               SourceKind kind = SourceKind::kHostsOption) {
  HostList l;
  for (const std::string& name : names)
    l.add(Host{name, slots, std::nullopt, given, kind, "-H"}, Position{"-H", 0, 0, {}});
  return l;
}

std::map<std::string, const Inventory*> all_are(const std::vector<std::string>& names,
                                                const Inventory& inv) {
  std::map<std::string, const Inventory*> m;
  for (const std::string& n : names)
    m[n] = &inv;
  return m;
}

/// "r0 a/0 gpu0 0-27 mlx5_0": one rank's placement.
Strings ranks(const Placement& p) {
  Strings out;
  for (const comm::RankPlacement& r : p.ranks) {
    out.push_back("r" + std::to_string(r.rank) + " " + p.topology_hosts[r.host].name + "/" +
                  std::to_string(r.local_rank) + " gpu" +
                  (r.gpu < 0 ? std::string("-") : std::to_string(r.gpu)) + " " +
                  (r.cpus.empty() ? "-" : r.cpus.str()) + " " + (r.nic.empty() ? "-" : r.nic));
  }
  return out;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const PlacementError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(PlaceTest, SummitNodeOneRankPerGpuSevenCoresEachNearestHca) {
  const Placement p =
      place(hosts({"a01n01"}), all_are({"a01n01"}, recording("summit-ac922.xml")), {});
  // 21 usable cores per socket (one isolated), 3 GPUs per socket: 7 cores (28 PUs) each. The
  // HCAs sit on their socket, not on the GPUs' switch, so the ranks alternate between them.
  EXPECT_EQ(ranks(p),
            (Strings{"r0 a01n01/0 gpu0 0-27 mlx5_0", "r1 a01n01/1 gpu1 28-55 mlx5_1",
                     "r2 a01n01/2 gpu2 56-83 mlx5_0", "r3 a01n01/3 gpu3 88-115 mlx5_2",
                     "r4 a01n01/4 gpu4 116-143 mlx5_3", "r5 a01n01/5 gpu5 144-171 mlx5_2"}));
  EXPECT_EQ(p.hosts[0].capacity_from, "6 GPUs");
  EXPECT_EQ(p.ranks[3].gpu_bus_id, "0035:03:00.0");
  ASSERT_EQ(p.topology_hosts.size(), 1u);
  EXPECT_EQ(p.topology_hosts[0].nics.size(), 4u);
  EXPECT_EQ(p.topology_hosts[0].nics[0], (comm::Nic{"mlx5_0", "infiniband", ""}));
  EXPECT_TRUE(p.notes.empty());
}

TEST(PlaceTest, BatchSlotsDoNotCapGpusButUserSlotsDo) {
  const Inventory& summit = recording("summit-ac922.xml");
  // LSF gives 42 slots per node: still one rank per GPU.
  Placement p = place(hosts({"a", "b"}, 42, true, SourceKind::kLsfMcpuHosts),
                      all_are({"a", "b"}, summit), {});
  EXPECT_EQ(p.ranks.size(), 12u);
  // -H a:2 caps at 2, one GPU per socket, each with its whole socket's cores.
  p = place(hosts({"a"}, 2, true), all_are({"a"}, summit), {});
  EXPECT_EQ(ranks(p), (Strings{"r0 a/0 gpu0 0-83 mlx5_0", "r1 a/1 gpu3 88-171 mlx5_2"}));
  EXPECT_EQ(p.hosts[0].capacity_from, "2 slots of 6 GPUs");
}

TEST(PlaceTest, AcceleratorsAndTotal) {
  const Inventory& summit = recording("summit-ac922.xml");
  PlaceRequest r;
  r.ranks_per_host = 4;
  Placement p = place(hosts({"a", "b"}), all_are({"a", "b"}, summit), r);
  EXPECT_EQ(p.hosts[1].capacity_from, "-a 4");
  // Two GPUs per socket: 10 of its 21 cores each.
  EXPECT_EQ(ranks(p)[4], "r4 b/0 gpu0 0-39 mlx5_0");
  EXPECT_EQ(ranks(p)[5], "r5 b/1 gpu1 40-79 mlx5_1");
  EXPECT_EQ(ranks(p)[6], "r6 b/2 gpu3 88-127 mlx5_2");
  r.ranks_per_host.reset();
  r.total_ranks = 8;
  p = place(hosts({"a", "b"}), all_are({"a", "b"}, summit), r);
  EXPECT_EQ(p.slots().describe(), "2 hosts: 6+2");
  r.total_ranks = 13;
  EXPECT_EQ(error_of([&] {
              place(hosts({"a", "b"}), all_are({"a", "b"}, summit), r);
            }),
            "-n 13 asks for more ranks than the 2 hosts have places for: 12; add hosts, or lower "
            "-n");
  r.total_ranks.reset();
  r.ranks_per_host = 8;
  EXPECT_EQ(error_of([&] {
              place(hosts({"a", "b"}), all_are({"a", "b"}, summit), r);
            }),
            "-a 8 asks for 8 ranks per host, but a has 6 GPUs; lower -a to 6 or leave out a");
}

TEST(PlaceTest, EightGpusOneNicPerPair) {
  const Placement p =
      place(hosts({"dgx"}), all_are({"dgx"}, recording("gpu8-nic-per-pair.xml")), {});
  const Strings r = ranks(p);
  ASSERT_EQ(r.size(), 8u);
  // 20 cores x 2 threads per socket, 4 GPUs per socket: 5 cores each; each pair's own HCA.
  EXPECT_EQ(r[0].substr(0, 12), "r0 dgx/0 gpu");
  EXPECT_EQ(r[0].substr(r[0].size() - 6), "mlx5_0");
  EXPECT_EQ(r[1].substr(r[1].size() - 6), "mlx5_0");
  EXPECT_EQ(r[2].substr(r[2].size() - 6), "mlx5_1");
  EXPECT_EQ(r[5].substr(r[5].size() - 6), "mlx5_2");
  EXPECT_EQ(r[7].substr(r[7].size() - 6), "mlx5_3");
  for (const comm::RankPlacement& rank : p.ranks)
    EXPECT_EQ(rank.cpus.size(), 10) << rank.rank;
  EXPECT_EQ(p.hosts[0].ring_order, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(PlaceTest, TcpAndNicFilter) {
  const Inventory& summit = recording("summit-ac922.xml");
  PlaceRequest r;
  r.tcp = true;
  Placement p = place(hosts({"a"}), all_are({"a"}, summit), r);
  EXPECT_EQ(ranks(p)[0], "r0 a/0 gpu0 0-27 ib0");
  EXPECT_EQ(ranks(p)[1], "r1 a/1 gpu1 28-55 ib1");
  EXPECT_EQ(ranks(p)[3], "r3 a/3 gpu3 88-115 ib2");
  r.tcp = false;
  r.nic = parse_nic_filter("ib3");
  p = place(hosts({"a"}), all_are({"a"}, summit), r);
  for (const comm::RankPlacement& rank : p.ranks)
    EXPECT_EQ(rank.nic, "mlx5_3");
  r.nic = parse_nic_filter("^mlx5_0,mlx5_1,mlx5_2");
  p = place(hosts({"a"}), all_are({"a"}, summit), r);
  EXPECT_EQ(p.ranks[0].nic, "mlx5_3");
  r.nic = parse_nic_filter("enp");
  r.tcp = true;
  EXPECT_EQ(error_of([&] { place(hosts({"a"}), all_are({"a"}, summit), r); }),
            "--nic enp lets no network interface of a through (it has mlx5_0, ib0, mlx5_1, ib1, "
            "enP5p1s0f0, enP5p1s0f1, mlx5_2, ib2, mlx5_3, ib3); change --nic or leave it out");
  r.nic = parse_nic_filter("enP5");
  p = place(hosts({"a"}), all_are({"a"}, summit), r);
  EXPECT_EQ(p.ranks[0].nic, "enP5p1s0f0");
  EXPECT_EQ(p.ranks[1].nic, "enP5p1s0f1");
}

TEST(PlaceTest, VirtualInterfacesOnlyWhenNamed) {
  Inventory inv = recording("laptop-1p4c8t.xml");
  Nic lo;
  lo.name = "lo";
  lo.interfaces.push_back(NetInterface{"lo", "", {"127.0.0.1"}, std::nullopt});
  Nic docker;
  docker.name = "docker0";
  docker.interfaces.push_back(NetInterface{"docker0", "", {"172.17.0.1"}, std::nullopt});
  inv.nics = {lo, docker};
  Placement p = place(hosts({"l"}), all_are({"l"}, inv), {});
  EXPECT_EQ(p.ranks[0].nic, "");
  PlaceRequest r;
  r.nic = parse_nic_filter("lo");
  p = place(hosts({"l"}), all_are({"l"}, inv), r);
  EXPECT_EQ(p.ranks[0].nic, "lo");
  EXPECT_EQ(p.ranks[0].address, "127.0.0.1");
}

TEST(PlaceTest, CpuOnlyHostsSplitTheirCores) {
  const Inventory& laptop = recording("laptop-1p4c8t.xml");
  Placement p = place(hosts({"l"}), all_are({"l"}, laptop), {});
  EXPECT_EQ(ranks(p), (Strings{"r0 l/0 gpu- 0-7 wlp0s20f3"}));
  EXPECT_EQ(p.hosts[0].capacity_from, "1 slot");
  p = place(hosts({"l"}, 2, true), all_are({"l"}, laptop), {});
  // Core c has PUs c and c+4.
  EXPECT_EQ(ranks(p), (Strings{"r0 l/0 gpu- 0-1,4-5 wlp0s20f3", "r1 l/1 gpu- 2-3,6-7 wlp0s20f3"}));
  p = place(hosts({"l"}, 8, true), all_are({"l"}, laptop), {});
  EXPECT_EQ(ranks(p)[7], "r7 l/7 gpu- 7 wlp0s20f3");  // threads when cores run out
  p = place(hosts({"l"}, 9, true), all_are({"l"}, laptop), {});
  EXPECT_EQ(ranks(p)[8], "r8 l/8 gpu- - wlp0s20f3");
  EXPECT_EQ(p.notes,
            (Strings{"l: 9 ranks for the 8 hardware threads of package 0: not bound to CPUs"}));
  // Two packages, 4 ranks: two per package.
  p = place(hosts({"x"}, 4, true), all_are({"x"}, recording("24em64t-2n6c2t-pci.xml")), {});
  ASSERT_EQ(p.ranks.size(), 3u);  // 3 GPUs; -H x:4 does not raise that
}

TEST(PlaceTest, UnknownHardwareIsPlacedBySlots) {
  const Placement p = place(hosts({"a", "b"}, 3, true), {}, {});
  EXPECT_EQ(ranks(p)[4], "r4 b/1 gpu- - -");
  EXPECT_EQ(p.topology_hosts[1].index, 1);
  EXPECT_EQ(p.hosts[1].ring_order, (std::vector<int>{0, 1, 2}));
}

TEST(PlaceTest, DifferentLayoutsNeedAccelerators) {
  const Inventory& summit = recording("summit-ac922.xml");
  const Inventory& dgx = recording("gpu8-nic-per-pair.xml");
  std::map<std::string, const Inventory*> inv = all_are({"a", "b", "c"}, summit);
  inv["d"] = &dgx;
  EXPECT_EQ(error_of([&] {
              place(hosts({"a", "b", "c", "d"}), inv, {});
            }),
            "the hosts have different numbers of GPUs: a and 2 more have 6 GPUs, d has 8 GPUs; "
            "give -a 6 to run that many ranks on every host, or leave out the hosts that differ");
  PlaceRequest r;
  r.ranks_per_host = 6;
  const Placement p = place(hosts({"a", "b", "c", "d"}), inv, r);
  EXPECT_EQ(p.ranks.size(), 24u);
  EXPECT_EQ(p.notes, (Strings{"hosts differ in GPUs: a and 2 more have 6 GPUs, d has 8 GPUs",
                              "hosts differ in cores per package: a and 2 more have 21+21 cores, "
                              "d has 20+20 cores; each host's CPU sets follow its own cores"}));
  // d: 6 of 8 GPUs, spread over both sockets.
  EXPECT_EQ(p.ranks[18].gpu, 0);
  EXPECT_EQ(p.ranks[19].gpu, 1);
  EXPECT_EQ(p.ranks[20].gpu, 2);
  EXPECT_EQ(p.ranks[21].gpu, 4);
}

TEST(PlaceTest, CudaVisibleDevices) {
  Inventory inv = recording("power8gpudistances.xml");
  EXPECT_EQ(usable_gpus(inv), (std::vector<int>{0, 1, 2, 3}));
  inv.cuda_visible_devices = "3,1";
  EXPECT_EQ(usable_gpus(inv), (std::vector<int>{1, 3}));
  inv.cuda_visible_devices = "2,7,0";  // CUDA stops at the first entry that names no GPU
  EXPECT_EQ(usable_gpus(inv), (std::vector<int>{2}));
  inv.cuda_visible_devices = "";
  EXPECT_EQ(usable_gpus(inv), (std::vector<int>{}));
  inv.cuda_visible_devices = inv.gpus[2].uuid.substr(0, 12) + ", 0";
  EXPECT_EQ(usable_gpus(inv), (std::vector<int>{0, 2}));
  inv.cuda_visible_devices = "1";
  const Placement p = place(hosts({"m"}), all_are({"m"}, inv), {});
  EXPECT_EQ(ranks(p), (Strings{"r0 m/0 gpu1 0-1,8-9,16-17,24-25 -"}));
}

/// Four GPUs on one socket whose NVLinks form the ring 0-2-1-3.
Inventory crossed_nvlinks() {
  Inventory inv = recording("power8gpudistances.xml");
  for (Gpu& g : inv.gpus)
    g.locality.package = 0;
  inv.gpus[0].nvlink_peers = {2, 3};
  inv.gpus[1].nvlink_peers = {2, 3};
  inv.gpus[2].nvlink_peers = {0, 1};
  inv.gpus[3].nvlink_peers = {0, 1};
  return inv;
}

TEST(PlaceTest, HardwareRingOrder) {
  const Inventory& minsky = recording("power8gpudistances.xml");
  // NVLink pairs 0-1 and 2-3, one pair per socket: rank order already follows the hardware.
  EXPECT_EQ(hardware_ring_order(minsky, {0, 1, 2, 3}), (std::vector<int>{0, 1, 2, 3}));
  // Given as 0 2 1 3, the ring visits positions 0 1 3 2: GPUs 0 2 3 1, pairs adjacent.
  EXPECT_EQ(hardware_ring_order(minsky, {0, 2, 1, 3}), (std::vector<int>{0, 1, 3, 2}));
  const Inventory crossed = crossed_nvlinks();
  EXPECT_EQ(hardware_ring_order(crossed, {0, 1, 2, 3}), (std::vector<int>{0, 2, 1, 3}));
  // A DGX-1 hybrid cube-mesh: NCCL's ring 0 3 2 1 5 6 7 4 is among the cheapest.
  Inventory dgx = recording("gpu8-nic-per-pair.xml");
  const std::vector<std::vector<int>> links = {{1, 2, 3, 4}, {0, 2, 3, 5}, {0, 1, 3, 6},
                                               {0, 1, 2, 7}, {0, 5, 6, 7}, {1, 4, 6, 7},
                                               {2, 4, 5, 7}, {3, 4, 5, 6}};
  for (int i = 0; i < 8; ++i)
    dgx.gpus[i].nvlink_peers = links[i];
  // Identity 0..7 crosses 3-4 without NVLink; the cheapest cycles use NVLink only.
  const std::vector<int> order = hardware_ring_order(dgx, {0, 1, 2, 3, 4, 5, 6, 7});
  for (int i = 0; i < 8; ++i) {
    const Gpu& a = dgx.gpus[order[i]];
    const int b = order[(i + 1) % 8];
    EXPECT_NE(std::find(a.nvlink_peers.begin(), a.nvlink_peers.end(), b), a.nvlink_peers.end())
        << order[i] << "-" << b;
  }
  EXPECT_EQ(order[0], 0);
  EXPECT_LT(order[1], order[7]);
}

TEST(PlaceTest, TopologyRingsFollowHardware) {
  const Inventory crossed = crossed_nvlinks();
  const Placement p = place(hosts({"a", "b"}), all_are({"a", "b"}, crossed), {});
  EXPECT_EQ(p.hosts[0].ring_order, (std::vector<int>{0, 2, 1, 3}));
  const comm::Topology t = make_topology(p, comm::parse_mode("p:4x2"), "job7");
  EXPECT_EQ(t.job_id, "job7");
  EXPECT_EQ(t.rings[0], (std::vector<comm::Ring>{{0, 2, 1, 3}, {4, 6, 5, 7}}));
  EXPECT_EQ(t.rings[1], (std::vector<comm::Ring>{{0, 4}, {2, 6}, {1, 5}, {3, 7}}));
  // Summit, 2 hosts: p:6x2x1x1.
  const Inventory& summit = recording("summit-ac922.xml");
  const Placement s = place(hosts({"a", "b"}), all_are({"a", "b"}, summit), {});
  const comm::Topology ts = make_topology(s, comm::parse_mode("p:6x2x1x1"), "1");
  EXPECT_EQ(ts.rings[0], (std::vector<comm::Ring>{{0, 1, 2, 3, 4, 5}, {6, 7, 8, 9, 10, 11}}));
  EXPECT_EQ(ts.rings[1].size(), 6u);
  EXPECT_EQ(ts.rings[1][5], (comm::Ring{5, 11}));
  EXPECT_EQ(ts.rings[3], (std::vector<comm::Ring>{
                             {0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, {11}}));
  EXPECT_EQ(error_of([&] { make_topology(s, comm::parse_mode("p:6x3"), "1"); }),
            "mode p:6x3 does not cover the 12 ranks of the job");
}

TEST(PlaceTest, RankfilePlacesAndIsChecked) {
  const Inventory& summit = recording("summit-ac922.xml");
  const hostfiles::Rankfile rf = hostfiles::parse_rankfile(
      "rank 0=a slot=1:0-6\nrank 1=b slot=0:*\nrank 2=a slot=0:0-6\n", "ranks.txt");
  PlaceRequest r;
  r.rankfile = &rf;
  r.rankfile_path = "ranks.txt";
  const std::map<std::string, const Inventory*> inv = all_are({"a", "b"}, summit);
  const Placement p = place(hosts({"a", "b"}), inv, r);
  // Each rank's GPU is the first free one on the socket of its cores.
  EXPECT_EQ(ranks(p), (Strings{"r0 a/0 gpu3 88-115 mlx5_2", "r1 b/0 gpu0 0-83 mlx5_0",
                               "r2 a/1 gpu0 0-27 mlx5_0"}));
  EXPECT_EQ(p.hosts[0].capacity_from, "rankfile");

  const auto error = [&](const std::string& text) {
    const hostfiles::Rankfile bad = hostfiles::parse_rankfile(text, "ranks.txt");
    PlaceRequest br;
    br.rankfile = &bad;
    br.rankfile_path = "ranks.txt";
    return error_of([&] { place(hosts({"a", "b"}), inv, br); });
  };
  EXPECT_EQ(error("rank 0=a slot=2:0\n"),
            "ranks.txt:1: rank 0 names socket 2 of a, which has 2 sockets (0-1); change the "
            "rankfile or leave it out");
  EXPECT_EQ(error("rank 0=a slot=0:0\nrank 1=a slot=1:21-22\n"),
            "ranks.txt:2: rank 1 names core 22 of socket 1 on a, which has 21 cores (0-20); "
            "change the rankfile or leave it out");
  EXPECT_EQ(error("rank 0=a slot=50\n"),
            "ranks.txt:1: rank 0 names core 50 of a, which has 42 cores (0-41); change the "
            "rankfile or leave it out");
  EXPECT_EQ(error("rank 0=a slot=0:0-3\nrank 1=a slot=2-5\n"),
            "ranks.txt:2: rank 1 shares CPU 8 with rank 0 on a; give each rank its own cores");
  EXPECT_EQ(error("rank 0=a slot=0\nrank 1=a slot=1\nrank 2=a slot=2\nrank 3=a slot=3\nrank "
                  "4=a slot=4\nrank 5=a slot=5\nrank 6=a slot=6\n"),
            "ranks.txt:7: rank 6 is rank 7 on a, which has 6 GPUs; give it at most one rank per "
            "GPU");
  EXPECT_EQ(error("rank 0=c slot=0\n"),
            "ranks.txt:1: rank 0 is on host 'c', which is not among the job's hosts");
}

TEST(PlaceTest, SocketRingsWhenSocketsShareNoNvlink) {
  // The 8-GPU node as NVML would see a PCIe-only variant of it: GPUs known, no NVLink at all.
  Inventory pcie = recording("gpu8-nic-per-pair.xml");
  for (Gpu& g : pcie.gpus)
    g.os_devices = {"nvml" + std::to_string(g.index)};
  Placement p = place(hosts({"a", "b"}), all_are({"a", "b"}, pcie), {});
  EXPECT_EQ(socket_ring_size(p), 4);
  // Recordings without link information (bare PCI devices) keep one ring per host.
  p = place(hosts({"a", "b"}), all_are({"a", "b"}, recording("gpu8-nic-per-pair.xml")), {});
  EXPECT_EQ(socket_ring_size(p), std::nullopt);
  // NVLink between the sockets (the DGX-1 cube-mesh): one ring per host.
  Inventory mesh = pcie;
  mesh.gpus[3].nvlink_peers = {7};
  mesh.gpus[7].nvlink_peers = {3};
  p = place(hosts({"a"}), all_are({"a"}, mesh), {});
  EXPECT_EQ(socket_ring_size(p), std::nullopt);
  // POWER: NVLink to the CPUs, whose X-Bus joins the sockets; one ring per host.
  p = place(hosts({"m"}), all_are({"m"}, recording("power8gpudistances.xml")), {});
  EXPECT_EQ(socket_ring_size(p), std::nullopt);
  // One GPU per socket is no socket ring.
  PlaceRequest r;
  r.ranks_per_host = 2;
  p = place(hosts({"a"}), all_are({"a"}, pcie), r);
  EXPECT_EQ(socket_ring_size(p), std::nullopt);
  // The rings then stay inside sockets: p:4x2x2x1x1.
  p = place(hosts({"a", "b"}), all_are({"a", "b"}, pcie), {});
  const comm::Topology t = make_topology(p, comm::parse_mode("p:4x2x2x1x1"), "s");
  EXPECT_EQ(t.rings[0][1], (comm::Ring{4, 5, 6, 7}));
  EXPECT_EQ(t.rings[1][0], (comm::Ring{0, 4}));
  EXPECT_EQ(t.rings[2][0], (comm::Ring{0, 8}));
}

// Hosts whose hardware is unknown (not probed) are filled by slots, in order.

std::vector<int> counts(const SlotPlacement& p) {
  std::vector<int> c;
  for (const HostRanks& h : p.hosts)
    c.push_back(h.count);
  return c;
}

TEST(PlaceBySlotsTest, OneRankPerSlotByDefault) {
  const SlotPlacement p = place(hosts({"a", "b"}, 4, true), {}, {}).slots();
  EXPECT_EQ(p.ranks, 8);
  EXPECT_EQ(counts(p), (std::vector<int>{4, 4}));
  EXPECT_EQ(p.hosts[1].host, "b");
  EXPECT_EQ(p.hosts[1].first_rank, 4);
  EXPECT_EQ(p.describe(), "2 hosts x 4");
  EXPECT_EQ(place(hosts({"a"}), {}, {}).slots().describe(), "1 host x 1");
}

TEST(PlaceBySlotsTest, AcceleratorsOverrideSlots) {
  PlaceRequest r;
  r.ranks_per_host = 6;
  const SlotPlacement p = place(hosts({"a", "b"}, 42, true), {}, r).slots();
  EXPECT_EQ(p.ranks, 12);
  EXPECT_EQ(counts(p), (std::vector<int>{6, 6}));
}

TEST(PlaceBySlotsTest, NpFillsHostsInOrder) {
  PlaceRequest r;
  r.total_ranks = 6;
  const SlotPlacement p = place(hosts({"a", "b", "c"}, 4, true), {}, r).slots();
  EXPECT_EQ(p.ranks, 6);
  EXPECT_EQ(counts(p), (std::vector<int>{4, 2, 0}));
  EXPECT_EQ(p.hosts[2].first_rank, 6);
  EXPECT_EQ(p.describe(), "2 hosts: 4+2");
}

TEST(PlaceBySlotsTest, TooManyRanksIsAnError) {
  PlaceRequest r;
  r.total_ranks = 5;
  EXPECT_EQ(error_of([&] {
              place(hosts({"a", "b"}, 2, true), {}, r);
            }),
            "-n 5 asks for more ranks than the 2 hosts have places for: 4; add hosts or slots "
            "(-H host:N), or lower -n");
  // With -a, slots do not count, so more of them would not help.
  r.total_ranks = 3;
  r.ranks_per_host = 2;
  EXPECT_EQ(error_of([&] { place(hosts({"a"}, 8, true), {}, r); }),
            "-n 3 asks for more ranks than the 1 host has places for: 2 (-a 2 per host); add "
            "hosts, or lower -n");
}

TEST(PlaceBySlotsTest, EmptyListIsAnError) {
  EXPECT_EQ(error_of([&] { place(HostList{}, {}, {}); }),
            "no hosts to place ranks on; name them with -H or --hostfile");
}

}  // namespace
}  // namespace ddl::mapper
