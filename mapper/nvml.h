#pragma once

#include <string>
#include <vector>

#include "mapper/inventory.h"

namespace ddl::mapper {

/// Where one NVLink of a GPU leads.
enum class NvlinkRemote {
  kGpu,      ///< another GPU; `pci_bus_id` says which
  kCpu,      ///< the CPU (IBM NPU on POWER8/POWER9)
  kSwitch,   ///< an NVSwitch
  kUnknown,  ///< not a GPU NVML knows, and the driver did not say what
};

/// One active NVLink.
struct NvlinkLink {
  NvlinkRemote remote = NvlinkRemote::kUnknown;
  std::string pci_bus_id;  ///< the far end's, normalized ("0000:04:00.0")

  bool operator==(const NvlinkLink&) const = default;
};

/// One GPU as NVML sees it.
struct NvmlGpu {
  std::string pci_bus_id;  ///< normalized: "0000:04:00.0"
  std::string pci_id;      ///< "10de:1db1"
  std::string uuid;        ///< "GPU-..."
  std::string name;        ///< "Tesla V100-SXM2-16GB"
  std::vector<NvlinkLink> links;

  bool operator==(const NvmlGpu&) const = default;
};

/// What asking NVML gave.
struct NvmlReport {
  bool available = false;  ///< NVML loaded and initialised
  std::string why_not;     ///< when not available: "libnvidia-ml.so.1: cannot open ..."
  std::vector<NvmlGpu> gpus;
};

/// Asks NVML through dlopen("libnvidia-ml.so.1"), so that ddlrun neither links nor needs it.
/// Its absence is normal (no NVIDIA driver): available is false and why_not says why. Never
/// throws for a missing or failing NVML.
NvmlReport read_nvml();

/// Adds what NVML knows to an inventory from hwloc: for each NVML GPU, matched by PCI bus id,
/// the UUID, the model name when hwloc had none, and NVLink peers (GPU indexes), links to the
/// CPU and to NVSwitches. NVML GPUs that hwloc did not see are appended with unknown locality
/// (os_devices "nvml<N>"), and indexes are renumbered in PCI bus id order.
void merge_nvml(const std::vector<NvmlGpu>& nvml, Inventory& inventory);

}  // namespace ddl::mapper
