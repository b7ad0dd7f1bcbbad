// An inventory as YAML: to_yaml() writes it, inventory_from_yaml() reads it back (inventory.h).
//
// How it works. Writing emits every field that is set, strings always double-quoted (so that
// "null" or "0-3" stay strings), small maps and CPU lists in flow style, and `version:` first.
// Reading checks the version first (a newer format may lack the fields this one needs), then
// walks the document with a Reader that knows each map's fields: an unknown one gets "did you
// mean", a missing or malformed one names its path ("gpus[1].pci_bus_id"), the line and the
// column; cross-field rules (GPU indexes, NVLink peers, PUs in one core each) come last.

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <limits>
#include <map>
#include <type_traits>

#include "base/text.h"
#include "base/yaml.h"
#include "hostfiles/hostfiles.h"
#include "mapper/inventory.h"

namespace ddl::mapper {

// ---------------------------------------------------------------------------------------------
// Writing

namespace {

/// A string value, always double-quoted so that any YAML reader keeps it a string ("null",
/// "0-3", "0000:04:00.0").
struct Quoted {
  const std::string& text;
};

YAML::Emitter& operator<<(YAML::Emitter& out, Quoted q) {
  return out << YAML::DoubleQuoted << q.text;
}

void emit_locality(YAML::Emitter& out, const Locality& l) {
  out << YAML::Flow << YAML::BeginMap;
  if (l.numa_node) out << YAML::Key << "numa_node" << YAML::Value << *l.numa_node;
  if (l.package) out << YAML::Key << "package" << YAML::Value << *l.package;
  if (!l.pci_switch.empty())
    out << YAML::Key << "pci_switch" << YAML::Value << Quoted{l.pci_switch};
  if (!l.host_bridge.empty())
    out << YAML::Key << "host_bridge" << YAML::Value << Quoted{l.host_bridge};
  out << YAML::EndMap;
}

void emit_string_list(YAML::Emitter& out, const std::vector<std::string>& list) {
  out << YAML::Flow << YAML::BeginSeq;
  for (const std::string& s : list)
    out << Quoted{s};
  out << YAML::EndSeq;
}

/// `key: [...]`, each item by `emit`; an empty list in flow style ("[]").
template <typename T, typename Emit>
void emit_list(YAML::Emitter& out, const char* key, const std::vector<T>& items, Emit emit) {
  out << YAML::Key << key << YAML::Value;
  if (items.empty()) out << YAML::Flow;
  out << YAML::BeginSeq;
  for (const T& item : items)
    emit(out, item);
  out << YAML::EndSeq;
}

void emit_core(YAML::Emitter& out, const Core& c) {
  out << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "os_index" << YAML::Value << c.os_index;
  out << YAML::Key << "logical_index" << YAML::Value << c.logical_index;
  out << YAML::Key << "pus" << YAML::Value << Quoted{format_cpu_list(c.pus)};
  out << YAML::EndMap;
}

void emit_package(YAML::Emitter& out, const Package& p) {
  out << YAML::BeginMap;
  out << YAML::Key << "os_index" << YAML::Value << p.os_index;
  if (!p.cpu_model.empty()) out << YAML::Key << "cpu_model" << YAML::Value << Quoted{p.cpu_model};
  emit_list(out, "cores", p.cores, emit_core);
  out << YAML::EndMap;
}

void emit_numa_node(YAML::Emitter& out, const NumaNode& n) {
  out << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "os_index" << YAML::Value << n.os_index;
  if (n.package) out << YAML::Key << "package" << YAML::Value << *n.package;
  out << YAML::Key << "pus" << YAML::Value << Quoted{format_cpu_list(n.pus)};
  out << YAML::Key << "memory_bytes" << YAML::Value << n.memory_bytes;
  out << YAML::EndMap;
}

void emit_gpu(YAML::Emitter& out, const Gpu& g) {
  out << YAML::BeginMap;
  out << YAML::Key << "index" << YAML::Value << g.index;
  out << YAML::Key << "vendor" << YAML::Value << Quoted{g.vendor};
  if (!g.pci_id.empty()) out << YAML::Key << "pci_id" << YAML::Value << Quoted{g.pci_id};
  if (!g.model.empty()) out << YAML::Key << "model" << YAML::Value << Quoted{g.model};
  out << YAML::Key << "pci_bus_id" << YAML::Value << Quoted{g.pci_bus_id};
  out << YAML::Key << "locality" << YAML::Value;
  emit_locality(out, g.locality);
  if (!g.uuid.empty()) out << YAML::Key << "uuid" << YAML::Value << Quoted{g.uuid};
  if (!g.nvlink_peers.empty()) {
    out << YAML::Key << "nvlink_peers" << YAML::Value << YAML::Flow << g.nvlink_peers;
  }
  if (g.nvlink_cpu) out << YAML::Key << "nvlink_cpu" << YAML::Value << true;
  if (g.nvlink_switch) out << YAML::Key << "nvlink_switch" << YAML::Value << true;
  if (!g.os_devices.empty()) {
    out << YAML::Key << "os_devices" << YAML::Value;
    emit_string_list(out, g.os_devices);
  }
  out << YAML::EndMap;
}

void emit_port(YAML::Emitter& out, const NicPort& p) {
  out << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "number" << YAML::Value << p.number;
  if (!p.state.empty()) out << YAML::Key << "state" << YAML::Value << Quoted{p.state};
  if (!p.link_layer.empty())
    out << YAML::Key << "link_layer" << YAML::Value << Quoted{p.link_layer};
  if (p.speed_mbps) out << YAML::Key << "speed_mbps" << YAML::Value << *p.speed_mbps;
  out << YAML::EndMap;
}

void emit_interface(YAML::Emitter& out, const NetInterface& i) {
  out << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << Quoted{i.name};
  if (!i.hw_address.empty())
    out << YAML::Key << "hw_address" << YAML::Value << Quoted{i.hw_address};
  if (!i.addresses.empty()) {
    out << YAML::Key << "addresses" << YAML::Value;
    emit_string_list(out, i.addresses);
  }
  if (i.speed_mbps) out << YAML::Key << "speed_mbps" << YAML::Value << *i.speed_mbps;
  out << YAML::EndMap;
}

void emit_nic(YAML::Emitter& out, const Nic& n) {
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << Quoted{n.name};
  out << YAML::Key << "kind" << YAML::Value << std::string(to_string(n.kind));
  if (!n.pci_id.empty()) out << YAML::Key << "pci_id" << YAML::Value << Quoted{n.pci_id};
  if (!n.pci_bus_id.empty())
    out << YAML::Key << "pci_bus_id" << YAML::Value << Quoted{n.pci_bus_id};
  out << YAML::Key << "locality" << YAML::Value;
  emit_locality(out, n.locality);
  if (!n.ports.empty()) emit_list(out, "ports", n.ports, emit_port);
  if (!n.interfaces.empty()) emit_list(out, "interfaces", n.interfaces, emit_interface);
  out << YAML::EndMap;
}

}  // namespace

std::string to_yaml(const Inventory& inv) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "version" << YAML::Value << kInventoryVersion;
  out << YAML::Key << "hostname" << YAML::Value << Quoted{inv.hostname};
  if (inv.cuda_visible_devices) {
    out << YAML::Key << "cuda_visible_devices" << YAML::Value << Quoted{*inv.cuda_visible_devices};
  }
  if (!inv.identity.empty()) out << YAML::Key << "identity" << YAML::Value << Quoted{inv.identity};
  emit_list(out, "packages", inv.packages, emit_package);
  emit_list(out, "numa_nodes", inv.numa_nodes, emit_numa_node);
  emit_list(out, "gpus", inv.gpus, emit_gpu);
  emit_list(out, "nics", inv.nics, emit_nic);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

// ---------------------------------------------------------------------------------------------
// Reading

namespace {

/// NicKind's names, in its order.
std::array<std::string_view, 3> nic_kind_names() {
  return {to_string(NicKind::kInfiniband), to_string(NicKind::kRoce),
          to_string(NicKind::kEthernet)};
}

constexpr std::string_view kFix =
    "write inventories with 'ddlrun --probe' of the same ddlrun version";

/// The position of the first byte of `s` that is not well-formed UTF-8 (base::utf8_sequence),
/// or npos. YAML text is Unicode, but yaml-cpp passes such bytes through, and its emitter would
/// write them back as U+FFFD.
size_t invalid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = base::utf8_sequence(s.substr(i));
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

/// Reads one inventory, remembering where it came from for error messages.
class Reader {
 public:
  explicit Reader(std::string_view source) : source_(source) {}

