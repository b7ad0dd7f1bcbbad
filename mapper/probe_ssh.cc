// Probing hosts over ssh with libssh.
//
// How one host is probed (probe_host_ssh):
//  1. A libssh session takes the host name and reads the ssh config (the user's and the system's,
//     or options.ssh_config), which may rename the host (HostName), pick the user, the port, the
//     identity files and known_hosts; options then override user, port and known_hosts.
//  2. Unless the config names a ProxyCommand, we open the TCP connection ourselves (getaddrinfo,
//     a non-blocking connect bounded by connect_timeout) and hand the socket to libssh: that is
//     what lets a failure say "name does not resolve", "connection refused" or "timed out" instead
//     of libssh's one generic message. Names under .invalid never reach the resolver (RFC 6761).
//  3. libssh does the handshake; the server's key is checked against known_hosts: unknown fails
//     (or is added, under kAcceptNew), changed always fails.
//  4. Login with keys only: "none" first to learn the server's methods, then publickey through
//     ssh-agent and the identity files. A passphrase callback that refuses keeps libssh from
//     ever asking for one.
//  5. The probe runs in an exec channel; stdout and stderr are read in turn without blocking on
//     either, until EOF or command_timeout; then the exit status (or signal) decides whether
//     stdout is parsed as an inventory.
// Every libssh object is owned by a unique_ptr, so every return and throw frees it.
//
// Many hosts (RemoteProber): the distinct hosts not yet known are looked up in the job's disk
// cache, the rest are probed by a pool of at most max_parallel threads taking the next host from
// a shared counter, and successes go into the run's map and the disk cache.

#include "mapper/probe_ssh.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <libssh/callbacks.h>
#include <libssh/libssh.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
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

