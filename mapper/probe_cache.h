#pragma once

#include <functional>
#include <string>

#include "mapper/inventory.h"

namespace ddl::mapper {

// This host's probe, cached: loading the live hwloc topology is most of what a small local
// launch (`ddlrun -H localhost:4 true`) spends before it starts a rank, and its answer changes
// only when the machine, the kernel's view of it or hwloc's settings change.
//
// How it works: only what hwloc finds (packages, cores, NUMA nodes, GPUs and NICs with their
// PCI places) is cached, as the inventory's YAML in
// ${XDG_CACHE_HOME:-$HOME/.cache}/ddlrun/hwloc/<host name>.yaml under a first line naming a
// hash of the key; what changes without a reboot (addresses, link speeds, port states, NVML,
// $CUDA_VISIBLE_DEVICES, the machine identity) is read live on every probe, as before. The key
// (local_probe_key) is everything that would change hwloc's answer: the machine identity (machine
// id, boot id, network namespace, host name), the mount namespace, the running ddlrun binary
// (device, inode, size, modification time), hwloc's version, the CPUs and memory nodes online and
// allowed (cgroup and cpuset), the PCI devices, network interfaces and RDMA devices present, and
// every HWLOC_* variable and the variables that select GPUs. A file whose key differs, that does
// not parse, that is not a regular file owned by this user (a link, another user's), or that
// sits in a directory not private to this user is ignored and rewritten: the probe then runs as
// without a cache. Writes go to a private temporary file renamed over the old one, so ddlruns
// that race read either a whole old file or a whole new one. DDL_PROBE_CACHE=0 turns it off.
// Beside it, <host name>.xml keeps hwloc's own XML of this host under the same key, for the
// PMIx server (probe_hwloc.h: local_topology), which would otherwise discover it again.

/// The key of this host's cached probe: a text naming everything that would change what hwloc
/// finds here (see above). Two calls return the same text unless something in it changed.
std::string local_probe_key();

/// ${XDG_CACHE_HOME:-$HOME/.cache}/ddlrun/hwloc; "" when the cache is off ($DDL_PROBE_CACHE is
/// 0, no, off or false) or neither variable is set.
std::string local_probe_cache_dir();

/// The inventory `compute` returns, through the cache in `dir` under `key`: read from
/// <dir>/<host name>.yaml when that file holds `key`, else computed and written there (the
/// directory made, 0700). With an empty `dir`, compute() alone. `hit`, when given, says whether
/// the file answered. Errors of compute() pass through; the cache's own never do.
Inventory cached_probe(const std::string& dir, const std::string& key,
                       const std::function<Inventory()>& compute, bool* hit = nullptr);

/// The same for this host's hwloc topology as XML, in <dir>/<host name>.xml: what that file
/// holds when it holds `key` and accept() takes it (an XML that hwloc loads), else compute()'s
/// answer, written there.
std::string cached_topology_xml(const std::string& dir, const std::string& key,
                                const std::function<std::string()>& compute,
                                const std::function<bool(const std::string&)>& accept,
                                bool* hit = nullptr);

}  // namespace ddl::mapper