  [[noreturn]] void fail(const YAML::Node& at, const std::string& path,
                         const std::string& message) const {
    const YAML::Mark mark = at.IsDefined() ? at.Mark() : YAML::Mark::null_mark();
    std::string text = base::yaml_position(source_, mark) + ": ";
    if (!path.empty()) text += "field '" + path + "': ";
    throw InventoryError(text + message + "; " + std::string(kFix));
  }

  /// Checks that `node` is a map with no keys outside `known`, and that `required` are there.
  void check_map(const YAML::Node& node, const std::string& path,
                 std::span<const std::string_view> known,
                 std::span<const std::string_view> required) const {
    if (!node.IsMap()) fail(node, path, "expected a map of fields, got " + describe(node));
    for (const auto& kv : node) {
      if (!kv.first.IsScalar())
        fail(kv.first, path, "expected field names, got " + describe(kv.first));
      const std::string key = kv.first.Scalar();
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        throw_unknown(kv.first, path, key, known);
      }
    }
    for (std::string_view r : required) {
      if (!node[std::string(r)]) fail(node, join(path, r), "missing");
    }
  }

  std::string text(const YAML::Node& node, const std::string& path) const {
    if (!node.IsScalar()) fail(node, path, "expected text, got " + describe(node));
    const std::string& s = node.Scalar();
    if (const size_t bad = invalid_utf8(s); bad != std::string_view::npos) {
      char byte[8];
      std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(s[bad]));
      fail(node, path,
           "not UTF-8 text (byte " + std::string(byte) + " at position " + std::to_string(bad + 1) +
               ")");
    }
    return s;
  }

