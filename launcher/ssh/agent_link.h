#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "launcher/ssh/agent_tree.h"
#include "launcher/ssh/protocol.h"
#include "ssh/session.h"

namespace ddl::launcher::ssh {

/// One agent's channel as the host above it drives it: ddlrun its first level's (the launch,
/// the probe's subtree start, --probe-links), an agent its children's (relay.h). Nothing here
/// waits longer than asked: frames go down through an ssh::Outbox (what the remote window or
/// the socket does not take waits for the next turn), a heartbeat a second among them, and
/// what comes up is read into frames (stdout) and kept text (stderr). Once its agent said
/// hello it is held to the launch's rules: silent for the heartbeat deadline, or taking none
/// of the bytes waiting for it for as long, and it is lost (lost_why()). Used by one thread at
/// a time.
class AgentLink {
 public:
  using Clock = std::chrono::steady_clock;

  /// Drives `kept`'s channel, its agent running; what it sent already (kept.pending) is read
  /// first. Its heartbeats start now.
  explicit AgentLink(AgentTree::Kept kept);
  /// The session and its channel back, what was read but not handed out after `keep` in
  /// Kept::pending.
  AgentTree::Kept release(const std::string& keep = {});

  /// Queues `frames` to go down after those queued before; none once a write failed (nothing
  /// more is written, so they would only pile up).
  void send(std::string_view frames) {
    if (!write_failed_) out_.add(frames);
  }
  /// One turn: a heartbeat when one is due; writes what the remote window and the socket take
  /// (none after a write failed: write_failed()); reads what came within `wait` into the
  /// frames (next()). False once the channel has ended.
  bool turn(std::chrono::milliseconds wait);
  /// The next whole frame read. Throws std::runtime_error when the bytes are not frames.
  std::optional<Frame> next() { return reader_.next(); }
  /// Reads what waits on stderr into err(), without waiting.
  void read_stderr();
  /// What was read of stderr and not yet taken.
  std::string& err() { return err_; }
  /// The next whole line of err() (with its newline), taken out; "" when none is whole.
  std::string take_line();
  /// Also copies stdout as it is read into `into`, up to `max` bytes (nullptr: no more).
  void copy_stdout(std::string* into, std::size_t max) {
    copy_ = into;
    copy_max_ = max;
  }

  /// Its agent said hello: from now on the rules of lost_why() hold.
  void said_hello() { hello_ = true; }
  bool hello() const { return hello_; }
  /// "no heartbeat for T ..." once it said hello and nothing came for `deadline`; else "".
  std::string silence(std::chrono::milliseconds deadline) const;
  /// "took no data for T ..." once it said hello and none of the bytes waiting for it moved for
  /// `deadline` (ssh::Outbox::stalled; not after a write failed); else "".
  std::string stall(std::chrono::milliseconds deadline) const;
  /// silence(), else stall().
  std::string lost_why(std::chrono::milliseconds deadline) const {
    const std::string why = silence(deadline);
    return why.empty() ? stall(deadline) : why;
  }
  /// The time until now counts neither as silence nor as taking no data: the caller held the
  /// channel up (it read nothing of it meanwhile).
  void excuse();
  /// Why its channel ended: before its hello, its command exited ("'COMMAND' exited before it
  /// said hello (exit status S...)", `ddlrun_path` where 127 says ddlrun is missing); after,
  /// "the connection to its agent closed", or "lost the connection to ENDPOINT (WHY)" when a
  /// write failed, with what is left of err() in parentheses.
  std::string closed_reason(const std::string& ddlrun_path) const;
  /// Closes the channel and the session without waiting for a host that cannot answer.
  void close_now();

  bool write_failed() const { return write_failed_; }
  /// The last turn read something.
  bool heard() const { return heard_; }
  /// The socket to wait on (-1: none), and whether to wait for POLLOUT too.
  int fd() const { return kept_.channel ? kept_.channel->fd() : -1; }
  bool socket_full() const { return out_.socket_full(); }
  std::size_t waiting() const { return out_.size(); }
  ddl::ssh::Channel& channel() { return *kept_.channel; }
  ddl::ssh::Session& session() { return *kept_.session; }
  const std::string& command() const { return kept_.command; }

 private:
  void heard_now();

  AgentTree::Kept kept_;
  FrameReader reader_;
  ddl::ssh::Outbox out_;
  std::string err_;
  std::string* copy_ = nullptr;
  std::size_t copy_max_ = 0;
  Clock::time_point next_beat_ = Clock::now();
  Clock::time_point last_heard_ = Clock::now();
  bool hello_ = false;
  bool heard_ = false;
  bool write_failed_ = false;
  std::string write_error_;
};

/// Why an agent whose `command` ended with `status` (-1: none) before its hello failed:
/// "'COMMAND' exited before it said hello (exit status S)", 127 saying that ddlrun is not
/// installed at `ddlrun_path` there.
std::string exited_before_hello_text(const std::string& command, int status,
                                     const std::string& ddlrun_path);

}  // namespace ddl::launcher::ssh
