#include "mapper/probe_hwloc.h"

// How the probe works
//
// hwloc loads the topology of this host (or an XML recording) with every I/O object kept. CPUs
// come from the Package, Core and PU objects (OS indexes), memory from the NUMA nodes. Then each
// PCI device is looked at once: it is a GPU when a GPU runtime showed an OS device for it (cuda0,
// nvml0, opencl0d0, rsmi0 - several for one GPU) or when its PCI class says so
// (is_gpu_pci_device). An OpenFabrics OS device (mlx5_0) is an RDMA NIC, holding the network
// interfaces of its PCI device (ib0); any other network interface (eth0) is an Ethernet NIC.
// Every device gets its locality: the NUMA node and package of its nearest CPU-side ancestor,
// the PCIe root port above it (devices below the same one share a switch) and its host bridge.
// NVLink comes from hwloc's "NVLinkBandwidth" matrix when recorded. A live probe then adds
// what hwloc does not record: NVML's UUIDs and NVLink (nvml.h), interface addresses and speeds,
// RDMA port link layers, virtual interfaces, the hostname and $CUDA_VISIBLE_DEVICES.

#include <arpa/inet.h>
#include <hwloc.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <system_error>

#include "mapper/machine.h"
#include "mapper/nvml.h"
#include "mapper/probe_cache.h"

namespace ddl::mapper {

namespace {

/// An hwloc topology, destroyed with this object.
class Topology {
 public:
  Topology() {
    if (hwloc_topology_init(&topology_) != 0) {
      throw ProbeError(std::string("hwloc_topology_init failed: ") + std::strerror(errno));
    }
  }
  ~Topology() { hwloc_topology_destroy(topology_); }
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;

  hwloc_topology_t get() const { return topology_; }

 private:
  hwloc_topology_t topology_ = nullptr;
};

int os_index_of(hwloc_obj_t obj) {
  return obj->os_index == HWLOC_UNKNOWN_INDEX ? -1 : static_cast<int>(obj->os_index);
}

std::string info(hwloc_obj_t obj, const char* name) {
  const char* v = hwloc_obj_get_info_by_name(obj, name);
  return v ? std::string(v) : std::string();
}

std::vector<int> bits_of(hwloc_const_bitmap_t set) {
  std::vector<int> out;
  if (!set) return out;
  int i = -1;
  while ((i = hwloc_bitmap_next(set, i)) != -1)
    out.push_back(i);
  return out;
}

std::string bus_id(unsigned domain, unsigned bus, unsigned dev, unsigned func) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", domain, bus, dev, func);
  return buf;
}

std::string bus_id(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& pci) {
  return bus_id(pci.domain, pci.bus, pci.dev, pci.func);
}

std::string pci_id(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& pci) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04x:%04x", pci.vendor_id, pci.device_id);
  return buf;
}

std::string vendor_name(std::uint16_t vendor_id) {
  switch (vendor_id) {
    case 0x10de:
      return "nvidia";
    case 0x1002:
      return "amd";
    case 0x8086:
      return "intel";
    default: {
      char buf[8];
      std::snprintf(buf, sizeof buf, "0x%04x", vendor_id);
      return buf;
    }
  }
}

/// The PCI device an OS device hangs off, or null.
hwloc_obj_t pci_parent(hwloc_obj_t osdev) {
  for (hwloc_obj_t p = osdev->parent; p; p = p->parent) {
    if (p->type == HWLOC_OBJ_PCI_DEVICE) return p;
    if (p->type != HWLOC_OBJ_OS_DEVICE) return nullptr;
  }
  return nullptr;
}

std::vector<hwloc_obj_t> os_devices_of(hwloc_obj_t pcidev) {
  std::vector<hwloc_obj_t> out;
  for (hwloc_obj_t c = pcidev->io_first_child; c; c = c->next_sibling) {
    if (c->type == HWLOC_OBJ_OS_DEVICE) out.push_back(c);
  }
  return out;
}

