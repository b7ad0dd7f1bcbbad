#pragma once
// comm (libddl) as the launcher side sees it: the one header other folders include. The
// topology file (Topology, its reader and writer, CPU sets, the --mode text) that the mapper
// writes and every rank reads, and the rendezvous server ddlrun runs for its own launchers.
// Training programs use the public API instead: <ddl/ddl.h>, <ddl/ddl.hpp>, `import ddl`.

#include "comm/bootstrap/bootstrap.h"       // RendezvousServer
#include "comm/bootstrap/rank_variables.h"  // rank_variables: who sets which rank variable
#include "comm/mode.h"                      // Mode: "p:6x18x1x1"
#include "comm/topology.h"                  // Topology, CpuSet, read/write_topology_file
