// The real Connector, Session and Channel, over libssh.
//
// How a host is logged in to (LibsshConnector::connect):
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
// A command runs in an exec channel (LibsshSession::exec), which records the signal that ended
// it. Its writes never wait (LibsshChannel::write): the session goes non-blocking for each, and
// a write takes nothing while libssh still holds bytes the socket has not taken (a host cut off
// fills the socket's buffer), so the caller keeps the rest and polls for POLLOUT. Every libssh
// object is owned by a unique_ptr, so every return and throw frees it.

#include <arpa/inet.h>
#include <fcntl.h>
#include <libssh/callbacks.h>
#include <libssh/libssh.h>
#include <linux/sockios.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <utility>

#include "base/check.h"
#include "base/fd.h"
#include "base/net/listener.h"
#include "ssh/session.h"

namespace ddl::ssh {
namespace {

using base::errno_text;
using Clock = std::chrono::steady_clock;

/// "10.200.3.2:22", "[fe80::1]:22".
constexpr auto endpoint_text = base::net::join_host_port;

// ---------------------------------------------------------------------------------------------
// libssh ownership

struct SessionFree {
  void operator()(ssh_session s) const {
    if (ssh_is_connected(s)) ssh_disconnect(s);
    ssh_free(s);
  }
};
struct ChannelFree {
  void operator()(ssh_channel c) const {
    if (ssh_channel_is_open(c)) ssh_channel_close(c);
    ssh_channel_free(c);
  }
};
struct KeyFree {
  void operator()(ssh_key k) const { ssh_key_free(k); }
};
struct CharFree {
  void operator()(char* p) const { ssh_string_free_char(p); }
};
using SessionPtr = std::unique_ptr<ssh_session_struct, SessionFree>;
using ChannelPtr = std::unique_ptr<ssh_channel_struct, ChannelFree>;
using KeyPtr = std::unique_ptr<ssh_key_struct, KeyFree>;
using CString = std::unique_ptr<char, CharFree>;

void init_libssh() {
  static std::once_flag once;
  static int rc = 0;
  std::call_once(once, [] { rc = ssh_init(); });
  if (rc != SSH_OK) throw Error("cannot initialize libssh (its crypto library failed)");
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
using AddrInfo = std::unique_ptr<addrinfo, AddrInfoFree>;

/// The addresses of name:port; throws Error when it does not resolve.
AddrInfo resolve(const std::string& name, unsigned port) {
  if (is_invalid_tld(name)) {
    throw Error("cannot resolve host name '" + name + "': " + gai_strerror(EAI_NONAME));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* raw = nullptr;
  const int gai = getaddrinfo(name.c_str(), std::to_string(port).c_str(), &hints, &raw);
  if (gai == 0) return AddrInfo(raw);
  // The resolver (and libssh before it, reading the ssh config) cannot open its files when
  // no descriptor is left, and then says the name is unknown.
  std::string fds = descriptor_exhaustion(gai == EAI_SYSTEM ? errno : 0);
  if (fds.empty()) fds = descriptors_exhausted_now();
  if (!fds.empty()) throw Error("cannot resolve host name '" + name + "': " + fds);
  throw Error("cannot resolve host name '" + name +
              "': " + (gai == EAI_SYSTEM ? errno_text(errno) : gai_strerror(gai)));
}

/// "10.200.3.2:22" of one resolved address.
std::string address_endpoint(const addrinfo& a, unsigned port) {
  char text[INET6_ADDRSTRLEN] = "?";
  const void* in =
      a.ai_family == AF_INET6
          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a.ai_addr)->sin6_addr)
          : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a.ai_addr)->sin_addr);
  inet_ntop(a.ai_family, in, text, sizeof text);
  return endpoint_text(text, port);
}