  long long integer(const YAML::Node& node, const std::string& path, long long min,
                    long long max) const {
    const std::string s = text(node, path);
    long long v = 0;
    const char* first = s.data();
    const auto [end, ec] = std::from_chars(first, s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size()) {
      fail(node, path, "expected a whole number, got '" + s + "'");
    }
    if (v < min || v > max) {
      fail(node, path,
           std::to_string(v) + " is out of range " + std::to_string(min) + ".." +
               std::to_string(max));
    }
    return v;
  }

  int small_int(const YAML::Node& node, const std::string& path, int min = 0) const {
    return static_cast<int>(integer(node, path, min, std::numeric_limits<int>::max()));
  }

  bool boolean(const YAML::Node& node, const std::string& path) const {
    const std::string s = text(node, path);
    if (s == "true") return true;
    if (s == "false") return false;
    fail(node, path, "expected true or false, got '" + s + "'");
  }

  std::vector<int> cpu_list(const YAML::Node& node, const std::string& path) const {
    const std::string s = text(node, path);
    std::optional<std::vector<int>> cpus = parse_cpu_list(s);
    if (!cpus) fail(node, path, "expected a CPU list like '0-3,8', got '" + s + "'");
    return *cpus;
  }

  std::string pci_bus_id(const YAML::Node& node, const std::string& path) const {
    const std::string s = text(node, path);
    std::optional<std::string> id = normalize_pci_bus_id(s);
    if (!id) fail(node, path, "expected a PCI bus id like '0000:04:00.0', got '" + s + "'");
    return *id;
  }

  /// The node itself, checked to be a list (by value: callers loop over temporaries).
  YAML::Node sequence(const YAML::Node& node, const std::string& path) const {
    if (!node.IsSequence()) fail(node, path, "expected a list, got " + describe(node));
    return node;
  }

  std::vector<std::string> string_list(const YAML::Node& node, const std::string& path) const {
    std::vector<std::string> out;
    size_t i = 0;
    for (const YAML::Node& item : sequence(node, path))
      out.push_back(text(item, index(path, i++)));
    return out;
  }

  static std::string join(const std::string& path, std::string_view key) {
    return base::yaml_join(path, key);
  }
  static std::string index(const std::string& path, size_t i) {
    return path + "[" + std::to_string(i) + "]";
  }

 private:
  static std::string describe(const YAML::Node& node) {
    return base::yaml_describe(node, {.map = "a map", .sequence = "a list"});
  }

  [[noreturn]] void throw_unknown(const YAML::Node& key_node, const std::string& path,
                                  const std::string& key,
                                  std::span<const std::string_view> known) const {
    const std::string hint = base::did_you_mean(key, known);
    fail(
        key_node, join(path, key),
        "unknown field" + (hint.empty() ? " (known here: " + base::join(known, ", ") + ")" : hint));
  }

