#include "mapper/probe_hwloc.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "mapper/nvml.h"

namespace ddl::mapper {
namespace {

std::string topology(const std::string& name) {
  return std::string(DDL_TEST_DATA_DIR) + "/topologies/" + name;
}

Inventory probe_xml(const std::string& name) {
  ProbeOptions o;
  o.xml_path = topology(name);
  return probe_hwloc(o);
}

std::string opt(const std::optional<int>& v) {
  return v ? std::to_string(*v) : "-";
}

/// "0000:06:00.0 numa=0 pkg=0 switch=0000:00:07.0": a GPU's bus id and locality.
std::string where(const std::string& bus_id, const Locality& l) {
  return bus_id + " numa=" + opt(l.numa_node) + " pkg=" + opt(l.package) +
         (l.pci_switch.empty() ? "" : " switch=" + l.pci_switch);
}

std::vector<std::string> gpus(const Inventory& inv) {
  std::vector<std::string> out;
  for (const Gpu& g : inv.gpus) {
    EXPECT_EQ(g.index, static_cast<int>(out.size()));
    out.push_back(where(g.pci_bus_id, g.locality));
  }
  return out;
}

/// "mlx5_0 infiniband 0003:01:00.0 numa=0 pkg=0 switch=... [ib0]"
std::vector<std::string> nics(const Inventory& inv) {
  std::vector<std::string> out;
  for (const Nic& n : inv.nics) {
    std::string ifs;
    for (const NetInterface& i : n.interfaces)
      ifs += (ifs.empty() ? "" : ",") + i.name;
    out.push_back(n.name + " " + std::string(to_string(n.kind)) + " " +
                  where(n.pci_bus_id, n.locality) + " [" + ifs + "]");
  }
  return out;
}

std::vector<std::string> numa(const Inventory& inv) {
  std::vector<std::string> out;
  for (const NumaNode& n : inv.numa_nodes) {
    out.push_back(std::to_string(n.os_index) + " pkg=" + opt(n.package) +
                  " pus=" + format_cpu_list(n.pus) + " mem=" + std::to_string(n.memory_bytes));
  }
  return out;
}

/// Cores per package, and "core os_index:pus" for the first core of each.
std::vector<std::string> cpus(const Inventory& inv) {
  std::vector<std::string> out;
  for (const Package& p : inv.packages) {
    out.push_back("pkg " + std::to_string(p.os_index) + ": " + std::to_string(p.cores.size()) +
                  " cores, pus " + format_cpu_list(p.pus()) + ", first core " +
                  std::to_string(p.cores.at(0).os_index) + ":" +
                  format_cpu_list(p.cores.at(0).pus));
  }
  return out;
}

using Strings = std::vector<std::string>;

TEST(ProbeXmlTest, Power8Minsky) {
  const Inventory inv = probe_xml("power8gpudistances.xml");
  EXPECT_EQ(inv.hostname, "drac-12.grenoble.grid5000.fr");
  EXPECT_EQ(inv.core_count(), 8);
  EXPECT_EQ(inv.pu_count(), 16);
  EXPECT_EQ(cpus(inv),
            (Strings{"pkg 0: 4 cores, pus 0-1,8-9,16-17,24-25, first core 8:0-1",
                     "pkg 1: 4 cores, pus 80-81,88-89,96-97,104-105, first core 136:80-81"}));
  EXPECT_EQ(inv.packages[0].cpu_model, "POWER8NVL, altivec supported");
  EXPECT_EQ(numa(inv), (Strings{"0 pkg=0 pus=0-1,8-9,16-17,24-25 mem=68556816384",
                                "1 pkg=1 pus=80-81,88-89,96-97,104-105 mem=68450713600"}));
  // Three OS devices (cuda, opencl, nvml) per GPU, one GPU each.
  EXPECT_EQ(gpus(inv), (Strings{"0002:01:00.0 numa=0 pkg=0 switch=0002:00:00.0",
                                "0003:01:00.0 numa=0 pkg=0 switch=0003:00:00.0",
                                "000a:01:00.0 numa=1 pkg=1 switch=000a:00:00.0",
                                "000b:01:00.0 numa=1 pkg=1 switch=000b:00:00.0"}));
  const Gpu& g = inv.gpus[0];
  EXPECT_EQ(g.vendor, "nvidia");
  EXPECT_EQ(g.pci_id, "10de:15f9");
  EXPECT_EQ(g.model, "Tesla P100-SXM2-16GB");
  EXPECT_EQ(g.uuid, "GPU-77bf6b9a-6906-5a93-d28b-b77d2c23d1d2");
  EXPECT_EQ(g.os_devices, (Strings{"cuda0", "opencl0d0", "nvml0"}));
  EXPECT_EQ(g.locality.host_bridge, "0002:[00-01]");
  EXPECT_EQ(inv.gpus[3].uuid, "GPU-93f5db36-624e-1453-40ab-85cc675aa903");
  // NVLink from the recorded NVLinkBandwidth matrix: pairs 0-1 and 2-3, each to its CPU.
  EXPECT_EQ(inv.gpus[0].nvlink_peers, std::vector<int>{1});
  EXPECT_EQ(inv.gpus[1].nvlink_peers, std::vector<int>{0});
  EXPECT_EQ(inv.gpus[2].nvlink_peers, std::vector<int>{3});
  EXPECT_EQ(inv.gpus[3].nvlink_peers, std::vector<int>{2});
  for (const Gpu& x : inv.gpus) {
    EXPECT_TRUE(x.nvlink_cpu);
    EXPECT_FALSE(x.nvlink_switch);
  }
  EXPECT_TRUE(inv.nics.empty());
  EXPECT_EQ(inv.cuda_visible_devices, std::nullopt);
}

TEST(ProbeXmlTest, Intel24em64tWithPciGpusAndInfiniband) {
  const Inventory inv = probe_xml("24em64t-2n6c2t-pci.xml");
  EXPECT_EQ(inv.hostname, "mirage004");
  EXPECT_EQ(inv.core_count(), 12);
  EXPECT_EQ(inv.pu_count(), 24);
  // Linux numbers the sockets' threads alternately: package 0 has the even PUs.
  EXPECT_EQ(cpus(inv),
            (Strings{"pkg 0: 6 cores, pus 0,2,4,6,8,10,12,14,16,18,20,22, first core 0:0,12",
                     "pkg 1: 6 cores, pus 1,3,5,7,9,11,13,15,17,19,21,23, first core 0:1,13"}));
  EXPECT_EQ(inv.packages[1].cores[0].logical_index, 6);
  EXPECT_EQ(numa(inv), (Strings{"0 pkg=0 pus=0,2,4,6,8,10,12,14,16,18,20,22 mem=19316633600",
                                "1 pkg=1 pus=1,3,5,7,9,11,13,15,17,19,21,23 mem=19327348736"}));
  // Three NVIDIA GPUs seen only as PCI devices; the ATI ES1000 VGA chip is not one.
  EXPECT_EQ(gpus(inv), (Strings{"0000:06:00.0 numa=0 pkg=0 switch=0000:00:07.0",
                                "0000:11:00.0 numa=1 pkg=1 switch=0000:10:07.0",
                                "0000:14:00.0 numa=1 pkg=1 switch=0000:10:03.0"}));
  for (const Gpu& g : inv.gpus) {
    EXPECT_EQ(g.vendor, "nvidia");
    EXPECT_EQ(g.pci_id, "10de:06d2");
    EXPECT_EQ(g.model, "");
    EXPECT_TRUE(g.os_devices.empty());
    EXPECT_TRUE(g.nvlink_peers.empty());
  }
  EXPECT_EQ(inv.gpus[1].locality.host_bridge, "0000:[10-1f]");
  // The Mellanox HCA with its Ethernet and IPoIB interfaces, and two Intel Ethernet ports.
  EXPECT_EQ(
      nics(inv),
      (Strings{"eth0 ethernet 0000:04:00.0 numa=0 pkg=0 switch=0000:00:01.0 [eth0]",
               "eth1 ethernet 0000:04:00.1 numa=0 pkg=0 switch=0000:00:01.0 [eth1]",
               "mlx4_0 infiniband 0000:05:00.0 numa=0 pkg=0 switch=0000:00:05.0 [eth2,ib0]"}));
  const Nic& hca = *inv.find_nic("mlx4_0");
  EXPECT_EQ(hca.pci_id, "15b3:6746");
  EXPECT_TRUE(hca.ports.empty());  // not recorded
  EXPECT_EQ(hca.interfaces[1].hw_address,
            "80:00:00:48:fe:80:00:00:00:00:00:00:78:e7:d1:03:00:21:55:35");
  EXPECT_EQ(inv.find_nic("eth0")->interfaces[0].hw_address, "78:e7:d1:21:55:30");
  EXPECT_TRUE(inv.find_nic("eth0")->interfaces[0].addresses.empty());  // not in recordings
  EXPECT_EQ(inv.find_nic("eth0")->interfaces[0].speed_mbps, std::nullopt);
}

TEST(ProbeXmlTest, CpuOnlyLaptop) {
  const Inventory inv = probe_xml("laptop-1p4c8t.xml");
  EXPECT_EQ(inv.hostname, "laptop");
  EXPECT_EQ(cpus(inv), (Strings{"pkg 0: 4 cores, pus 0-7, first core 0:0,4"}));
  EXPECT_EQ(numa(inv), (Strings{"0 pkg=0 pus=0-7 mem=17179869184"}));
  // The integrated Intel graphics, even with an OpenCL device, is not a GPU to train on.
  EXPECT_TRUE(inv.gpus.empty());
  EXPECT_EQ(nics(inv), (Strings{"wlp0s20f3 ethernet 0000:00:14.3 numa=0 pkg=0 [wlp0s20f3]"}));
  EXPECT_EQ(inv.nics[0].locality.host_bridge, "0000:[00-01]");
}

TEST(ProbeXmlTest, SummitNode) {
  const Inventory inv = probe_xml("summit-ac922.xml");
  EXPECT_EQ(inv.hostname, "a01n01");
  // The recording is from inside a job: one core per socket is isolated for the system
  // (PUs 84-87 and 172-175 are not in the allowed cpuset), so 21 usable cores per socket.
  EXPECT_EQ(inv.core_count(), 42);
  EXPECT_EQ(inv.pu_count(), 168);
  EXPECT_EQ(cpus(inv), (Strings{"pkg 0: 21 cores, pus 0-83, first core 0:0-3",
                                "pkg 1: 21 cores, pus 88-171, first core 22:88-91"}));
  EXPECT_EQ(inv.packages[1].cores.back().pus, (std::vector<int>{168, 169, 170, 171}));
  EXPECT_EQ(numa(inv),
            (Strings{"0 pkg=0 pus=0-83 mem=274877906944", "1 pkg=1 pus=88-171 mem=274877906944"}));
  // Six V100 as bare PCI devices, three per socket behind one PCIe switch; the ASPEED VGA chip
  // is not a GPU.
  EXPECT_EQ(gpus(inv), (Strings{"0004:04:00.0 numa=0 pkg=0 switch=0004:00:00.0",
                                "0004:05:00.0 numa=0 pkg=0 switch=0004:00:00.0",
                                "0004:06:00.0 numa=0 pkg=0 switch=0004:00:00.0",
                                "0035:03:00.0 numa=1 pkg=1 switch=0035:00:00.0",
                                "0035:04:00.0 numa=1 pkg=1 switch=0035:00:00.0",
                                "0035:05:00.0 numa=1 pkg=1 switch=0035:00:00.0"}));
  EXPECT_EQ(inv.gpus[0].model, "GV100GL [Tesla V100 SXM2 16GB]");
  EXPECT_EQ(
      nics(inv),
      (Strings{"mlx5_0 infiniband 0003:01:00.0 numa=0 pkg=0 switch=0003:00:00.0 [ib0]",
               "mlx5_1 infiniband 0003:01:00.1 numa=0 pkg=0 switch=0003:00:00.0 [ib1]",
               "enP5p1s0f0 ethernet 0005:01:00.0 numa=0 pkg=0 switch=0005:00:00.0 [enP5p1s0f0]",
               "enP5p1s0f1 ethernet 0005:01:00.1 numa=0 pkg=0 switch=0005:00:00.0 [enP5p1s0f1]",
               "mlx5_2 infiniband 0033:01:00.0 numa=1 pkg=1 switch=0033:00:00.0 [ib2]",
               "mlx5_3 infiniband 0033:01:00.1 numa=1 pkg=1 switch=0033:00:00.0 [ib3]"}));
  EXPECT_EQ(inv.find_nic("mlx5_0")->ports, (std::vector<NicPort>{NicPort{1, "active", "", {}}}));
}

TEST(ProbeXmlTest, EightGpusWithANicPerPair) {
  const Inventory inv = probe_xml("gpu8-nic-per-pair.xml");
  EXPECT_EQ(inv.core_count(), 40);
  EXPECT_EQ(inv.pu_count(), 80);
  EXPECT_EQ(cpus(inv), (Strings{"pkg 0: 20 cores, pus 0-19,40-59, first core 0:0,40",
                                "pkg 1: 20 cores, pus 20-39,60-79, first core 20:20,60"}));
  EXPECT_EQ(gpus(inv), (Strings{"0000:04:00.0 numa=0 pkg=0 switch=0000:00:02.0",
                                "0000:05:00.0 numa=0 pkg=0 switch=0000:00:02.0",
                                "0000:09:00.0 numa=0 pkg=0 switch=0000:00:03.0",
                                "0000:0a:00.0 numa=0 pkg=0 switch=0000:00:03.0",
                                "0000:84:00.0 numa=1 pkg=1 switch=0000:80:02.0",
                                "0000:85:00.0 numa=1 pkg=1 switch=0000:80:02.0",
                                "0000:89:00.0 numa=1 pkg=1 switch=0000:80:03.0",
                                "0000:8a:00.0 numa=1 pkg=1 switch=0000:80:03.0"}));
  // Each pair's HCA shares its PCIe switch; the ConnectX-5 in Ethernet mode is RoCE; the Matrox
  // VGA chip is not a GPU.
  EXPECT_EQ(nics(inv),
            (Strings{"mlx5_0 infiniband 0000:03:00.0 numa=0 pkg=0 switch=0000:00:02.0 [ib0]",
                     "mlx5_1 infiniband 0000:08:00.0 numa=0 pkg=0 switch=0000:00:03.0 [ib1]",
                     "enp11s0f0 ethernet 0000:0b:00.0 numa=0 pkg=0 switch=0000:00:01.0 [enp11s0f0]",
                     "enp11s0f1 ethernet 0000:0b:00.1 numa=0 pkg=0 switch=0000:00:01.0 [enp11s0f1]",
                     "mlx5_2 infiniband 0000:83:00.0 numa=1 pkg=1 switch=0000:80:02.0 [ib2]",
                     "mlx5_3 infiniband 0000:88:00.0 numa=1 pkg=1 switch=0000:80:03.0 [ib3]",
                     "mlx5_4 roce 0000:8b:00.0 numa=1 pkg=1 switch=0000:80:01.0 [enp139s0f0]"}));
}

TEST(ProbeXmlTest, EveryRecordingRoundTripsThroughYaml) {
  for (const char* name : {"power8gpudistances.xml", "24em64t-2n6c2t-pci.xml", "laptop-1p4c8t.xml",
                           "summit-ac922.xml", "gpu8-nic-per-pair.xml"}) {
    const Inventory inv = probe_xml(name);
    EXPECT_EQ(inventory_from_yaml(to_yaml(inv), name), inv) << name;
  }
}

TEST(ProbeXmlTest, MissingFile) {
  ProbeOptions o;
  o.xml_path = "no-such.xml";
  try {
    probe_hwloc(o);
    FAIL();
  } catch (const ProbeError& e) {
    EXPECT_STREQ(e.what(),
                 "cannot load hwloc XML 'no-such.xml': No such file or directory; record one "
                 "with 'lstopo --of xml no-such.xml'");
  }
}

TEST(ProbeXmlTest, NotXml) {
  const std::string path = testing::TempDir() + "probe_not_xml.xml";
  std::ofstream(path) << "pack:1 core:4\n";
  ProbeOptions o;
  o.xml_path = path;
  try {
    probe_hwloc(o);
    FAIL();
  } catch (const ProbeError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("cannot load hwloc XML '" + path + "': not an hwloc topology (hwloc: ", 0),
              0u)
        << what;
    EXPECT_NE(what.find("; record one with 'lstopo --of xml " + path + "'"), std::string::npos);
  }
  std::filesystem::remove(path);
}

TEST(ProbeXmlTest, Directory) {
  ProbeOptions o;
  o.xml_path = testing::TempDir();
  try {
    probe_hwloc(o);
    FAIL();
  } catch (const ProbeError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot load hwloc XML '" + o.xml_path +
                                         "': it is a directory; record one with 'lstopo --of "
                                         "xml " +
                                         o.xml_path + "'");
  }
}

