// An agent's link agent for --probe-links down the launch tree (tree_links.h).
//
// How it works: the first N frame makes a socket pair and two threads: one runs the link
// agent (ddlrun's mapper::run_link_agent, as this host's runs in-process) on its end
// instead of an ssh channel's stdin and stdout, the other reads the lines it prints and sends
// each up as an N frame (id 0), then, once it returned and shut its end, that it ended (N, id
// 1). Each N frame's line is written to our end. stop() shuts our end: the link agent reads
// the end of its input and returns (a test it serves stops too), and both threads are joined.

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "base/text.h"
#include "launcher/ssh/protocol.h"
#include "launcher/ssh/tree_links.h"

namespace ddl::launcher::ssh {

namespace {

/// Writes all of `bytes` to the socket `fd` (no SIGPIPE); false when it is gone.
bool send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

LinkAgentThread::LinkAgentThread(Up up, std::string seen_from, LinkAgentRunner run)
    : up_(std::move(up)), seen_from_(std::move(seen_from)), run_(std::move(run)) {}

LinkAgentThread::~LinkAgentThread() {
  stop();
}

void LinkAgentThread::take(int port, const std::string& line) {
  if (stopped_) return;
  if (!run_) {
    stopped_ = true;
    up_(encode_frame(FrameType::kLinkLine, 1, "this agent cannot run a link agent"));
    return;
  }
  if (!agent_.joinable()) {
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds_) != 0) {
      up_(encode_frame(FrameType::kLinkLine, 1,
                       "cannot make a socket pair: " + base::errno_text(errno)));
      return;
    }
    try {
      agent_ = std::thread([this, port] {
        status_ = run_(fds_[1], fds_[1], port, seen_from_);
        ::shutdown(fds_[1], SHUT_RDWR);  // the reader sees the end
      });
      reader_ = std::thread([this] { read_lines(); });
    } catch (const std::system_error& e) {
      ::shutdown(fds_[0], SHUT_RDWR);
      if (agent_.joinable()) agent_.join();
      up_(encode_frame(FrameType::kLinkLine, 1, std::string("cannot start a thread: ") + e.what()));
      stopped_ = true;
      return;
    }
  }
  if (!line.empty()) send_all(fds_[0], line + "\n");
}

void LinkAgentThread::read_lines() {
  std::string buffer;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fds_[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    buffer.append(buf, static_cast<size_t>(n));
    std::string frames;
    for (size_t nl; (nl = buffer.find('\n')) != std::string::npos; buffer.erase(0, nl + 1))
      frames += encode_frame(FrameType::kLinkLine, 0, buffer.substr(0, nl));
    if (!frames.empty() && !up_(frames)) return;  // the channel up is gone: so is the agent
  }
  const int status = status_;
  up_(encode_frame(FrameType::kLinkLine, 1,
                   status == 0 ? "" : "exit status " + std::to_string(status)));
}

void LinkAgentThread::stop() {
  stopped_ = true;
  if (!agent_.joinable()) return;
  ::shutdown(fds_[0], SHUT_RDWR);  // the link agent reads the end of its input and returns
  agent_.join();
  if (reader_.joinable()) reader_.join();
  ::close(fds_[0]);
  ::close(fds_[1]);
  fds_[0] = fds_[1] = -1;
}

}  // namespace ddl::launcher::ssh