/// The GPU runtime an OS device belongs to, from its subtype ("CUDA") or, in recordings without
/// subtypes, its name ("cuda0"): "cuda", "nvml", "rsmi", "opencl", "levelzero", or "".
std::string gpu_runtime(hwloc_obj_t osdev) {
  const std::string subtype = osdev->subtype ? osdev->subtype : "";
  const std::string name = osdev->name ? osdev->name : "";
  const auto is = [&](const char* sub, const char* prefix) {
    return strcasecmp(subtype.c_str(), sub) == 0 || (subtype.empty() && name.rfind(prefix, 0) == 0);
  };
  if (is("CUDA", "cuda")) return "cuda";
  if (is("NVML", "nvml")) return "nvml";
  if (is("RSMI", "rsmi")) return "rsmi";
  if (is("OpenCL", "opencl")) return "opencl";
  if (is("LevelZero", "ze")) return "levelzero";
  return "";
}

/// Locality of an I/O object, from its CPU-side ancestor and the PCI bridges above it.
Locality locality_of(hwloc_topology_t topo, hwloc_obj_t io) {
  Locality l;
  const hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, io);
  if (anc && anc->cpuset && !hwloc_bitmap_iszero(anc->cpuset)) {
    hwloc_obj_t pkg = nullptr;
    while ((pkg = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PACKAGE, pkg))) {
      if (hwloc_bitmap_isincluded(anc->cpuset, pkg->cpuset)) l.package = os_index_of(pkg);
    }
    // The NUMA node: the one node with CPUs among those local to the ancestor.
    std::vector<int> nodes;
    hwloc_obj_t node = nullptr;
    while ((node = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, node))) {
      if (anc->nodeset && hwloc_bitmap_isset(anc->nodeset, node->os_index) &&
          hwloc_bitmap_intersects(node->cpuset, anc->cpuset)) {
        nodes.push_back(os_index_of(node));
      }
    }
    if (nodes.size() == 1) l.numa_node = nodes[0];
  }
  hwloc_obj_t p = io->parent;
  while (p && (p->type == HWLOC_OBJ_OS_DEVICE || p->type == HWLOC_OBJ_PCI_DEVICE))
    p = p->parent;
  hwloc_obj_t root_port = nullptr;
  for (; p && p->type == HWLOC_OBJ_BRIDGE; p = p->parent) {
    const auto& b = p->attr->bridge;
    if (b.upstream_type == HWLOC_OBJ_BRIDGE_PCI) {
      root_port = p;
    } else if (b.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%04x:[%02x-%02x]", b.downstream.pci.domain,
                    b.downstream.pci.secondary_bus, b.downstream.pci.subordinate_bus);
      l.host_bridge = buf;
    }
  }
  if (root_port) l.pci_switch = bus_id(root_port->attr->bridge.upstream.pci);
  return l;
}

void read_cpus(hwloc_topology_t topo, Inventory& inv) {
  std::vector<hwloc_obj_t> packages;
  hwloc_obj_t obj = nullptr;
  while ((obj = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PACKAGE, obj))) {
    packages.push_back(obj);
    inv.packages.push_back(Package{os_index_of(obj), info(obj, "CPUModel"), {}});
  }
  if (packages.empty()) {  // some VMs and ARM boards: the machine is the one package
    const hwloc_obj_t root = hwloc_get_root_obj(topo);
    packages.push_back(root);
    inv.packages.push_back(Package{0, info(root, "CPUModel"), {}});
  }
  const auto package_of = [&](hwloc_obj_t o) -> Package& {
    for (size_t i = 0; i < packages.size(); ++i) {
      if (hwloc_bitmap_isincluded(o->cpuset, packages[i]->cpuset)) return inv.packages[i];
    }
    return inv.packages.front();
  };
  // Cores, or PUs standing for cores where hwloc found no cores.
  const hwloc_obj_type_t core_type =
      hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
  obj = nullptr;
  while ((obj = hwloc_get_next_obj_by_type(topo, core_type, obj))) {
    Core core{os_index_of(obj), static_cast<int>(obj->logical_index), bits_of(obj->cpuset)};
    if (core.pus.empty()) continue;  // a core whose PUs are all disallowed
    package_of(obj).cores.push_back(std::move(core));
  }
  obj = nullptr;
  while ((obj = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, obj))) {
    NumaNode n;
    n.os_index = os_index_of(obj);
    n.pus = bits_of(obj->cpuset);
    n.memory_bytes = obj->attr ? obj->attr->numanode.local_memory : 0;
    if (!n.pus.empty()) {
      for (size_t i = 0; i < packages.size(); ++i) {
        if (hwloc_bitmap_isincluded(obj->cpuset, packages[i]->cpuset)) {
          n.package = inv.packages[i].os_index;
        }
      }
    }
    inv.numa_nodes.push_back(std::move(n));
  }
}

