// The supervisor against a recording fake backend (processes are simulated: the test decides
// when each "exits" and which signals "kill" it).

#include "launcher/supervise.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

namespace ddl::launcher {
namespace {

using namespace std::chrono_literals;

class FakeBackend : public Backend {
 public:
  explicit FakeBackend(std::vector<int> ranks, std::set<int> deadly = {SIGTERM, SIGKILL})
      : ranks_(std::move(ranks)), deadly_(std::move(deadly)) {}
  std::string_view name() const override { return "fake"; }
  std::vector<int> start(EventQueue& events) override {
    events_ = &events;
    for (auto& s : script_)
      events.push(s);
    running_ = std::set<int>(ranks_.begin(), ranks_.end());
    for (auto& s : script_)
      if (s.type == Event::Type::kExit) running_.erase(s.rank);
    return ranks_;
  }
  void signal(int sig) override {
    std::lock_guard lock(mutex_);
    signals.push_back(sig);
    if (deadly_.count(sig) == 0) return;
    for (int r : running_)
      events_->push(Event{Event::Type::kExit, r, -1, Stream::kStdout, {}, {0, sig}});
    running_.clear();
  }
  void write_stdin(std::string_view) override {}
  void close_stdin() override {}
  void finish() override { finished = true; }

  std::vector<Event> script_;  ///< pushed at start
  std::vector<int> signals;
  bool finished = false;

