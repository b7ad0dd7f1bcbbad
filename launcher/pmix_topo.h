#pragma once

#include <functional>
#include <string>

namespace ddl::launcher {

// This host's hwloc topology for the PMIx servers of this process (pmix_server/server.cc
// implements this). PMIx_server_init discovers the topology itself unless it is given one, reading
// sysfs and the configuration space of every PCI device once more: most of a small launch's time,
// although ddlrun's probe already knows the answer. ddlrun's main provides it
// (mapper::local_topology, through the probe cache); code that provides none (unit tests) lets PMIx
// discover it.

/// An hwloc topology (hwloc_topology_t) and its source as PMIx names it ("hwloc:2.9.0").
struct HostTopology {
  void* topology = nullptr;
  std::string source;
};

/// Sets where this process's PMIx server takes the topology from: `load` runs once, when the
/// first server starts; what it returns is kept for the life of the process (PMIx keeps the
/// pointer). A null topology or an exception: PMIx discovers it itself.
void provide_host_topology(std::function<HostTopology()> load);

}  // namespace ddl::launcher