/// Waits until the non-blocking connect of `fd` is done: 0, or its errno. Throws Error (and
/// closes `fd`) at `deadline`.
int wait_connected(int fd, const base::Deadline& deadline, std::chrono::milliseconds timeout,
                   const std::string& endpoint) {
  pollfd p{fd, POLLOUT, 0};
  int ready = 0;
  for (;;) {
    ready = poll(&p, 1, deadline.poll_ms(std::numeric_limits<int>::max()));
    if (ready >= 0 || errno != EINTR) break;
  }
  if (ready == 0) {
    close(fd);
    throw Error("timed out after " + seconds_text(timeout) + " connecting to " + endpoint);
  }
  int err = 0;
  socklen_t len = sizeof err;
  if (ready < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  return err;
}

/// A connected, non-blocking TCP socket to name:port, trying each address in turn; throws
/// Error with the reason.
int connect_tcp(const std::string& name, unsigned port, std::chrono::milliseconds timeout) {
  const AddrInfo addresses = resolve(name, port);
  const base::Deadline deadline(timeout);
  int last_error = 0;
  std::string last_endpoint = endpoint_text(name, port);
  for (const addrinfo* a = addresses.get(); a != nullptr; a = a->ai_next) {
    last_endpoint = address_endpoint(*a, port);
    const int fd =
        socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = errno;
      if (const std::string fds = descriptor_exhaustion(last_error); !fds.empty()) {
        throw Error("cannot connect to " + last_endpoint + ": " + fds);
      }
      continue;
    }
    int err = connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    if (err == EINPROGRESS) err = wait_connected(fd, deadline, timeout, last_endpoint);
    if (err == 0) return fd;
    close(fd);
    last_error = err;
  }
  if (last_error == ECONNREFUSED) throw Error("connection refused (" + last_endpoint + ")");
  throw Error("cannot connect to " + last_endpoint + ": " + errno_text(last_error));
}

// ---------------------------------------------------------------------------------------------
// Host keys

/// known_hosts is written by every thread that accepts a new key: one at a time.
std::mutex& known_hosts_mutex() {
  static std::mutex m;
  return m;
}

/// "ssh-ed25519 key SHA256:..." of the server's key.
std::string server_key_text(ssh_session s, const std::string& endpoint) {
  ssh_key raw_key = nullptr;
  if (ssh_get_server_publickey(s, &raw_key) != SSH_OK) {
    throw Error("cannot read the host key of " + endpoint + ": " + session_error(s));
  }
  const KeyPtr key(raw_key);
  unsigned char* hash = nullptr;
  std::size_t hash_len = 0;
  std::string fingerprint = "(no fingerprint)";
  if (ssh_get_publickey_hash(key.get(), SSH_PUBLICKEY_HASH_SHA256, &hash, &hash_len) == SSH_OK) {
    const CString text(ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, hash_len));
    if (text) fingerprint = text.get();
    ssh_clean_pubkey_hash(&hash);
  }
  const char* type = ssh_key_type_to_char(ssh_key_type(key.get()));
  return std::string(type != nullptr ? type : "unknown") + " key " + fingerprint;
}

/// One host key check: the names its messages use.
struct HostKeyCheck {
  std::string alias;        ///< the host as listed ("ssh ALIAS")
  std::string key_name;     ///< how known_hosts names it: "node1", "[node1]:2222"
  std::string known_hosts;  ///< the file
  std::string key_text;     ///< the key it offers

  /// The changed- or other-type-key warning after `what`.
  [[noreturn]] void refuse(const std::string& what) const {
    throw Error(what +
                ", refusing to connect: someone may be intercepting the connection "
                "(man-in-the-middle), or the host was reinstalled; if you know it was, remove the "
                "old key with 'ssh-keygen -f " +
                known_hosts + " -R " + key_name + "' and connect once with 'ssh " + alias + "'");
  }
  /// When known_hosts could not be read for want of descriptors.
  void check_descriptors() const {
    if (const std::string fds = descriptors_exhausted_now(); !fds.empty()) {
      throw Error("cannot read " + known_hosts + " to check the host key of " + key_name + ": " +
                  fds);
    }
  }
};

