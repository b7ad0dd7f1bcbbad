#include "mapper/machine.h"

#include <arpa/inet.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <fstream>
#include <optional>
#include <unordered_map>

#include "mapper/placement.h"

namespace ddl::mapper {

namespace {

/// The first line of a small file, trimmed; "" when it cannot be read.
std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  line.erase(line.find_last_not_of(" \r\t") + 1);
  return line;
}

/// The value of `key` in an identity ("host" -> "node1"); "" when absent.
std::string part(std::string_view identity, std::string_view key) {
  size_t at = 0;
  while (at <= identity.size()) {
    size_t end = identity.find(';', at);
    if (end == std::string_view::npos) end = identity.size();
    const std::string_view field = identity.substr(at, end - at);
    if (field.size() > key.size() && field.substr(0, key.size()) == key &&
        field[key.size()] == '=') {
      return std::string(field.substr(key.size() + 1));
    }
    at = end + 1;
  }
  return "";
}

/// The address a literal names, in one canonical spelling; nullopt for a name.
std::optional<std::string> canonical_address(std::string_view name) {
  std::string text(name);
  if (text.size() > 2 && text.front() == '[' && text.back() == ']')
    text = text.substr(1, text.size() - 2);
  std::array<unsigned char, 16> bytes{};
  std::array<char, INET6_ADDRSTRLEN> out{};
  for (const int family : {AF_INET, AF_INET6}) {
    if (inet_pton(family, text.c_str(), bytes.data()) == 1 &&
        inet_ntop(family, bytes.data(), out.data(), out.size()) != nullptr) {
      return std::string(out.data());
    }
  }
  return std::nullopt;
}

/// Why `a` and `b` are one machine, or "" when nothing says so.
std::string same_machine(const NamedHost& a, const NamedHost& b) {
  if (!a.identity.empty() && !b.identity.empty()) {
    if (a.identity != b.identity) return "";
    const std::string host = identity_host_name(a.identity);
    return "their probes found one machine (the same machine id, boot id and network "
           "namespace, host name '" +
           host + "')";
  }
  if (a.local && b.local) return "both are this host";
  const std::optional<std::string> x = canonical_address(a.name);
  if (x && x == canonical_address(b.name)) return "both are the address " + *x;
  return "";
}

}  // namespace

std::string read_machine_identity() {
  std::string machine = first_line("/etc/machine-id");
  if (machine.empty()) machine = first_line("/var/lib/dbus/machine-id");
  const std::string boot = first_line("/proc/sys/kernel/random/boot_id");
  if (machine.empty() && boot.empty()) return "";
  std::string netns;
  struct stat st {};
  if (stat("/proc/self/ns/net", &st) == 0) netns = std::to_string(st.st_ino);
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
  return "machine=" + machine + ";boot=" + boot + ";netns=" + netns + ";host=" + host.data();
}

std::string identity_host_name(std::string_view identity) {
  return part(identity, "host");
}

void check_distinct_machines(std::span<const NamedHost> hosts) {
  // One pass with three indexes, so that 16,384 hosts cost no more than listing them: by
  // identity; by this-host-or-address among the names without an identity; and by the same
  // key among all names.
  std::unordered_map<std::string, size_t> by_identity, unknown_by_key, all_by_key;
  for (size_t j = 0; j < hosts.size(); ++j) {
    const NamedHost& h = hosts[j];
    std::string key;
    if (h.local) {
      key = "this host";
    } else if (const std::optional<std::string> a = canonical_address(h.name)) {
      key = *a;
    }
    std::optional<size_t> earlier;
    if (!h.identity.empty()) {
      if (auto it = by_identity.find(h.identity); it != by_identity.end()) earlier = it->second;
      if (auto it = unknown_by_key.find(key);
          !earlier && !key.empty() && it != unknown_by_key.end())
        earlier = it->second;
    } else if (auto it = all_by_key.find(key); !key.empty() && it != all_by_key.end()) {
      earlier = it->second;
    }
    if (earlier) {
      const NamedHost& first = hosts[*earlier];
      throw PlacementError("'" + h.name + "' (" + h.origin + ") and '" + first.name + "' (" +
                           first.origin + ") are the same machine: " + same_machine(first, h) +
                           "; list each machine once, under one name, with all its slots");
    }
    if (!h.identity.empty()) by_identity.emplace(h.identity, j);
    if (!key.empty()) {
      all_by_key.emplace(key, j);
      if (h.identity.empty()) unknown_by_key.emplace(key, j);
    }
  }
}

}  // namespace ddl::mapper
