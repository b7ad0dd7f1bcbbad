#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ddl::mapper {

/// An interface filter in NCCL_SOCKET_IFNAME's syntax (--nic): a comma-separated list of name
/// prefixes ("ib,eth"); a leading '^' turns it into a list to exclude ("^docker,lo"); a '=' after
/// it (or at the start) matches whole names instead of prefixes ("=eth0", "^=docker0").
struct NicFilter {
  bool exclude = false;
  bool exact = false;
  std::vector<std::string> names;  ///< empty: no filter

  /// True when `interface` passes the filter (always, for an empty filter).
  bool matches(std::string_view interface) const;
  /// True when the filter names `interface` itself (not by exclusion): the user asked for it.
  bool selects_explicitly(std::string_view interface) const;
  /// The filter as written: "^=docker0,lo".
  std::string str() const;
};

/// A malformed --nic value; what() names it and the fix.
class NicFilterError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// Parses a --nic / NCCL_SOCKET_IFNAME value. Throws NicFilterError for empty names ("ib,,eth",
/// "^", "=") and names with blanks.
NicFilter parse_nic_filter(std::string_view spec);

/// Loopback, container and virtual interfaces: lo, docker*, veth*, virbr*, br-*, cni*,
/// flannel*, vxlan*. They are never picked unless the filter names them.
bool is_virtual_interface(std::string_view name);

/// The interfaces `filter` lets through, in the order ddlrun prefers them: InfiniBand (ib*)
/// first, then other physical interfaces, each group in the order given. Virtual interfaces
/// (is_virtual_interface) pass only when the filter names them explicitly.
std::vector<std::string> select_interfaces(const std::vector<std::string>& interfaces,
                                           const NicFilter& filter);

}  // namespace ddl::mapper
