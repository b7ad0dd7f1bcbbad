#include "mapper/probe_cache.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <hwloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string_view>
#include <vector>

#include "mapper/machine.h"
#include "mapper/probe_remote.h"

extern char** environ;

namespace ddl::mapper {

namespace {

/// The whole of a small file (sysfs, procfs), "" when it cannot be read.
std::string file_text(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;)
    text.append(buf, static_cast<size_t>(n));
  close(fd);
  return text;
}

/// The names in a directory, sorted; "" when it cannot be read.
std::string dir_names(const char* path) {
  DIR* dir = opendir(path);
  if (dir == nullptr) return "";
  std::vector<std::string> names;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') names.emplace_back(e->d_name);
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  std::string text;
  for (const std::string& n : names)
    text += n + ",";
  return text;
}

/// "dev:inode:size:mtime" of a file, "" when it cannot be looked at.
std::string file_stamp(const char* path) {
  struct stat st {};
  if (path == nullptr || stat(path, &st) != 0) return "";
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" +
         std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

/// The file holding this code (ddlrun, or a library it is linked into): a rebuilt probe makes
/// a new key.
std::string code_stamp() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&local_probe_key), &info) != 0 && info.dli_fname != nullptr)
    return file_stamp(info.dli_fname);
  return file_stamp("/proc/self/exe");
}

/// The cgroup v2 cpuset this process may use ("" under cgroup v1 or without the controller).
std::string cgroup_cpuset() {
  const std::string cgroup = file_text("/proc/self/cgroup");
  const size_t at = cgroup.find("0::");
  if (at == std::string::npos) return "";
  const std::string path = "/sys/fs/cgroup" + cgroup.substr(at + 3, cgroup.find('\n', at) - at - 3);
  return file_text(path + "/cpuset.cpus.effective") + ";" +
         file_text(path + "/cpuset.mems.effective");
}

/// Every HWLOC_* variable and those that choose GPUs, sorted.
std::string environment_part() {
  static constexpr std::string_view kGpuVariables[] = {
      "CUDA_VISIBLE_DEVICES=", "CUDA_DEVICE_ORDER=",  "ROCR_VISIBLE_DEVICES=",
      "HIP_VISIBLE_DEVICES=",  "GPU_DEVICE_ORDINAL=", "ZE_AFFINITY_MASK="};
  std::vector<std::string> vars;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view v(*e);
    const bool gpu = std::any_of(std::begin(kGpuVariables), std::end(kGpuVariables),
                                 [&](std::string_view p) { return v.starts_with(p); });
    if (gpu || v.starts_with("HWLOC_")) vars.emplace_back(v);
  }
  std::sort(vars.begin(), vars.end());
  std::string text;
  for (const std::string& v : vars)
    text += v + "\n";
  return text;
}

/// The proc status lines naming the CPUs and memory nodes this process may use.
std::string allowed_part() {
  const std::string status = file_text("/proc/self/status");
  std::string text;
  for (const char* field : {"Cpus_allowed_list:", "Mems_allowed_list:"}) {
    const size_t at = status.find(field);
    if (at != std::string::npos) text += status.substr(at, status.find('\n', at) - at) + ";";
  }
  return text;
}

/// FNV-1a, 64 bits, as 16 hex digits.
std::string hash_text(std::string_view text) {
  uint64_t h = 14695981039346656037ull;
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

constexpr std::string_view kKeyLine = "# ddlrun hwloc cache, key ";

/// <dir>/<host name><extension>, the host name made safe for a file name.
std::string host_file(const std::string& dir, const char* extension) {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::snprintf(host, 5, "host");
  std::string name;
  for (const char* c = host; *c != '\0'; ++c)
    name += (std::isalnum(static_cast<unsigned char>(*c)) || *c == '-' || *c == '.') ? *c : '_';
  if (name[0] == '.') name[0] = '_';
  return dir + "/" + name + extension;
}

/// What the cache file `path` holds below its key line `first`; nothing when it is not a
/// cache file of ours (read_cache_file's rules) or holds another key.
std::optional<std::string> cached_body(const std::string& path, const std::string& first) {
  std::optional<std::string> text = read_cache_file(path);
  if (!text || !text->starts_with(first)) return std::nullopt;
  return text->substr(first.size());
}

}  // namespace

std::string local_probe_key() {
  std::string key = "format=1\nidentity=" + read_machine_identity() + "\n";
  // The namespace's inode only: the times of nsfs inodes are those of their last lookup.
  struct stat mnt {};
  const std::string mntns = stat("/proc/self/ns/mnt", &mnt) == 0 ? std::to_string(mnt.st_ino) : "";
  key += "mntns=" + mntns + "\ncode=" + code_stamp() + "\n";
  key += "hwloc=" + std::to_string(hwloc_get_api_version()) + "/" +
         std::to_string(HWLOC_API_VERSION) + "\n";
  key += "cpus=" + file_text("/sys/devices/system/cpu/online") + ";" +
         file_text("/sys/devices/system/cpu/present") + "\n";
  key += "nodes=" + file_text("/sys/devices/system/node/online") + "\n";
  key += "allowed=" + allowed_part() + "\ncpuset=" + file_text("/proc/self/cpuset") + ";" +
         cgroup_cpuset() + "\n";
  key += "pci=" + dir_names("/sys/bus/pci/devices") + "\nnet=" + dir_names("/sys/class/net") +
         "\nrdma=" + dir_names("/sys/class/infiniband") + "\n";
  return key + environment_part();
}

std::string local_probe_cache_dir() {
  if (const char* off = std::getenv("DDL_PROBE_CACHE")) {
    const std::string_view v(off);
    if (v == "0" || v == "no" || v == "off" || v == "false") return "";
  }
  const std::string probe_dir = default_probe_cache_dir();  // <root>/ddlrun/probe
  if (probe_dir.empty()) return "";
  return probe_dir.substr(0, probe_dir.rfind('/')) + "/hwloc";
}

Inventory cached_probe(const std::string& dir, const std::string& key,
                       const std::function<Inventory()>& compute, bool* hit) {
  if (hit != nullptr) *hit = false;
  if (dir.empty()) return compute();
  const std::string path = host_file(dir, ".yaml");
  const std::string first = std::string(kKeyLine) + hash_text(key) + "\n";
  const bool usable = make_private_dir(dir);
  if (const std::optional<std::string> body = usable ? cached_body(path, first) : std::nullopt) {
    try {
      Inventory inv = inventory_from_yaml(*body, path);
      if (hit != nullptr) *hit = true;
      return inv;
    } catch (const std::exception&) {
      // Corrupt (InventoryError, or yaml-cpp's own): computed again and rewritten below.
    }
  }
  Inventory inv = compute();
  if (usable) write_cache_file(path, first + to_yaml(inv));
  return inv;
}

std::string cached_topology_xml(const std::string& dir, const std::string& key,
                                const std::function<std::string()>& compute,
                                const std::function<bool(const std::string&)>& accept, bool* hit) {
  if (hit != nullptr) *hit = false;
  if (dir.empty()) return compute();
  const std::string path = host_file(dir, ".xml");
  const std::string first = std::string(kKeyLine) + hash_text(key) + "\n";
  const bool usable = make_private_dir(dir);
  if (std::optional<std::string> body = usable ? cached_body(path, first) : std::nullopt;
      body && accept(*body)) {
    if (hit != nullptr) *hit = true;
    return std::move(*body);
  }
  std::string xml = compute();
  if (usable) write_cache_file(path, first + xml);
  return xml;
}

}  // namespace ddl::mapper