/// A key known_hosts does not have: added under kAcceptNew, else refused naming how to add it.
void unknown_host_key(ssh_session s, const HostKeyCheck& check, const std::string& host_name,
                      unsigned port, HostKeyPolicy policy) {
  check.check_descriptors();  // libssh answers "unknown" when it could not open known_hosts
  if (policy == HostKeyPolicy::kAcceptNew) {
    if (ssh_session_update_known_hosts(s) != SSH_OK) {
      throw Error("cannot add the host key of " + check.key_name + " to " + check.known_hosts +
                  ": " + session_error(s));
    }
    return;
  }
  const std::string scan = "ssh-keyscan " + (port == 22 ? "" : "-p " + std::to_string(port) + " ") +
                           "-H " + host_name + " >> " + check.known_hosts;
  throw Error("unknown host key: " + check.key_name + " is not in " + check.known_hosts +
              " (it offers " + check.key_text + "); if that is the host you expect, add its key " +
              "with '" + scan + "' or by connecting once with 'ssh " + check.alias + "'");
}

/// Checks the server's key against known_hosts; throws Error unless it is known (or accepted
/// under kAcceptNew).
void check_host_key(ssh_session s, const std::string& alias, const std::string& host_name,
                    unsigned port, HostKeyPolicy policy) {
  HostKeyCheck check;
  check.alias = alias;
  check.key_text = server_key_text(s, endpoint_text(host_name, port));
  check.known_hosts = get_option(s, SSH_OPTIONS_KNOWNHOSTS);
  if (check.known_hosts.empty()) check.known_hosts = "~/.ssh/known_hosts";
  // How ssh names this host in known_hosts, ssh-keyscan and ssh-keygen -R.
  check.key_name = port == 22 ? host_name : "[" + host_name + "]:" + std::to_string(port);

  std::unique_lock lock(known_hosts_mutex());
  switch (ssh_session_is_known_server(s)) {
    case SSH_KNOWN_HOSTS_OK:
      return;
    case SSH_KNOWN_HOSTS_CHANGED:
      check.refuse("WARNING: the host key of " + check.key_name + " has CHANGED (now " +
                   check.key_text + ")");
    case SSH_KNOWN_HOSTS_OTHER:
      check.refuse("WARNING: " + check.known_hosts + " has a key of another type for " +
                   check.key_name + " than the " + check.key_text + " it offers now");
    case SSH_KNOWN_HOSTS_UNKNOWN:
    case SSH_KNOWN_HOSTS_NOT_FOUND:
      return unknown_host_key(s, check, host_name, port, policy);
    case SSH_KNOWN_HOSTS_ERROR:
      check.check_descriptors();
      break;
  }
  throw Error("cannot check the host key of " + check.key_name + " against " + check.known_hosts +
              ": " + session_error(s));
}

// ---------------------------------------------------------------------------------------------
// Login

void authenticate(ssh_session s, const std::string& alias, const std::string& who) {
  int rc = ssh_userauth_none(s, nullptr);
  if (rc == SSH_AUTH_SUCCESS) return;
  if (rc == SSH_AUTH_ERROR) throw Error("login as " + who + " failed: " + session_error(s));
  const int methods = ssh_userauth_list(s, nullptr);
  const std::string fix = "; ddlrun logs in with keys only, never a password: make 'ssh -o " +
                          std::string("BatchMode=yes ") + alias + " true' work";
  if (!(methods & SSH_AUTH_METHOD_PUBLICKEY)) {
    throw Error("authentication failed for " + who +
                ": the server takes no keys (it allows: " + methods_text(methods) + ")" + fix);
  }
  rc = ssh_userauth_publickey_auto(s, nullptr, nullptr);
  if (rc == SSH_AUTH_SUCCESS) return;
  if (rc == SSH_AUTH_ERROR) {
    throw Error("authentication failed for " + who + ": " + session_error(s));
  }
  const char* agent = std::getenv("SSH_AUTH_SOCK");
  const std::string tried = agent != nullptr && *agent != '\0'
                                ? "publickey with ssh-agent and the identity files"
                                : "publickey with the identity files, no ssh-agent (SSH_AUTH_SOCK "
                                  "is not set)";
  if (rc == SSH_AUTH_PARTIAL) {
    throw Error("authentication failed for " + who +
                ": a key was accepted but the server asks for more (it allows: " +
                methods_text(ssh_userauth_list(s, nullptr)) + ")" + fix);
  }
  throw Error("authentication failed for " + who + ": no key was accepted (tried: " + tried +
              "; the server allows: " + methods_text(methods) + ")" + fix);
}