namespace ddl::mapper {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kMaxStdout = std::size_t{64} << 20;  // a huge host's inventory is ~1 MiB
constexpr std::size_t kMaxStderr = std::size_t{64} << 10;
constexpr std::size_t kStderrLines = 5;      // of a failed command, in its reason
constexpr std::size_t kStderrLineMax = 200;  // characters per such line
constexpr int kPollSliceMs = 100;            // how long to wait for stdout before looking at stderr

constexpr std::string_view kNextStep =
    "fix them (each must pass 'ssh -o BatchMode=yes HOST true'), leave them out of the host "
    "list, or plan offline with --host-xml HOST=FILE (FILE from 'lstopo --of xml FILE' on that "
    "host)";

// ---------------------------------------------------------------------------------------------
// Texts

/// "10 s", "0.3 s".
std::string seconds_text(std::chrono::milliseconds ms) {
  if (ms.count() % 1000 == 0) return std::to_string(ms.count() / 1000) + " s";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g s", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

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

/// "10.200.3.2:22", "[fe80::1]:22".
std::string endpoint_text(std::string_view host, unsigned port) {
  const bool v6 = host.find(':') != std::string_view::npos;
  return (v6 ? "[" + std::string(host) + "]" : std::string(host)) + ":" + std::to_string(port);
}

std::string errno_text(int err) {
  return std::error_code(err, std::generic_category()).message();
}

// ---------------------------------------------------------------------------------------------
// libssh ownership

struct SessionFree {
  void operator()(ssh_session s) const {
    if (ssh_is_connected(s)) ssh_disconnect(s);
    ssh_free(s);
  }
};
struct ChannelFree {
  void operator()(ssh_channel c) const { ssh_channel_free(c); }  // closes it when open
};
struct KeyFree {
  void operator()(ssh_key k) const { ssh_key_free(k); }
};
struct CharFree {
  void operator()(char* p) const { ssh_string_free_char(p); }
};
using Session = std::unique_ptr<ssh_session_struct, SessionFree>;
using Channel = std::unique_ptr<ssh_channel_struct, ChannelFree>;
using Key = std::unique_ptr<ssh_key_struct, KeyFree>;
using CString = std::unique_ptr<char, CharFree>;

void init_libssh() {
  static std::once_flag once;
  static int rc = 0;
  std::call_once(once, [] { rc = ssh_init(); });
  if (rc != SSH_OK) throw ProbeError("cannot initialize libssh (its crypto library failed)");
}

/// A string option as libssh holds it now; "" when unset.
std::string get_option(ssh_session s, ssh_options_e type) {
  char* raw = nullptr;
  if (ssh_options_get(s, type, &raw) != SSH_OK || raw == nullptr) return "";
  const CString owned(raw);
  return raw;
}

std::string session_error(ssh_session s) {
  const char* e = ssh_get_error(s);
  return e != nullptr && *e != '\0' ? e : "unknown libssh error";
}

/// The passphrase callback: never ask (BatchMode).
int refuse_passphrase(const char*, char*, std::size_t, int, int, void*) {
  return -1;
}

/// "publickey, password".
std::string methods_text(int methods) {
  static constexpr std::pair<int, std::string_view> kNames[] = {
      {SSH_AUTH_METHOD_PUBLICKEY, "publickey"},
      {SSH_AUTH_METHOD_PASSWORD, "password"},
      {SSH_AUTH_METHOD_INTERACTIVE, "keyboard-interactive"},
      {SSH_AUTH_METHOD_GSSAPI_MIC, "gssapi-with-mic"},
      {SSH_AUTH_METHOD_HOSTBASED, "hostbased"},
  };
  std::string out;
  for (const auto& [bit, name] : kNames) {
    if (methods & bit) out += (out.empty() ? "" : ", ") + std::string(name);
  }
  return out.empty() ? "none" : out;
}

// ---------------------------------------------------------------------------------------------
// TCP connection

bool is_invalid_tld(std::string_view name) {
  while (!name.empty() && name.back() == '.')
    name.remove_suffix(1);
  constexpr std::string_view kInvalid = "invalid";
  if (name.size() < kInvalid.size()) return false;
  const std::string_view tail = name.substr(name.size() - kInvalid.size());
  const bool match = std::equal(tail.begin(), tail.end(), kInvalid.begin(), [](char a, char b) {
    return (a >= 'A' && a <= 'Z' ? a - 'A' + 'a' : a) == b;
  });
  return match &&
         (name.size() == kInvalid.size() || name[name.size() - kInvalid.size() - 1] == '.');
}

struct AddrInfoFree {
  void operator()(addrinfo* a) const { freeaddrinfo(a); }
};

/// A connected, non-blocking TCP socket to name:port; throws ProbeError with the reason.
int connect_tcp(const std::string& name, unsigned port, std::chrono::milliseconds timeout) {
  if (is_invalid_tld(name)) {
    throw ProbeError("cannot resolve host name '" + name + "': " + gai_strerror(EAI_NONAME));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* raw = nullptr;
  const int gai = getaddrinfo(name.c_str(), std::to_string(port).c_str(), &hints, &raw);
  if (gai != 0) {
    // The resolver (and libssh before it, reading the ssh config) cannot open its files when
    // no descriptor is left, and then says the name is unknown.
    std::string fds = descriptor_exhaustion(gai == EAI_SYSTEM ? errno : 0);
    if (fds.empty()) fds = descriptors_exhausted_now();
    if (!fds.empty()) throw ProbeError("cannot resolve host name '" + name + "': " + fds);
    throw ProbeError("cannot resolve host name '" + name +
                     "': " + (gai == EAI_SYSTEM ? errno_text(errno) : gai_strerror(gai)));
  }
  const std::unique_ptr<addrinfo, AddrInfoFree> addresses(raw);
  const Clock::time_point deadline = Clock::now() + timeout;
  int last_error = 0;
  std::string last_endpoint = endpoint_text(name, port);
  for (const addrinfo* a = addresses.get(); a != nullptr; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = "?";
    const void* in =
        a->ai_family == AF_INET6
            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr)
            : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr);
    inet_ntop(a->ai_family, in, text, sizeof text);
    last_endpoint = endpoint_text(text, port);

    const int fd =
        socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = errno;
      if (const std::string fds = descriptor_exhaustion(last_error); !fds.empty()) {
        throw ProbeError("cannot connect to " + last_endpoint + ": " + fds);
      }
      continue;
    }
    int err = connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int ready = 0;
      for (;;) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        ready = poll(&p, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 0)));
        if (ready >= 0 || errno != EINTR) break;
      }
      if (ready == 0) {
        close(fd);
        throw ProbeError("timed out after " + seconds_text(timeout) + " connecting to " +
                         last_endpoint);
      }
      socklen_t len = sizeof err;
      if (ready < 0) {
        err = errno;
      } else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
        err = errno;
      }
    }
    if (err == 0) return fd;
    close(fd);
    last_error = err;
  }
  if (last_error == ECONNREFUSED) throw ProbeError("connection refused (" + last_endpoint + ")");
  throw ProbeError("cannot connect to " + last_endpoint + ": " + errno_text(last_error));
}

