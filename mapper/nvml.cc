#include "mapper/nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <map>

namespace ddl::mapper {

namespace {

// The few NVML declarations used, from NVML's public API (nvml.h is not needed to build).
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr unsigned kNvlinkMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS (12 before Hopper, 6 before A100)
constexpr unsigned kUuidBufferSize = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE
constexpr unsigned kNameBufferSize = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE

struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;  // device id << 16 | vendor id
  unsigned int pciSubSystemId;
  char busId[32];  // "00000000:04:00.0"
};
static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t must match NVML's layout");

enum NvmlNvlinkDeviceType { kNvlinkGpu = 0, kNvlinkIbmNpu = 1, kNvlinkSwitch = 2 };

/// libnvidia-ml.so.1, open for as long as this object lives.
class Library {
 public:
  Library() : handle_(dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL)) {}
  ~Library() {
    if (handle_) dlclose(handle_);
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  void* handle() const { return handle_; }

  /// The symbol as a function pointer of type F, or null.
  template <typename F>
  F symbol(const char* name) const {
    return reinterpret_cast<F>(dlsym(handle_, name));
  }

 private:
  void* handle_;
};

struct Api {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*count)(unsigned*) = nullptr;
  nvmlReturn_t (*handle_by_index)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*pci_info)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned) = nullptr;
  // NVLink, optional (old drivers, GPUs without NVLink).
  nvmlReturn_t (*nvlink_state)(nvmlDevice_t, unsigned, int*) = nullptr;
  nvmlReturn_t (*nvlink_remote_pci)(nvmlDevice_t, unsigned, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*nvlink_remote_type)(nvmlDevice_t, unsigned, int*) = nullptr;

  std::string error(nvmlReturn_t r) const {
    const char* s = error_string ? error_string(r) : nullptr;
    return s ? std::string(s) : "NVML error " + std::to_string(r);
  }
};

std::string bus_id_of(const nvmlPciInfo_t& pci) {
  char raw[sizeof pci.busId + 1] = {};
  std::copy(std::begin(pci.busId), std::end(pci.busId), raw);
  if (std::optional<std::string> id = normalize_pci_bus_id(raw)) return *id;
  // Older drivers may leave busId empty; the numbers are always there (function 0).
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.0", pci.domain, pci.bus, pci.device);
  return buf;
}

std::string pci_id_of(const nvmlPciInfo_t& pci) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04x:%04x", pci.pciDeviceId & 0xffffu, pci.pciDeviceId >> 16);
  return buf;
}

std::vector<NvlinkLink> read_links(const Api& api, nvmlDevice_t dev) {
  std::vector<NvlinkLink> links;
  if (!api.nvlink_state || !api.nvlink_remote_pci) return links;
  for (unsigned link = 0; link < kNvlinkMaxLinks; ++link) {
    int active = 0;
    if (api.nvlink_state(dev, link, &active) != kNvmlSuccess || !active) continue;
    nvmlPciInfo_t remote{};
    if (api.nvlink_remote_pci(dev, link, &remote) != kNvmlSuccess) continue;
    NvlinkLink l;
    l.pci_bus_id = bus_id_of(remote);
    int type = -1;
    if (api.nvlink_remote_type && api.nvlink_remote_type(dev, link, &type) == kNvmlSuccess) {
      l.remote = type == kNvlinkGpu      ? NvlinkRemote::kGpu
                 : type == kNvlinkIbmNpu ? NvlinkRemote::kCpu
                 : type == kNvlinkSwitch ? NvlinkRemote::kSwitch
                                         : NvlinkRemote::kUnknown;
    }
    links.push_back(std::move(l));
  }
  return links;
}

}  // namespace

