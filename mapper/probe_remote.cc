// Other hosts' inventories: what their probe printed judged (inventory_from_probe_output; ddlrun's
// agents bring it, launcher/ssh/agent_tree.h), the failures reported together, and the job's
// disk cache.
//
// Many hosts through one probe function (RemoteProber, as jsrun's probe uses it): the distinct
// hosts not yet known are looked up in the job's disk cache, the rest are probed on a pool of at
// most options.parallel threads, and successes go into the run's map and the disk cache.

#include "mapper/probe_remote.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>
#include <utility>

#include "base/fd.h"

namespace ddl::mapper {
namespace {

constexpr std::size_t kStderrLines = 5;      // of a failed command, in its reason
constexpr std::size_t kStderrLineMax = 200;  // characters per such line

constexpr std::string_view kNextStep =
    "fix them (each must pass 'ssh -o BatchMode=yes HOST true', printing nothing), leave them "
    "out of the host "
    "list, or plan offline with --host-xml HOST=FILE (FILE from 'lstopo --of xml FILE' on that "
    "host)";

// ---------------------------------------------------------------------------------------------
// Texts

/// The program a command line starts with: "/a b/p" from "'/a b/p' --x", "/p" from "/p --x".
std::string first_word(std::string_view command) {
  std::string word;
  std::size_t i = 0;
  while (i < command.size() && command[i] == ' ')
    ++i;
  for (; i < command.size() && command[i] != ' ' && command[i] != '\t'; ++i) {
    if (command[i] == '\'') {
      const std::size_t end = command.find('\'', i + 1);
      if (end == std::string_view::npos) return word + std::string(command.substr(i + 1));
      word += command.substr(i + 1, end - i - 1);
      i = end;
    } else if (command[i] == '\\' && i + 1 < command.size()) {
      word += command[++i];
    } else {
      word += command[i];
    }
  }
  return word;
}

/// `text` with '"', '\\' and bytes outside printable ASCII written C-style ("\\n", "\\x1b").
std::string c_escaped(std::string_view text) {
  std::string out;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c >= 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += ch;
    }
  }
  return out;
}

/// Up to kStderrLines non-empty lines of `text`, each cut at kStderrLineMax characters.
std::vector<std::string> first_lines(std::string_view text) {
  std::vector<std::string> lines;
  while (!text.empty() && lines.size() < kStderrLines) {
    const std::size_t end = std::min(text.find('\n'), text.size());
    std::string line(text.substr(0, end));
    text.remove_prefix(std::min(end + 1, text.size()));
    line.erase(line.find_last_not_of("\r \t") + 1);
    if (line.empty()) continue;
    if (line.size() > kStderrLineMax) line = line.substr(0, kStderrLineMax) + "...";
    lines.push_back(std::move(line));
  }
  return lines;
}

// ---------------------------------------------------------------------------------------------
// Disk cache