void read_gpus(hwloc_topology_t topo, Inventory& inv) {
  hwloc_obj_t pci = nullptr;
  while ((pci = hwloc_get_next_pcidev(topo, pci))) {
    const auto& attr = pci->attr->pcidev;
    Gpu g;
    bool compute = false;
    bool opencl = false;
    for (hwloc_obj_t os : os_devices_of(pci)) {
      const std::string runtime = gpu_runtime(os);
      if (runtime.empty()) continue;
      (runtime == "opencl" || runtime == "levelzero" ? opencl : compute) = true;
      g.os_devices.push_back(os->name ? os->name : runtime);
      if (g.model.empty()) g.model = info(os, "GPUModel");
      for (const char* key : {"NVIDIAUUID", "AMDUUID", "LevelZeroUUID"}) {
        if (g.uuid.empty()) g.uuid = info(os, key);
      }
    }
    if (!is_gpu_pci_device(attr.class_id, attr.vendor_id, compute, opencl)) continue;
    if (g.model.empty()) g.model = info(pci, "PCIDevice");
    g.vendor = vendor_name(attr.vendor_id);
    g.pci_id = pci_id(attr);
    g.pci_bus_id = bus_id(attr);
    g.locality = locality_of(topo, pci);
    inv.gpus.push_back(std::move(g));
  }
  std::stable_sort(inv.gpus.begin(), inv.gpus.end(), [](const Gpu& a, const Gpu& b) {
    return pci_bus_id_less(a.pci_bus_id, b.pci_bus_id);
  });
  for (size_t i = 0; i < inv.gpus.size(); ++i)
    inv.gpus[i].index = static_cast<int>(i);
}

/// NVLink from hwloc's "NVLinkBandwidth" matrix (recorded by hwloc's NVML backend): between
/// GPUs (through their NVML OS devices), to packages (POWER's NVLink to the CPU), or to anything
/// else (NVSwitch).
void read_nvlink(hwloc_topology_t topo, Inventory& inv) {
  unsigned nr = 1;
  hwloc_distances_s* d = nullptr;
  if (hwloc_distances_get_by_name(topo, "NVLinkBandwidth", &nr, &d, 0) != 0 || nr == 0) return;
  std::vector<int> gpu(d->nbobjs, -1);
  for (unsigned i = 0; i < d->nbobjs; ++i) {
    const hwloc_obj_t o = d->objs[i];
    const hwloc_obj_t p = o->type == HWLOC_OBJ_OS_DEVICE ? pci_parent(o) : nullptr;
    if (const Gpu* g = p ? inv.find_gpu(bus_id(p->attr->pcidev)) : nullptr) gpu[i] = g->index;
  }
  for (unsigned i = 0; i < d->nbobjs; ++i) {
    if (gpu[i] < 0) continue;
    Gpu& g = inv.gpus[gpu[i]];
    for (unsigned j = 0; j < d->nbobjs; ++j) {
      if (i == j || d->values[i * d->nbobjs + j] == 0) continue;
      if (gpu[j] >= 0) {
        if (gpu[j] != gpu[i]) g.nvlink_peers.push_back(gpu[j]);
      } else if (d->objs[j]->type == HWLOC_OBJ_PACKAGE) {
        g.nvlink_cpu = true;
      } else {
        g.nvlink_switch = true;
      }
    }
    std::sort(g.nvlink_peers.begin(), g.nvlink_peers.end());
    g.nvlink_peers.erase(std::unique(g.nvlink_peers.begin(), g.nvlink_peers.end()),
                         g.nvlink_peers.end());
  }
  hwloc_distances_release(topo, d);
}