NvmlReport read_nvml() {
  NvmlReport report;
  const Library lib;
  if (!lib.handle()) {
    const char* err = dlerror();
    report.why_not = err ? err : "libnvidia-ml.so.1: cannot be loaded";
    return report;
  }
  Api api;
  api.init = lib.symbol<decltype(api.init)>("nvmlInit_v2");
  api.shutdown = lib.symbol<decltype(api.shutdown)>("nvmlShutdown");
  api.error_string = lib.symbol<decltype(api.error_string)>("nvmlErrorString");
  api.count = lib.symbol<decltype(api.count)>("nvmlDeviceGetCount_v2");
  api.handle_by_index = lib.symbol<decltype(api.handle_by_index)>("nvmlDeviceGetHandleByIndex_v2");
  api.pci_info = lib.symbol<decltype(api.pci_info)>("nvmlDeviceGetPciInfo_v3");
  api.uuid = lib.symbol<decltype(api.uuid)>("nvmlDeviceGetUUID");
  api.name = lib.symbol<decltype(api.name)>("nvmlDeviceGetName");
  api.nvlink_state = lib.symbol<decltype(api.nvlink_state)>("nvmlDeviceGetNvLinkState");
  api.nvlink_remote_pci =
      lib.symbol<decltype(api.nvlink_remote_pci)>("nvmlDeviceGetNvLinkRemotePciInfo_v2");
  api.nvlink_remote_type =
      lib.symbol<decltype(api.nvlink_remote_type)>("nvmlDeviceGetNvLinkRemoteDeviceType");
  if (!api.init || !api.shutdown || !api.count || !api.handle_by_index || !api.pci_info ||
      !api.uuid || !api.name) {
    report.why_not =
        "libnvidia-ml.so.1 lacks nvmlInit_v2 or nvmlDeviceGetPciInfo_v3 (driver too old)";
    return report;
  }
  if (const nvmlReturn_t r = api.init(); r != kNvmlSuccess) {
    report.why_not = "nvmlInit_v2: " + api.error(r);
    return report;
  }
  unsigned count = 0;
  if (const nvmlReturn_t r = api.count(&count); r != kNvmlSuccess) {
    report.why_not = "nvmlDeviceGetCount_v2: " + api.error(r);
    api.shutdown();
    return report;
  }
  report.available = true;
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t dev = nullptr;
    nvmlPciInfo_t pci{};
    // A GPU NVML cannot open (lost, or not ours in a container) is left to hwloc.
    if (api.handle_by_index(i, &dev) != kNvmlSuccess) continue;
    if (api.pci_info(dev, &pci) != kNvmlSuccess) continue;
    NvmlGpu gpu;
    gpu.pci_bus_id = bus_id_of(pci);
    gpu.pci_id = pci_id_of(pci);
    char buf[std::max(kUuidBufferSize, kNameBufferSize)] = {};
    if (api.uuid(dev, buf, kUuidBufferSize) == kNvmlSuccess) gpu.uuid = buf;
    std::fill(std::begin(buf), std::end(buf), '\0');
    if (api.name(dev, buf, kNameBufferSize) == kNvmlSuccess) gpu.name = buf;
    gpu.links = read_links(api, dev);
    report.gpus.push_back(std::move(gpu));
  }
  api.shutdown();
  return report;
}

void merge_nvml(const std::vector<NvmlGpu>& nvml, Inventory& inventory) {
  std::vector<Gpu>& gpus = inventory.gpus;
  // GPUs hwloc missed (no PCI access in a container): add them, then renumber in PCI order.
  const size_t known = gpus.size();
  for (size_t i = 0; i < nvml.size(); ++i) {
    if (inventory.find_gpu(nvml[i].pci_bus_id)) continue;
    Gpu g;
    g.vendor = "nvidia";
    g.pci_id = nvml[i].pci_id;
    g.pci_bus_id = nvml[i].pci_bus_id;
    g.index = -1;
    g.os_devices.push_back("nvml" + std::to_string(i));
    gpus.push_back(std::move(g));
  }
  if (gpus.size() != known) {
    std::stable_sort(gpus.begin(), gpus.end(), [](const Gpu& a, const Gpu& b) {
      return pci_bus_id_less(a.pci_bus_id, b.pci_bus_id);
    });
    std::map<int, int> renumber;  // old index -> new
    for (size_t i = 0; i < gpus.size(); ++i) {
      if (gpus[i].index >= 0) renumber[gpus[i].index] = static_cast<int>(i);
      gpus[i].index = static_cast<int>(i);
    }
    for (Gpu& g : gpus) {
      for (int& peer : g.nvlink_peers)
        peer = renumber.at(peer);
    }
  }

  std::map<std::string, int> index_of;
  for (const Gpu& g : gpus)
    index_of[g.pci_bus_id] = g.index;
  for (const NvmlGpu& n : nvml) {
    Gpu& g = gpus[index_of.at(n.pci_bus_id)];
    if (!n.uuid.empty()) g.uuid = n.uuid;
    if (g.model.empty()) g.model = n.name;
    for (const NvlinkLink& l : n.links) {
      const auto peer = index_of.find(l.pci_bus_id);
      if (peer != index_of.end() && peer->second != g.index) {
        g.nvlink_peers.push_back(peer->second);
      } else if (l.remote == NvlinkRemote::kCpu) {
        g.nvlink_cpu = true;
      } else if (l.remote == NvlinkRemote::kSwitch) {
        g.nvlink_switch = true;
      }
    }
    std::sort(g.nvlink_peers.begin(), g.nvlink_peers.end());
    g.nvlink_peers.erase(std::unique(g.nvlink_peers.begin(), g.nvlink_peers.end()),
                         g.nvlink_peers.end());
  }
}

}  // namespace ddl::mapper
