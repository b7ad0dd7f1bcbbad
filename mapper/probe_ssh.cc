// Probing hosts over ssh: ddlrun-probe run through an ssh::Session (ssh/session.h).
//
// How one host is probed (probe_host_ssh):
//  1. The connector logs in (ssh/libssh.cc: the ssh config, our own TCP connect, the host key
//     checked against known_hosts, keys only).
//  2. The probe runs in an exec channel; stdout and stderr are read in turn without blocking on
//     either, until EOF or command_timeout; then the exit status (or signal) decides whether
//     stdout is parsed as an inventory.
//  3. With keep_sessions the session is kept for the ssh launcher; with keep_command too, the
//     command prints the inventory and a line "..." and goes on as the agent: its channel is
//     kept open, with what it sent after the inventory.
// Sessions and channels are owned by unique_ptrs, so every return and throw frees them.
//
// Many hosts (RemoteProber): the distinct hosts not yet known are looked up in the job's disk
// cache, the rest are probed by a pool of at most max_parallel threads taking the next host from
// a shared counter, and successes go into the run's map and the disk cache.

#include "mapper/probe_ssh.h"

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

constexpr std::size_t kMaxStdout = std::size_t{64} << 20;  // a huge host's inventory is ~1 MiB
constexpr std::size_t kMaxStderr = std::size_t{64} << 10;
constexpr std::size_t kStderrLines = 5;      // of a failed command, in its reason
constexpr std::size_t kStderrLineMax = 200;  // characters per such line
constexpr int kPollSliceMs = 100;            // how long to wait for stdout before looking at stderr

constexpr std::string_view kNextStep =
    "fix them (each must pass 'ssh -o BatchMode=yes HOST true', printing nothing), leave them "
    "out of the host "
    "list, or plan offline with --host-xml HOST=FILE (FILE from 'lstopo --of xml FILE' on that "
    "host)";

// ---------------------------------------------------------------------------------------------
// Texts

bool shell_safe(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("_./:=@%+,-").find(c) != std::string_view::npos;
}

std::string shell_quote(std::string_view word) {
  if (!word.empty() && std::all_of(word.begin(), word.end(), shell_safe)) return std::string(word);
  std::string out = "'";
  for (char c : word)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

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
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.pop_back();
    if (line.empty()) continue;
    if (line.size() > kStderrLineMax) line = line.substr(0, kStderrLineMax) + "...";
    lines.push_back(std::move(line));
  }
  return lines;
}

// ---------------------------------------------------------------------------------------------
// The command

/// libssh's text for the last failure of `session`.
std::string session_error(ssh::Session& session) {
  const std::string e = session.error();
  return e.empty() ? "unknown libssh error" : e;
}

/// Appends what is waiting on one stream; returns bytes read, or -1 at its EOF.
int drain(ssh::Session& session, ssh::Channel& ch, ssh::Stream stream, std::string& into,
          std::size_t limit) {
  char buf[16384];
  const int n = ch.read(buf, sizeof buf, stream);
  if (n == ssh::Channel::kEof) return -1;
  if (n < 0) {
    throw ProbeError("reading from the remote command failed: " + session_error(session));
  }
  if (into.size() < limit) into.append(buf, std::min<std::size_t>(n, limit - into.size()));
  return n;
}

/// Reads `command`'s stdout and stderr from `ch` into `out` until `done(out)` holds (returns
/// true) or the command's output ends (false). Throws when it prints more than an inventory,
/// on a read error, and after `timeout` ("timed out after T waiting for 'command' <what>").
bool read_output(ssh::Session& session, ssh::Channel& ch, const std::string& command,
                 RemoteOutput& out, std::chrono::milliseconds timeout, std::string_view what,
                 const std::function<bool(const RemoteOutput&)>& done) {
  const base::Deadline deadline(timeout);
  for (;;) {
    const int n_out = drain(session, ch, ssh::Stream::kStdout, out.out, kMaxStdout + 1);
    const int n_err = drain(session, ch, ssh::Stream::kStderr, out.err, kMaxStderr);
    if (done && done(out)) return true;
    if (out.out.size() > kMaxStdout) {
      throw ProbeError("'" + command + "' printed more than " + std::to_string(kMaxStdout >> 20) +
                       " MiB; that is not an inventory");
    }
    if (ch.eof() || (n_out < 0 && n_err < 0)) return false;
    if (n_out > 0 || n_err > 0) continue;
    if (deadline.passed()) {
      throw ProbeError("timed out after " + ssh::seconds_text(timeout) + " waiting for '" +
                       command + "' " + std::string(what));
    }
    const std::chrono::milliseconds wait(deadline.poll_ms(kPollSliceMs));
    if (ch.poll(wait) == ssh::Channel::kError) {
      throw ProbeError("reading from the remote command failed: " + session_error(session));
    }
  }
}