// ---------------------------------------------------------------------------------------------
// Host keys

/// known_hosts is written by every thread that accepts a new key: one at a time.
std::mutex& known_hosts_mutex() {
  static std::mutex m;
  return m;
}

/// Checks the server's key against known_hosts; throws ProbeError unless it is known (or
/// accepted under kAcceptNew).
void check_host_key(ssh_session s, const std::string& alias, const std::string& host_name,
                    unsigned port, HostKeyPolicy policy) {
  const std::string endpoint = endpoint_text(host_name, port);
  ssh_key raw_key = nullptr;
  if (ssh_get_server_publickey(s, &raw_key) != SSH_OK) {
    throw ProbeError("cannot read the host key of " + endpoint + ": " + session_error(s));
  }
  const Key key(raw_key);
  unsigned char* hash = nullptr;
  std::size_t hash_len = 0;
  std::string fingerprint = "(no fingerprint)";
  if (ssh_get_publickey_hash(key.get(), SSH_PUBLICKEY_HASH_SHA256, &hash, &hash_len) == SSH_OK) {
    const CString text(ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, hash_len));
    if (text) fingerprint = text.get();
    ssh_clean_pubkey_hash(&hash);
  }
  const char* type = ssh_key_type_to_char(ssh_key_type(key.get()));
  const std::string key_text =
      std::string(type != nullptr ? type : "unknown") + " key " + fingerprint;
  std::string known_hosts = get_option(s, SSH_OPTIONS_KNOWNHOSTS);
  if (known_hosts.empty()) known_hosts = "~/.ssh/known_hosts";
  // How ssh names this host in known_hosts, ssh-keyscan and ssh-keygen -R.
  const std::string key_name =
      port == 22 ? host_name : "[" + host_name + "]:" + std::to_string(port);
  const std::string scan = "ssh-keyscan " + (port == 22 ? "" : "-p " + std::to_string(port) + " ") +
                           "-H " + host_name + " >> " + known_hosts;

  std::unique_lock lock(known_hosts_mutex());
  switch (ssh_session_is_known_server(s)) {
    case SSH_KNOWN_HOSTS_OK:
      return;
    case SSH_KNOWN_HOSTS_CHANGED:
      throw ProbeError("WARNING: the host key of " + key_name + " has CHANGED (now " + key_text +
                       "), refusing to connect: someone may be intercepting the connection "
                       "(man-in-the-middle), or the host was reinstalled; if you know it was, "
                       "remove the old key with 'ssh-keygen -f " +
                       known_hosts + " -R " + key_name + "' and connect once with 'ssh " + alias +
                       "'");
    case SSH_KNOWN_HOSTS_OTHER:
      throw ProbeError("WARNING: " + known_hosts + " has a key of another type for " + key_name +
                       " than the " + key_text +
                       " it offers now, refusing to connect: someone may be intercepting the "
                       "connection (man-in-the-middle), or the host was reinstalled; if you know "
                       "it was, remove the old key with 'ssh-keygen -f " +
                       known_hosts + " -R " + key_name + "' and connect once with 'ssh " + alias +
                       "'");
    case SSH_KNOWN_HOSTS_UNKNOWN:
    case SSH_KNOWN_HOSTS_NOT_FOUND:
      // libssh answers "unknown" when it could not open known_hosts at all.
      if (const std::string fds = descriptors_exhausted_now(); !fds.empty()) {
        throw ProbeError("cannot read " + known_hosts + " to check the host key of " + key_name +
                         ": " + fds);
      }
      if (policy == HostKeyPolicy::kAcceptNew) {
        if (ssh_session_update_known_hosts(s) != SSH_OK) {
          throw ProbeError("cannot add the host key of " + key_name + " to " + known_hosts + ": " +
                           session_error(s));
        }
        return;
      }
      throw ProbeError("unknown host key: " + key_name + " is not in " + known_hosts +
                       " (it offers " + key_text +
                       "); if that is the host you expect, add its key with '" + scan +
                       "' or by connecting once with 'ssh " + alias + "'");
    case SSH_KNOWN_HOSTS_ERROR:
      if (const std::string fds = descriptors_exhausted_now(); !fds.empty()) {
        throw ProbeError("cannot read " + known_hosts + " to check the host key of " + key_name +
                         ": " + fds);
      }
      break;
  }
  throw ProbeError("cannot check the host key of " + key_name + " against " + known_hosts + ": " +
                   session_error(s));
}

