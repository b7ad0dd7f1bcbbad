#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/check.h"

namespace ddl::mapper {

/// Leaf switch (rack) of each host named by a Slurm topology.conf: "SwitchName=s1 Nodes=n[01-18]".
/// Lines that list only Switches= (upper levels) name no hosts. '#' starts a comment. Throws
/// hostfiles::InputError (file, line, caret) for unknown keys (with a suggestion), a line
/// without SwitchName=, bad host ranges, and a host listed under two leaf switches.
std::map<std::string, std::string> parse_slurm_topology(std::string_view text,
                                                        std::string_view source);

/// Reads and parses a topology.conf; an unreadable file names the path and strerror.
std::map<std::string, std::string> read_slurm_topology(const std::string& path);

/// A ring layout request that does not fit the hosts; what() names the numbers and the fix.
using RackError = base::Error<struct RackErrorTag>;

/// Hosts per rack from a host -> rack map, for `hosts` in job order: every rack must hold the
/// same number of the job's hosts, listed one rack after another (racks contiguous in job
/// order), and every host must be in the map. Throws RackError naming the host or racks.
int hosts_per_rack_from(const std::vector<std::string>& hosts,
                        const std::map<std::string, std::string>& rack_of_host);

/// IBM's four ring dimensions, innermost first: ranks per host x hosts per rack x racks per
/// aisle x aisles. `hosts_per_rack` (--nodes) defaults to all hosts (one rack), and
/// `racks_per_aisle` (--racks) to all racks (one aisle). 18 Summit nodes: {6, 18, 1, 1}.
/// Throws RackError when a count does not divide the next level evenly.
std::vector<int> ring_dims(int ranks_per_host, int hosts, std::optional<int> hosts_per_rack,
                           std::optional<int> racks_per_aisle);

}  // namespace ddl::mapper