/// Runs `command` on `session` to its end.
RemoteOutput run_command(ssh::Session& session, const std::string& command,
                         std::chrono::milliseconds timeout) {
  RemoteOutput out;
  const std::unique_ptr<ssh::Channel> ch = session.exec(command);
  read_output(session, *ch, command, out, timeout, "to finish", {});
  out.exit_status = ch->exit_status();
  out.signal = ch->exit_signal();
  return out;
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

// ---------------------------------------------------------------------------------------------
// One host

std::string probe_command(const SshProbeOptions& options) {
  return options.remote_command.empty() ? shell_quote(options.probe_path) : options.remote_command;
}

namespace {

/// Runs `command` (keep_command) and reads its stdout up to the line "..." that ends the
/// inventory; the channel stays open. Output that ends first is judged as a probe's.
Inventory probe_and_keep(const std::string& host, const SshProbeOptions& options,
                         std::unique_ptr<ssh::Session> session) {
  const std::string& command = options.keep_command;
  std::unique_ptr<ssh::Channel> ch = session->exec(command);
  RemoteOutput out;
  static constexpr std::string_view kEnd = "\n...\n";
  const auto ended_inventory = [](const RemoteOutput& o) {
    return o.out.find(kEnd) != std::string::npos;
  };
  if (read_output(*session, *ch, command, out, options.command_timeout, "to print the inventory",
                  ended_inventory)) {
    const std::size_t end = out.out.find(kEnd);
    Inventory inventory = inventory_from_probe_output(
        host, command, RemoteOutput{0, {}, out.out.substr(0, end + 1), out.err});
    options.keep_sessions->put(host,
                               ssh::KeptSessions::Kept{std::move(session), std::move(ch),
                                                       out.out.substr(end + kEnd.size()), command});
    return inventory;
  }
  out.exit_status = ch->exit_status();
  return inventory_from_probe_output(host, command, out);
}

}  // namespace

Inventory probe_host_ssh(const std::string& host, const SshProbeOptions& options,
                         ssh::Connector& connector) {
  try {
    if (options.keep_sessions && !options.keep_command.empty()) {
      return probe_and_keep(host, options, connector.connect(host, options));
    }
    const std::string command = probe_command(options);
    if (command.empty()) {
      throw ProbeError("no command to run: the path of ddlrun-probe is not set");
    }
    std::unique_ptr<ssh::Session> session = connector.connect(host, options);
    Inventory inventory = inventory_from_probe_output(
        host, command, run_command(*session, command, options.command_timeout));
    if (options.keep_sessions) {
      options.keep_sessions->put(host, ssh::KeptSessions::Kept{std::move(session), {}, {}, {}});
    }
    return inventory;
  } catch (const ssh::Error& e) {
    throw ProbeError(e.what());
  }
}

Inventory probe_host_ssh(const std::string& host, const SshProbeOptions& options) {
  return probe_host_ssh(host, options, ssh::libssh_connector());
}

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

RemoteProber::RemoteProber(SshProbeOptions options)
    : options_(std::move(options)),
      probe_one_([o = options_](const std::string& host) { return probe_host_ssh(host, o); }) {}

RemoteProber::RemoteProber(SshProbeOptions options, HostProbeFn probe_one)
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

/// Probes every host of `todo` with `probe_one`, at most `max_parallel` at once (threads that
/// take the next host from a shared counter); a failure becomes the host's error.
void probe_all(const Todo& todo, int max_parallel, const HostProbeFn& probe_one) {
  std::atomic<std::size_t> next{0};
  const auto worker = [&] {
    for (std::size_t i = next++; i < todo.size(); i = next++) {
      Outcome& o = *todo[i].second;
      try {
        o.inventory = probe_one(*todo[i].first);
      } catch (const ProbeError& e) {
        o.error = e.what();
      } catch (const std::exception& e) {
        o.error = std::string("internal error: ") + e.what() + " (please report this)";
      }
      if (o.inventory == std::nullopt && o.error.empty()) o.error = "unknown failure";
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
    if (!o.inventory) todo.emplace_back(&host, &o);
  }
  probe_all(todo, options_.max_parallel, probe_one_);
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

std::vector<HostProbe> probe_hosts_ssh(std::span<const std::string> hosts,
                                       const SshProbeOptions& options) {
  return RemoteProber(options).probe(hosts);
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

std::string job_cache_dir(const SshProbeOptions& options) {
  if (options.job_id.empty()) return "";
  const std::string root =
      options.cache_dir.empty() ? default_probe_cache_dir() : options.cache_dir;
  const std::string job_dir = root + "/" + escape_component(options.job_id);
  if (root.empty() || !make_private_dir(root) || !make_private_dir(job_dir)) return "";
  return job_dir;
}

std::optional<Inventory> cached_inventory(const SshProbeOptions& options, const std::string& host) {
  const std::string job_dir = job_cache_dir(options);
  if (job_dir.empty()) return std::nullopt;
  return read_cache(job_dir + "/" + escape_component(host) + ".yaml");
}

void cache_inventory(const SshProbeOptions& options, const std::string& host,
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
