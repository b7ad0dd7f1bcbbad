#include "base/fd.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <string>
#include <thread>
#include <vector>

namespace ddl::base {
namespace {

TEST(WriteAll, WritesMoreThanAPipeHoldsWhileAReaderDrainsSlowly) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const std::string data(1 << 20, 'x');
  std::string got;
  std::thread reader([&] {
    char buf[4096];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0)
      got.append(buf, static_cast<size_t>(n));
  });
  EXPECT_EQ(write_all(fds[1], data), 0);
  close(fds[1]);
  reader.join();
  close(fds[0]);
  EXPECT_EQ(got, data);
}

TEST(WriteAll, ReturnsTheErrnoOfTheFailedWrite) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  close(fds[0]);
  std::signal(SIGPIPE, SIG_IGN);
  EXPECT_EQ(write_all(fds[1], "x"), EPIPE);
  close(fds[1]);
  EXPECT_EQ(write_all(-1, "x"), EBADF);
  EXPECT_EQ(write_all(-1, ""), 0);
}

TEST(Deadline, CountsDownAndClampsPollTimes) {
  const Deadline later(std::chrono::seconds(10));
  EXPECT_FALSE(later.passed());
  EXPECT_EQ(later.poll_ms(), 1000);
  EXPECT_EQ(later.poll_ms(20000) > 9000, true);
  EXPECT_GT(later.left(), std::chrono::seconds(9));
  const Deadline past(Deadline::Clock::now() - std::chrono::seconds(1));
  EXPECT_TRUE(past.passed());
  EXPECT_EQ(past.poll_ms(), 0);
  EXPECT_EQ(past.left(), Deadline::Clock::duration::zero());
}

/// The child of AcceptRest.RestsOnlyWhenOutOfDescriptors: 0 when the rest began with EMFILE,
/// lasted kRest and ended in the connection taken; else the step that failed.
int accept_rest_out_of_descriptors() {
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(listener, 4) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return 10;
  AcceptRest rest;
  if (rest.accept(listener, SOCK_CLOEXEC) >= 0 || errno != EAGAIN || !rest.listening()) return 11;
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = static_cast<rlim_t>(listener + 8);
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) return 12;
  std::vector<int> spare;
  for (int fd; (fd = open("/dev/null", O_RDONLY)) >= 0;)
    spare.push_back(fd);
  close(spare.back());
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return 13;
  if (rest.accept(listener, SOCK_CLOEXEC) >= 0 || errno != EMFILE) return 1;
  if (rest.listening() || rest.events() != 0) return 2;
  const int ms = rest.poll_ms(1000);
  if (ms <= 0 || ms > 100 || rest.poll_ms(20) != 20) return 3;
  std::this_thread::sleep_for(AcceptRest::kRest);
  if (!rest.listening() || rest.events() != POLLIN || rest.poll_ms(1000) != 1000) return 4;
  close(spare.front());
  return rest.accept(listener, SOCK_CLOEXEC) >= 0 ? 0 : 5;
}

// Out of descriptors accept() fails and the listening socket stays readable: AcceptRest rests
// it for kRest (poll it for nothing, wake when the rest ends); EAGAIN rests nothing.
TEST(AcceptRest, RestsOnlyWhenOutOfDescriptors) {
  const pid_t pid = fork();  // in a child, so that this process keeps its limit
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(accept_rest_out_of_descriptors());
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace ddl::base
