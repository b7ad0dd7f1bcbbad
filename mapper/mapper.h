#pragma once
// mapper: the one header other folders include. Each host's hardware (probed with hwloc here
// or over ssh, or read from hwloc XML) -> an Inventory; hosts, inventories and the user's
// request -> a Placement (place()): one rank per GPU with its cores and NIC, and the rings.

#include "mapper/cost.h"          // the cost model: fabric levels, predicted allreduce times
#include "mapper/inventory.h"     // Inventory: the model and its YAML
#include "mapper/link_probe.h"    // --probe-links: the agents that measure, over ssh
#include "mapper/links.h"         // --probe-links: pairs, racks and levels measured
#include "mapper/machine.h"       // this machine's name and addresses
#include "mapper/nic_filter.h"    // --nic
#include "mapper/place.h"         // place(): the plan
#include "mapper/placement.h"     // PlacementError, plural
#include "mapper/probe_hwloc.h"   // probing this host, hwloc XML
#include "mapper/probe_remote.h"  // other hosts' probes read, cached
#include "mapper/racks.h"         // topology.conf: racks and aisles
