#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/check.h"
#include "base/text.h"

namespace ddl::ssh {

// Logging in to other hosts and running commands there: the one door through which ddlrun
// speaks ssh. ddlrun's agents (launcher/ssh: `ddlrun --probe-agent` for the probe, `ddlrun
// --agent` for the launch) are started through it, seeing only the interfaces below, so their
// unit tests pass a recording fake (tests/ssh/fake_ssh.h) and only the namespace tests use
// libssh.
//
// libssh_connector() behaves like `ssh -o BatchMode=yes HOST`: keys only (ssh-agent, the
// default identity files and IdentityFile from the ssh config), never a password or passphrase
// prompt; the ssh config honoured (HostName, User, Port, IdentityFile, UserKnownHostsFile,
// ProxyCommand); host keys checked strictly against known_hosts, a changed key always fatal.
// Each failure is one line of reason ("connection refused (10.200.3.2:22)").

/// A host that cannot be reached or logged in to, or a command that cannot be started there;
/// what() is the reason alone, without the host in front: "connection refused (10.200.3.2:22)".
using Error = base::Error<struct SshErrorTag>;

/// What to do with a host key that known_hosts does not have.
enum class HostKeyPolicy {
  kStrict,     ///< fail that host, naming its key's fingerprint and how to add it (the default)
  kAcceptNew,  ///< add it to known_hosts and go on (StrictHostKeyChecking=accept-new)
};

/// How to reach the hosts. A changed host key fails under every policy.
struct Options {
  /// An ssh config file to read instead of ~/.ssh/config and /etc/ssh/ssh_config (ssh -F).
  std::string ssh_config;
  std::string user;  ///< overrides the config's User; empty: the config's, else the local user
  int port = 0;      ///< overrides the config's Port; 0: the config's, else 22
  /// Overrides the config's UserKnownHostsFile; empty: the config's, else ~/.ssh/known_hosts.
  std::string known_hosts;
  HostKeyPolicy host_key_policy = HostKeyPolicy::kStrict;
  /// For the TCP connection, and for each later ssh exchange (handshake, login, exit status).
  std::chrono::milliseconds connect_timeout{10'000};
  /// For a remote command to finish (the probe), or to answer (the launcher's agents).
  std::chrono::milliseconds command_timeout{120'000};
  /// Hosts logged in to at once: the probe's login threads (one more thread reads every started
  /// probe, and the launch's logins to the agents it starts). 32 keeps
  /// ddlrun under 64 threads, flat or tree.
  int max_parallel = 32;
};

/// Which output stream of a remote command.
enum class Stream { kStdout, kStderr };

/// A command running on a host, in a channel of its Session: its stdin, stdout and stderr.
/// Used by one thread at a time; destroying it closes the channel.
class Channel {
 public:
  static constexpr int kError = -1;  ///< the session failed (Session::error() says why)
  static constexpr int kEof = -2;    ///< the stream has ended

  virtual ~Channel() = default;
  /// Waits up to `timeout` for stdout: the bytes waiting (> 0), 0 when none came, kEof when it
  /// has ended, kError.
  virtual int poll(std::chrono::milliseconds timeout) = 0;
  /// Reads at most `size` bytes of `stream` that are waiting, without blocking: their count, 0
  /// when none are, kEof at its end, kError.
  virtual int read(char* buffer, std::size_t size, Stream stream) = 0;
  /// Whether the remote side has sent EOF.
  virtual bool eof() = 0;
  /// Whether the channel is still open.
  virtual bool open() = 0;
  /// How many bytes write() takes now (the remote window); 0: none until the remote side reads.
  virtual std::uint32_t window() = 0;
  /// Writes at most window() bytes of `bytes` to the command's stdin, never waiting: how many
  /// it took, or kError. 0 when it takes none now: the remote window is shut, or the socket has
  /// not yet sent what the last write gave it (flushed() is false: wait for POLLOUT on fd()). A
  /// host cut off (no RST) so never holds up the thread that writes to it.
  virtual int write(std::string_view bytes) = 0;
  /// Whether the socket has sent everything write() took (trying once more now, without
  /// waiting); false: write() takes nothing until the socket can write again (POLLOUT on fd()).
  virtual bool flushed() { return true; }
  /// A count that grows whenever bytes that write() took move on towards the host: libssh's
  /// buffer hands some to the socket, or the socket's queue sends some (the link carries
  /// them). Unchanged while nothing moves (a host cut off, or one whose side reads nothing),
  /// so a slow link that drains one write over many seconds still shows progress. Default 0:
  /// a channel whose flushed() is always true needs none.
  virtual std::uint64_t moved() { return 0; }
  /// The command's exit status, waiting for it (at most the connect timeout); -1 when it
  /// ended without one (see exit_signal()).
  virtual int exit_status() = 0;
  /// The signal that ended the command ("KILL"), when the server said; "" otherwise.
  virtual std::string exit_signal() = 0;
  /// The socket under it, for poll() to wait on several channels at once (POLLIN: something
  /// came, which poll(0) then reads); -1 when there is none to wait on (then poll it).
  virtual int fd() { return -1; }
};

/// Writes from the front of `pending` what `channel`'s remote window and socket take now, never
/// waiting, and erases it from `pending`: false on an error. `socket_full`, when given, says
/// whether it stopped because the socket still holds what an earlier write gave it (wait for
/// POLLOUT on fd()); the bytes it wrote are added to `*wrote`, when given.
bool write_some(Channel& channel, std::string& pending, bool* socket_full = nullptr,
                std::size_t* wrote = nullptr);

/// Bytes for one channel, written as it takes them (write_some), and when they last made
/// progress: the ssh launcher loses a host that took none of them for its heartbeat deadline
/// ("took no data for ..."). Progress is a byte that write() took, a byte that moved on below
/// it (Channel::moved()), or nothing left to write; time only counts while bytes wait and
/// nothing moves. Used by one thread.
class Outbox {
 public:
  using Clock = std::chrono::steady_clock;

  /// Queues `bytes` after those waiting.
  void add(std::string_view bytes) { bytes_.append(bytes); }
  /// Writes from the front what `channel` takes now, never waiting; false on an error.
  bool write(Channel& channel);
  /// Bytes wait and none moved for more than `deadline` (since the last progress or excuse()).
  bool stalled(std::chrono::milliseconds deadline) const;
  /// The time until now does not count: the caller held the channel up (it was not reading
  /// what the other side sends, so the other side may have stopped reading too).
  void excuse() { last_progress_ = Clock::now(); }
  /// The last write() stopped because the socket still holds an earlier write's bytes: wait
  /// for POLLOUT on the channel's fd().
  bool socket_full() const { return socket_full_; }
  /// How many bytes wait.
  std::size_t size() const { return bytes_.size(); }

 private:
  std::string bytes_;
  bool socket_full_ = false;
  std::uint64_t moved_ = 0;  ///< Channel::moved() at the last write()
  Clock::time_point last_progress_ = Clock::now();
};

/// A connected, logged-in session to one host. Used by one thread at a time; destroying it
/// disconnects (its channels must be destroyed first).
class Session {
 public:
  virtual ~Session() = default;
  /// The "address:port" it reached, for messages: "10.200.3.2:22", "[fe80::1]:22".
  virtual const std::string& endpoint() const = 0;
  /// Whether it is still connected.
  virtual bool connected() = 0;
  /// Runs `command` in a new channel. Throws Error: "cannot open a channel to ENDPOINT: why",
  /// "cannot open a session on ENDPOINT: why", "cannot run 'COMMAND' on ENDPOINT: why".
  virtual std::unique_ptr<Channel> exec(const std::string& command) = 0;
  /// What the ssh library said about the last failure; "" when it said nothing.
  virtual std::string error() = 0;
  /// From now on no call blocks: closing need not wait for a host that cannot answer.
  virtual void stop_blocking() = 0;
};

/// Opens sessions.
class Connector {
 public:
  virtual ~Connector() = default;
  /// Connects to `host` (the config's HostName and Port), checks its host key and logs in with
  /// keys. Throws Error with the reason alone ("connection refused (10.200.3.2:22)").
  /// Thread-safe.
  virtual std::unique_ptr<Session> connect(const std::string& host, const Options& options) = 0;
};

/// The real connector (libssh). Lives as long as the program.
Connector& libssh_connector();

/// The reason for a call that failed with `err` EMFILE or ENFILE, naming the limit: "too many
/// open files (limit 1024): raise ulimit -n" (ENFILE: "the system's open files are exhausted
/// (fs.file-max): close some, or raise it"); "" for any other error.
std::string descriptor_exhaustion(int err);

/// descriptor_exhaustion() of this process right now: "" unless opening one more file fails
/// with EMFILE or ENFILE. libssh reports a known_hosts it could not open as an unknown key;
/// this tells the two apart.
std::string descriptors_exhausted_now();

/// A duration as this unit's messages write it: "10 s", "0.3 s".
using base::seconds_text;

}  // namespace ddl::ssh