/// Bus ids of the GPUs in /sys/bus/pci by the class rule alone: 3D controllers, and NVIDIA
/// display devices.
std::set<std::string> pci_gpus_in_sysfs() {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& dev : std::filesystem::directory_iterator("/sys/bus/pci/devices", ec)) {
    std::string cls;
    std::string vendor;
    std::ifstream(dev.path() / "class") >> cls;      // "0x030200"
    std::ifstream(dev.path() / "vendor") >> vendor;  // "0x10de"
    if (cls.rfind("0x0302", 0) == 0 || (cls.rfind("0x03", 0) == 0 && vendor == "0x10de")) {
      out.insert(dev.path().filename().string());
    }
  }
  return out;
}

TEST(ProbeLiveTest, ThisHost) {
  ProbeOptions o;
  const Inventory inv = probe_hwloc(o);
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
  EXPECT_EQ(inv.hostname, host);

  // Every CPU this process may run on is in exactly one core, and no other.
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  ASSERT_GE(inv.packages.size(), 1u);
  EXPECT_EQ(inv.pu_count(), CPU_COUNT(&allowed));
  EXPECT_LE(inv.pu_count(), sysconf(_SC_NPROCESSORS_ONLN));
  std::set<int> seen;
  int logical = -1;
  for (const Package& p : inv.packages) {
    for (const Core& c : p.cores) {
      EXPECT_GT(c.logical_index, logical);
      logical = c.logical_index;
      EXPECT_FALSE(c.pus.empty());
      for (int pu : c.pus) {
        EXPECT_TRUE(CPU_ISSET(pu, &allowed)) << pu;
        EXPECT_TRUE(seen.insert(pu).second) << pu;
      }
    }
  }
  ASSERT_GE(inv.numa_nodes.size(), 1u);
  for (const NumaNode& n : inv.numa_nodes) {
    EXPECT_TRUE(n.pus.empty() || n.package.has_value()) << n.os_index;
  }

  // GPUs: those the PCI class rule finds in sysfs (none on a build machine), and those a GPU
  // runtime showed, in PCI order.
  const std::set<std::string> by_class = pci_gpus_in_sysfs();
  for (const std::string& bus_id : by_class)
    EXPECT_NE(inv.find_gpu(bus_id), nullptr) << bus_id;
  for (size_t i = 0; i < inv.gpus.size(); ++i) {
    const Gpu& g = inv.gpus[i];
    EXPECT_EQ(g.index, static_cast<int>(i));
    EXPECT_EQ(normalize_pci_bus_id(g.pci_bus_id), g.pci_bus_id);
    EXPECT_TRUE(by_class.count(g.pci_bus_id) || !g.os_devices.empty()) << g.pci_bus_id;
    EXPECT_TRUE(i == 0 || pci_bus_id_less(inv.gpus[i - 1].pci_bus_id, g.pci_bus_id));
  }
  for (const Nic& n : inv.nics) {
    EXPECT_FALSE(n.name.empty());
    EXPECT_FALSE(n.interfaces.empty() && n.kind == NicKind::kEthernet) << n.name;
    EXPECT_NE(n.name, "lo");
  }
  EXPECT_EQ(inventory_from_yaml(to_yaml(inv), "live"), inv);
}