  std::string source_;
};

/// The list `node` (at `path`), each item read by `read(r, item, item_path)`.
template <typename Read>
auto read_list(const Reader& r, const YAML::Node& node, const std::string& path, Read read) {
  std::vector<decltype(read(r, node, path))> out;
  size_t i = 0;
  for (const YAML::Node& item : r.sequence(node, path))
    out.push_back(read(r, item, r.index(path, i++)));
  return out;
}

/// Reads the field `key` of the map `node` into `out` when it is there: with `read`, or
/// without one by the type of `out` (text, a whole number, true or false, a list of texts).
template <typename T, typename Read>
void read_optional(const Reader& r, const YAML::Node& node, const std::string& path,
                   const char* key, T& out, Read read) {
  if (const YAML::Node value = node[key]) out = read(r, value, r.join(path, key));
}

template <typename T>
void read_optional(const Reader& r, const YAML::Node& node, const std::string& path,
                   const char* key, T& out) {
  read_optional(r, node, path, key, out,
                [](const Reader& r, const YAML::Node& value, const std::string& at) -> T {
                  if constexpr (std::is_same_v<T, bool>) {
                    return r.boolean(value, at);
                  } else if constexpr (std::is_same_v<T, std::optional<int>>) {
                    return r.small_int(value, at);
                  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
                    return r.string_list(value, at);
                  } else {
                    return r.text(value, at);
                  }
                });
}

std::string read_pci_bus_id(const Reader& r, const YAML::Node& node, const std::string& path) {
  return r.pci_bus_id(node, path);
}

/// A list read item by item with `read_item`, for read_optional.
template <auto read_item>
auto read_list_of(const Reader& r, const YAML::Node& node, const std::string& path) {
  return read_list(r, node, path, read_item);
}

int read_index(const Reader& r, const YAML::Node& node, const std::string& path) {
  return r.small_int(node, path);
}

Locality read_locality(const Reader& r, const YAML::Node& node, const std::string& path) {
  static constexpr std::array<std::string_view, 4> kKnown = {"numa_node", "package", "pci_switch",
                                                             "host_bridge"};
  r.check_map(node, path, kKnown, {});
  Locality l;
  read_optional(r, node, path, "numa_node", l.numa_node);
  read_optional(r, node, path, "package", l.package);
  read_optional(r, node, path, "pci_switch", l.pci_switch, read_pci_bus_id);
  read_optional(r, node, path, "host_bridge", l.host_bridge);
  return l;
}

Core read_core(const Reader& r, const YAML::Node& node, const std::string& path) {
  static constexpr std::array<std::string_view, 3> kKnown = {"os_index", "logical_index", "pus"};
  r.check_map(node, path, kKnown, kKnown);
  Core core;
  core.os_index = r.small_int(node["os_index"], r.join(path, "os_index"), -1);
  core.logical_index = r.small_int(node["logical_index"], r.join(path, "logical_index"));
  core.pus = r.cpu_list(node["pus"], r.join(path, "pus"));
  if (core.pus.empty()) r.fail(node["pus"], r.join(path, "pus"), "a core needs at least one PU");
  return core;
}

Package read_package(const Reader& r, const YAML::Node& node, const std::string& path) {
  static constexpr std::array<std::string_view, 3> kKnown = {"os_index", "cpu_model", "cores"};
  static constexpr std::array<std::string_view, 2> kRequired = {"os_index", "cores"};
  r.check_map(node, path, kKnown, kRequired);
  Package p;
  p.os_index = r.small_int(node["os_index"], r.join(path, "os_index"));
  read_optional(r, node, path, "cpu_model", p.cpu_model);
  p.cores = read_list(r, node["cores"], r.join(path, "cores"), read_core);
  return p;
}