 private:
  std::vector<int> ranks_;
  std::set<int> deadly_;
  std::set<int> running_;
  EventQueue* events_ = nullptr;
  std::mutex mutex_;
};

class RecordingSink : public OutputSink {
 public:
  void output(int rank, Stream stream, std::string_view text) override {
    lines.push_back(std::to_string(rank) + (stream == Stream::kStdout ? " out " : " err ") +
                    std::string(text));
  }
  void note(std::string_view text) override { notes.emplace_back(text); }
  std::vector<std::string> lines, notes;
};

/// A sink whose reader never reads (ready() is false), or is gone (failure()).
class StalledSink : public RecordingSink {
 public:
  bool ready() override { return false; }
  bool written() override { return false; }
  std::optional<OutputFailure> failure() override { return failure_; }
  std::optional<OutputFailure> failure_;
};

comm::Topology three_ranks() {
  comm::Topology t;
  t.job_id = "j";
  t.hosts = {{0, "n1", "a", {}}, {1, "n2", "b", {}}};
  t.ranks = {{0, 0, 0, -1, "", "", {}, "", ""},
             {1, 1, 0, -1, "", "", {}, "", ""},
             {2, 0, 1, -1, "", "", {}, "", ""}};
  return t;
}

SuperviseOptions quiet_options() {
  SuperviseOptions o;
  o.handle_signals = false;
  o.stdin_fd = -1;
  o.kill_grace = 200ms;
  o.tail_lines = 2;
  return o;
}

Event out(int rank, std::string text) {
  return {Event::Type::kOutput, rank, -1, Stream::kStdout, std::move(text) + "\n", {}};
}
Event exit_of(int rank, int code, int sig = 0) {
  return {Event::Type::kExit, rank, -1, Stream::kStdout, {}, {code, sig}};
}

TEST(SuperviseTest, AllSucceed) {
  FakeBackend b({0, 1, 2});
  b.script_ = {out(0, "hi"), exit_of(0, 0), exit_of(1, 0), out(2, "bye"), exit_of(2, 0)};
  RecordingSink sink;
  const comm::Topology t = three_ranks();
  EXPECT_EQ(supervise(b, &t, quiet_options(), sink), 0);
  EXPECT_EQ(sink.lines, (std::vector<std::string>{"0 out hi\n", "2 out bye\n"}));
  EXPECT_TRUE(sink.notes.empty());
  EXPECT_TRUE(b.signals.empty());
  EXPECT_TRUE(b.finished);
}

TEST(SuperviseTest, FirstFailureStopsTheRestAndNamesTheRank) {
  FakeBackend b({0, 1, 2});
  b.script_ = {out(2, "a"), out(2, "b"), out(2, "Traceback: boom"), exit_of(2, 7)};
  RecordingSink sink;
  const comm::Topology t = three_ranks();
  EXPECT_EQ(supervise(b, &t, quiet_options(), sink), 7);
  EXPECT_EQ(b.signals, (std::vector<int>{SIGTERM, SIGCONT}));
  EXPECT_EQ(sink.notes, (std::vector<std::string>{
                            "ddlrun: rank 2 (n2) exited with status 7; stopping the other 2 "
                            "processes",
                            "ddlrun: last lines of rank 2 (n2):", "  b", "  Traceback: boom"}));
}

TEST(SuperviseTest, ASignalledRankGivesOneTwentyEightPlusN) {
  FakeBackend b({0, 1, 2});
  b.script_ = {exit_of(1, 0, SIGKILL)};
  RecordingSink sink;
  const comm::Topology t = three_ranks();
  EXPECT_EQ(supervise(b, &t, quiet_options(), sink), 137);
  EXPECT_EQ(sink.notes.at(0),
            "ddlrun: rank 1 (n1) was killed by SIGKILL; stopping the other 2 processes");
}

TEST(SuperviseTest, SigkillAfterTheGrace) {
  FakeBackend b({0, 1}, {SIGKILL});  // they ignore SIGTERM
  b.script_ = {exit_of(0, 3)};
  b.script_.push_back(exit_of(0, 3));
  RecordingSink sink;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(supervise(b, nullptr, quiet_options(), sink), 3);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 200ms);
  EXPECT_EQ(b.signals, (std::vector<int>{SIGTERM, SIGCONT, SIGKILL}));
  EXPECT_EQ(sink.notes.back(),
            "ddlrun: 1 of 2 processes still running 0.2 s after SIGTERM; sending SIGKILL");
}

TEST(SuperviseTest, TimeoutGivesOneTwentyFour) {
  FakeBackend b({0, 1});
  SuperviseOptions o = quiet_options();
  o.timeout = 100ms;
  RecordingSink sink;
  EXPECT_EQ(supervise(b, nullptr, o, sink), 124);
  EXPECT_EQ(sink.notes.at(0),
            "ddlrun: the job timed out after 0.1 s (--timeout); stopping 2 processes");
}

TEST(SuperviseTest, LostHostEndsTheJob) {
  FakeBackend b({0, 1, 2});
  b.script_ = {{Event::Type::kHostFailure, -1, 1, Stream::kStdout, "connection reset", {}}};
  RecordingSink sink;
  const comm::Topology t = three_ranks();
  EXPECT_EQ(supervise(b, &t, quiet_options(), sink), 1);
  EXPECT_EQ(sink.notes.at(0), "ddlrun: n2: connection reset; stopping the other 2 processes");
  EXPECT_EQ(b.signals, (std::vector<int>{SIGTERM, SIGCONT}));
}

TEST(SuperviseTest, InterruptIsForwardedAndASecondKills) {
  FakeBackend b({0, 1}, {SIGKILL});
  const Event sigint{Event::Type::kSignal, -1, -1, Stream::kStdout, {}, {0, SIGINT}};
  b.script_ = {sigint, sigint};
  RecordingSink sink;
  EXPECT_EQ(supervise(b, nullptr, quiet_options(), sink), 130);
  EXPECT_EQ(b.signals, (std::vector<int>{SIGINT, SIGCONT, SIGKILL}));
  EXPECT_EQ(sink.notes, (std::vector<std::string>{
                            "ddlrun: got SIGINT; passing it to 2 processes (interrupt again to "
                            "kill them at once)",
                            "ddlrun: second interrupt: killing every process now"}));
}

TEST(SuperviseTest, TheKillNoteNamesTheSignalThatWasForwarded) {
  // A SIGINT passed on is not called SIGTERM when SIGKILL follows it.
  FakeBackend b({0}, {SIGKILL});
  b.script_ = {Event{Event::Type::kSignal, -1, -1, Stream::kStdout, {}, {0, SIGINT}}};
  RecordingSink sink;
  EXPECT_EQ(supervise(b, nullptr, quiet_options(), sink), 128 + SIGINT);
  ASSERT_EQ(sink.notes.size(), 2u);
  EXPECT_EQ(sink.notes[1],
            "ddlrun: 1 of 1 processes still running 0.2 s after SIGINT; sending SIGKILL");
}

// Processes that never end (a host that cannot be reached): a signal while the job is being
// stopped leaves at once, whatever stopped it, rather than waiting for them.
TEST(SuperviseTest, ASignalWhileStoppingLeavesAtOnce) {
  FakeBackend b({0, 1, 2}, {});
  const Event sigterm{Event::Type::kSignal, -1, -1, Stream::kStdout, {}, {0, SIGTERM}};
  b.script_ = {exit_of(1, 4), sigterm};
  SuperviseOptions o = quiet_options();
  o.kill_grace = 10s;
  RecordingSink sink;
  const comm::Topology t = three_ranks();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(supervise(b, &t, o, sink), 4);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_EQ(b.signals, (std::vector<int>{SIGTERM, SIGCONT, SIGKILL}));
  EXPECT_EQ(sink.notes.back(), "ddlrun: got SIGTERM while stopping: killing every process now");
  EXPECT_TRUE(b.finished);
}

// "stopping 1 process", not "1 processes"; and a signal while a failure is stopped is what ended
// the job (JobEnd::signal, not failed: no restart follows), though the status stays the failure's.
TEST(SuperviseTest, OneProcessIsSingularAndASignalWhileStoppingIsNoFailure) {
  FakeBackend one({0});
  SuperviseOptions o = quiet_options();
  o.timeout = 100ms;
  RecordingSink timed;
  EXPECT_EQ(supervise(one, nullptr, o, timed), 124);
  EXPECT_EQ(timed.notes.at(0),
            "ddlrun: the job timed out after 0.1 s (--timeout); stopping 1 process");

  FakeBackend b({0, 1, 2}, {});
  const Event sigint{Event::Type::kSignal, -1, -1, Stream::kStdout, {}, {0, SIGINT}};
  b.script_ = {exit_of(1, 4), sigint};
  o = quiet_options();
  o.kill_grace = 10s;
  RecordingSink sink;
  const comm::Topology t = three_ranks();
  JobEnd end;
  EXPECT_EQ(supervise(b, &t, o, sink, &end), 4);
  EXPECT_EQ(end.signal, SIGINT);
  EXPECT_FALSE(end.failed);
}

TEST(SuperviseTest, ASecondTermLeavesAtOnce) {
  FakeBackend b({0, 1}, {});
  const Event sigterm{Event::Type::kSignal, -1, -1, Stream::kStdout, {}, {0, SIGTERM}};
  b.script_ = {sigterm, sigterm};
  SuperviseOptions o = quiet_options();
  o.kill_grace = 10s;
  RecordingSink sink;
  EXPECT_EQ(supervise(b, nullptr, o, sink), 143);
  EXPECT_EQ(b.signals, (std::vector<int>{SIGTERM, SIGCONT, SIGKILL}));
  EXPECT_EQ(sink.notes, (std::vector<std::string>{
                            "ddlrun: got SIGTERM; passing it to 2 processes",
                            "ddlrun: got SIGTERM while stopping: killing every process now"}));
}

// Past SIGKILL, ddlrun waits `give_up` at most for processes that never report their end.
TEST(SuperviseTest, GivesUpOnProcessesThatNeverEnd) {
  FakeBackend b({0, 1}, {});
  b.script_ = {exit_of(0, 2)};
  SuperviseOptions o = quiet_options();
  o.kill_grace = 100ms;
  o.give_up = 300ms;
  RecordingSink sink;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(supervise(b, nullptr, o, sink), 2);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 400ms);
  EXPECT_EQ(b.signals, (std::vector<int>{SIGTERM, SIGCONT, SIGKILL}));
  EXPECT_EQ(sink.notes.back(),
            "ddlrun: 1 of 2 processes did not report their end 0.3 s after SIGKILL; leaving "
            "without them");
}