TEST(ProbeLiveTest, CudaVisibleDevices) {
  ProbeOptions o;
  o.use_nvml = false;
  ASSERT_EQ(setenv("CUDA_VISIBLE_DEVICES", "1,0", 1), 0);
  EXPECT_EQ(probe_hwloc(o).cuda_visible_devices, "1,0");
  ASSERT_EQ(unsetenv("CUDA_VISIBLE_DEVICES"), 0);
  EXPECT_EQ(probe_hwloc(o).cuda_visible_devices, std::nullopt);
}

TEST(ProberTest, HwlocProberReadsXml) {
  std::unique_ptr<Prober> prober =
      make_hwloc_prober(ProbeOptions{topology("summit-ac922.xml"), true});
  EXPECT_EQ(prober->probe().gpus.size(), 6u);
}

TEST(GpuRuleTest, ClassesAndVendors) {
  struct Case {
    std::uint16_t cls, vendor;
    bool compute, opencl, gpu;
    const char* what;
  };
  const Case cases[] = {
      {0x0302, 0x10de, false, false, true, "NVIDIA 3D controller (Tesla)"},
      {0x0300, 0x10de, false, false, true, "NVIDIA VGA (workstation card)"},
      {0x0380, 0x10de, false, false, true, "NVIDIA other display"},
      {0x0302, 0x1002, false, false, true, "AMD 3D controller"},
      {0x0380, 0x1002, false, false, true, "AMD Instinct"},
      {0x0300, 0x1002, false, false, false, "ATI ES1000 (server VGA)"},
      {0x0300, 0x1002, true, false, true, "Radeon with ROCm SMI"},
      {0x0300, 0x102b, false, false, false, "Matrox G200"},
      {0x0300, 0x1a03, false, false, false, "ASPEED AST2500"},
      {0x0300, 0x8086, false, true, false, "Intel iGPU with OpenCL"},
      {0x0380, 0x8086, false, true, true, "Intel data-center GPU with Level Zero"},
      {0x0200, 0x15b3, false, false, false, "Mellanox NIC"},
      {0x0680, 0x10de, false, false, false, "NVSwitch bridge"},
      {0x1200, 0x1234, true, false, true, "accelerator with a CUDA device"},
  };
  for (const Case& c : cases)
    EXPECT_EQ(is_gpu_pci_device(c.cls, c.vendor, c.compute, c.opencl), c.gpu) << c.what;
}

