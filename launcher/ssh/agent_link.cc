// One agent's channel, driven from the host above it (agent_link.h).
//
// How it works: a turn adds a heartbeat when a second has passed since the last, writes from
// the outbox's front what the remote window and the socket take (ssh::Outbox: never waiting;
// after a failed write nothing more is written, and reading decides what was lost), then waits
// on the channel for at most the turn's time and reads every byte of stdout that came into the
// frame reader. Any byte read, stdout or stderr, is hearing from the agent. The silence and
// stall rules start with the agent's hello: before it a login may take its time.

#include "launcher/ssh/agent_link.h"

#include "launcher/ssh/tree.h"

namespace ddl::launcher::ssh {

AgentLink::AgentLink(AgentTree::Kept kept) : kept_(std::move(kept)) {
  reader_.feed(kept_.pending);
  kept_.pending.clear();
}

AgentTree::Kept AgentLink::release(const std::string& keep) {
  kept_.pending = keep + reader_.take_rest();
  return std::move(kept_);
}

bool AgentLink::turn(std::chrono::milliseconds wait) {
  if (Clock::now() >= next_beat_) {
    send(encode_frame(FrameType::kHeartbeat, 0, {}));
    next_beat_ = Clock::now() + kHeartbeatInterval;
  }
  if (!write_failed_ && !out_.write(*kept_.channel)) {
    write_failed_ = true;
    write_error_ = kept_.session->error();
  }
  heard_ = false;
  int avail = kept_.channel->poll(wait);
  if (avail == ddl::ssh::Channel::kError) return false;
  bool eof = avail == ddl::ssh::Channel::kEof;
  char buf[65536];
  while (avail > 0) {
    const int n = kept_.channel->read(buf, sizeof buf, ddl::ssh::Stream::kStdout);
    if (n <= 0) {
      eof = eof || n == ddl::ssh::Channel::kEof || n == ddl::ssh::Channel::kError;
      break;
    }
    const std::string_view bytes(buf, static_cast<size_t>(n));
    if (copy_ != nullptr && copy_->size() < copy_max_)
      copy_->append(bytes.substr(0, copy_max_ - copy_->size()));
    reader_.feed(bytes);
    heard_now();
  }
  return !(eof || kept_.channel->eof());
}

void AgentLink::read_stderr() {
  char buf[16384];
  for (int n; (n = kept_.channel->read(buf, sizeof buf, ddl::ssh::Stream::kStderr)) > 0;) {
    err_.append(buf, static_cast<size_t>(n));
    heard_now();
  }
}

std::string AgentLink::take_line() {
  const size_t nl = err_.find('\n');
  if (nl == std::string::npos) return {};
  std::string line = err_.substr(0, nl + 1);
  err_.erase(0, nl + 1);
  return line;
}

std::string AgentLink::silence(std::chrono::milliseconds deadline) const {
  if (!hello_ || Clock::now() - last_heard_ <= deadline) return {};
  return no_heartbeat_text(deadline);
}

std::string AgentLink::stall(std::chrono::milliseconds deadline) const {
  if (!hello_ || write_failed_ || !out_.stalled(deadline)) return {};
  return took_no_data_text(deadline, out_.size());
}

void AgentLink::excuse() {
  heard_now();
  out_.excuse();
}

std::string AgentLink::closed_reason(const std::string& ddlrun_path) const {
  if (!hello_)
    return exited_before_hello_text(kept_.command, kept_.channel->exit_status(), ddlrun_path);
  std::string why = "the connection to its agent closed";
  if (write_failed_) {
    why = "lost the connection to " + kept_.session->endpoint();
    if (!write_error_.empty()) why += " (" + write_error_ + ")";
  }
  if (!err_.empty()) why += " (" + err_ + ")";
  return why;
}

void AgentLink::close_now() {
  if (kept_.session) kept_.session->stop_blocking();
  kept_.channel.reset();
  kept_.session.reset();
}

void AgentLink::heard_now() {
  last_heard_ = Clock::now();
  heard_ = true;
}

std::string exited_before_hello_text(const std::string& command, int status,
                                     const std::string& ddlrun_path) {
  std::string why = "'" + command + "' exited before it said hello";
  if (status == 127) {
    why += " (exit status 127: ddlrun is not installed at " + ddlrun_path + " there)";
  } else if (status >= 0) {
    why += " (exit status " + std::to_string(status) + ")";
  }
  return why;
}

}  // namespace ddl::launcher::ssh