// ---------------------------------------------------------------------------------------------
// Login and the command

void authenticate(ssh_session s, const std::string& alias, const std::string& who) {
  int rc = ssh_userauth_none(s, nullptr);
  if (rc == SSH_AUTH_SUCCESS) return;
  if (rc == SSH_AUTH_ERROR) throw ProbeError("login as " + who + " failed: " + session_error(s));
  const int methods = ssh_userauth_list(s, nullptr);
  const std::string fix = "; ddlrun logs in with keys only, never a password: make 'ssh -o " +
                          std::string("BatchMode=yes ") + alias + " true' work";
  if (!(methods & SSH_AUTH_METHOD_PUBLICKEY)) {
    throw ProbeError("authentication failed for " + who +
                     ": the server takes no keys (it allows: " + methods_text(methods) + ")" + fix);
  }
  rc = ssh_userauth_publickey_auto(s, nullptr, nullptr);
  if (rc == SSH_AUTH_SUCCESS) return;
  if (rc == SSH_AUTH_ERROR) {
    throw ProbeError("authentication failed for " + who + ": " + session_error(s));
  }
  const char* agent = std::getenv("SSH_AUTH_SOCK");
  const std::string tried = agent != nullptr && *agent != '\0'
                                ? "publickey with ssh-agent and the identity files"
                                : "publickey with the identity files, no ssh-agent (SSH_AUTH_SOCK "
                                  "is not set)";
  if (rc == SSH_AUTH_PARTIAL) {
    throw ProbeError("authentication failed for " + who +
                     ": a key was accepted but the server asks for more (it allows: " +
                     methods_text(ssh_userauth_list(s, nullptr)) + ")" + fix);
  }
  throw ProbeError("authentication failed for " + who + ": no key was accepted (tried: " + tried +
                   "; the server allows: " + methods_text(methods) + ")" + fix);
}

void on_exit_signal(ssh_session, ssh_channel, const char* signal, int, const char*, const char*,
                    void* userdata) {
  if (signal != nullptr) static_cast<RemoteOutput*>(userdata)->signal = signal;
}

/// Appends what is waiting on one stream; returns bytes read, or -1 at its EOF.
int drain(ssh_session s, ssh_channel ch, int is_stderr, std::string& into, std::size_t limit) {
  char buf[16384];
  const int n = ssh_channel_read_nonblocking(ch, buf, sizeof buf, is_stderr);
  if (n == SSH_EOF) return -1;
  if (n < 0) throw ProbeError("reading from the remote command failed: " + session_error(s));
  if (into.size() < limit) into.append(buf, std::min<std::size_t>(n, limit - into.size()));
  return n;
}

