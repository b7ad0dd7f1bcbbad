// Probing hosts over ssh: ddlrun-probe run through an ssh::Session (ssh/session.h).
//
// How one host is probed (probe_host_ssh):
//  1. The connector logs in (ssh/libssh.cc: the ssh config, our own TCP connect, the host key
//     checked against known_hosts, keys only).
//  2. The probe runs in an exec channel; stdout and stderr are read in turn without blocking on
//     either, until EOF or command_timeout; then the exit status (or signal) decides whether
//     stdout is parsed as an inventory.
// Sessions and channels are owned by unique_ptrs, so every return and throw frees them.
//
// Many hosts (RemoteProber): the distinct hosts not yet known are looked up in the job's disk
// cache, the rest are probed (PipelinedProbe, below: at most max_parallel threads log in and
// start the commands, one thread reads them all, so a slow host holds no thread while it is
// slow; a HostProbeFn, as tests pass, on a pool of at most max_parallel threads), and successes
// go into the run's map and the disk cache.

#include "mapper/probe_ssh.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
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

/// A host's probe command, started: what it printed so far, and until when it may print.
struct Running {
  std::string host;
  std::string command;
  std::chrono::milliseconds timeout{0};
  base::Deadline deadline{std::chrono::milliseconds(0)};
  RemoteOutput out;
  std::unique_ptr<ssh::Session> session;
  std::unique_ptr<ssh::Channel> channel;  ///< destroyed before session
};

/// Reads what `r`'s command printed on stdout and stderr, without waiting: true once its output
/// ended, false while more may come. Throws when it prints more than an inventory, on a
/// read error, and past its deadline ("timed out after T waiting for 'command' to finish").
bool read_step(Running& r) {
  for (;;) {
    const int n_out =
        drain(*r.session, *r.channel, ssh::Stream::kStdout, r.out.out, kMaxStdout + 1);
    const int n_err = drain(*r.session, *r.channel, ssh::Stream::kStderr, r.out.err, kMaxStderr);
    if (r.out.out.size() > kMaxStdout) {
      throw ProbeError("'" + r.command + "' printed more than " + std::to_string(kMaxStdout >> 20) +
                       " MiB; that is not an inventory");
    }
    if (r.channel->eof() || (n_out < 0 && n_err < 0)) return true;
    if (n_out > 0 || n_err > 0) continue;
    if (r.deadline.passed()) {
      throw ProbeError("timed out after " + ssh::seconds_text(r.timeout) + " waiting for '" +
                       r.command + "' to finish");
    }
    return false;
  }
}

/// read_step until the output is complete, waiting on the channel in between.
void read_output(Running& r) {
  while (!read_step(r)) {
    const std::chrono::milliseconds wait(r.deadline.poll_ms(kPollSliceMs));
    if (r.channel->poll(wait) == ssh::Channel::kError) {
      throw ProbeError("reading from the remote command failed: " + session_error(*r.session));
    }
  }
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

/// Steps 1 and 2 up to the command's start: logs in to `host` and runs the probe command.
/// Throws ssh::Error or ProbeError.
std::unique_ptr<Running> start_probe(const std::string& host, const SshProbeOptions& options,
                                     ssh::Connector& connector) {
  auto r = std::make_unique<Running>();
  r->host = host;
  r->command = probe_command(options);
  if (r->command.empty()) {
    throw ProbeError("no command to run: the path of ddlrun-probe is not set");
  }
  r->session = connector.connect(host, options);
  r->channel = r->session->exec(r->command);
  r->timeout = options.command_timeout;
  r->deadline = base::Deadline(options.command_timeout);
  return r;
}

/// Step 2 once the output has ended: the exit status (or signal) judged, and the inventory.
/// Throws ProbeError.
Inventory finish_probe(Running& r) {
  r.out.exit_status = r.channel->exit_status();
  r.out.signal = r.channel->exit_signal();
  return inventory_from_probe_output(r.host, r.command, r.out);
}

}  // namespace