NumaNode read_numa_node(const Reader& r, const YAML::Node& node, const std::string& path) {
  static constexpr std::array<std::string_view, 4> kKnown = {"os_index", "package", "pus",
                                                             "memory_bytes"};
  static constexpr std::array<std::string_view, 3> kRequired = {"os_index", "pus", "memory_bytes"};
  r.check_map(node, path, kKnown, kRequired);
  NumaNode n;
  n.os_index = r.small_int(node["os_index"], r.join(path, "os_index"));
  read_optional(r, node, path, "package", n.package);
  n.pus = r.cpu_list(node["pus"], r.join(path, "pus"));
  n.memory_bytes =
      static_cast<std::uint64_t>(r.integer(node["memory_bytes"], r.join(path, "memory_bytes"), 0,
                                           std::numeric_limits<long long>::max()));
  return n;
}

Gpu read_gpu(const Reader& r, const YAML::Node& node, const std::string& path) {
  static constexpr std::array<std::string_view, 11> kKnown = {
      "index", "vendor",       "pci_id",     "model",         "pci_bus_id", "locality",
      "uuid",  "nvlink_peers", "nvlink_cpu", "nvlink_switch", "os_devices"};
  static constexpr std::array<std::string_view, 3> kRequired = {"index", "vendor", "pci_bus_id"};
  r.check_map(node, path, kKnown, kRequired);
  Gpu g;
  g.index = r.small_int(node["index"], r.join(path, "index"));
  g.vendor = r.text(node["vendor"], r.join(path, "vendor"));
  read_optional(r, node, path, "pci_id", g.pci_id);
  read_optional(r, node, path, "model", g.model);
  g.pci_bus_id = r.pci_bus_id(node["pci_bus_id"], r.join(path, "pci_bus_id"));
  read_optional(r, node, path, "locality", g.locality, read_locality);
  read_optional(r, node, path, "uuid", g.uuid);
  read_optional(r, node, path, "nvlink_peers", g.nvlink_peers, read_list_of<read_index>);
  read_optional(r, node, path, "nvlink_cpu", g.nvlink_cpu);
  read_optional(r, node, path, "nvlink_switch", g.nvlink_switch);
  read_optional(r, node, path, "os_devices", g.os_devices);
  return g;
}

NicPort read_port(const Reader& r, const YAML::Node& node, const std::string& path) {
  static constexpr std::array<std::string_view, 4> kKnown = {"number", "state", "link_layer",
                                                             "speed_mbps"};
  static constexpr std::array<std::string_view, 1> kRequired = {"number"};
  r.check_map(node, path, kKnown, kRequired);
  NicPort port;
  port.number = r.small_int(node["number"], r.join(path, "number"));
  read_optional(r, node, path, "state", port.state);
  read_optional(r, node, path, "link_layer", port.link_layer);
  read_optional(r, node, path, "speed_mbps", port.speed_mbps);
  return port;
}

NetInterface read_interface(const Reader& r, const YAML::Node& node, const std::string& path) {
  static constexpr std::array<std::string_view, 4> kKnown = {"name", "hw_address", "addresses",
                                                             "speed_mbps"};
  static constexpr std::array<std::string_view, 1> kRequired = {"name"};
  r.check_map(node, path, kKnown, kRequired);
  NetInterface nif;
  nif.name = r.text(node["name"], r.join(path, "name"));
  read_optional(r, node, path, "hw_address", nif.hw_address);
  read_optional(r, node, path, "addresses", nif.addresses);
  read_optional(r, node, path, "speed_mbps", nif.speed_mbps);
  return nif;
}

Nic read_nic(const Reader& r, const YAML::Node& node, const std::string& path) {
  static constexpr std::array<std::string_view, 7> kKnown = {
      "name", "kind", "pci_id", "pci_bus_id", "locality", "ports", "interfaces"};
  static constexpr std::array<std::string_view, 2> kRequired = {"name", "kind"};
  r.check_map(node, path, kKnown, kRequired);
  Nic n;
  n.name = r.text(node["name"], r.join(path, "name"));
  const std::string kind = r.text(node["kind"], r.join(path, "kind"));
  const std::array<std::string_view, 3> kinds = nic_kind_names();
  const auto it = std::find(kinds.begin(), kinds.end(), kind);
  if (it == kinds.end()) {
    const std::string hint = base::did_you_mean(kind, kinds);
    r.fail(node["kind"], r.join(path, "kind"),
           "unknown kind '" + kind + "'" +
               (hint.empty() ? " (expected infiniband, roce or ethernet)" : hint));
  }
  n.kind = static_cast<NicKind>(it - kinds.begin());
  read_optional(r, node, path, "pci_id", n.pci_id);
  read_optional(r, node, path, "pci_bus_id", n.pci_bus_id, read_pci_bus_id);
  read_optional(r, node, path, "locality", n.locality, read_locality);
  read_optional(r, node, path, "ports", n.ports, read_list_of<read_port>);
  read_optional(r, node, path, "interfaces", n.interfaces, read_list_of<read_interface>);
  return n;
}