/// Octets in a hardware address "78:e7:d1:21:55:30".
size_t address_octets(const std::string& hw) {
  return hw.empty() ? 0 : static_cast<size_t>(std::count(hw.begin(), hw.end(), ':')) + 1;
}

/// The port state as the kernel spells it, from hwloc's "Port1State" digit.
std::string port_state_name(const std::string& digit) {
  static const std::map<std::string, std::string> kNames = {
      {"1", "down"}, {"2", "init"}, {"3", "armed"}, {"4", "active"}, {"5", "active_defer"}};
  const auto it = kNames.find(digit);
  return it == kNames.end() ? digit : it->second;
}

void read_nics(hwloc_topology_t topo, Inventory& inv) {
  std::set<hwloc_obj_t> claimed;  // network interfaces that belong to an RDMA device
  hwloc_obj_t os = nullptr;
  while ((os = hwloc_get_next_osdev(topo, os))) {
    if (os->attr->osdev.type != HWLOC_OBJ_OSDEV_OPENFABRICS || !os->name) continue;
    Nic n;
    n.name = os->name;
    n.kind = NicKind::kInfiniband;
    const hwloc_obj_t pci = pci_parent(os);
    if (pci) {
      n.pci_id = pci_id(pci->attr->pcidev);
      n.pci_bus_id = bus_id(pci->attr->pcidev);
      for (hwloc_obj_t c : os_devices_of(pci)) {
        if (c->attr->osdev.type != HWLOC_OBJ_OSDEV_NETWORK || !c->name) continue;
        n.interfaces.push_back(NetInterface{c->name, info(c, "Address"), {}, {}});
        claimed.insert(c);
      }
    }
    n.locality = locality_of(topo, os);
    bool lid = false;
    for (int port = 1; port < 256; ++port) {
      const std::string prefix = "Port" + std::to_string(port);
      const std::string state = info(os, (prefix + "State").c_str());
      if (state.empty()) break;
      n.ports.push_back(NicPort{port, port_state_name(state), "", {}});
      const std::string l = info(os, (prefix + "LID").c_str());
      lid |= !l.empty() && std::strtol(l.c_str(), nullptr, 0) != 0;
    }
    // hwloc records no link layer: a LID or an IPoIB interface means InfiniBand; Ethernet
    // interfaces only, and no LID, mean RoCE. With neither, InfiniBand (Omni-Path, bare HCAs).
    const bool ipoib =
        std::any_of(n.interfaces.begin(), n.interfaces.end(), [](const NetInterface& i) {
          return address_octets(i.hw_address) == 20 || i.name.rfind("ib", 0) == 0;
        });
    if (!lid && !ipoib && !n.interfaces.empty()) n.kind = NicKind::kRoce;
    inv.nics.push_back(std::move(n));
  }
  os = nullptr;
  while ((os = hwloc_get_next_osdev(topo, os))) {
    if (os->attr->osdev.type != HWLOC_OBJ_OSDEV_NETWORK || !os->name || claimed.count(os)) continue;
    Nic n;
    n.name = os->name;
    const std::string hw = info(os, "Address");
    n.kind = address_octets(hw) == 20 ? NicKind::kInfiniband : NicKind::kEthernet;
    if (const hwloc_obj_t pci = pci_parent(os)) {
      n.pci_id = pci_id(pci->attr->pcidev);
      n.pci_bus_id = bus_id(pci->attr->pcidev);
    }
    n.locality = locality_of(topo, os);
    n.interfaces.push_back(NetInterface{os->name, hw, {}, {}});
    inv.nics.push_back(std::move(n));
  }
  std::stable_sort(inv.nics.begin(), inv.nics.end(), [](const Nic& a, const Nic& b) {
    if (a.pci_bus_id.empty() != b.pci_bus_id.empty()) return !a.pci_bus_id.empty();
    if (a.pci_bus_id != b.pci_bus_id) return pci_bus_id_less(a.pci_bus_id, b.pci_bus_id);
    return a.name < b.name;
  });
}

// --- Live only: what the kernel knows and hwloc does not record. ---------------------------------

std::optional<std::string> read_line(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return line;
}

