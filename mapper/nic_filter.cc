#include "mapper/nic_filter.h"

#include <algorithm>
#include <array>

namespace ddl::mapper {

namespace {

bool name_matches(std::string_view interface, std::string_view name, bool exact) {
  return exact ? interface == name : interface.starts_with(name);
}

}  // namespace

bool NicFilter::matches(std::string_view interface) const {
  if (names.empty()) return true;
  const bool listed = std::any_of(names.begin(), names.end(), [&](const std::string& n) {
    return name_matches(interface, n, exact);
  });
  return exclude ? !listed : listed;
}

bool NicFilter::selects_explicitly(std::string_view interface) const {
  return !exclude && !names.empty() && matches(interface);
}

std::string NicFilter::str() const {
  std::string s = std::string(exclude ? "^" : "") + (exact ? "=" : "");
  for (size_t i = 0; i < names.size(); ++i)
    s += (i ? "," : "") + names[i];
  return s;
}

NicFilter parse_nic_filter(std::string_view spec) {
  NicFilter filter;
  std::string_view rest = spec;
  if (rest.starts_with('^')) {
    filter.exclude = true;
    rest.remove_prefix(1);
  }
  if (rest.starts_with('=')) {
    filter.exact = true;
    rest.remove_prefix(1);
  }
  if (rest.empty()) {
    if (spec.empty()) return filter;
    throw NicFilterError("--nic '" + std::string(spec) +
                         "' names no interface; write prefixes such as 'ib,eth', '^docker' or "
                         "'=eth0'");
  }
  size_t index = 0;
  while (true) {
    ++index;
    const size_t comma = rest.find(',');
    const std::string_view name = rest.substr(0, comma);
    if (name.empty()) {
      throw NicFilterError("--nic '" + std::string(spec) + "': name " + std::to_string(index) +
                           " is empty; remove the extra ','");
    }
    if (name.find_first_of(" \t") != std::string_view::npos) {
      throw NicFilterError("--nic '" + std::string(spec) + "': '" + std::string(name) +
                           "' holds a blank; separate names with ',' alone");
    }
    filter.names.emplace_back(name);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return filter;
}

bool is_virtual_interface(std::string_view name) {
  static constexpr std::array<std::string_view, 7> kPrefixes = {"docker", "veth",    "virbr", "br-",
                                                                "cni",    "flannel", "vxlan"};
  if (name == "lo") return true;
  return std::any_of(kPrefixes.begin(), kPrefixes.end(),
                     [&](std::string_view p) { return name.starts_with(p); });
}

std::vector<std::string> select_interfaces(const std::vector<std::string>& interfaces,
                                           const NicFilter& filter) {
  std::vector<std::string> infiniband, physical, asked_virtual;
  for (const std::string& i : interfaces) {
    if (!filter.matches(i)) continue;
    if (is_virtual_interface(i)) {
      if (filter.selects_explicitly(i)) asked_virtual.push_back(i);
    } else if (i.starts_with("ib")) {
      infiniband.push_back(i);
    } else {
      physical.push_back(i);
    }
  }
  infiniband.insert(infiniband.end(), physical.begin(), physical.end());
  infiniband.insert(infiniband.end(), asked_virtual.begin(), asked_virtual.end());
  return infiniband;
}

}  // namespace ddl::mapper
