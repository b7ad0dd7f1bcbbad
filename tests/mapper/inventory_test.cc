#include "mapper/inventory.h"

#include <gtest/gtest.h>

namespace ddl::mapper {
namespace {

/// A small host with every field set, some to text a careless YAML writer would mangle.
Inventory sample() {
  Inventory inv;
  inv.hostname = "null";
  inv.cuda_visible_devices = "0,1";
  Package p0{0, "POWER9, altivec supported", {}};
  p0.cores.push_back(Core{8, 0, {0, 1, 2, 3}});
  p0.cores.push_back(Core{-1, 1, {4, 6}});
  inv.packages.push_back(p0);
  inv.packages.push_back(Package{1, "", {Core{0, 2, {8}}}});
  inv.numa_nodes.push_back(NumaNode{0, 0, {0, 1, 2, 3, 4, 6}, 68556816384});
  inv.numa_nodes.push_back(NumaNode{1, 1, {8}, 1024});
  inv.numa_nodes.push_back(NumaNode{255, std::nullopt, {}, 17179869184});
  Gpu g0;
  g0.index = 0;
  g0.vendor = "nvidia";
  g0.pci_id = "10de:1db1";
  g0.model = "Tesla V100-SXM2-16GB";
  g0.pci_bus_id = "0004:04:00.0";
  g0.locality = Locality{0, 0, "0004:00:00.0", "0004:[00-06]"};
  g0.uuid = "GPU-77bf6b9a-6906-5a93-d28b-b77d2c23d1d2";
  g0.nvlink_peers = {1};
  g0.nvlink_cpu = true;
  g0.os_devices = {"cuda0", "nvml0"};
  Gpu g1;
  g1.index = 1;
  g1.vendor = "0x1234";
  g1.pci_bus_id = "0035:03:00.0";
  g1.nvlink_peers = {0};
  g1.nvlink_switch = true;
  inv.gpus = {g0, g1};
  Nic ib;
  ib.name = "mlx5_0";
  ib.kind = NicKind::kInfiniband;
  ib.pci_id = "15b3:1019";
  ib.pci_bus_id = "0003:01:00.0";
  ib.locality = Locality{0, 0, "0003:00:00.0", "0003:[00-01]"};
  ib.ports = {NicPort{1, "active", "infiniband", 100000}, NicPort{2, "down", "", std::nullopt}};
  ib.interfaces = {NetInterface{"ib0",
                                "80:00:00:48:fe:80:00:00:00:00:00:00:78:e7:d1:03:00:21:55:35",
                                {"10.1.0.5", "fd00::5"},
                                100000}};
  Nic eth;
  eth.name = "yes";
  eth.kind = NicKind::kEthernet;
  eth.interfaces = {NetInterface{"yes", "", {}, std::nullopt}};
  Nic roce;
  roce.name = "mlx5_4";
  roce.kind = NicKind::kRoce;
  inv.nics = {ib, eth, roce};
  return inv;
}

constexpr std::string_view kSampleYaml = R"(version: 1
hostname: "null"
cuda_visible_devices: "0,1"
packages:
  - os_index: 0
    cpu_model: "POWER9, altivec supported"
    cores:
      - {os_index: 8, logical_index: 0, pus: "0-3"}
      - {os_index: -1, logical_index: 1, pus: "4,6"}
  - os_index: 1
    cores:
      - {os_index: 0, logical_index: 2, pus: "8"}
numa_nodes:
  - {os_index: 0, package: 0, pus: "0-4,6", memory_bytes: 68556816384}
  - {os_index: 1, package: 1, pus: "8", memory_bytes: 1024}
  - {os_index: 255, pus: "", memory_bytes: 17179869184}
gpus:
  - index: 0
    vendor: "nvidia"
    pci_id: "10de:1db1"
    model: "Tesla V100-SXM2-16GB"
    pci_bus_id: "0004:04:00.0"
    locality: {numa_node: 0, package: 0, pci_switch: "0004:00:00.0", host_bridge: "0004:[00-06]"}
    uuid: "GPU-77bf6b9a-6906-5a93-d28b-b77d2c23d1d2"
    nvlink_peers: [1]
    nvlink_cpu: true
    os_devices: ["cuda0", "nvml0"]
  - index: 1
    vendor: "0x1234"
    pci_bus_id: "0035:03:00.0"
    locality: {}
    nvlink_peers: [0]
    nvlink_switch: true
nics:
  - name: "mlx5_0"
    kind: infiniband
    pci_id: "15b3:1019"
    pci_bus_id: "0003:01:00.0"
    locality: {numa_node: 0, package: 0, pci_switch: "0003:00:00.0", host_bridge: "0003:[00-01]"}
    ports:
      - {number: 1, state: "active", link_layer: "infiniband", speed_mbps: 100000}
      - {number: 2, state: "down"}
    interfaces:
      - {name: "ib0", hw_address: "80:00:00:48:fe:80:00:00:00:00:00:00:78:e7:d1:03:00:21:55:35", addresses: ["10.1.0.5", "fd00::5"], speed_mbps: 100000}
  - name: "yes"
    kind: ethernet
    locality: {}
    interfaces:
      - {name: "yes"}
  - name: "mlx5_4"
    kind: roce
    locality: {}
)";

TEST(InventoryTest, EmitsYaml) {
  EXPECT_EQ(to_yaml(sample()), kSampleYaml);
}

TEST(InventoryTest, RoundTrips) {
  const Inventory inv = sample();
  EXPECT_EQ(inventory_from_yaml(to_yaml(inv), "sample"), inv);
}

TEST(InventoryTest, RoundTripsAnEmptyHost) {
  const Inventory empty;
  EXPECT_EQ(to_yaml(empty),
            "version: 1\nhostname: \"\"\npackages: []\nnuma_nodes: []\ngpus: []\nnics: []\n");
  EXPECT_EQ(inventory_from_yaml(to_yaml(empty), "empty"), empty);
}

TEST(InventoryTest, RoundTripsAwkwardText) {
  Inventory inv;
  for (const char* name : {"~", "true", "123", "a: b", "[x]", "#c", "'q\"", "ünï"}) {
    inv.hostname = name;
    inv.cuda_visible_devices = name;
    EXPECT_EQ(inventory_from_yaml(to_yaml(inv), "t"), inv) << name;
  }
}

TEST(InventoryTest, IdentityRoundTripsAndOldInventoriesHaveNone) {
  Inventory inv;
  inv.hostname = "node1";
  inv.identity = "machine=0123abcd;boot=4567-89ef;netns=4026531840;host=node1";
  const std::string yaml = to_yaml(inv);
  EXPECT_EQ(yaml,
            "version: 1\nhostname: \"node1\"\nidentity: "
            "\"machine=0123abcd;boot=4567-89ef;netns=4026531840;host=node1\"\npackages: "
            "[]\nnuma_nodes: []\ngpus: []\nnics: []\n");
  EXPECT_EQ(inventory_from_yaml(yaml, "t"), inv);
  // What a ddlrun without the field wrote (a cached probe) still reads, with no identity.
  const Inventory old = inventory_from_yaml(
      "version: 1\nhostname: node1\npackages: []\nnuma_nodes: []\ngpus: []\nnics: []\n", "old");
  EXPECT_EQ(old.identity, "");
  EXPECT_EQ(old.hostname, "node1");
}

TEST(InventoryTest, Counts) {
  const Inventory inv = sample();
  EXPECT_EQ(inv.core_count(), 3);
  EXPECT_EQ(inv.pu_count(), 7);
  EXPECT_EQ(inv.packages[0].pus(), (std::vector<int>{0, 1, 2, 3, 4, 6}));
  ASSERT_NE(inv.find_gpu("0035:03:00.0"), nullptr);
  EXPECT_EQ(inv.find_gpu("0035:03:00.0")->index, 1);
  EXPECT_EQ(inv.find_gpu("0000:00:00.0"), nullptr);
  ASSERT_NE(inv.find_nic("mlx5_4"), nullptr);
  EXPECT_EQ(inv.find_nic("mlx5_4")->kind, NicKind::kRoce);
  EXPECT_EQ(inv.find_nic("eth9"), nullptr);
}

TEST(InventoryTest, NicKindNames) {
  EXPECT_EQ(to_string(NicKind::kInfiniband), "infiniband");
  EXPECT_EQ(to_string(NicKind::kRoce), "roce");
  EXPECT_EQ(to_string(NicKind::kEthernet), "ethernet");
}

TEST(CpuListTest, Formats) {
  const auto fmt = [](std::vector<int> v) { return format_cpu_list(v); };
  EXPECT_EQ(fmt({}), "");
  EXPECT_EQ(fmt({5}), "5");
  EXPECT_EQ(fmt({0, 1, 2, 3, 8}), "0-3,8");
  EXPECT_EQ(fmt({0, 12}), "0,12");
  EXPECT_EQ(fmt({3, 1, 2, 2, 10, 11}), "1-3,10-11");
}

TEST(CpuListTest, Parses) {
  EXPECT_EQ(parse_cpu_list(""), std::vector<int>{});
  EXPECT_EQ(parse_cpu_list("0-3,8"), (std::vector<int>{0, 1, 2, 3, 8}));
  EXPECT_EQ(parse_cpu_list(" 8 , 0-1 "), (std::vector<int>{0, 1, 8}));
  EXPECT_EQ(parse_cpu_list("2,2,1-2"), (std::vector<int>{1, 2}));
  for (const char* bad : {"a", "1,", ",1", "3-1", "-1", "1-", "1--2", "+1", "1 2", "99999999999"})
    EXPECT_EQ(parse_cpu_list(bad), std::nullopt) << bad;
}

TEST(PciBusIdTest, Normalizes) {
  EXPECT_EQ(normalize_pci_bus_id("0000:04:00.0"), "0000:04:00.0");
  EXPECT_EQ(normalize_pci_bus_id("00000000:3B:00.0"), "0000:3b:00.0");
  EXPECT_EQ(normalize_pci_bus_id("04:00.1"), "0000:04:00.1");
  EXPECT_EQ(normalize_pci_bus_id("10000:e1:1f.7"), "10000:e1:1f.7");
  for (const char* bad : {"", "0000:04:00", "0000:04:20.0", "0000:04:00.8", "0000:104:00.0",
                          "x:04:00.0", "123456789:00:00.0", "0000:04:00.0.1"})
    EXPECT_EQ(normalize_pci_bus_id(bad), std::nullopt) << bad;
}

TEST(PciBusIdTest, OrdersNumerically) {
  EXPECT_TRUE(pci_bus_id_less("0000:04:00.0", "0000:11:00.0"));
  EXPECT_TRUE(pci_bus_id_less("0004:06:00.0", "0035:03:00.0"));
  EXPECT_TRUE(pci_bus_id_less("ffff:00:00.0", "10000:00:00.0"));
  EXPECT_FALSE(pci_bus_id_less("0000:04:00.1", "0000:04:00.0"));
  EXPECT_TRUE(pci_bus_id_less("0000:04:00.0", ""));
}

/// The InventoryError text for `yaml`, or "" when it parses.
std::string error_of(const std::string& yaml) {
  try {
    inventory_from_yaml(yaml, "node1");
  } catch (const InventoryError& e) {
    return e.what();
  }
  return "";
}

constexpr std::string_view kFix =
    "; write inventories with 'ddlrun --probe' of the same ddlrun version";

std::string with(std::string_view from, std::string_view to) {
  std::string text(kSampleYaml);
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(InventoryErrorTest, NotYaml) {
  EXPECT_EQ(error_of("version: 1\nhostname: [\n"),
            "node1:3:1: not valid YAML: end of sequence flow not found" + std::string(kFix));
}

TEST(InventoryErrorTest, NotUtf8) {
  // YAML is Unicode text; bytes that are not UTF-8 would not survive a round trip.
  const std::string got = error_of(with("hostname: \"null\"", "hostname: \"\xe2x\""));
  EXPECT_NE(got.find("field 'hostname': not UTF-8 text (byte 0xe2 at position 1)"),
            std::string::npos)
      << got;
}

TEST(InventoryErrorTest, Empty) {
  EXPECT_EQ(error_of(""), "node1: empty inventory" + std::string(kFix));
}

TEST(InventoryErrorTest, NotAMap) {
  EXPECT_EQ(error_of("- 1\n"),
            "node1:1:1: expected a map of fields, got a list" + std::string(kFix));
}

TEST(InventoryErrorTest, WrongShapes) {
  EXPECT_EQ(error_of(with("hostname: \"null\"", "hostname: {a: 1}")),
            "node1:2:11: field 'hostname': expected text, got a map" + std::string(kFix));
  EXPECT_EQ(error_of("version: 1\nhostname: a\npackages: 3\nnuma_nodes: []\ngpus: []\nnics: []\n"),
            "node1:3:11: field 'packages': expected a list, got '3'" + std::string(kFix));
  EXPECT_EQ(error_of("? [a]\n: 1\n"),
            "node1:1:3: expected field names, got a list" + std::string(kFix));
}

TEST(InventoryErrorTest, OtherVersion) {
  EXPECT_EQ(error_of(with("version: 1", "version: 2")),
            "node1:1:10: field 'version': this ddlrun reads inventory version 1, not 2" +
                std::string(kFix));
}

TEST(InventoryErrorTest, MissingField) {
  EXPECT_EQ(error_of(with("nics:", "nix:")),
            "node1:34:1: field 'nix': unknown field (did you mean 'nics'?)" + std::string(kFix));
  EXPECT_EQ(error_of("version: 1\nhostname: a\npackages: []\nnuma_nodes: []\ngpus: []\n"),
            "node1:1:1: field 'nics': missing" + std::string(kFix));
}

TEST(InventoryErrorTest, UnknownFieldWithoutSuggestion) {
  EXPECT_EQ(error_of(with("    uuid:", "    colour:")),
            "node1:24:5: field 'gpus[0].colour': unknown field (known here: index, vendor, "
            "pci_id, model, pci_bus_id, locality, uuid, nvlink_peers, nvlink_cpu, "
            "nvlink_switch, os_devices)" +
                std::string(kFix));
}

TEST(InventoryErrorTest, BadNumber) {
  EXPECT_EQ(error_of(with("logical_index: 1,", "logical_index: one,")),
            "node1:9:39: field 'packages[0].cores[1].logical_index': expected a whole number, "
            "got 'one'" +
                std::string(kFix));
  EXPECT_EQ(error_of(with("memory_bytes: 1024", "memory_bytes: -1")),
            "node1:15:55: field 'numa_nodes[1].memory_bytes': -1 is out of range "
            "0..9223372036854775807" +
                std::string(kFix));
}

TEST(InventoryErrorTest, BadCpuList) {
  EXPECT_EQ(error_of(with("pus: \"4,6\"", "pus: \"6-4\"")),
            "node1:9:47: field 'packages[0].cores[1].pus': expected a CPU list like '0-3,8', "
            "got '6-4'" +
                std::string(kFix));
}

TEST(InventoryErrorTest, BadBusId) {
  EXPECT_EQ(error_of(with("pci_bus_id: \"0035:03:00.0\"", "pci_bus_id: \"35:3\"")),
            "node1:30:17: field 'gpus[1].pci_bus_id': expected a PCI bus id like "
            "'0000:04:00.0', got '35:3'" +
                std::string(kFix));
}

TEST(InventoryErrorTest, BadKind) {
  EXPECT_EQ(error_of(with("kind: roce", "kind: rocev2")),
            "node1:51:11: field 'nics[2].kind': unknown kind 'rocev2' (did you mean 'roce'?)" +
                std::string(kFix));
  EXPECT_EQ(error_of(with("kind: roce", "kind: [x]")),
            "node1:51:11: field 'nics[2].kind': expected text, got a list" + std::string(kFix));
}

TEST(InventoryErrorTest, BadBool) {
  EXPECT_EQ(error_of(with("nvlink_cpu: true", "nvlink_cpu: yes")),
            "node1:26:17: field 'gpus[0].nvlink_cpu': expected true or false, got 'yes'" +
                std::string(kFix));
}

TEST(InventoryErrorTest, GpusOutOfOrder) {
  EXPECT_EQ(error_of(with("  - index: 1", "  - index: 7")),
            "node1:28:12: field 'gpus[1].index': expected 1 (GPUs are listed in index order), "
            "got 7" +
                std::string(kFix));
}

TEST(InventoryErrorTest, NvlinkToNowhere) {
  EXPECT_EQ(error_of(with("nvlink_peers: [0]", "nvlink_peers: [2]")),
            "node1:32:20: field 'gpus[1].nvlink_peers[0]': GPU 2 is not another GPU of this host" +
                std::string(kFix));
}

TEST(InventoryErrorTest, PuInTwoCores) {
  EXPECT_EQ(error_of(with("pus: \"8\"}", "pus: \"3\"}")),
            "node1:12:46: field 'packages[1].cores[0].pus': PU 3 is also in packages[0].cores[0]" +
                std::string(kFix));
}

TEST(InventoryErrorTest, CoreWithoutPus) {
  EXPECT_EQ(error_of(with("pus: \"8\"}", "pus: \"\"}")),
            "node1:12:46: field 'packages[1].cores[0].pus': a core needs at least one PU" +
                std::string(kFix));
}

TEST(InventoryErrorTest, MissingNestedField) {
  EXPECT_EQ(error_of(with("{number: 2, state: \"down\"}", "{state: \"down\"}")),
            "node1:42:9: field 'nics[0].ports[1].number': missing" + std::string(kFix));
}

TEST(InventoryTest, AcceptsHandWrittenSpellings) {
  // Bus ids in NVML's spelling are normalized; plain scalars are fine.
  const Inventory inv = inventory_from_yaml(
      "version: 1\nhostname: n1\npackages:\n  - os_index: 0\n    cores:\n"
      "      - {os_index: 0, logical_index: 0, pus: 0-1}\nnuma_nodes: []\n"
      "gpus:\n  - {index: 0, vendor: nvidia, pci_bus_id: 00000000:3B:00.0}\nnics: []\n",
      "hand.yaml");
  EXPECT_EQ(inv.hostname, "n1");
  EXPECT_EQ(inv.gpus.at(0).pci_bus_id, "0000:3b:00.0");
  EXPECT_EQ(inv.packages.at(0).cores.at(0).pus, (std::vector<int>{0, 1}));
}

}  // namespace
}  // namespace ddl::mapper