// A stalled rank is named, not the bystander that timed out first: the
// note waits for the other ranks' errors.
TEST(SuperviseTest, NamesTheStalledRankNotTheFirstToFail) {
  FakeBackend b({0, 1, 2});
  Event err1 = out(1, "rank 1: allreduce failed: rank 0 (n1): no progress for 5 s");
  err1.stream = Stream::kStderr;
  b.script_ = {err1, exit_of(1, 1), out(0, "rank 0: failed: rank 2 (n1): no progress for 5 s")};
  RecordingSink sink;
  const comm::Topology t = three_ranks();
  EXPECT_EQ(supervise(b, &t, quiet_options(), sink), 1);
  EXPECT_EQ(sink.notes.at(0),
            "ddlrun: rank 1 (n1) exited with status 1 waiting for rank 2 (n2), which made no "
            "progress for 5 s; stopping the other 2 processes");
}

// A rank that left early (status 0) is named, not the rank that failed because of it (17c).
TEST(SuperviseTest, NamesTheRankThatLeftEarly) {
  FakeBackend b({0, 1, 2});
  b.script_ = {exit_of(2, 0), out(0, "rank 0: allreduce: rank 2 (n2): the peer closed the link"),
               exit_of(0, 1)};
  RecordingSink sink;
  const comm::Topology t = three_ranks();
  EXPECT_EQ(supervise(b, &t, quiet_options(), sink), 1);
  EXPECT_EQ(sink.notes.at(0),
            "ddlrun: rank 2 (n2) exited (status 0) while the others were still running a "
            "collective; rank 0 (n1) exited with status 1 because of it; stopping the other "
            "process");
}

