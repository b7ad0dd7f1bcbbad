#pragma once

// A recording test double of ssh/session.h: a FakeConnector whose hosts log in (or refuse, as
// told), whose sessions record each command they run (or fail to run it, as told), and whose
// channels lead to a FakeRemote: the test plays the remote command there, printing to stdout
// and stderr, ending it with an exit status, and reacting to what is written to it.

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ssh/session.h"

namespace ddl::ssh {

/// The far end of a fake channel: the remote command, played by the test. Thread-safe.
class FakeRemote {
 public:
  /// Called with the bytes each write() passes (outside the lock): the remote command reacting.
  using OnWrite = std::function<void(FakeRemote&, std::string_view)>;

  explicit FakeRemote(std::string command) : command_(std::move(command)) {}

  /// The command it runs.
  const std::string& command() const { return command_; }
  /// The command prints `bytes` on `stream`.
  void print(std::string_view bytes, Stream stream = Stream::kStdout) {
    {
      std::lock_guard lock(mutex_);
      (stream == Stream::kStdout ? out_ : err_).append(bytes);
    }
    changed_.notify_all();
  }
  /// The command ends: EOF after what it printed, with `exit_status` (-1: none) and `signal`.
  void end(int exit_status = 0, std::string signal = {}) {
    {
      std::lock_guard lock(mutex_);
      eof_ = true;
      exit_status_ = exit_status;
      signal_ = std::move(signal);
    }
    changed_.notify_all();
  }
  /// Makes each later write() fail (the connection is gone).
  void fail_writes() {
    std::lock_guard lock(mutex_);
    fail_writes_ = true;
  }
  /// From now on the socket to it takes nothing, as when its host is cut off without a RST:
  /// flushed() is false, and a write() made anyway waits `block` before it takes the bytes, as
  /// libssh's write in blocking mode waits (up to its timeout) for the socket.
  void jam(std::chrono::milliseconds block) {
    std::lock_guard lock(mutex_);
    jammed_ = true;
    jam_block_ = block;
  }
  /// From now on the link to it carries `bytes_per_second`, as a slow link does: write()
  /// takes at most 64 KiB (as libssh's), and only once the socket's queue sent all of the last
  /// write (flushed() is false until then); the queue drains at that rate, the remote command
  /// gets the bytes as they arrive, and moved() counts them.
  void throttle(std::uint64_t bytes_per_second) {
    std::lock_guard lock(mutex_);
    rate_ = bytes_per_second;
    drained_at_ = std::chrono::steady_clock::now();
  }
  /// Sets the remote window (how much write() takes at once).
  void set_window(std::uint32_t window) {
    std::lock_guard lock(mutex_);
    window_ = window;
  }
  void on_write(OnWrite react) {
    std::lock_guard lock(mutex_);
    on_write_ = std::move(react);
  }
  /// Everything written to the command's stdin so far.
  std::string written() const {
    std::lock_guard lock(mutex_);
    return written_;
  }
  /// Whether the local side has closed the channel (destroyed it).
  bool closed() const {
    std::lock_guard lock(mutex_);
    return closed_;
  }

 private:
  friend class FakeChannel;

  std::string command_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::string out_;
  std::string err_;
  bool eof_ = false;
  int exit_status_ = -1;
  std::string signal_;
  bool fail_writes_ = false;
  bool jammed_ = false;
  std::chrono::milliseconds jam_block_{0};
  std::uint32_t window_ = 1 << 20;
  std::uint64_t rate_ = 0;  ///< throttle(); 0: the link carries everything at once
  std::string queue_;       ///< written, not yet carried (throttle)
  std::chrono::steady_clock::time_point drained_at_;
  std::uint64_t moved_ = 0;  ///< bytes the throttled link carried
  OnWrite on_write_;
  std::string written_;
  bool closed_ = false;
};

/// A channel whose remote end is a FakeRemote.
class FakeChannel final : public Channel {
 public:
  explicit FakeChannel(std::shared_ptr<FakeRemote> remote) : remote_(std::move(remote)) {}
  ~FakeChannel() override {
    std::lock_guard lock(remote_->mutex_);
    remote_->closed_ = true;
  }

