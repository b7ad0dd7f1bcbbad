#pragma once
// The canonical text of a parsed rankfile, for the tests of parse_rankfile: what it writes
// parses back to an equal Rankfile (the round trip of rankfile_test and fuzz_rankfile).

#include <string>
#include <vector>

#include "hostfiles/rankfile.h"

namespace ddl::hostfiles {

/// "1:0-2,4", "1:*", "0-3;1:0" as written in a rankfile.
inline std::string format_slots(const std::vector<SlotSpec>& slots) {
  std::string out;
  for (size_t g = 0; g < slots.size(); ++g) {
    const SlotSpec& spec = slots[g];
    if (g > 0) out += ';';
    if (spec.socket) out += std::to_string(*spec.socket) + ":";
    if (spec.all_cores) {
      out += '*';
      continue;
    }
    for (size_t i = 0; i < spec.cpus.size(); ++i) {
      const CpuRange& range = spec.cpus[i];
      if (i > 0) out += ',';
      out += std::to_string(range.first);
      if (range.last != range.first) out += "-" + std::to_string(range.last);
    }
  }
  return out;
}

/// One "rank N=host slot=SPEC" line per entry ("+nK" for a relative node).
inline std::string write_rankfile(const Rankfile& rankfile) {
  std::string out;
  for (const RankfileEntry& entry : rankfile.entries) {
    out += "rank " + std::to_string(entry.rank) + "=";
    out += entry.relative_node ? "+n" + std::to_string(*entry.relative_node) : entry.host;
    if (!entry.slots.empty()) out += " slot=" + format_slots(entry.slots);
    out += '\n';
  }
  return out;
}

}  // namespace ddl::hostfiles