// ---------------------------------------------------------------------------------------------
// Session and channel

/// An exec channel; records the signal that ended its command.
class LibsshChannel final : public Channel {
 public:
  LibsshChannel() {
    callbacks_.userdata = &signal_;
    callbacks_.channel_exit_signal_function = on_exit_signal;
    ssh_callbacks_init(&callbacks_);
  }
  /// ssh_channel_free keeps a channel the host has not closed yet (libssh frees it when the
  /// host's close arrives), and libssh reads a channel's callbacks for every message to it: so
  /// they go before this object does, or a late exit-status or close read freed memory (the
  /// crash of a launch after --probe-links, whose agents' channels were closed from this side).
  ~LibsshChannel() override {
    if (channel_) ssh_remove_channel_callbacks(channel_.get(), &callbacks_);
  }
  /// Opens a new channel of `s` and runs `command` there (Session::exec).
  void start(ssh_session s, const std::string& command, const std::string& endpoint) {
    channel_.reset(ssh_channel_new(s));
    if (!channel_) throw Error("cannot open a channel to " + endpoint + ": " + session_error(s));
    ssh_set_channel_callbacks(channel_.get(), &callbacks_);
    if (ssh_channel_open_session(channel_.get()) != SSH_OK) {
      throw Error("cannot open a session on " + endpoint + ": " + session_error(s));
    }
    if (ssh_channel_request_exec(channel_.get(), command.c_str()) != SSH_OK) {
      throw Error("cannot run '" + command + "' on " + endpoint + ": " + session_error(s));
    }
  }

  int poll(std::chrono::milliseconds timeout) override {
    return status(ssh_channel_poll_timeout(channel_.get(), static_cast<int>(timeout.count()), 0));
  }
  int read(char* buffer, std::size_t size, Stream stream) override {
    return status(ssh_channel_read_nonblocking(channel_.get(), buffer,
                                               static_cast<std::uint32_t>(size),
                                               stream == Stream::kStderr ? 1 : 0));
  }
  bool eof() override { return ssh_channel_is_eof(channel_.get()) != 0; }
  bool open() override { return ssh_channel_is_open(channel_.get()) != 0; }
  std::uint32_t window() override { return ssh_channel_window_size(channel_.get()); }
  int write(std::string_view bytes) override {
    const NonBlocking for_now(session());
    if (!flush_now()) return 0;
    const auto size = static_cast<std::uint32_t>(std::min(bytes.size(), kMostPerWrite));
    const int n = ssh_channel_write(channel_.get(), bytes.data(), size);
    observe();  // what the write handed the socket at once
    return n < 0 ? kError : n;
  }
  bool flushed() override {
    const NonBlocking for_now(session());
    return flush_now();
  }
  std::uint64_t moved() override {
    observe();
    return moved_;
  }
  int exit_status() override { return ssh_channel_get_exit_status(channel_.get()); }
  std::string exit_signal() override { return signal_; }
  int fd() override { return ssh_get_fd(session()); }

 private:
  /// What one write() takes at most: what waits in libssh's own buffer for the socket (which
  /// libssh does not bound) stays at most this, the rest with the caller.
  static constexpr std::size_t kMostPerWrite = std::size_t{64} << 10;

  /// The session non-blocking while it lives, then as it was: in blocking mode libssh's
  /// write waits (up to the connect timeout, again each call) until the socket took it all.
  class NonBlocking {
   public:
    explicit NonBlocking(ssh_session s) : s_(s), was_(ssh_is_blocking(s)) {
      ssh_set_blocking(s_, 0);
    }
    ~NonBlocking() { ssh_set_blocking(s_, was_); }
    NonBlocking(const NonBlocking&) = delete;
    NonBlocking& operator=(const NonBlocking&) = delete;

