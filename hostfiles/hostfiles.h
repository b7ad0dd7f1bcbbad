#pragma once
// hostfiles: the one header other folders include. Every way users and batch systems name
// hosts (-H lists, hostfiles, rankfiles, LSF and Slurm allocations) -> HostList / Rankfile;
// InputError (file:line:col, the line, a caret) and printable() for user text.

#include "hostfiles/host_list.h"    // Host, HostList, the parsers' entry points
#include "hostfiles/input_error.h"  // InputError, Position, printable
#include "hostfiles/rankfile.h"     // Rankfile: read and written
