// ssh::Upward (launcher/ssh/upward.h): an agent's writes up its channel never wait for the
// parent to read.

#include "launcher/ssh/upward.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

namespace ddl::launcher::ssh {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// 8 MiB into a pipe nobody reads (it holds 64 KiB): every put() returns at once; once the
// parent reads, every byte arrives in order and flush() says so.
TEST(Upward, PutNeverWaitsForAParentThatDoesNotRead) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  Upward up(fds[1]);
  std::string sent;
  const auto start = Clock::now();
  for (int i = 0; i < 128; ++i) {
    std::string chunk(65536, static_cast<char>('a' + i % 26));
    chunk[0] = static_cast<char>(i);
    ASSERT_TRUE(up.put(chunk));
    sent += chunk;
  }
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_FALSE(up.flush(300ms));  // nobody reads yet
  EXPECT_GT(up.waiting(), 0u);
  std::string got;
  std::thread reader([&] {
    char buf[65536];
    while (got.size() < sent.size()) {
      const ssize_t n = read(fds[0], buf, sizeof buf);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
  });
  EXPECT_TRUE(up.flush(10s));
  reader.join();
  EXPECT_TRUE(got == sent) << got.size() << " of " << sent.size() << " bytes, or out of order";
  close(fds[0]);
  close(fds[1]);
}

// Once the parent is gone (a write fails), put() says so.
TEST(Upward, APutAfterTheChannelFailedIsRefused) {
  signal(SIGPIPE, SIG_IGN);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  close(fds[0]);
  Upward up(fds[1]);
  EXPECT_TRUE(up.put("x"));
  EXPECT_FALSE(up.flush(5s));
  EXPECT_FALSE(up.put("y"));
  close(fds[1]);
}

}  // namespace
}  // namespace ddl::launcher::ssh