std::string escape_component(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const bool plain =
        std::isalnum(c) || std::string_view("._:@+-").find(c) != std::string_view::npos;
    if (plain && !(i == 0 && c == '.')) {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

std::optional<Inventory> read_cache(const std::string& path) {
  const std::optional<std::string> text = read_cache_file(path);
  if (!text) return std::nullopt;
  try {
    return inventory_from_yaml(*text, path);
  } catch (const InventoryError&) {
    return std::nullopt;  // probed again and overwritten
  }
}

void write_cache(const std::string& path, const Inventory& inventory) {
  write_cache_file(path, to_yaml(inventory));
}

}  // namespace

Inventory inventory_from_probe_output(std::string_view host, std::string_view command,
                                      const RemoteOutput& output) {
  const std::string h(host);
  if (output.exit_status == 0) {
    try {
      return inventory_from_yaml(output.out, "inventory of " + h);
    } catch (const InventoryError& e) {
      // The inventory after other output: a login script that prints on stdout.
      const size_t inventory = output.out.find("\nversion:");
      if (inventory != std::string::npos && output.out.rfind("version:", 0) != 0) {
        throw ProbeError("something prints on its standard output before the inventory, \"" +
                         c_escaped(output.out.substr(0, std::min<size_t>(inventory + 1, 80))) +
                         "\" (a login script such as ~/.bashrc?); make it print nothing when "
                         "the shell is not interactive, or print on stderr");
      }
      throw ProbeError(std::string("its output is not an inventory: ") + e.what());
    }
  }
  const std::vector<std::string> lines = first_lines(output.err);
  const std::string said = lines.empty() ? "" : ", \"" + lines.front() + "\"";
  const std::string program = first_word(command);
  // 127 and 126 are the shell's "not found" and "cannot execute": about the probe itself when
  // the command starts with its absolute path (a wrapper's own commands may fail the same way).
  if (program.starts_with('/') && output.exit_status == 127) {
    throw ProbeError(program.substr(program.rfind('/') + 1) + " is not installed at " + program +
                     " on " + h + " (exit status 127" + said +
                     "); install ddlrun there at the same path as here, or plan offline with "
                     "--host-xml " +
                     h + "=FILE");
  }
  if (program.starts_with('/') && output.exit_status == 126) {
    throw ProbeError(program + " cannot be run on " + h + " (exit status 126" + said +
                     "); install a ddlrun built for that host at the same path as here, or plan "
                     "offline with --host-xml " +
                     h + "=FILE");
  }
  std::string text = "'" + std::string(command) + "' ";
  if (output.exit_status >= 0) {
    text += "exited with status " + std::to_string(output.exit_status);
    if (output.exit_status == 127) text += " (command not found)";
  } else if (!output.signal.empty()) {
    text += "was killed by signal " + output.signal;
  } else {
    text += "ended without an exit status";
  }
  if (lines.empty()) throw ProbeError(text + " and printed nothing on stderr");
  text += "; its stderr:";
  for (const std::string& line : lines)
    text += "\n" + line;
  throw ProbeError(text);
}

// ---------------------------------------------------------------------------------------------
// Many hosts

RemoteProber::RemoteProber(HostProbeOptions options, HostProbeFn probe_one)
    : options_(std::move(options)), probe_one_(std::move(probe_one)) {}

namespace {

/// One distinct host's outcome during RemoteProber::probe.
struct Outcome {
  std::optional<Inventory> inventory;
  std::string error;
  bool cached = false;
};
/// The hosts still to probe, each with where its outcome goes.
using Todo = std::vector<std::pair<const std::string*, Outcome*>>;

/// The reason a probe failed with `e`: its text, unless it is none of the probe's own errors.
std::string reason_of(const std::exception& e) {
  if (dynamic_cast<const ProbeError*>(&e) != nullptr) return e.what();
  return std::string("internal error: ") + e.what() + " (please report this)";
}

/// The outcome of `work`, which probes one host: its inventory, or the reason it failed.
template <typename Work>
void settle(Outcome& o, Work&& work) {
  try {
    o.inventory = work();
  } catch (const std::exception& e) {
    o.error = reason_of(e);
  }
  if (o.inventory == std::nullopt && o.error.empty()) o.error = "unknown failure";
}

/// Probes every host of `todo` with `probe_one`, at most `max_parallel` at once (threads that
/// take the next host from a shared counter); a failure becomes the host's error.
void probe_all(const Todo& todo, int max_parallel, const HostProbeFn& probe_one,
               const std::function<void(const std::string&)>& on_settled) {
  std::atomic<std::size_t> next{0};
  const auto worker = [&] {
    for (std::size_t i = next++; i < todo.size(); i = next++) {
      settle(*todo[i].second, [&] { return probe_one(*todo[i].first); });
      if (on_settled) on_settled(*todo[i].first);
    }
  };
  const std::size_t want = std::min<std::size_t>(std::max(max_parallel, 1), todo.size());
  std::vector<std::jthread> pool;
  try {
    while (pool.size() < want)
      pool.emplace_back(worker);
  } catch (const std::system_error&) {
    if (pool.empty()) worker();  // no thread to be had: probe one after the other here
  }
}  // joins

}  // namespace

std::vector<HostProbe> RemoteProber::probe(std::span<const std::string> hosts) {
  // Each distinct host once: from this run's map, else the job's disk cache, else probed; then
  // the new inventories go into both, and each entry of `hosts` gets its host's outcome.
  const std::lock_guard lock(mutex_);
  std::map<std::string, Outcome, std::less<>> outcomes;
  for (const std::string& h : hosts) {
    if (outcomes.contains(h)) continue;
    Outcome& o = outcomes[h];
    if (const auto it = inventories_.find(h); it != inventories_.end()) {
      o.inventory = it->second;
      o.cached = true;
    }
  }
  const std::string job_dir = job_cache_dir(options_);
  const auto cache_file = [&](const std::string& host) {
    return job_dir + "/" + escape_component(host) + ".yaml";
  };
  Todo todo;
  for (auto& [host, o] : outcomes) {
    if (!o.inventory && !job_dir.empty()) {
      o.inventory = read_cache(cache_file(host));
      o.cached = o.inventory.has_value();
    }
    if (!o.inventory) {
      todo.emplace_back(&host, &o);
    } else if (options_.on_settled) {
      options_.on_settled(host);
    }
  }
  probe_all(todo, options_.parallel, probe_one_, options_.on_settled);
  for (const auto& [host, o] : todo) {
    if (o->inventory && !job_dir.empty()) write_cache(cache_file(*host), *o->inventory);
  }
  for (const auto& [host, o] : outcomes) {
    if (o.inventory) inventories_.emplace(host, *o.inventory);
  }
  std::vector<HostProbe> results;
  results.reserve(hosts.size());
  for (const std::string& h : hosts) {
    const Outcome& o = outcomes.find(h)->second;
    results.push_back(HostProbe{h, o.inventory, o.error, o.cached});
  }
  return results;
}

std::string format_probe_failures(std::span<const HostProbe> results) {
  std::set<std::string_view> seen;
  std::vector<const HostProbe*> failed;
  for (const HostProbe& r : results) {
    if (!seen.insert(r.host).second) continue;
    if (!r.ok()) failed.push_back(&r);
  }
  if (failed.empty()) return "";
  std::string out = "cannot probe " + std::to_string(failed.size()) + " of " +
                    std::to_string(seen.size()) + (seen.size() == 1 ? " host:\n" : " hosts:\n");
  for (const HostProbe* r : failed) {
    std::string_view reason = r->error;
    const std::size_t nl = std::min(reason.find('\n'), reason.size());
    out += "  " + r->host + ": " + std::string(reason.substr(0, nl)) + "\n";
    reason.remove_prefix(nl);
    while (!reason.empty()) {
      reason.remove_prefix(1);  // the '\n'
      const std::size_t end = std::min(reason.find('\n'), reason.size());
      out += "      " + std::string(reason.substr(0, end)) + "\n";
      reason.remove_prefix(end);
    }
  }
  return out + std::string(kNextStep) + "\n";
}

std::string job_cache_dir(const HostProbeOptions& options) {
  if (options.job_id.empty()) return "";
  const std::string root =
      options.cache_dir.empty() ? default_probe_cache_dir() : options.cache_dir;
  const std::string job_dir = root + "/" + escape_component(options.job_id);
  if (root.empty() || !make_private_dir(root) || !make_private_dir(job_dir)) return "";
  return job_dir;
}

std::optional<Inventory> cached_inventory(const HostProbeOptions& options,
                                          const std::string& host) {
  const std::string job_dir = job_cache_dir(options);
  if (job_dir.empty()) return std::nullopt;
  return read_cache(job_dir + "/" + escape_component(host) + ".yaml");
}

void cache_inventory(const HostProbeOptions& options, const std::string& host,
                     const Inventory& inventory) {
  const std::string job_dir = job_cache_dir(options);
  if (!job_dir.empty()) write_cache(job_dir + "/" + escape_component(host) + ".yaml", inventory);
}

std::optional<std::string> read_cache_file(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  struct stat st {};
  bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid();
  char buf[65536];
  for (ssize_t n = 0; ok && (n = read(fd, buf, sizeof buf)) != 0;) {
    if (n < 0)
      ok = errno == EINTR;
    else
      text.append(buf, static_cast<std::size_t>(n));
  }
  close(fd);
  if (!ok) return std::nullopt;
  return text;
}

void write_cache_file(const std::string& path, std::string_view text) {
  const std::size_t slash = path.rfind('/');
  std::string tmp = path.substr(0, slash + 1) + "." + path.substr(slash + 1) + ".XXXXXX";
  const int fd = mkostemp(tmp.data(), O_CLOEXEC);  // mode 0600
  if (fd < 0) return;
  const bool ok = base::write_all(fd, text) == 0 && fsync(fd) == 0;
  if (close(fd) != 0 || !ok || rename(tmp.c_str(), path.c_str()) != 0) unlink(tmp.c_str());
}

std::string default_probe_cache_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/ddlrun/probe";
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] != '\0') return std::string(home) + "/.cache/ddlrun/probe";
  return "";
}

bool make_private_dir(const std::string& path) {
  for (std::size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string prefix = path.substr(0, slash);
    if (!prefix.empty() && mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) return false;
    if (slash == std::string::npos) break;
  }
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) return false;
  return (st.st_mode & 07777) == 0700 || chmod(path.c_str(), 0700) == 0;
}

std::string probe_cache_path(std::string_view cache_dir, std::string_view job_id,
                             std::string_view host) {
  return std::string(cache_dir) + "/" + escape_component(job_id) + "/" + escape_component(host) +
         ".yaml";
}

}  // namespace ddl::mapper
