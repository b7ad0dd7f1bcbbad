#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/check.h"

namespace ddl::mapper {

// What one host has: its packages, cores and hardware threads (PUs), NUMA nodes, GPUs and NICs,
// with where each device attaches. `ddlrun-probe` prints it as YAML on the host itself (or from
// an hwloc XML recording); the placement reads it back, so it runs with no hardware present.
//
// CPU numbers are always Linux's (OS indexes, as taskset, numactl, jsrun and mpirun take them),
// never hwloc's logical indexes, except `Core::logical_index`.

/// Where a device attaches: the CPUs near it and its place in the PCIe tree.
struct Locality {
  std::optional<int> numa_node;  ///< OS index of the one NUMA node it is local to; unset if unknown
  std::optional<int> package;  ///< OS index of the package (socket) it hangs off; unset if unknown
  /// Bus id of the PCIe root port above the device ("0000:00:03.0"): devices with the same value
  /// sit below one PCIe switch (or one port) and reach each other without crossing the host
  /// bridge. Empty when the device hangs directly off its host bridge, or when unknown.
  std::string pci_switch;
  /// The host bridge (root complex) above the device, as hwloc writes it: "0000:[00-0f]".
  std::string host_bridge;

  bool operator==(const Locality&) const = default;
};

/// One core and its hardware threads.
struct Core {
  int os_index = -1;      ///< Linux's core id; not unique across packages; -1 when unknown
  int logical_index = 0;  ///< hwloc's logical index: unique, 0..cores-1 in topology order
  std::vector<int> pus;   ///< OS indexes of its hardware threads, ascending

  bool operator==(const Core&) const = default;
};

/// One processor package (socket).
struct Package {
  int os_index = 0;
  std::string cpu_model;    ///< "POWER9, altivec supported"; empty when not recorded
  std::vector<Core> cores;  ///< in logical order

  /// OS indexes of all its hardware threads, ascending.
  std::vector<int> pus() const;

  bool operator==(const Package&) const = default;
};

/// One NUMA node (a memory bank and the CPUs local to it).
struct NumaNode {
  int os_index = 0;
  std::optional<int> package;  ///< the package holding all its CPUs; unset when it has none
  std::vector<int> pus;  ///< OS indexes of its local hardware threads; empty for CPU-less memory
  std::uint64_t memory_bytes = 0;

  bool operator==(const NumaNode&) const = default;
};

/// One GPU: one PCI device, however many OS devices (cuda0, nvml0, opencl0d0) describe it.
struct Gpu {
  int index = 0;           ///< position in PCI bus id order, 0..n-1 (CUDA_DEVICE_ORDER=PCI_BUS_ID)
  std::string vendor;      ///< "nvidia", "amd", "intel", else the PCI vendor id "0x1234"
  std::string pci_id;      ///< PCI "vendor:device", "10de:1db1"
  std::string model;       ///< "Tesla V100-SXM2-16GB"; empty when unknown
  std::string pci_bus_id;  ///< "0004:04:00.0"
  Locality locality;
  std::string uuid;               ///< "GPU-77bf6b9a-..." when NVML (or the recording) gives it
  std::vector<int> nvlink_peers;  ///< indexes of the GPUs it has NVLink to, ascending
  bool nvlink_cpu = false;        ///< NVLink to a CPU (POWER8/POWER9)
  bool nvlink_switch = false;     ///< NVLink to an NVSwitch (then peers through it are implied)
  /// The OS devices seen for it, in hwloc's order: "cuda0", "nvml0", "opencl0d0", "rsmi0".
  /// Empty when it was found as a bare PCI device (no driver runtime visible).
  std::vector<std::string> os_devices;

  bool operator==(const Gpu&) const = default;
};

/// How a NIC moves data.
enum class NicKind {
  kInfiniband,  ///< an RDMA device on InfiniBand (or Omni-Path)
  kRoce,        ///< an RDMA device on Ethernet
  kEthernet,    ///< a network interface without RDMA (TCP only)
};

/// "infiniband", "roce", "ethernet".
std::string_view to_string(NicKind kind);

/// One port of an RDMA device.
struct NicPort {
  int number = 1;
  std::string state;       ///< "active", "down", "init", "armed", "active_defer"; empty if unknown
  std::string link_layer;  ///< "infiniband" or "ethernet"; empty when not recorded (XML)
  std::optional<int> speed_mbps;  ///< live probes only

