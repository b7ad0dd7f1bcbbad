#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hostfiles/host_list.h"

namespace ddl::hostfiles {

/// An inclusive range of CPU numbers: "0-6" is {0, 6}, "3" is {3, 3}.
struct CpuRange {
  int first = 0;
  int last = 0;
  bool operator==(const CpuRange&) const = default;
};

/// One element of Open MPI's slot= list. With a socket, "1:0-2,4" (cores 0-2 and 4 of socket 1)
/// or "1:*" (every core of socket 1); without one, "0-3,8" lists logical CPUs.
struct SlotSpec {
  std::optional<int> socket;
  bool all_cores = false;  ///< "socket:*"
  std::vector<CpuRange> cpus;
  bool operator==(const SlotSpec&) const = default;
};

/// One line "rank N=host slot=SPEC".
struct RankfileEntry {
  int rank = 0;
  std::string host;  ///< host name, or empty when `relative_node` is set ("+n2")
  std::optional<int> relative_node;
  std::vector<SlotSpec> slots;  ///< socket groups are separated by ';' in the file
  int line = 0;                 ///< line in the file it was read from (0 when built in code)
  bool operator==(const RankfileEntry& o) const {
    return rank == o.rank && host == o.host && relative_node == o.relative_node && slots == o.slots;
  }
};

/// An Open MPI rankfile. Entries are kept sorted by rank; ranks are exactly 0..N-1.
struct Rankfile {
  std::vector<RankfileEntry> entries;
  bool operator==(const Rankfile&) const = default;
};

/// Parses rankfile text. Lines: "rank N=host slot=SPEC" ('#' comments, blank lines allowed;
/// "rank N=host" without slot= is allowed). Errors with caret: unknown keys ("slots=" -> did you
/// mean 'slot='?), bad numbers, duplicate ranks (naming the first line), missing ranks
/// ("rank 2 is missing: ranks must be 0..N-1"), empty files.
Rankfile parse_rankfile(std::string_view text, std::string_view source);

/// Reads and parses a rankfile; an unreadable file throws InputError naming it and strerror.
Rankfile read_rankfile(const std::string& path);

/// The hosts a rankfile names, in order of first appearance, each with one slot per rank.
/// Relative nodes ("+n1") refer to `allocation` (an error when it has too few hosts).
/// "First appearance" follows rank order. Errors and each host's origin name `source` (the
/// rankfile's path) and the line of the host's first rank: "ranks.txt:3".
HostList hosts_of(const Rankfile& rankfile, const HostList* allocation = nullptr,
                  std::string_view source = "rankfile");

}  // namespace ddl::hostfiles
