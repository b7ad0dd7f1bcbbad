#pragma once
// LinkAgentThread: the link agent (mapper/link_probe.h, run_link_agent) in a thread of the test,
// spoken to over a socket pair as ddlrun speaks to one over ssh (and as LocalAgent runs one).
// Header-only, for the tests of the link probe and of the agent against strangers.

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>

#include "mapper/link_probe.h"

namespace ddl::testing {

class LinkAgentThread {
 public:
  /// Starts the agent; nothing is read from it yet (greet() reads its greeting).
  LinkAgentThread() {
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds_), 0);
    thread_ = std::thread([this] { ddl::mapper::run_link_agent(fds_[1], fds_[1]); });
  }
  /// Closes the agent's channel, as ddlrun's end of ssh does, and waits for its thread.
  ~LinkAgentThread() {
    ::shutdown(fds_[0], SHUT_RDWR);
    thread_.join();
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  LinkAgentThread(const LinkAgentThread&) = delete;
  LinkAgentThread& operator=(const LinkAgentThread&) = delete;

  /// Reads the greeting, "ddl-link-agent 2 PORT", and its PORT (port()).
  void greet() {
    const std::string greeting = line();
    EXPECT_EQ(std::sscanf(greeting.c_str(), "ddl-link-agent 2 %d", &port_), 1) << greeting;
  }
  /// Gives the agent its token: it answers "ready".
  void authenticate(const std::string& token) {
    send("token " + token);
    EXPECT_EQ(line(), "ready");
  }
  void send(const std::string& line) {
    const std::string text = line + "\n";
    ASSERT_EQ(::write(fds_[0], text.data(), text.size()), static_cast<ssize_t>(text.size()));
  }
  /// The agent's next line, without its newline (what was read when the channel ends first).
  std::string line() {
    std::string out;
    char c = 0;
    while (::read(fds_[0], &c, 1) == 1 && c != '\n')
      out += c;
    return out;
  }
  /// The port of the greeting (0 before greet()).
  int port() const { return port_; }

 private:
  int fds_[2] = {-1, -1};
  int port_ = 0;
  std::thread thread_;
};

}  // namespace ddl::testing