   private:
    ssh_session s_;
    int was_;
  };

  ssh_session session() { return ssh_channel_get_session(channel_.get()); }
  /// Sends what the socket takes now of what libssh holds for it (the session non-blocking):
  /// whether nothing is left. A failed session counts as flushed: the next write says it.
  bool flush_now() {
    observe();  // what the link carried since the last look
    const bool done = ssh_blocking_flush(session(), 0) != SSH_AGAIN;
    observe();  // what the flush handed the socket
    return done;
  }
  /// Adds to moved_ how far the socket's send queue (bytes not yet acknowledged by the host)
  /// changed since the last look: it grows as libssh hands the socket bytes and shrinks as the
  /// link carries them; a host cut off leaves it as it is. Where the queue cannot be read
  /// (not a TCP or Unix socket), nothing counts: as before, only what write() takes.
  void observe() {
    int queued = 0;
    const int fd = ssh_get_fd(session());
    if (fd < 0 || ioctl(fd, SIOCOUTQ, &queued) != 0) return;
    moved_ += static_cast<std::uint64_t>(queued > queued_ ? queued - queued_ : queued_ - queued);
    queued_ = queued;
  }

  /// libssh's answer in our terms; SSH_AGAIN is "nothing now".
  static int status(int n) {
    return n == SSH_EOF ? kEof : n == SSH_ERROR ? kError : std::max(n, 0);
  }
  static void on_exit_signal(ssh_session, ssh_channel, const char* signal, int, const char*,
                             const char*, void* userdata) {
    if (signal != nullptr) *static_cast<std::string*>(userdata) = signal;
  }

  std::string signal_;
  int queued_ = 0;                            ///< the socket's send queue at the last observe()
  std::uint64_t moved_ = 0;                   ///< Channel::moved()
  ssh_channel_callbacks_struct callbacks_{};  // removed from the channel before it is freed
  ChannelPtr channel_;
};

class LibsshSession final : public Session {
 public:
  LibsshSession(SessionPtr session, std::string endpoint)
      : session_(std::move(session)), endpoint_(std::move(endpoint)) {}

  const std::string& endpoint() const override { return endpoint_; }
  bool connected() override { return ssh_is_connected(session_.get()) != 0; }
  std::unique_ptr<Channel> exec(const std::string& command) override {
    auto channel = std::make_unique<LibsshChannel>();
    channel->start(session_.get(), command, endpoint_);
    return channel;
  }
  std::string error() override { return ssh_get_error(session_.get()); }
  void stop_blocking() override { ssh_set_blocking(session_.get(), 0); }

 private:
  SessionPtr session_;
  std::string endpoint_;
};

// ---------------------------------------------------------------------------------------------
// Connecting