TEST(NvmlTest, AbsentOrWorking) {
  const NvmlReport r = read_nvml();
  if (!r.available) {
    EXPECT_FALSE(r.why_not.empty());
    EXPECT_TRUE(r.gpus.empty());
  } else {
    for (const NvmlGpu& g : r.gpus)
      EXPECT_TRUE(normalize_pci_bus_id(g.pci_bus_id).has_value()) << g.pci_bus_id;
  }
}

NvmlGpu nvml_gpu(std::string bus, std::string uuid, std::vector<NvlinkLink> links = {}) {
  return NvmlGpu{std::move(bus), "10de:1db1", std::move(uuid), "Tesla V100-SXM2-16GB",
                 std::move(links)};
}

TEST(NvmlTest, MergeFillsUuidsAndNvlink) {
  Inventory inv = probe_xml("summit-ac922.xml");
  std::vector<NvmlGpu> nvml;
  for (const Gpu& g : inv.gpus) {
    // On Summit each GPU has NVLink to the CPU and to the other two GPUs of its socket.
    std::vector<NvlinkLink> links = {{NvlinkRemote::kCpu, "0004:00:00.1"}};
    const int base = g.index < 3 ? 0 : 3;
    for (int k = base; k < base + 3; ++k) {
      if (k != g.index) links.push_back({NvlinkRemote::kGpu, inv.gpus[k].pci_bus_id});
    }
    nvml.push_back(nvml_gpu(g.pci_bus_id, "GPU-" + std::to_string(g.index), links));
  }
  merge_nvml(nvml, inv);
  ASSERT_EQ(inv.gpus.size(), 6u);
  EXPECT_EQ(inv.gpus[0].uuid, "GPU-0");
  EXPECT_EQ(inv.gpus[0].nvlink_peers, (std::vector<int>{1, 2}));
  EXPECT_EQ(inv.gpus[4].nvlink_peers, (std::vector<int>{3, 5}));
  EXPECT_TRUE(inv.gpus[4].nvlink_cpu);
  EXPECT_FALSE(inv.gpus[4].nvlink_switch);
  EXPECT_EQ(inv.gpus[0].model, "GV100GL [Tesla V100 SXM2 16GB]");  // hwloc's name is kept
}

