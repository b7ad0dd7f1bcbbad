// A standalone `ddlrun --link-agent` (as ssh starts it for --probe-links) with a stranger
// connected to its port: it still answers ddlrun's `test`, and it ends as soon as
// its controller goes (stdin closed), with nothing left running.

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

#include "tests/lib/dial.h"

namespace ddl::ddlrun {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

/// `ddlrun --link-agent` with pipes for its stdin and stdout.
struct StandaloneAgent {
  /// `port`: the argument after --link-agent; null: none.
  explicit StandaloneAgent(const char* port = nullptr) {
    int in[2], out[2];
    EXPECT_EQ(::pipe2(in, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
    pid = ::fork();
    if (pid == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::execl(DDLRUN_BINARY, DDLRUN_BINARY, "--link-agent", port, static_cast<char*>(nullptr));
      ::_exit(127);
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

TEST(LinkAgentCli, WithAStrangerConnectedItAnswersTestAndEndsWithItsStdin) {
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
  EXPECT_EQ(agent.ended_within(1000ms), 0) << "the agent outlived its closed stdin";
  ::close(stranger);
  ::close(again);
}

TEST(LinkAgentCli, ItsPortArgumentIsChecked) {
  StandaloneAgent bad("0");
  EXPECT_EQ(bad.line(5000ms),
            "error the link agent's port '0' is not a port: a whole number, 1 to 65535");
  EXPECT_EQ(bad.ended_within(2000ms), 1);
  // A free port asked for is the one it listens on.
  StandaloneAgent any;
  int free_port = 0;
  ASSERT_EQ(std::sscanf(any.line(5000ms).c_str(), "ddl-link-agent 2 %d", &free_port), 1);
  ::close(any.to);
  any.to = -1;
  ASSERT_EQ(any.ended_within(2000ms), 0);
  StandaloneAgent fixed(std::to_string(free_port).c_str());
  int port = 0;
  EXPECT_EQ(std::sscanf(fixed.line(5000ms).c_str(), "ddl-link-agent 2 %d", &port), 1);
  EXPECT_EQ(port, free_port);
}

}  // namespace
}  // namespace ddl::ddlrun