/// Step 1: a new libssh session for `host`, its ssh config read and `options` applied.
SessionPtr configured_session(const std::string& host, const Options& options) {
  // Stateless, so one for every session; it must outlive them.
  static ssh_callbacks_struct callbacks = [] {
    ssh_callbacks_struct c{};
    c.auth_function = refuse_passphrase;
    ssh_callbacks_init(&c);
    return c;
  }();
  SessionPtr session(ssh_new());
  ssh_session s = session.get();
  if (s == nullptr) throw Error("cannot create an ssh session (out of memory)");
  ssh_set_callbacks(s, &callbacks);
  if (ssh_options_set(s, SSH_OPTIONS_HOST, host.c_str()) != SSH_OK) {
    throw Error("bad host name '" + host + "': " + session_error(s));
  }
  if (!options.ssh_config.empty() && access(options.ssh_config.c_str(), R_OK) != 0) {
    throw Error("cannot read ssh config " + options.ssh_config + ": " + errno_text(errno));
  }
  if (ssh_options_parse_config(
          s, options.ssh_config.empty() ? nullptr : options.ssh_config.c_str()) != 0) {
    throw Error("cannot read the ssh config " +
                (options.ssh_config.empty() ? std::string("(~/.ssh/config, /etc/ssh/ssh_config)")
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
    throw Error("bad ssh option: " + session_error(s));
  }
  return session;
}

/// libssh makes its socket blocking once connected (fcntl(fd, F_SETFL, 0) on the first POLLOUT,
/// and a ProxyCommand's socketpair is blocking from the start). A blocking send() of a packet
/// larger than the room the socket has waits until the host acknowledges it all, and a host cut
/// off never does: the write of a "never waiting" channel then held its talker thread, and with
/// it every other host that thread serves, until TCP gave up. Non-blocking, send() takes what
/// fits and libssh keeps the rest for the next flush; libssh only sends after poll() says
/// POLLOUT, so it is never refused outright, and it only reads after POLLIN.
void keep_nonblocking(int fd) {
  if (fd < 0) return;
  const int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

/// Steps 2 and 3: the TCP connection (or the config's ProxyCommand) and the ssh handshake.
void handshake(ssh_session s, const std::string& host_name, unsigned port, const Options& options) {
  const std::string endpoint = endpoint_text(host_name, port);
  const std::string proxy = get_option(s, SSH_OPTIONS_PROXYCOMMAND);
  const bool use_proxy = !proxy.empty() && proxy != "none";
  if (!use_proxy) {
    int fd = connect_tcp(host_name, port, options.connect_timeout);
    if (ssh_options_set(s, SSH_OPTIONS_FD, &fd) != SSH_OK) {
      close(fd);
      throw Error("cannot hand the socket to libssh: " + session_error(s));
    }
  }
  const Clock::time_point handshake_start = Clock::now();
  if (ssh_connect(s) == SSH_OK) {
    keep_nonblocking(ssh_get_fd(s));
    return;
  }
  const std::string error = session_error(s);
  if (use_proxy) throw Error("cannot connect through ProxyCommand '" + proxy + "': " + error);
  if (Clock::now() - handshake_start >= options.connect_timeout) {
    throw Error("timed out after " + seconds_text(options.connect_timeout) +
                " waiting for the ssh server at " + endpoint + " to greet");
  }
  if (const std::string fds = descriptors_exhausted_now(); !fds.empty()) {
    throw Error("ssh handshake with " + endpoint + " failed: " + fds);
  }
  throw Error("ssh handshake with " + endpoint + " failed: " + error);
}

/// Step 4: the login, naming descriptor exhaustion as such.
void log_in(ssh_session s, const std::string& alias, const std::string& endpoint) {
  const std::string user = get_option(s, SSH_OPTIONS_USER);
  try {
    authenticate(s, alias, (user.empty() ? "" : user + "@") + endpoint);
  } catch (const Error&) {
    // Identity files that could not be opened for want of descriptors look like keys refused.
    if (const std::string fds = descriptors_exhausted_now(); !fds.empty()) {
      throw Error("cannot log in to " + endpoint + ": " + fds);
    }
    throw;
  }
}

class LibsshConnector final : public Connector {
 public:
  std::unique_ptr<Session> connect(const std::string& host, const Options& options) override {
    init_libssh();
    if (host.empty()) throw Error("empty host name");
    SessionPtr session = configured_session(host, options);
    ssh_session s = session.get();
    const std::string host_name = get_option(s, SSH_OPTIONS_HOST);
    unsigned port = 22;
    if (ssh_options_get_port(s, &port) != SSH_OK || port == 0) port = 22;
    std::string endpoint = endpoint_text(host_name, port);
    handshake(s, host_name, port, options);
    check_host_key(s, host, host_name, port, options.host_key_policy);
    log_in(s, host, endpoint);
    return std::make_unique<LibsshSession>(std::move(session), std::move(endpoint));
  }
};

}  // namespace

Connector& libssh_connector() {
  static LibsshConnector connector;
  return connector;
}

}  // namespace ddl::ssh