/// Opens a session on `ch` and runs `command` there.
void exec_on(ssh_session s, ssh_channel ch, const std::string& command,
             const std::string& endpoint) {
  if (ssh_channel_open_session(ch) != SSH_OK) {
    throw ProbeError("cannot open a session on " + endpoint + ": " + session_error(s));
  }
  if (ssh_channel_request_exec(ch, command.c_str()) != SSH_OK) {
    throw ProbeError("cannot run '" + command + "' on " + endpoint + ": " + session_error(s));
  }
}

/// Reads `command`'s stdout and stderr from `ch` into `out` until `done(out)` holds (returns
/// true) or the command's output ends (false). Throws when it prints more than an inventory,
/// on a read error, and after `timeout` ("timed out after T waiting for 'command' <what>").
bool read_output(ssh_session s, ssh_channel ch, const std::string& command, RemoteOutput& out,
                 std::chrono::milliseconds timeout, std::string_view what,
                 const std::function<bool(const RemoteOutput&)>& done) {
  const Clock::time_point deadline = Clock::now() + timeout;
  for (;;) {
    const int n_out = drain(s, ch, 0, out.out, kMaxStdout + 1);
    const int n_err = drain(s, ch, 1, out.err, kMaxStderr);
    if (done && done(out)) return true;
    if (out.out.size() > kMaxStdout) {
      throw ProbeError("'" + command + "' printed more than " + std::to_string(kMaxStdout >> 20) +
                       " MiB; that is not an inventory");
    }
    if (ssh_channel_is_eof(ch) || (n_out < 0 && n_err < 0)) return false;
    if (n_out > 0 || n_err > 0) continue;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      throw ProbeError("timed out after " + seconds_text(timeout) + " waiting for '" + command +
                       "' " + std::string(what));
    }
    const int wait = static_cast<int>(std::min<std::int64_t>(left.count(), kPollSliceMs));
    if (ssh_channel_poll_timeout(ch, wait, 0) == SSH_ERROR) {
      throw ProbeError("reading from the remote command failed: " + session_error(s));
    }
  }
}

