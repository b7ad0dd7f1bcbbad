#include "base/fd.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <string>
#include <thread>

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

}  // namespace
}  // namespace ddl::base
