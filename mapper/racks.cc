#include "mapper/racks.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/text.h"
#include "hostfiles/hostfiles.h"

namespace ddl::mapper {

namespace {

using hostfiles::InputError;
using hostfiles::Position;

constexpr std::array<std::string_view, 4> kKeys = {"SwitchName", "Nodes", "Switches", "LinkSpeed"};

}  // namespace

std::map<std::string, std::string> parse_slurm_topology(std::string_view text,
                                                        std::string_view source) {
  std::map<std::string, std::string> rack_of_host;
  std::map<std::string, int> line_of_host;
  int line_number = 0;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    std::string line(text.substr(start, end - start));
    start = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string content = line.substr(0, line.find('#'));
    std::string switch_name, nodes;
    int nodes_column = 0;
    size_t pos = 0;
    while (pos < content.size()) {
      pos = content.find_first_not_of(" \t", pos);
      if (pos == std::string::npos) break;
      const size_t word_end = std::min(content.find_first_of(" \t", pos), content.size());
      const std::string word = content.substr(pos, word_end - pos);
      const size_t eq = word.find('=');
      const std::string key = word.substr(0, eq);
      const Position where{std::string(source), line_number, static_cast<int>(pos) + 1, line};
      if (std::find(kKeys.begin(), kKeys.end(), key) == kKeys.end() || eq == std::string::npos) {
        throw InputError(where,
                         "unknown entry '" + word + "'" + base::did_you_mean(key, kKeys) +
                             "; topology.conf lines read 'SwitchName=s1 Nodes=node[01-18]'",
                         static_cast<int>(word.size()));
      }
      if (key == "SwitchName") switch_name = word.substr(eq + 1);
      if (key == "Nodes") {
        nodes = word.substr(eq + 1);
        nodes_column = static_cast<int>(pos + eq) + 2;
      }
      pos = word_end;
    }
    if (content.find_first_not_of(" \t") == std::string::npos) continue;
    if (switch_name.empty()) {
      throw InputError(Position{std::string(source), line_number, 1, line},
                       "no SwitchName= on this line; every line names its switch");
    }
    if (nodes.empty()) continue;
    for (std::string& host : hostfiles::expand_hostlist(
             nodes, Position{std::string(source), line_number, nodes_column, line})) {
      if (auto seen = rack_of_host.find(host); seen != rack_of_host.end()) {
        throw InputError(Position{std::string(source), line_number, nodes_column, line},
                         "host '" + host + "' is already under switch '" + seen->second +
                             "' (line " + std::to_string(line_of_host[host]) +
                             "); a host belongs to one leaf switch",
                         static_cast<int>(nodes.size()));
      }
      line_of_host[host] = line_number;
      rack_of_host.emplace(std::move(host), switch_name);
    }
  }
  return rack_of_host;
}

std::map<std::string, std::string> read_slurm_topology(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw InputError(Position{path, 0, 0, {}},
                     std::string("cannot read topology.conf: ") + std::strerror(errno));
  }
  std::stringstream text;
  text << in.rdbuf();
  return parse_slurm_topology(text.str(), path);
}

int hosts_per_rack_from(const std::vector<std::string>& hosts,
                        const std::map<std::string, std::string>& rack_of_host) {
  // Walk the hosts in job order, counting a run per rack; a rack seen again after another one
  // would split its ring, and runs of different lengths would make uneven rings.
  std::vector<std::pair<std::string, int>> runs;
  for (const std::string& host : hosts) {
    const auto it = rack_of_host.find(host);
    if (it == rack_of_host.end()) {
      throw RackError("host '" + host +
                      "' is under no switch in topology.conf; add it to a SwitchName= line");
    }
    if (!runs.empty() && runs.back().first == it->second) {
      ++runs.back().second;
      continue;
    }
    for (const auto& run : runs) {
      if (run.first == it->second) {
        throw RackError("hosts of switch '" + it->second + "' are not listed together (host '" +
                        host +
                        "' comes after another switch's hosts); list each rack's hosts together");
      }
    }
    runs.emplace_back(it->second, 1);
  }
  for (const auto& run : runs) {
    if (run.second != runs.front().second) {
      throw RackError(
          "switches hold different numbers of this job's hosts ('" + runs.front().first +
          "': " + std::to_string(runs.front().second) + ", '" + run.first +
          "': " + std::to_string(run.second) +
          "); the ring layout needs equal racks: use whole racks, or give --nodes or -m");
    }
  }
  return runs.empty() ? 0 : runs.front().second;
}

std::vector<int> ring_dims(int ranks_per_host, int hosts, std::optional<int> hosts_per_rack,
                           std::optional<int> racks_per_aisle) {
  const int per_rack = hosts_per_rack.value_or(hosts);
  if (per_rack < 1 || hosts % per_rack != 0) {
    throw RackError(std::to_string(hosts) + " hosts do not split into racks of " +
                    std::to_string(per_rack) + " (--nodes " + std::to_string(per_rack) +
                    "); give a --nodes that divides " + std::to_string(hosts));
  }
  const int racks = hosts / per_rack;
  const int per_aisle = racks_per_aisle.value_or(racks);
  if (per_aisle < 1 || racks % per_aisle != 0) {
    throw RackError(std::to_string(racks) + " racks do not split into aisles of " +
                    std::to_string(per_aisle) + " (--racks " + std::to_string(per_aisle) +
                    "); give a --racks that divides " + std::to_string(racks));
  }
  return {ranks_per_host, per_rack, per_aisle, racks / per_aisle};
}

}  // namespace ddl::mapper