RemoteOutput run_command(ssh_session s, const std::string& command, const std::string& endpoint,
                         std::chrono::milliseconds timeout) {
  RemoteOutput out;
  ssh_channel_callbacks_struct callbacks{};  // outlives the channel
  callbacks.userdata = &out;
  callbacks.channel_exit_signal_function = on_exit_signal;
  ssh_callbacks_init(&callbacks);

  const Channel ch(ssh_channel_new(s));
  if (!ch) throw ProbeError("cannot open a channel to " + endpoint + ": " + session_error(s));
  ssh_set_channel_callbacks(ch.get(), &callbacks);
  exec_on(s, ch.get(), command, endpoint);
  read_output(s, ch.get(), command, out, timeout, "to finish", {});
  out.exit_status = ssh_channel_get_exit_status(ch.get());
  ssh_channel_close(ch.get());
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

/// Creates `path` and its parents (0700 for those it makes) and checks that the last is a
/// directory of ours that only we can use (making it so when it is ours). False when it cannot.
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

std::optional<Inventory> read_cache(const std::string& path) {
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
  try {
    return inventory_from_yaml(text, path);
  } catch (const InventoryError&) {
    return std::nullopt;  // probed again and overwritten
  }
}

/// Writes atomically: a 0600 temporary file beside it, then rename.
void write_cache(const std::string& path, const Inventory& inventory) {
  const std::size_t slash = path.rfind('/');
  std::string tmp = path.substr(0, slash + 1) + "." + path.substr(slash + 1) + ".XXXXXX";
  const int fd = mkostemp(tmp.data(), O_CLOEXEC);  // mode 0600
  if (fd < 0) return;
  const std::string text = to_yaml(inventory);
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  const bool ok = done == text.size() && fsync(fd) == 0;
  if (close(fd) != 0 || !ok || rename(tmp.c_str(), path.c_str()) != 0) unlink(tmp.c_str());
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// One host

std::string probe_command(const SshProbeOptions& options) {
  return options.remote_command.empty() ? shell_quote(options.probe_path) : options.remote_command;
}

void SshSessionFree::operator()(ssh_session_struct* s) const {
  SessionFree{}(s);
}

void SshChannelFree::operator()(ssh_channel_struct* c) const {
  ChannelFree{}(c);
}

SshSession open_ssh_session(const std::string& host, const SshProbeOptions& options,
                            std::string* endpoint_out) {
  init_libssh();
  if (host.empty()) throw ProbeError("empty host name");
  // Stateless, so one for every session; it must outlive them.
  static ssh_callbacks_struct callbacks = [] {
    ssh_callbacks_struct c{};
    c.auth_function = refuse_passphrase;
    ssh_callbacks_init(&c);
    return c;
  }();

  SshSession session(ssh_new());
  ssh_session s = session.get();
  if (s == nullptr) throw ProbeError("cannot create an ssh session (out of memory)");
  ssh_set_callbacks(s, &callbacks);
  if (ssh_options_set(s, SSH_OPTIONS_HOST, host.c_str()) != SSH_OK) {
    throw ProbeError("bad host name '" + host + "': " + session_error(s));
  }
  if (!options.ssh_config.empty() && access(options.ssh_config.c_str(), R_OK) != 0) {
    throw ProbeError("cannot read ssh config " + options.ssh_config + ": " + errno_text(errno));
  }
  if (ssh_options_parse_config(
          s, options.ssh_config.empty() ? nullptr : options.ssh_config.c_str()) != 0) {
    throw ProbeError("cannot read the ssh config " +
                     (options.ssh_config.empty()
                          ? std::string("(~/.ssh/config, /etc/ssh/ssh_config)")
                          : options.ssh_config) +
                     ": " + session_error(s));
  }
  const long timeout_s = static_cast<long>(options.connect_timeout.count() / 1000);
  const long timeout_us = static_cast<long>(options.connect_timeout.count() % 1000 * 1000);
  const unsigned port_override = static_cast<unsigned>(options.port);
  if ((!options.user.empty() && ssh_options_set(s, SSH_OPTIONS_USER, options.user.c_str()) != 0) ||
      (options.port > 0 && ssh_options_set(s, SSH_OPTIONS_PORT, &port_override) != 0) ||
      (!options.known_hosts.empty() &&
       ssh_options_set(s, SSH_OPTIONS_KNOWNHOSTS, options.known_hosts.c_str()) != 0) ||
      ssh_options_set(s, SSH_OPTIONS_TIMEOUT, &timeout_s) != 0 ||
      ssh_options_set(s, SSH_OPTIONS_TIMEOUT_USEC, &timeout_us) != 0) {
    throw ProbeError("bad ssh option: " + session_error(s));
  }

  const std::string host_name = get_option(s, SSH_OPTIONS_HOST);
  unsigned port = 22;
  if (ssh_options_get_port(s, &port) != SSH_OK || port == 0) port = 22;
  const std::string endpoint = endpoint_text(host_name, port);
  const std::string proxy = get_option(s, SSH_OPTIONS_PROXYCOMMAND);
  const bool use_proxy = !proxy.empty() && proxy != "none";
  if (!use_proxy) {
    int fd = connect_tcp(host_name, port, options.connect_timeout);
    if (ssh_options_set(s, SSH_OPTIONS_FD, &fd) != SSH_OK) {
      close(fd);
      throw ProbeError("cannot hand the socket to libssh: " + session_error(s));
    }
  }
  const Clock::time_point handshake_start = Clock::now();
  if (ssh_connect(s) != SSH_OK) {
    const std::string error = session_error(s);
    if (use_proxy) {
      throw ProbeError("cannot connect through ProxyCommand '" + proxy + "': " + error);
    }
    if (Clock::now() - handshake_start >= options.connect_timeout) {
      throw ProbeError("timed out after " + seconds_text(options.connect_timeout) +
                       " waiting for the ssh server at " + endpoint + " to greet");
    }
    if (const std::string fds = descriptors_exhausted_now(); !fds.empty()) {
      throw ProbeError("ssh handshake with " + endpoint + " failed: " + fds);
    }
    throw ProbeError("ssh handshake with " + endpoint + " failed: " + error);
  }
  check_host_key(s, host, host_name, port, options.host_key_policy);
  std::string user = get_option(s, SSH_OPTIONS_USER);
  try {
    authenticate(s, host, (user.empty() ? "" : user + "@") + endpoint);
  } catch (const ProbeError&) {
    // Identity files that could not be opened for want of descriptors look like keys refused.
    if (const std::string fds = descriptors_exhausted_now(); !fds.empty()) {
      throw ProbeError("cannot log in to " + endpoint + ": " + fds);
    }
    throw;
  }
  if (endpoint_out != nullptr) *endpoint_out = endpoint;
  return session;
}

/// Runs `command` (keep_command) and reads its stdout up to the line "..." that ends the
/// inventory; the channel stays open. Output that ends first is judged as a probe's.
Inventory probe_and_keep(const std::string& host, const SshProbeOptions& options,
                         SshSession session, const std::string& endpoint) {
  ssh_session s = session.get();
  const std::string& command = options.keep_command;
  SshChannel ch(ssh_channel_new(s));
  if (!ch) throw ProbeError("cannot open a channel to " + endpoint + ": " + session_error(s));
  exec_on(s, ch.get(), command, endpoint);
  RemoteOutput out;
  static constexpr std::string_view kEnd = "\n...\n";
  const auto ended_inventory = [](const RemoteOutput& o) {
    return o.out.find(kEnd) != std::string::npos;
  };
  if (read_output(s, ch.get(), command, out, options.command_timeout, "to print the inventory",
                  ended_inventory)) {
    const std::size_t end = out.out.find(kEnd);
    Inventory inventory = inventory_from_probe_output(
        host, command, RemoteOutput{0, {}, out.out.substr(0, end + 1), out.err});
    options.keep_sessions->put(host, SshSessions::Kept{std::move(session), endpoint, std::move(ch),
                                                       out.out.substr(end + kEnd.size()), command});
    return inventory;
  }
  out.exit_status = ssh_channel_get_exit_status(ch.get());
  return inventory_from_probe_output(host, command, out);
}

Inventory probe_host_ssh(const std::string& host, const SshProbeOptions& options) {
  if (options.keep_sessions && !options.keep_command.empty()) {
    std::string endpoint;
    SshSession session = open_ssh_session(host, options, &endpoint);
    return probe_and_keep(host, options, std::move(session), endpoint);
  }
  const std::string command = probe_command(options);
  if (command.empty()) throw ProbeError("no command to run: the path of ddlrun-probe is not set");
  std::string endpoint;
  SshSession session = open_ssh_session(host, options, &endpoint);
  Inventory inventory = inventory_from_probe_output(
      host, command, run_command(session.get(), command, endpoint, options.command_timeout));
  if (options.keep_sessions) {
    options.keep_sessions->put(
        host, SshSessions::Kept{std::move(session), std::move(endpoint), {}, {}, {}});
  }
  return inventory;
}

void SshSessions::put(const std::string& host, Kept kept) {
  Kept old;  // closed outside the lock
  const std::lock_guard lock(mutex_);
  if (auto it = kept_.find(host); it != kept_.end()) old = std::move(it->second);
  kept_[host] = std::move(kept);
}

SshSessions::Kept SshSessions::take(const std::string& host) {
  const std::lock_guard lock(mutex_);
  auto it = kept_.find(host);
  if (it == kept_.end()) return {};
  Kept kept = std::move(it->second);
  kept_.erase(it);
  return kept;
}

std::size_t SshSessions::size() const {
  const std::lock_guard lock(mutex_);
  return kept_.size();
}

std::string descriptor_exhaustion(int err) {
  if (err == ENFILE) {
    return "the system's open files are exhausted (fs.file-max): close some, or raise it";
  }
  if (err != EMFILE) return "";
  rlimit limit{};
  const std::string n = getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY
                            ? std::to_string(limit.rlim_cur)
                            : std::string("unknown");
  return "too many open files (limit " + n + "): raise ulimit -n";
}

std::string descriptors_exhausted_now() {
  const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    close(fd);
    return "";
  }
  return descriptor_exhaustion(errno);
}

Inventory inventory_from_probe_output(std::string_view host, std::string_view command,
                                      const RemoteOutput& output) {
  const std::string h(host);
  if (output.exit_status == 0) {
    try {
      return inventory_from_yaml(output.out, "inventory of " + h);
    } catch (const InventoryError& e) {
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

std::vector<HostProbe> RemoteProber::probe(std::span<const std::string> hosts) {
  const std::lock_guard lock(mutex_);
  struct Outcome {
    std::optional<Inventory> inventory;
    std::string error;
    bool cached = false;
  };
  std::map<std::string, Outcome, std::less<>> outcomes;
  for (const std::string& h : hosts) {
    if (outcomes.contains(h)) continue;
    Outcome& o = outcomes[h];
    if (const auto it = inventories_.find(h); it != inventories_.end()) {
      o.inventory = it->second;
      o.cached = true;
    }
  }

  std::string job_dir;  // "" when there is no disk cache
  if (!options_.job_id.empty()) {
    const std::string root =
        options_.cache_dir.empty() ? default_probe_cache_dir() : options_.cache_dir;
    job_dir = root + "/" + escape_component(options_.job_id);
    if (root.empty() || !make_private_dir(root) || !make_private_dir(job_dir)) job_dir.clear();
  }
  const auto cache_file = [&](const std::string& host) {
    return job_dir + "/" + escape_component(host) + ".yaml";
  };
  std::vector<std::pair<const std::string*, Outcome*>> todo;
  for (auto& [host, o] : outcomes) {
    if (!o.inventory && !job_dir.empty()) {
      o.inventory = read_cache(cache_file(host));
      o.cached = o.inventory.has_value();
    }
    if (!o.inventory) todo.emplace_back(&host, &o);
  }

  std::atomic<std::size_t> next{0};
  const auto worker = [&] {
    for (std::size_t i = next++; i < todo.size(); i = next++) {
      Outcome& o = *todo[i].second;
      try {
        o.inventory = probe_one_(*todo[i].first);
      } catch (const ProbeError& e) {
        o.error = e.what();
      } catch (const std::exception& e) {
        o.error = std::string("internal error: ") + e.what() + " (please report this)";
      }
      if (o.inventory == std::nullopt && o.error.empty()) o.error = "unknown failure";
    }
  };
  {
    const std::size_t want = std::min<std::size_t>(std::max(options_.max_parallel, 1), todo.size());
    std::vector<std::jthread> pool;
    try {
      while (pool.size() < want)
        pool.emplace_back(worker);
    } catch (const std::system_error&) {
      if (pool.empty()) worker();  // no thread to be had: probe one after the other here
    }
  }  // joins

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

std::string default_probe_cache_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/ddlrun/probe";
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] != '\0') return std::string(home) + "/.cache/ddlrun/probe";
  return "";
}

std::string probe_cache_path(std::string_view cache_dir, std::string_view job_id,
                             std::string_view host) {
  return std::string(cache_dir) + "/" + escape_component(job_id) + "/" + escape_component(host) +
         ".yaml";
}

}  // namespace ddl::mapper