/// Cross-field rules: GPU indexes are positions, NVLink peers exist, no PU is in two cores.
void check_consistency(const Reader& r, const YAML::Node& root, const Inventory& inv) {
  std::map<int, std::string> owner;
  size_t pi = 0;
  for (const YAML::Node& p : root["packages"]) {
    size_t ci = 0;
    for (const YAML::Node& c : p["cores"]) {
      const std::string path =
          "packages[" + std::to_string(pi) + "].cores[" + std::to_string(ci) + "]";
      for (int pu : inv.packages[pi].cores[ci].pus) {
        const auto [it, inserted] = owner.emplace(pu, path);
        if (!inserted) {
          r.fail(c["pus"], path + ".pus", "PU " + std::to_string(pu) + " is also in " + it->second);
        }
      }
      ++ci;
    }
    ++pi;
  }
  const int gpus = static_cast<int>(inv.gpus.size());
  size_t gi = 0;
  for (const YAML::Node& g : root["gpus"]) {
    const std::string path = "gpus[" + std::to_string(gi) + "]";
    const Gpu& gpu = inv.gpus[gi];
    if (gpu.index != static_cast<int>(gi)) {
      r.fail(g["index"], path + ".index",
             "expected " + std::to_string(gi) + " (GPUs are listed in index order), got " +
                 std::to_string(gpu.index));
    }
    for (size_t k = 0; k < gpu.nvlink_peers.size(); ++k) {
      const int peer = gpu.nvlink_peers[k];
      if (peer >= gpus || peer == gpu.index) {
        r.fail(g["nvlink_peers"][k], path + ".nvlink_peers[" + std::to_string(k) + "]",
               "GPU " + std::to_string(peer) + " is not another GPU of this host");
      }
    }
    ++gi;
  }
}

Inventory read_inventory(const Reader& r, const YAML::Node& root) {
  if (!root.IsDefined() || root.IsNull()) r.fail(root, "", "empty inventory");
  static constexpr std::array<std::string_view, 8> kKnown = {
      "version", "hostname", "cuda_visible_devices", "identity", "packages", "numa_nodes",
      "gpus",    "nics"};
  static constexpr std::array<std::string_view, 6> kRequired = {
      "version", "hostname", "packages", "numa_nodes", "gpus", "nics"};
  // The version first: a newer format may not have the other fields this one needs.
  if (root.IsMap() && root["version"]) {
    const int version = r.small_int(root["version"], "version");
    if (version != kInventoryVersion) {
      r.fail(root["version"], "version",
             "this ddlrun reads inventory version " + std::to_string(kInventoryVersion) + ", not " +
                 std::to_string(version));
    }
  }
  r.check_map(root, "", kKnown, kRequired);

  Inventory inv;
  inv.hostname = r.text(root["hostname"], "hostname");
  read_optional(r, root, "", "cuda_visible_devices", inv.cuda_visible_devices);
  read_optional(r, root, "", "identity", inv.identity);
  inv.packages = read_list(r, root["packages"], "packages", read_package);
  inv.numa_nodes = read_list(r, root["numa_nodes"], "numa_nodes", read_numa_node);
  inv.gpus = read_list(r, root["gpus"], "gpus", read_gpu);
  inv.nics = read_list(r, root["nics"], "nics", read_nic);
  check_consistency(r, root, inv);
  return inv;
}

}  // namespace

Inventory inventory_from_yaml(std::string_view text, std::string_view source) {
  const Reader r(source);
  try {
    return read_inventory(r, YAML::Load(std::string(text)));
  } catch (const YAML::Exception& e) {  // bad syntax, or a shape the reader did not expect
    const std::string where = e.mark.is_null()
                                  ? std::string(source)
                                  : std::string(source) + ":" + std::to_string(e.mark.line + 1) +
                                        ":" + std::to_string(e.mark.column + 1);
    throw InventoryError(where + ": not valid YAML: " + e.msg + "; " + std::string(kFix));
  }
}

}  // namespace ddl::mapper