Inventory probe_host_ssh(const std::string& host, const SshProbeOptions& options,
                         ssh::Connector& connector) {
  try {
    std::unique_ptr<Running> r = start_probe(host, options, connector);
    read_output(*r);
    return finish_probe(*r);
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
    : RemoteProber(std::move(options), ssh::libssh_connector()) {}

RemoteProber::RemoteProber(SshProbeOptions options, ssh::Connector& connector)
    : options_(std::move(options)), connector_(&connector) {}

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

/// The reason a probe failed with `e`: its text, unless it is none of the probe's own errors.
std::string reason_of(const std::exception& e) {
  if (dynamic_cast<const ProbeError*>(&e) != nullptr ||
      dynamic_cast<const ssh::Error*>(&e) != nullptr) {
    return e.what();
  }
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

// Probing many hosts over ssh without a thread per host in wait (RemoteProber with a
// connector). At most max_parallel worker threads log in to the next host and start its probe
// command, then hand it to the calling thread, which reads every started command's output in
// one poll() on their sockets (ssh::Channel::fd) and its wake-up eventfd: a host whose command
// is slow to start or to print (a login shell that sleeps) holds no thread, so every host's
// wait overlaps while at most max_parallel log in at once. A command whose output is complete
// (or failed, or past its deadline) goes back to a worker, which takes its exit status, parses
// the inventory and closes the session: the parse runs in parallel, and a blocking close never
// holds up the reading. The texts are probe_host_ssh's, whose steps these are.
class PipelinedProbe {
 public:
  PipelinedProbe(const Todo& todo, const SshProbeOptions& options, ssh::Connector& connector)
      : todo_(todo),
        options_(options),
        connector_(connector),
        wake_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
        unsettled_(todo.size()) {}
  ~PipelinedProbe() {
    if (wake_ >= 0) close(wake_);
  }
  PipelinedProbe(const PipelinedProbe&) = delete;
  PipelinedProbe& operator=(const PipelinedProbe&) = delete;

  void run() {
    const std::size_t want =
        std::min<std::size_t>(std::max(options_.max_parallel, 1), todo_.size());
    std::vector<std::jthread> pool;
    try {
      while (wake_ >= 0 && pool.size() < want)
        pool.emplace_back([this] { work(); });
    } catch (const std::system_error&) {
    }
    if (pool.empty()) {  // no thread, or no eventfd: one host after the other
      for (const auto& [host, o] : todo_) {
        const std::string* name = host;  // clang before 16 captures no structured binding
        settle(*o, [&] { return probe_host_ssh(*name, options_, connector_); });
        if (options_.on_settled) options_.on_settled(*name);
      }
      return;
    }
    read_all();
  }  // joins

 private:
  /// A started probe and where its outcome goes.
  struct Item {
    const std::string* host = nullptr;
    Outcome* outcome = nullptr;
    std::unique_ptr<Running> running;
    std::string error;  ///< why reading it failed
  };

  /// A worker: finishes what was read, else starts the next host, until every host settled.
  void work() {
    std::unique_lock lock(mutex_);
    for (;;) {
      changed_.wait(lock,
                    [&] { return !read_.empty() || next_ < todo_.size() || unsettled_ == 0; });
      if (!read_.empty()) {
        std::unique_ptr<Item> item = std::move(read_.front());
        read_.pop_front();
        lock.unlock();
        finish(*item);
        const std::string& host = *item->host;
        item.reset();  // closes the session here rather than in the reading thread
        lock.lock();
        settled(host);
      } else if (next_ < todo_.size()) {
        const std::size_t i = next_++;
        lock.unlock();
        auto item = std::make_unique<Item>();
        item->host = todo_[i].first;
        item->outcome = todo_[i].second;
        try {
          item->running = start_probe(*todo_[i].first, options_, connector_);
        } catch (const std::exception& e) {
          item->outcome->error = reason_of(e);
        }
        lock.lock();
        if (item->running) {
          started_.push_back(std::move(item));
          wake();
        } else {
          settled(*item->host);
        }
      } else {
        return;
      }
    }
  }

  void finish(Item& item) {
    Outcome& o = *item.outcome;
    if (!item.error.empty()) {
      o.error = item.error;
      return;
    }
    settle(o, [&] { return finish_probe(*item.running); });
  }

  /// Under the lock: one more host, `host`, settled; the reader and the workers may be done.
  void settled(const std::string& host) {
    if (options_.on_settled) options_.on_settled(host);
    --unsettled_;
    changed_.notify_all();
    wake();
  }
  void wake() {
    const std::uint64_t one = 1;
    (void)!::write(wake_, &one, sizeof one);
  }

  /// The calling thread: reads every started probe until every host settled.
  void read_all() {
    std::vector<std::unique_ptr<Item>> mine;
    for (;;) {
      {
        std::lock_guard lock(mutex_);
        if (unsettled_ == 0) return;
        for (auto& item : started_)
          mine.push_back(std::move(item));
        started_.clear();
      }
      for (std::size_t i = 0; i < mine.size();) {
        if (!read_one(*mine[i])) {
          ++i;
          continue;
        }
        std::lock_guard lock(mutex_);
        read_.push_back(std::move(mine[i]));
        mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(i));
        changed_.notify_one();
      }
      wait(mine);
    }
  }

  /// One look at `item`'s output: true once it is complete, or reading it failed.
  static bool read_one(Item& item) {
    try {
      return read_step(*item.running);
    } catch (const std::exception& e) {
      item.error = reason_of(e);
    }
    return true;
  }

  /// Waits for output on any of `mine`, a wake-up, or the nearest deadline (at most
  /// kPollSliceMs; 5 ms when a channel has no socket to wait on).
  void wait(const std::vector<std::unique_ptr<Item>>& mine) {
    std::vector<pollfd> fds{{wake_, POLLIN, 0}};
    int ms = kPollSliceMs;
    for (const auto& item : mine) {
      const int fd = item->running->channel->fd();
      if (fd >= 0) {
        fds.push_back({fd, POLLIN, 0});
      } else {
        ms = std::min(ms, 5);
      }
      ms = std::min(ms, item->running->deadline.poll_ms(kPollSliceMs));
    }
    ::poll(fds.data(), fds.size(), ms);
    std::uint64_t n = 0;
    (void)!::read(wake_, &n, sizeof n);
  }

  const Todo& todo_;
  const SshProbeOptions& options_;
  ssh::Connector& connector_;
  int wake_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::size_t next_ = 0;                        ///< the first host no worker took yet
  std::size_t unsettled_;                       ///< hosts without an outcome yet
  std::vector<std::unique_ptr<Item>> started_;  ///< from the workers to the reader
  std::deque<std::unique_ptr<Item>> read_;      ///< from the reader to the workers
};

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
  if (connector_ != nullptr) {
    PipelinedProbe(todo, options_, *connector_).run();
  } else {
    probe_all(todo, options_.max_parallel, probe_one_, options_.on_settled);
  }
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
