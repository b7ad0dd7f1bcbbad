// The event queue's output bound and the summary's last lines (launcher/backend.h, output.h).
// The sinks themselves write to ddlrun's fds 1 and 2: tests/launcher/io_bounds_test.sh runs
// them in real jobs.

#include "launcher/output.h"

#include <gtest/gtest.h>

#include <atomic>

namespace ddl::launcher {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

Event output(int rank, size_t bytes) {
  return {Event::Type::kOutput, rank, -1, Stream::kStdout, std::string(bytes, 'x'), {}};
}
Event exit_of(int rank) {
  return {Event::Type::kExit, rank, -1, Stream::kStdout, {}, {}};
}

TEST(EventQueueTest, OtherEventsPassOutputThatWaits) {
  EventQueue q;
  q.push(output(0, 10));
  q.push(exit_of(1));
  q.push(output(2, 10));
  // A consumer that cannot take output gets the exit at once.
  std::optional<Event> e = q.pop(Clock::now(), false);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->type, Event::Type::kExit);
  EXPECT_FALSE(q.pop(Clock::now() + 10ms, false));
  EXPECT_TRUE(q.has_output());
  EXPECT_TRUE(q.has_output(2));
  EXPECT_FALSE(q.has_output(1));
  // Otherwise events come in the order they came.
  q.push(exit_of(3));
  EXPECT_EQ(q.pop(Clock::now())->rank, 0);
  EXPECT_EQ(q.pop(Clock::now())->rank, 2);
  EXPECT_EQ(q.pop(Clock::now())->rank, 3);
}

TEST(EventQueueTest, FullAtTheLimitUntilBelowHalfThenWakes) {
  EventQueue q;
  std::atomic<int> woken{0};
  const int token = q.add_waker([&] { ++woken; });
  const size_t chunk = 64 * 1024;
  int pushed = 0;
  while (!q.output_full()) {
    q.push(output(0, chunk));
    ++pushed;
  }
  EXPECT_GE(static_cast<size_t>(pushed) * chunk, EventQueue::kOutputLimit * 9 / 10);
  EXPECT_LE(static_cast<size_t>(pushed) * chunk, EventQueue::kOutputLimit + chunk);
  // Still full while more than half is queued; room (and one wake) below half.
  int popped = 0;
  while (q.output_full()) {
    EXPECT_EQ(woken, 0);
    ASSERT_TRUE(q.pop(Clock::now()));
    ++popped;
  }
  EXPECT_GE(popped, pushed / 2 - 1);
  EXPECT_EQ(woken, 1);
  EXPECT_FALSE(q.output_full());
  q.remove_waker(token);
  while (!q.output_full())
    q.push(output(0, chunk));
  while (q.pop(Clock::now())) {
  }
  EXPECT_EQ(woken, 1);  // removed: not called again
}

TEST(LastLinesTest, LinesAcrossChunksAndStreamsCutAt300) {
  LastLines t(3);
  t.add(0, Stream::kStdout, "a\nb");
  t.add(0, Stream::kStderr, "e1\ne");
  t.add(0, Stream::kStdout, "c\n");
  EXPECT_EQ(t.of(0), (std::vector<std::string>{"e1", "bc", "e"}));
  t.add(0, Stream::kStdout, std::string(200000, 'y'));
  EXPECT_EQ(t.of(0), (std::vector<std::string>{"bc", std::string(300, 'y') + "...", "e"}));
  t.add(0, Stream::kStdout, "\n\n");
  EXPECT_EQ(t.of(0), (std::vector<std::string>{std::string(300, 'y') + "...", "", "e"}));
  EXPECT_TRUE(t.of(5).empty());
}

}  // namespace
}  // namespace ddl::launcher