  int poll(std::chrono::milliseconds timeout) override {
    std::unique_lock lock(remote_->mutex_);
    remote_->changed_.wait_for(lock, timeout,
                               [&] { return !remote_->out_.empty() || remote_->eof_; });
    if (!remote_->out_.empty()) return static_cast<int>(remote_->out_.size());
    return remote_->eof_ ? kEof : 0;
  }
  int read(char* buffer, std::size_t size, Stream stream) override {
    std::lock_guard lock(remote_->mutex_);
    std::string& from = stream == Stream::kStdout ? remote_->out_ : remote_->err_;
    if (from.empty()) return remote_->eof_ ? kEof : 0;
    const std::size_t n = std::min(size, from.size());
    from.copy(buffer, n);
    from.erase(0, n);
    return static_cast<int>(n);
  }
  bool eof() override {  // as libssh: not while output waits to be read
    std::lock_guard lock(remote_->mutex_);
    return remote_->eof_ && remote_->out_.empty() && remote_->err_.empty();
  }
  bool open() override {
    std::lock_guard lock(remote_->mutex_);
    return !remote_->eof_;
  }
  std::uint32_t window() override {
    std::lock_guard lock(remote_->mutex_);
    return remote_->window_;
  }
  int write(std::string_view bytes) override {
    std::chrono::milliseconds block{0};
    {
      std::unique_lock lock(remote_->mutex_);
      if (remote_->rate_ > 0) return write_throttled(bytes, lock);
      if (remote_->jammed_) block = remote_->jam_block_;
    }
    std::this_thread::sleep_for(block);
    FakeRemote::OnWrite react;
    {
      std::lock_guard lock(remote_->mutex_);
      if (remote_->fail_writes_) return kError;
      remote_->written_.append(bytes);
      react = remote_->on_write_;
    }
    if (react) react(*remote_, bytes);
    return static_cast<int>(bytes.size());
  }
  bool flushed() override {
    std::unique_lock lock(remote_->mutex_);
    if (remote_->rate_ > 0) {
      deliver(drain(), lock);
      return remote_->queue_.empty();
    }
    return !remote_->jammed_;
  }
  std::uint64_t moved() override {
    std::unique_lock lock(remote_->mutex_);
    deliver(drain(), lock);
    return remote_->moved_;
  }
  int exit_status() override {
    std::lock_guard lock(remote_->mutex_);
    return remote_->exit_status_;
  }
  std::string exit_signal() override {
    std::lock_guard lock(remote_->mutex_);
    return remote_->signal_;
  }

 private:
  /// A throttled link's write(): nothing while its queue holds bytes, else 64 KiB at most.
  int write_throttled(std::string_view bytes, std::unique_lock<std::mutex>& lock) {
    deliver(drain(), lock);
    if (!remote_->queue_.empty()) return 0;
    if (remote_->fail_writes_) return kError;
    const std::size_t n = std::min<std::size_t>(bytes.size(), std::size_t{64} << 10);
    remote_->queue_.append(bytes.substr(0, n));
    remote_->drained_at_ = std::chrono::steady_clock::now();
    return static_cast<int>(n);
  }
  /// What the throttled link carried since the last look, taken off its queue (under the lock).
  std::string drain() {
    const auto now = std::chrono::steady_clock::now();
    FakeRemote& r = *remote_;
    if (r.rate_ == 0 || r.queue_.empty()) {
      r.drained_at_ = now;
      return {};
    }
    const double seconds = std::chrono::duration<double>(now - r.drained_at_).count();
    const auto n =
        std::min<std::size_t>(r.queue_.size(), static_cast<std::size_t>(seconds * r.rate_));
    if (n == 0) return {};
    std::string carried = r.queue_.substr(0, n);
    r.queue_.erase(0, n);
    r.moved_ += n;
    r.drained_at_ += std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(static_cast<double>(n) / r.rate_));
    r.written_.append(carried);
    return carried;
  }
  /// The remote command reacts to `bytes` that arrived, outside the lock.
  void deliver(const std::string& bytes, std::unique_lock<std::mutex>& lock) {
    if (bytes.empty() || !remote_->on_write_) return;
    FakeRemote::OnWrite react = remote_->on_write_;
    lock.unlock();
    react(*remote_, bytes);
    lock.lock();
  }