std::optional<int> read_int(const std::filesystem::path& path) {
  const std::optional<std::string> s = read_line(path);
  if (!s) return std::nullopt;
  char* end = nullptr;
  const long v = std::strtol(s->c_str(), &end, 10);
  if (end == s->c_str()) return std::nullopt;
  return static_cast<int>(v);
}

/// Interfaces and their addresses.
using Addresses = std::vector<std::pair<std::string, std::vector<std::string>>>;

/// Non-loopback interfaces that are up, with their IPv4/IPv6 addresses (link-local IPv6 left
/// out: unusable without a scope), in the order getifaddrs gives them.
Addresses interface_addresses() {
  Addresses out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (const ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_name || (a->ifa_flags & IFF_LOOPBACK) || !(a->ifa_flags & IFF_UP)) continue;
    auto it =
        std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == a->ifa_name; });
    if (it == out.end()) it = out.insert(out.end(), {a->ifa_name, {}});
    if (!a->ifa_addr) continue;
    char buf[INET6_ADDRSTRLEN] = {};
    if (a->ifa_addr->sa_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
      if (inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf)) it->second.push_back(buf);
    } else if (a->ifa_addr->sa_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr)) continue;
      if (inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf)) it->second.push_back(buf);
    }
  }
  freeifaddrs(list);
  return out;
}

/// An interface's addresses and link speed, from getifaddrs and sysfs.
void add_interface_details(NetInterface& i, const Addresses& addresses) {
  for (const auto& [name, addrs] : addresses) {
    if (name == i.name) i.addresses = addrs;
  }
  if (std::optional<int> speed =
          read_int(std::filesystem::path("/sys/class/net") / i.name / "speed")) {
    if (*speed > 0) i.speed_mbps = *speed;
  }
}

/// An RDMA device's ports from sysfs when hwloc recorded none, each port's state, link layer
/// and rate, and its kind from the link layers: the kernel settles InfiniBand or RoCE.
void add_rdma_port_details(Nic& n) {
  namespace fs = std::filesystem;
  const fs::path ports = fs::path("/sys/class/infiniband") / n.name / "ports";
  if (n.ports.empty()) {  // hwloc recorded none: list them from sysfs
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(ports, ec)) {
      const int number = std::atoi(entry.path().filename().c_str());
      if (number > 0) n.ports.push_back(NicPort{number, "", "", {}});
    }
    std::sort(n.ports.begin(), n.ports.end(),
              [](const NicPort& a, const NicPort& b) { return a.number < b.number; });
  }
  bool ethernet = false;
  bool infiniband = false;
  for (NicPort& p : n.ports) {
    const fs::path port = ports / std::to_string(p.number);
    if (p.state.empty()) {  // "4: ACTIVE"
      if (std::optional<std::string> state = read_line(port / "state")) {
        p.state = port_state_name(state->substr(0, 1));
      }
    }
    if (std::optional<std::string> ll = read_line(port / "link_layer")) {
      std::string lower = *ll;
      std::transform(lower.begin(), lower.end(), lower.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      p.link_layer = lower;
      ethernet |= lower == "ethernet";
      infiniband |= lower == "infiniband";
    }
    if (std::optional<std::string> rate = read_line(port / "rate")) {  // "100 Gb/sec (4X EDR)"
      const double gbps = std::strtod(rate->c_str(), nullptr);
      if (gbps > 0) p.speed_mbps = static_cast<int>(gbps * 1000);
    }
  }
  if (ethernet && !infiniband) n.kind = NicKind::kRoce;
  if (infiniband) n.kind = NicKind::kInfiniband;
}

/// Interfaces hwloc does not attach to a PCI device (virtio in some VMs, bonds, containers'
/// veth): Ethernet NICs without locality, when they are up and have an address, by name.
std::vector<Nic> virtual_nics(const Inventory& inv, const Addresses& addresses) {
  namespace fs = std::filesystem;
  std::set<std::string> known;
  for (const Nic& n : inv.nics) {
    for (const NetInterface& i : n.interfaces)
      known.insert(i.name);
  }
  std::vector<Nic> out;
  for (const auto& [name, addrs] : addresses) {
    if (known.count(name) || addrs.empty()) continue;
    Nic n;
    n.name = name;
    const std::optional<int> type = read_int(fs::path("/sys/class/net") / name / "type");
    n.kind = type && *type == 32 ? NicKind::kInfiniband : NicKind::kEthernet;  // ARPHRD_INFINIBAND
    NetInterface i{
        name, read_line(fs::path("/sys/class/net") / name / "address").value_or(""), {}, {}};
    add_interface_details(i, addresses);
    n.interfaces.push_back(std::move(i));
    out.push_back(std::move(n));
  }
  std::sort(out.begin(), out.end(), [](const Nic& a, const Nic& b) { return a.name < b.name; });
  return out;
}

