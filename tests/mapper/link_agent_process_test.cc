// The link agent of --probe-links (run_link_agent) as a process of its own, on pipes, with a
// stranger connected to its port: it still answers ddlrun's `test`, and it ends as soon as its
// controller goes (its input closed), with nothing left running.

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "mapper/link_probe.h"
#include "tests/lib/dial.h"

namespace ddl::mapper {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

/// run_link_agent in a child process, with pipes for its input and output.
struct StandaloneAgent {
  /// `port`: the port it listens on; 0: any free one.
  explicit StandaloneAgent(int port = 0) {
    int in[2], out[2];
    EXPECT_EQ(::pipe2(in, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
    pid = ::fork();
    if (pid == 0) {
      ::close(in[1]);  // the parent's ends: the agent's input ends when the parent closes it
      ::close(out[0]);
      ::_exit(run_link_agent(in[0], out[1], port));
    }
    ::close(in[0]);
    ::close(out[1]);
    to = in[1];
    from = out[0];
  }
  ~StandaloneAgent() {
    if (to >= 0) ::close(to);
    ::close(from);
    if (pid > 0 && ::waitpid(pid, nullptr, WNOHANG) == 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  std::string line(std::chrono::milliseconds limit) {
    std::string text;
    const auto until = Clock::now() + limit;
    char c = 0;
    while (Clock::now() < until) {
      pollfd p{from, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      if (::read(from, &c, 1) != 1) break;
      if (c == '\n') return text;
      text += c;
    }
    return text + " (no whole line)";
  }
  void send(const std::string& line) {
    ASSERT_EQ(::write(to, (line + "\n").data(), line.size() + 1),
              static_cast<ssize_t>(line.size() + 1));
  }
  /// Its exit status, once it ended within `limit`; -1 when it still runs.
  int ended_within(std::chrono::milliseconds limit) {
    const auto until = Clock::now() + limit;
    while (Clock::now() < until) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(20ms);
    }
    return -1;
  }

  pid_t pid = -1;
  int to = -1, from = -1;
};

using ddl::testing::dial;

TEST(LinkAgentProcess, WithAStrangerConnectedItAnswersTestAndEndsWithItsInput) {
  StandaloneAgent agent;
  int port = 0;
  const std::string greeting = agent.line(5000ms);
  ASSERT_EQ(std::sscanf(greeting.c_str(), "ddl-link-agent 2 %d", &port), 1) << greeting;
  agent.send("token t0k3n");
  EXPECT_EQ(agent.line(2000ms), "ready");
  const int stranger = dial(port);
  (void)::send(stranger, "t", 1, MSG_NOSIGNAL);  // and never the rest of a line
  std::this_thread::sleep_for(200ms);
  // Port 1 on loopback refuses at once: the answer comes from the test itself.
  agent.send("test 127.0.0.1 1");
  EXPECT_EQ(agent.line(2000ms), "unreachable cannot connect to 127.0.0.1:1: Connection refused");
  const int again = dial(port);  // a second stranger, being served when stdin closes
  std::this_thread::sleep_for(200ms);
  ::close(agent.to);
  agent.to = -1;
  EXPECT_EQ(agent.ended_within(1000ms), 0) << "the agent outlived its closed input";
  ::close(stranger);
  ::close(again);
}

TEST(LinkAgentProcess, ListensOnThePortAskedFor) {
  StandaloneAgent any;
  int free_port = 0;
  ASSERT_EQ(std::sscanf(any.line(5000ms).c_str(), "ddl-link-agent 2 %d", &free_port), 1);
  ::close(any.to);
  any.to = -1;
  ASSERT_EQ(any.ended_within(2000ms), 0);
  StandaloneAgent fixed(free_port);
  int port = 0;
  EXPECT_EQ(std::sscanf(fixed.line(5000ms).c_str(), "ddl-link-agent 2 %d", &port), 1);
  EXPECT_EQ(port, free_port);
}

}  // namespace
}  // namespace ddl::mapper