// A killed rank whose death another host reports first (its peer's error comes with an earlier
// exit) is named, with its own status: SIGKILL of a rank over ssh used to end the job with the
// bystander's status 1 (the chaos suite's kill_rank).
TEST(SuperviseTest, NamesTheKilledRankWhoseDeathAPeerReportedFirst) {
  FakeBackend b({0, 1, 2});
  b.script_ = {out(0, "rank 0: allreduce: rank 2 (n2): the connection was reset by the peer"),
               exit_of(0, 1), exit_of(2, 0, SIGKILL)};
  RecordingSink sink;
  const comm::Topology t = three_ranks();
  EXPECT_EQ(supervise(b, &t, quiet_options(), sink), 137);
  EXPECT_EQ(sink.notes.at(0),
            "ddlrun: rank 2 (n2) was killed by SIGKILL; stopping the other 2 processes");
}

// The same when the killed rank's host was lost (its agent SIGKILLed): the host is named.
TEST(SuperviseTest, NamesTheLostHostWhoseRankAPeerReportedFirst) {
  FakeBackend b({0, 1, 2});
  Event lost{
      Event::Type::kHostFailure, -1, 1, Stream::kStdout, "the connection to its agent closed", {}};
  b.script_ = {out(0, "rank 0: allreduce: rank 2 (n2): the connection was reset by the peer"),
               exit_of(0, 1), lost};
  RecordingSink sink;
  const comm::Topology t = three_ranks();
  EXPECT_EQ(supervise(b, &t, quiet_options(), sink), 1);
  EXPECT_EQ(sink.notes.at(0),
            "ddlrun: n2: the connection to its agent closed; stopping the other 2 processes");
}

/// What on_first_failure heard while supervising `script` on three ranks, and the status.
std::pair<std::vector<std::pair<int, ExitStatus>>, int> told_of(std::vector<Event> script) {
  FakeBackend b({0, 1, 2});
  b.script_ = std::move(script);
  RecordingSink sink;
  const comm::Topology t = three_ranks();
  SuperviseOptions o = quiet_options();
  std::vector<std::pair<int, ExitStatus>> told;
  o.on_first_failure = [&](int rank, const ExitStatus& s) { told.emplace_back(rank, s); };
  const int status = supervise(b, &t, o, sink);
  return {told, status};
}

TEST(SuperviseTest, OnFirstFailureHearsTheFirstFailureAtOnce) {
  const auto [told, status] = told_of({exit_of(2, 7), exit_of(0, 143), exit_of(1, 143)});
  EXPECT_EQ(status, 7);
  EXPECT_EQ(told, (std::vector<std::pair<int, ExitStatus>>{{2, ExitStatus{7, 0}}}));
}