/// What the kernel knows of the network and hwloc does not record: addresses, speeds, RDMA
/// ports and link layers, and interfaces outside the PCI tree.
void add_live_network_details(Inventory& inv) {
  const Addresses addresses = interface_addresses();
  for (Nic& n : inv.nics) {
    for (NetInterface& i : n.interfaces)
      add_interface_details(i, addresses);
    if (n.kind != NicKind::kEthernet) add_rdma_port_details(n);
  }
  for (Nic& n : virtual_nics(inv, addresses))
    inv.nics.push_back(std::move(n));
}

std::string this_hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

/// Reads the topology into an Inventory: everything hwloc knows, live or recorded.
Inventory inventory_of(hwloc_topology_t topo) {
  Inventory inv;
  inv.hostname = info(hwloc_get_root_obj(topo), "HostName");
  read_cpus(topo, inv);
  read_gpus(topo, inv);
  read_nvlink(topo, inv);
  read_nics(topo, inv);
  return inv;
}

class HwlocProber : public Prober {
 public:
  explicit HwlocProber(ProbeOptions options) : options_(std::move(options)) {}

  Inventory probe() override {
    if (!options_.xml_path.empty()) {
      Topology topo;
      hwloc_topology_set_io_types_filter(topo.get(), HWLOC_TYPE_FILTER_KEEP_ALL);
      load_xml(topo);
      return inventory_of(topo.get());
    }
    const std::string cache_dir = options_.use_cache ? local_probe_cache_dir() : "";
    Inventory inv =
        cache_dir.empty() ? load_live() : cached_probe(cache_dir, local_probe_key(), load_live);
    inv.hostname = this_hostname();
    inv.identity = read_machine_identity();
    if (const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES")) inv.cuda_visible_devices = cvd;
    if (options_.use_nvml) {
      const NvmlReport nvml = read_nvml();
      if (nvml.available) merge_nvml(nvml.gpus, inv);
    }
    add_live_network_details(inv);
    return inv;
  }

 private:
  /// What hwloc finds on this host, before the live details.
  static Inventory load_live() {
    Topology topo;
    hwloc_topology_set_io_types_filter(topo.get(), HWLOC_TYPE_FILTER_KEEP_ALL);
    // PCI devices come from the Linux backend (sysfs). hwloc's libpciaccess component would
    // add only vendor and device names from pci.ids, and leaks on every load.
    hwloc_topology_set_components(topo.get(), HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
    if (hwloc_topology_load(topo.get()) != 0) {
      throw ProbeError(std::string("cannot read this host's topology with hwloc: ") +
                       std::strerror(errno) + "; check that /sys and /proc are mounted");
    }
    return inventory_of(topo.get());
  }

  void load_xml(Topology& topo) const {
    const std::string& path = options_.xml_path;
    const std::string fix = "; record one with 'lstopo --of xml " + path + "'";
    if (access(path.c_str(), R_OK) != 0) {
      throw ProbeError("cannot load hwloc XML '" + path + "': " + std::strerror(errno) + fix);
    }
    if (std::filesystem::is_directory(path)) {
      throw ProbeError("cannot load hwloc XML '" + path + "': it is a directory" + fix);
    }
    if (hwloc_topology_set_xml(topo.get(), path.c_str()) != 0 ||
        hwloc_topology_load(topo.get()) != 0) {
      throw ProbeError("cannot load hwloc XML '" + path +
                       "': not an hwloc topology (hwloc: " + std::strerror(errno) + ")" + fix);
    }
  }

  ProbeOptions options_;
};

}  // namespace

bool is_gpu_pci_device(std::uint16_t class_id, std::uint16_t vendor_id, bool has_compute_osdev,
                       bool has_opencl_osdev) {
  constexpr std::uint16_t kVga = 0x0300;
  constexpr std::uint16_t k3d = 0x0302;
  constexpr std::uint16_t kOtherDisplay = 0x0380;
  constexpr std::uint16_t kNvidia = 0x10de;
  constexpr std::uint16_t kAmd = 0x1002;
  if (has_compute_osdev || class_id == k3d) return true;
  if ((class_id >> 8) == 0x03 && vendor_id == kNvidia) return true;
  if (class_id == kOtherDisplay && vendor_id == kAmd) return true;
  return has_opencl_osdev && class_id != kVga;
}

namespace {

/// A topology loaded from `xml` (hwloc's XML) and marked as this system's; nullptr when hwloc
/// cannot load it.
hwloc_topology_t topology_from_xml(const std::string& xml) {
  hwloc_topology_t t = nullptr;
  if (hwloc_topology_init(&t) != 0) return nullptr;
  hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_ALL);  // all that was written
  if (hwloc_topology_set_xmlbuffer(t, xml.c_str(), static_cast<int>(xml.size()) + 1) != 0 ||
      hwloc_topology_set_flags(t, HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM) != 0 ||
      hwloc_topology_load(t) != 0) {
    hwloc_topology_destroy(t);
    return nullptr;
  }
  return t;
}

/// This host's topology as PMIx's own discovery loads it (pmix_hwloc.c: I/O filter "important",
/// no flags), as XML.
std::string discover_topology_xml() {
  Topology topo;
  hwloc_topology_set_io_types_filter(topo.get(), HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  hwloc_topology_set_components(topo.get(), HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
  char* buffer = nullptr;
  int length = 0;
  if (hwloc_topology_load(topo.get()) != 0 ||
      hwloc_topology_export_xmlbuffer(topo.get(), &buffer, &length, 0) != 0) {
    throw ProbeError(std::string("cannot read this host's topology with hwloc: ") +
                     std::strerror(errno) + "; check that /sys and /proc are mounted");
  }
  std::string xml(buffer, length > 0 ? static_cast<size_t>(length) - 1 : 0);
  hwloc_free_xmlbuffer(topo.get(), buffer);
  return xml;
}

}  // namespace

hwloc_topology* local_topology(bool use_cache) {
  const std::string dir = use_cache ? local_probe_cache_dir() : "";
  hwloc_topology_t loaded = nullptr;
  const auto accept = [&](const std::string& xml) {
    loaded = topology_from_xml(xml);
    return loaded != nullptr;
  };
  const std::string xml =
      cached_topology_xml(dir, dir.empty() ? "" : local_probe_key(), discover_topology_xml, accept);
  if (loaded == nullptr) loaded = topology_from_xml(xml);
  if (loaded == nullptr) {
    throw ProbeError("hwloc cannot load the XML it wrote of this host's topology (" +
                     std::to_string(xml.size()) + " bytes)");
  }
  return loaded;
}

std::string hwloc_source() {
  const unsigned v = hwloc_get_api_version();
  return "hwloc:" + std::to_string(v >> 16) + "." + std::to_string((v >> 8) & 0xff) + "." +
         std::to_string(v & 0xff);
}

void choose_hwloc_plugins() {
  static bool chosen = false;
  if (chosen) return;
  chosen = true;
  if (std::getenv("HWLOC_PLUGINS_BLACKLIST") != nullptr) return;
  setenv("HWLOC_PLUGINS_BLACKLIST", "hwloc_gl,hwloc_xml_libxml,hwloc_pci", 1);
  // Never destroyed: while one topology lives, hwloc keeps the plugins it loaded now.
  static hwloc_topology_t keep = nullptr;
  hwloc_topology_init(&keep);
  unsetenv("HWLOC_PLUGINS_BLACKLIST");
}

std::unique_ptr<Prober> make_hwloc_prober(ProbeOptions options) {
  return std::make_unique<HwlocProber>(std::move(options));
}

Inventory probe_hwloc(const ProbeOptions& options) {
  return make_hwloc_prober(options)->probe();
}

}  // namespace ddl::mapper
