#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/check.h"
#include "mapper/inventory.h"

struct hwloc_topology;  // hwloc.h: hwloc_topology_t is a pointer to it

namespace ddl::mapper {

/// What to probe.
struct ProbeOptions {
  /// An hwloc XML recording to read instead of this host ("lstopo --of xml x.xml"); empty: probe
  /// this host. A recording yields only what it recorded: no addresses, speeds or
  /// $CUDA_VISIBLE_DEVICES, and NVML is not asked.
  std::string xml_path;
  /// For this host: ask NVML (libnvidia-ml.so.1, when installed) for GPU UUIDs, names and NVLink.
  bool use_nvml = true;
  /// For this host: take what hwloc finds from the cache of probe_cache.h when its key still
  /// holds ($DDL_PROBE_CACHE=0 turns it off); the live details are read every time.
  bool use_cache = false;
};

/// This host, live, through the cache (ProbeOptions::use_cache): what ddlrun probes itself with.
inline ProbeOptions this_host_cached() {
  ProbeOptions options;
  options.use_cache = true;
  return options;
}

/// This host's hardware could not be read (or the XML could not be loaded). what() names the
/// file or call that failed, the reason, and what to do.
using ProbeError = base::Error<struct ProbeErrorTag>;

/// Something that finds out a host's inventory. The hwloc prober below reads this host or an XML
/// recording; tests and the launcher can pass others (a fixed inventory, one read over ssh).
class Prober {
 public:
  virtual ~Prober() = default;
  /// Throws ProbeError when the hardware cannot be read.
  virtual Inventory probe() = 0;
};

/// A prober that asks hwloc (I/O objects kept), then, on a live host, NVML and the kernel
/// (/sys/class/net, /sys/class/infiniband, getifaddrs) for what hwloc does not record.
std::unique_ptr<Prober> make_hwloc_prober(ProbeOptions options);

/// The same, once: make_hwloc_prober(options)->probe().
Inventory probe_hwloc(const ProbeOptions& options);

/// Whether a PCI device is a GPU, from its class and vendor and whether a GPU runtime (CUDA,
/// NVML, RSMI, or OpenCL/Level Zero) showed an OS device for it:
///  - a CUDA, NVML or RSMI device: yes;
///  - class 0x0302 (3D controller, any vendor): yes;
///  - NVIDIA (0x10de) with any display class 0x03xx: yes; AMD (0x1002) class 0x0380: yes;
///  - an OpenCL or Level Zero device on anything but a VGA-class (0x0300) chip: yes;
///  - anything else, notably the VGA chips of servers (Matrox 0x102b, ASPEED 0x1a03, ATI ES1000)
///    and laptops' integrated graphics: no.
bool is_gpu_pci_device(std::uint16_t class_id, std::uint16_t vendor_id, bool has_compute_osdev,
                       bool has_opencl_osdev);

/// This host's hwloc topology as a PMIx server would discover it for itself (I/O objects that
/// hwloc deems important, the resources this process may use), so that ddlrun's PMIx server
/// takes it instead: loaded from the probe cache's XML copy (probe_cache.h) when `use_cache`
/// and its key still holds, else discovered and written there. Loading that XML takes a
/// fraction of a millisecond; discovering reads sysfs and the configuration space of every PCI
/// device, most of a small launch's time. Marked as this system's topology (binding works). The
/// caller owns it (hwloc_topology_destroy). Throws ProbeError when hwloc cannot read this host.
hwloc_topology* local_topology(bool use_cache);

/// "hwloc:" and the version of the hwloc library this process runs, as PMIx names a topology's
/// source.
std::string hwloc_source();

/// Chooses this process's hwloc plugins before anything else uses hwloc (hwloc loads them all at
/// the first hwloc_topology_init and keeps them while a topology lives): all but GL (X
/// displays), libxml2 (hwloc's own parser reads and writes the same XML) and libpciaccess (the
/// probe turns it off), which no answer of ddlrun's needs and whose libraries (X11, ICU,
/// libpciaccess) take milliseconds to load. HWLOC_PLUGINS_BLACKLIST, when set, is left to hwloc
/// alone. Changes no variable that outlives the call; call it while the process has one thread.
void choose_hwloc_plugins();

}  // namespace ddl::mapper