TEST(NvmlTest, MergeAddsGpusHwlocMissed) {
  Inventory inv = probe_xml("24em64t-2n6c2t-pci.xml");
  inv.gpus[0].nvlink_peers = {2};  // pretend, to see it renumbered
  inv.gpus[2].nvlink_peers = {0};
  merge_nvml({nvml_gpu("0000:11:00.0", "GPU-b"),
              nvml_gpu("0000:08:00.0", "GPU-new", {{NvlinkRemote::kSwitch, "0000:c0:00.0"}})},
             inv);
  ASSERT_EQ(inv.gpus.size(), 4u);
  EXPECT_EQ(gpus(inv),
            (Strings{"0000:06:00.0 numa=0 pkg=0 switch=0000:00:07.0", "0000:08:00.0 numa=- pkg=-",
                     "0000:11:00.0 numa=1 pkg=1 switch=0000:10:07.0",
                     "0000:14:00.0 numa=1 pkg=1 switch=0000:10:03.0"}));
  EXPECT_EQ(inv.gpus[1].uuid, "GPU-new");
  EXPECT_EQ(inv.gpus[1].model, "Tesla V100-SXM2-16GB");
  EXPECT_EQ(inv.gpus[1].os_devices, Strings{"nvml1"});
  EXPECT_TRUE(inv.gpus[1].nvlink_switch);
  EXPECT_EQ(inv.gpus[2].uuid, "GPU-b");
  EXPECT_EQ(inv.gpus[0].nvlink_peers, std::vector<int>{3});
  EXPECT_EQ(inv.gpus[3].nvlink_peers, std::vector<int>{0});
}

}  // namespace
}  // namespace ddl::mapper
