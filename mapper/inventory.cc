// An inventory's model: counts and look-ups, NIC kind names, CPU lists and PCI bus ids. Its
// YAML is inventory_yaml.cc's.

#include "mapper/inventory.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>

#include "comm/comm.h"

namespace ddl::mapper {

std::vector<int> Package::pus() const {
  std::vector<int> all;
  for (const Core& c : cores)
    all.insert(all.end(), c.pus.begin(), c.pus.end());
  std::sort(all.begin(), all.end());
  return all;
}

int Inventory::core_count() const {
  int n = 0;
  for (const Package& p : packages)
    n += static_cast<int>(p.cores.size());
  return n;
}

int Inventory::pu_count() const {
  int n = 0;
  for (const Package& p : packages) {
    for (const Core& c : p.cores)
      n += static_cast<int>(c.pus.size());
  }
  return n;
}

const Gpu* Inventory::find_gpu(std::string_view pci_bus_id) const {
  for (const Gpu& g : gpus) {
    if (g.pci_bus_id == pci_bus_id) return &g;
  }
  return nullptr;
}

const Nic* Inventory::find_nic(std::string_view name) const {
  for (const Nic& n : nics) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

namespace {

constexpr std::array<std::string_view, 3> kNicKinds = {"infiniband", "roce", "ethernet"};

bool parse_hex(std::string_view s, unsigned long max, unsigned long& out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out, 16);
  return ec == std::errc() && end == s.data() + s.size() && out <= max;
}

}  // namespace

std::string_view to_string(NicKind kind) {
  switch (kind) {
    case NicKind::kInfiniband:
      return kNicKinds[0];
    case NicKind::kRoce:
      return kNicKinds[1];
    case NicKind::kEthernet:
      return kNicKinds[2];
  }
  return "?";
}

std::string format_cpu_list(std::span<const int> cpus) {
  return comm::CpuSet::of(std::vector<int>(cpus.begin(), cpus.end())).str();
}

std::optional<std::vector<int>> parse_cpu_list(std::string_view text) {
  try {
    return comm::CpuSet::parse(text).pus();
  } catch (const comm::TopologyError&) {
    return std::nullopt;
  }
}

std::optional<std::string> normalize_pci_bus_id(std::string_view text) {
  // [domain:]bus:device.function
  const size_t dot = text.rfind('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const std::string_view head = text.substr(0, dot);
  const size_t last_colon = head.rfind(':');
  if (last_colon == std::string_view::npos) return std::nullopt;
  const std::string_view device = head.substr(last_colon + 1);
  const std::string_view rest = head.substr(0, last_colon);
  const size_t first_colon = rest.rfind(':');
  const std::string_view bus =
      first_colon == std::string_view::npos ? rest : rest.substr(first_colon + 1);
  const std::string_view domain =
      first_colon == std::string_view::npos ? std::string_view("0") : rest.substr(0, first_colon);
  unsigned long d = 0, b = 0, dev = 0, fn = 0;
  if (domain.size() > 8 || bus.size() > 2 || device.size() > 2 || text.size() - dot - 1 != 1 ||
      !parse_hex(domain, 0xffffffffUL, d) || !parse_hex(bus, 0xff, b) ||
      !parse_hex(device, 0x1f, dev) || !parse_hex(text.substr(dot + 1), 7, fn)) {
    return std::nullopt;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04lx:%02lx:%02lx.%lx", d, b, dev, fn);
  return std::string(buf);
}

namespace {

/// (domain, bus, device, function) of a normalized bus id.
std::optional<std::array<unsigned long, 4>> pci_key(std::string_view id) {
  const std::optional<std::string> n = normalize_pci_bus_id(id);
  if (!n) return std::nullopt;
  std::array<unsigned long, 4> key{};
  const std::string_view s = *n;
  const size_t colon = s.find(':');
  if (!parse_hex(s.substr(0, colon), 0xffffffffUL, key[0]) ||
      !parse_hex(s.substr(colon + 1, 2), 0xff, key[1]) ||
      !parse_hex(s.substr(colon + 4, 2), 0xff, key[2]) ||
      !parse_hex(s.substr(colon + 7, 1), 0xf, key[3])) {
    return std::nullopt;
  }
  return key;
}

}  // namespace

bool pci_bus_id_less(std::string_view a, std::string_view b) {
  const auto ka = pci_key(a);
  const auto kb = pci_key(b);
  if (ka && kb) return *ka < *kb;
  if (ka || kb) return ka.has_value();
  return a < b;
}

}  // namespace ddl::mapper