TEST(SuperviseTest, OnFirstFailureOfABlamingRankHearsOfTheRankItBlames) {
  const auto [told, status] =
      told_of({out(0, "rank 0: allreduce: rank 2 (n2): the connection was reset by the peer"),
               exit_of(0, 1), exit_of(2, 0, SIGKILL)});
  EXPECT_EQ(status, 137);
  EXPECT_EQ(told, (std::vector<std::pair<int, ExitStatus>>{{2, ExitStatus{0, SIGKILL}}}));
}

TEST(SuperviseTest, LaterFailuresDoNotChangeTheStatus) {
  FakeBackend b({0, 1, 2}, {});
  b.script_ = {exit_of(0, 5), exit_of(1, 9), exit_of(2, 0, SIGTERM)};
  RecordingSink sink;
  EXPECT_EQ(supervise(b, nullptr, quiet_options(), sink), 5);
  EXPECT_EQ(sink.notes.size(), 1u);
}

TEST(SuperviseTest, ExitsAndSignalsPassOutputAStalledReaderHoldsBack) {
  FakeBackend b({0, 1});
  const Event sigterm{Event::Type::kSignal, -1, -1, Stream::kStdout, {}, {0, SIGTERM}};
  b.script_ = {out(0, "waits"), out(1, "waits too"), sigterm};
  StalledSink sink;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(supervise(b, nullptr, quiet_options(), sink), 128 + SIGTERM);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_EQ(b.signals, (std::vector<int>{SIGTERM, SIGCONT}));
  EXPECT_TRUE(sink.lines.empty());  // dropped: the reader never took any
}

/// Records the ends of ranks among the output.
class EndingSink : public RecordingSink {
 public:
  void end(int rank) override { lines.push_back(std::to_string(rank) + " end"); }
};

/// Both ranks exit at once; rank 0's last output (a partial line) comes 100 ms later, as under
/// the ssh launcher when it waited for its host's output window, which says meanwhile that
/// output may follow.
class LateOutputBackend : public FakeBackend {
 public:
  LateOutputBackend() : FakeBackend({0, 1}) { script_ = {exit_of(0, 0), exit_of(1, 0)}; }
  ~LateOutputBackend() override {
    if (late_.joinable()) late_.join();
  }
  std::vector<int> start(EventQueue& events) override {
    std::vector<int> ranks = FakeBackend::start(events);
    late_ = std::thread([this, &events] {
      std::this_thread::sleep_for(100ms);
      events.push(Event{Event::Type::kOutput, 0, -1, Stream::kStdout, "tail", {}});
      more_ = false;
      events.push(Event{});
    });
    return ranks;
  }
  bool output_may_follow() override { return more_; }

 private:
  std::atomic<bool> more_{true};
  std::thread late_;
};

TEST(SuperviseTest, OutputThatFollowsTheExitsIsWaitedForAndEndsItsRankAgain) {
  // Exits pass output that waits; what comes after them is neither lost nor cut.
  LateOutputBackend b;
  EndingSink sink;
  EXPECT_EQ(supervise(b, nullptr, quiet_options(), sink), 0);
  EXPECT_EQ(sink.lines, (std::vector<std::string>{"0 end", "1 end", "0 out tail", "0 end"}));
}

TEST(SuperviseTest, ATimeoutStopsTheJobAndTheStopDoesNotWaitForTheReader) {
  FakeBackend b({0});
  b.script_ = {out(0, "waits")};
  SuperviseOptions o = quiet_options();
  o.timeout = 100ms;
  StalledSink sink;
  EXPECT_EQ(supervise(b, nullptr, o, sink), 124);
}

TEST(SuperviseTest, AClosedStdoutStopsTheJobWithItsStatus) {
  FakeBackend b({0, 1});
  StalledSink sink;
  sink.failure_ = OutputFailure{141, "standard output is closed (EPIPE)"};
  EXPECT_EQ(supervise(b, nullptr, quiet_options(), sink), 141);
  EXPECT_EQ(b.signals, (std::vector<int>{SIGTERM, SIGCONT}));
  EXPECT_EQ(sink.notes.at(0), "ddlrun: standard output is closed (EPIPE); stopping 2 processes");
}