  std::shared_ptr<FakeRemote> remote_;
};

/// One fake host: how it answers, and what it was asked.
struct FakeHost {
  // How it answers (set before connecting).
  std::string endpoint;    ///< what its sessions say they reached; "" : "NAME:22"
  std::string refuse;      ///< when set, connect() throws Error(refuse)
  std::string exec_error;  ///< when set, exec() fails and Session::error() says this
  /// Plays each command run there (prints, ends, reacts to writes); null: it prints nothing.
  std::function<void(FakeRemote&)> program;
  // What it was asked (read after the sessions are gone, or under FakeConnector's lock).
  int logins = 0;
  std::vector<std::string> commands;                 ///< each exec(), in order
  std::vector<std::shared_ptr<FakeRemote>> remotes;  ///< each channel's remote end
  bool stopped_blocking = false;
  int sessions_open = 0;  ///< sessions not yet destroyed
};

/// A session to a FakeHost.
class FakeSession final : public Session {
 public:
  FakeSession(FakeHost& host, std::mutex& mutex, std::string endpoint)
      : host_(host), mutex_(mutex), endpoint_(std::move(endpoint)) {}  // counted by connect()
  ~FakeSession() override {
    std::lock_guard lock(mutex_);
    --host_.sessions_open;
  }

  const std::string& endpoint() const override { return endpoint_; }
  bool connected() override { return true; }
  std::unique_ptr<Channel> exec(const std::string& command) override {
    std::function<void(FakeRemote&)> program;
    auto remote = std::make_shared<FakeRemote>(command);
    {
      std::lock_guard lock(mutex_);
      host_.commands.push_back(command);
      if (!host_.exec_error.empty()) {
        error_ = host_.exec_error;
        throw Error("cannot run '" + command + "' on " + endpoint_ + ": " + error_);
      }
      host_.remotes.push_back(remote);
      program = host_.program;
    }
    if (program) program(*remote);
    return std::make_unique<FakeChannel>(remote);
  }
  std::string error() override { return error_; }
  void stop_blocking() override {
    std::lock_guard lock(mutex_);
    host_.stopped_blocking = true;
  }

 private:
  FakeHost& host_;
  std::mutex& mutex_;
  std::string endpoint_;
  std::string error_;
};

/// Connects to FakeHosts by name; a name not configured with host() is a host that logs in and
/// prints nothing. Thread-safe.
class FakeConnector final : public Connector {
 public:
  /// Host `name`, to configure (before connecting) or inspect.
  FakeHost& host(const std::string& name) {
    std::lock_guard lock(mutex_);
    return hosts_[name];
  }
  /// The hosts connect() was asked for, in order.
  std::vector<std::string> connected() const {
    std::lock_guard lock(mutex_);
    return order_;
  }
  /// The options of the last connect().
  Options last_options() const {
    std::lock_guard lock(mutex_);
    return last_options_;
  }

  std::unique_ptr<Session> connect(const std::string& name, const Options& options) override {
    std::lock_guard lock(mutex_);
    order_.push_back(name);
    last_options_ = options;
    FakeHost& h = hosts_[name];
    ++h.logins;
    if (!h.refuse.empty()) throw Error(h.refuse);
    ++h.sessions_open;
    return std::make_unique<FakeSession>(h, mutex_, h.endpoint.empty() ? name + ":22" : h.endpoint);
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, FakeHost> hosts_;  // node-based: references stay valid
  std::vector<std::string> order_;
  Options last_options_;
};

}  // namespace ddl::ssh