  bool operator==(const NicPort&) const = default;
};

/// One network interface (what sockets bind to: eth0, ib0).
struct NetInterface {
  std::string name;
  std::string hw_address;              ///< MAC (or 20-byte IPoIB address) when recorded
  std::vector<std::string> addresses;  ///< IPv4/IPv6 addresses; live probes only
  std::optional<int> speed_mbps;       ///< link speed; live probes only

  bool operator==(const NetInterface&) const = default;
};

/// One NIC. An RDMA device (mlx5_0) is one NIC with the interfaces of its PCI device (ib0); a
/// network interface without an RDMA device (eth0) is a NIC of kind kEthernet by itself.
struct Nic {
  std::string name;  ///< the RDMA device (mlx5_0), else the interface (eth0)
  NicKind kind = NicKind::kEthernet;
  std::string pci_id;      ///< "15b3:1019"; empty for a virtual interface
  std::string pci_bus_id;  ///< "0003:01:00.0"; empty for a virtual interface
  Locality locality;
  std::vector<NicPort> ports;  ///< RDMA ports; empty for kEthernet
  std::vector<NetInterface> interfaces;

  bool operator==(const Nic&) const = default;
};

/// The hardware of one host.
struct Inventory {
  std::string hostname;
  std::vector<Package> packages;     ///< in topology order
  std::vector<NumaNode> numa_nodes;  ///< in topology order
  std::vector<Gpu> gpus;             ///< in PCI bus id order; gpus[i].index == i
  std::vector<Nic> nics;             ///< in PCI bus id order, then virtual interfaces by name
  std::optional<std::string> cuda_visible_devices;  ///< $CUDA_VISIBLE_DEVICES when set
  /// Which machine this is (read_machine_identity, machine.h), so that one machine named twice
  /// is found out; empty for a recording (XML) or an inventory written before the field.
  std::string identity;

  /// Number of cores, and of hardware threads, over all packages.
  int core_count() const;
  int pu_count() const;
  /// The GPU with this (normalized) PCI bus id, or null.
  const Gpu* find_gpu(std::string_view pci_bus_id) const;
  /// The NIC with this name (mlx5_0, eth0), or null.
  const Nic* find_nic(std::string_view name) const;

  bool operator==(const Inventory&) const = default;
};

/// The inventory format this build writes and reads (the `version:` field).
inline constexpr int kInventoryVersion = 1;

/// A malformed inventory. what() names the source, the line and column, the field
/// ("gpus[1].pci_bus_id") and what to do.
using InventoryError = base::Error<struct InventoryErrorTag>;

/// The inventory as YAML (`version: 1` first). Fields that are unset or empty are left out.
std::string to_yaml(const Inventory& inventory);

/// Reads what to_yaml() wrote; inventory_from_yaml(to_yaml(x), s) == x. `source` names the text
/// in errors ("inventory of node1", "a.yaml"). Unknown fields are errors, so that a typo or a
/// mismatched ddlrun version is not silently ignored. Throws InventoryError.
Inventory inventory_from_yaml(std::string_view text, std::string_view source);

/// Linux's CPU list syntax for ascending or unordered indexes: {0,1,2,3,8} -> "0-3,8". The same
/// text comm::CpuSet writes into topology files (it does the work); throws comm::TopologyError
/// for an index below 0 or above 1048575.
std::string format_cpu_list(std::span<const int> cpus);

/// Parses "0-3,8" (the inverse of format_cpu_list) with comm::CpuSet::parse; "" is the empty
/// list. Returns the indexes ascending and without repeats, or nullopt when the text is not a
/// CPU list or names an index above 1048575.
std::optional<std::vector<int>> parse_cpu_list(std::string_view text);

/// "0000:04:00.0" from "00000000:04:00.0", "0000:04:00.0" or "04:00.0" (any case); nullopt when
/// the text is not a PCI bus id. Domains above 0xffff are kept as they are.
std::optional<std::string> normalize_pci_bus_id(std::string_view text);

/// PCI order: by domain, bus, device, function, compared as numbers (domains may be longer than
/// four digits). Texts that are not bus ids sort after those that are, by text.
bool pci_bus_id_less(std::string_view a, std::string_view b);

}  // namespace ddl::mapper