TEST(SuperviseTest, OutputThatFailsAfterTheLastExitStillFailsTheJob) {
  FakeBackend b({0});
  b.script_ = {exit_of(0, 0)};
  StalledSink sink;
  sink.failure_ = OutputFailure{1, "cannot write standard output: No space left on device"};
  EXPECT_EQ(supervise(b, nullptr, quiet_options(), sink), 1);
}

// How the job ended, for ddlrun's restarts: the failure's note, its rank and host, and the
// hosts lost; a stop ddlrun was asked for (a timeout) is no failure of the job's own.
TEST(SuperviseTest, JobEndNamesTheFailureAndTheLostHosts) {
  const comm::Topology t = three_ranks();
  {
    FakeBackend b({0, 1, 2});
    b.script_ = {exit_of(2, 7)};
    RecordingSink sink;
    JobEnd end;
    EXPECT_EQ(supervise(b, &t, quiet_options(), sink, &end), 7);
    EXPECT_EQ(end.status, 7);
    EXPECT_TRUE(end.failed);
    EXPECT_EQ(end.reason, "rank 2 (n2) exited with status 7");
    EXPECT_EQ(end.rank, 2);
    EXPECT_EQ(end.host, "n2");
    EXPECT_TRUE(end.lost_hosts.empty());
  }
  {
    FakeBackend b({0, 1, 2});
    Event lost{Event::Type::kHostFailure,
               -1,
               1,
               Stream::kStdout,
               "the connection to its agent closed",
               {}};
    b.script_ = {out(0, "rank 0: allreduce: rank 2 (n2): the connection was reset by the peer"),
                 exit_of(0, 1), lost};
    RecordingSink sink;
    JobEnd end;
    EXPECT_EQ(supervise(b, &t, quiet_options(), sink, &end), 1);
    EXPECT_TRUE(end.failed);
    EXPECT_EQ(end.reason, "n2: the connection to its agent closed");
    EXPECT_EQ(end.rank, -1);
    EXPECT_EQ(end.host, "n2");
    EXPECT_EQ(end.lost_hosts, (std::set<std::string>{"n2"}));
  }
  {
    // n2 lost only with its tree parent n1 (the ssh launcher's launch tree) is no
    // lost host of its own: a restart keeps it.
    FakeBackend b({0, 1, 2});
    Event first{Event::Type::kHostFailure, -1, 0, Stream::kStdout, "no heartbeat for 4 s", {}};
    Event with{Event::Type::kHostFailure,      -1, 1, Stream::kStdout,
               "lost with its tree parent n1", {}};
    with.with_parent = true;
    b.script_ = {first, with};
    RecordingSink sink;
    JobEnd end;
    EXPECT_EQ(supervise(b, &t, quiet_options(), sink, &end), 1);
    EXPECT_EQ(end.reason, "n1: no heartbeat for 4 s");
    EXPECT_EQ(end.lost_hosts, (std::set<std::string>{"n1"}));
  }
  {
    FakeBackend b({0, 1});
    SuperviseOptions o = quiet_options();
    o.timeout = 100ms;
    RecordingSink sink;
    JobEnd end;
    EXPECT_EQ(supervise(b, nullptr, o, sink, &end), 124);
    EXPECT_FALSE(end.failed);
  }
}

// Hosts whose processes never report their end after SIGKILL are lost too.
TEST(SuperviseTest, JobEndCountsHostsThatNeverReportedAsLost) {
  FakeBackend b({0, 1, 2}, {});
  b.script_ = {exit_of(0, 2)};
  SuperviseOptions o = quiet_options();
  o.kill_grace = 50ms;
  o.give_up = 100ms;
  RecordingSink sink;
  const comm::Topology t = three_ranks();
  JobEnd end;
  EXPECT_EQ(supervise(b, &t, o, sink, &end), 2);
  EXPECT_EQ(end.lost_hosts, (std::set<std::string>{"n1", "n2"}));
}

TEST(SignalNameTest, Names) {
  EXPECT_EQ(signal_name(SIGKILL), "SIGKILL");
  EXPECT_EQ(signal_name(SIGINT), "SIGINT");
}

}  // namespace
}  // namespace ddl::launcher
