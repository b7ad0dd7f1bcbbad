// The ssh backend driven through the recording ssh double (tests/ssh/fake_ssh.h): each host's
// `ddlrun --agent` is played by a ScriptedAgent that speaks the frame protocol (protocol.h).

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include "base/net/codec.h"
#include "launcher/ssh/protocol.h"
#include "launcher/ssh/ssh.h"
#include "tests/launcher/ssh_frames.h"
#include "tests/ssh/fake_ssh.h"

namespace ddl::launcher {
namespace {

using ddl::ssh::FakeConnector;
using ddl::ssh::FakeRemote;
using std::chrono::milliseconds;
using test::events_until;
using test::hello_frame;

constexpr char kDdlrun[] = "/opt/ddlrun/bin/ddlrun";
constexpr char kAgent[] = "/opt/ddlrun/bin/ddlrun --agent";
/// The next step start() names when a host could not be reached.
const std::string kFixThem =
    "fix them (each must pass 'ssh -o BatchMode=yes HOST ddlrun --version'), or leave them out "
    "of the host list";

/// Two hosts: ranks 0 and 1 on n1, rank 2 on n2.
Job two_hosts() {
  Job job;
  comm::Topology& t = job.topology;
  t.job_id = "job-1";
  t.hosts = {{0, "n1", "10.0.0.1", {}}, {1, "n2", "10.0.0.2", {}}};
  t.ranks = {
      {0, 0, 0, -1, "", "", comm::CpuSet(), "", ""},
      {1, 1, 0, -1, "", "", comm::CpuSet(), "", ""},
      {2, 0, 1, -1, "", "", comm::CpuSet(), "", ""},
  };
  t.mode = comm::parse_mode("p:1x3");
  t.rings = comm::default_rings({1, 3});
  job.argv = {"train"};
  job.token = "abc";
  return job;
}

LaunchOptions options() {
  LaunchOptions o;
  o.ddlrun_path = kDdlrun;
  o.ssh.connect_timeout = milliseconds(1000);
  o.ssh.command_timeout = milliseconds(3000);
  return o;
}

std::string frame(ssh::FrameType type, int32_t id, std::string_view payload = {}) {
  return ssh::encode_frame(type, id, payload);
}

std::string exit_frame(int rank, int code, int signal = 0) {
  std::string status;
  base::net::put_u32(status, static_cast<uint32_t>(code));
  base::net::put_u32(status, static_cast<uint32_t>(signal));
  return frame(ssh::FrameType::kExit, rank, status);
}

/// Plays `ddlrun --agent` on one host: hello at once; ready when the job comes (or a failure,
/// when told); on go each rank prints a line and exits 0, then done and the end (unless told
/// to close the channel without done after `exits_then_close` exits, or to let them run on
/// until SIGKILL).
struct ScriptedAgent {
  std::string host;
  std::vector<int> ranks;
  std::string refuse_job = {};  ///< when set: answer the job with this failure
  int refuse_status = 1;
  int exits_then_close = -1;
  bool ranks_hang = false;  ///< on go: nothing (the ranks run on)
  /// After its hello: the answer to an inventory request that the probe gave up waiting for.
  bool late_inventory = false;

  void operator()(FakeRemote& r) const {
    r.print(hello_frame(host));
    if (late_inventory) r.print(frame(ssh::FrameType::kInventory, 0, "hostname: " + host + "\n"));
    auto reader = std::make_shared<ssh::FrameReader>();
    r.on_write([self = *this, reader](FakeRemote& r, std::string_view bytes) {
      reader->feed(bytes);
      while (auto f = reader->next()) {
        if (f->type == ssh::FrameType::kJob) self.on_job(r);
        if (f->type == ssh::FrameType::kGo) self.on_go(r);
        if (f->type == ssh::FrameType::kSignal && f->id == SIGKILL) self.on_kill(r);
      }
    });
  }
  void on_job(FakeRemote& r) const {
    if (refuse_job.empty()) {
      r.print(frame(ssh::FrameType::kReady, 0));
    } else {
      r.print(frame(ssh::FrameType::kFailure, refuse_status, refuse_job));
    }
  }
  void on_kill(FakeRemote& r) const {
    for (int rank : ranks)
      r.print(exit_frame(rank, 0, SIGKILL));
    r.print(frame(ssh::FrameType::kDone, 0));
    r.end(0);
  }
  void on_go(FakeRemote& r) const {
    if (ranks_hang) return;
    int exits = 0;
    for (int rank : ranks) {
      if (exits++ == exits_then_close) return r.end(-1);
      r.print(frame(ssh::FrameType::kStdout, rank, "rank " + std::to_string(rank) + "\n"));
      r.print(exit_frame(rank, 0));
    }
    r.print(frame(ssh::FrameType::kDone, 0));
    r.end(0);
  }
};

/// The frame types in `bytes`, heartbeats and output windows (M) left out.
std::string frame_types(const std::string& bytes) {
  ssh::FrameReader reader;
  reader.feed(bytes);
  std::string types;
  while (auto f = reader.next()) {
    if (f->type != ssh::FrameType::kHeartbeat && f->type != ssh::FrameType::kOutputCredit)
      types += static_cast<char>(f->type);
  }
  return types;
}

/// The frames of `type` in `bytes`.
std::vector<ssh::Frame> frames_of(const std::string& bytes, ssh::FrameType type) {
  ssh::FrameReader reader;
  reader.feed(bytes);
  std::vector<ssh::Frame> out;
  while (auto f = reader.next()) {
    if (f->type == type) out.push_back(std::move(*f));
  }
  return out;
}

void agents_on_both(FakeConnector& connector) {
  connector.host("n1").program = ScriptedAgent{"n1", {0, 1}};
  connector.host("n2").program = ScriptedAgent{"n2", {2}};
}

/// What start() throws, with its status: "STATUS: TEXT".
std::string start_failure(Backend& backend, EventQueue& events) {
  try {
    backend.start(events);
  } catch (const LaunchError& e) {
    return std::to_string(e.status()) + ": " + e.what();
  }
  return "started";
}

/// Hosts n1 and n2 behind a fake connector, each running a ScriptedAgent unless a test says
/// otherwise.
class SshBackendTest : public ::testing::Test {
 protected:
  void SetUp() override { agents_on_both(connector); }
  std::unique_ptr<Backend> backend(const LaunchOptions& o = options()) {
    return make_ssh_backend(two_hosts(), o, connector);
  }
  FakeConnector connector;
  EventQueue events;
};

TEST_F(SshBackendTest, RunsTheAgentOnEveryHostAndRelaysTheRanks) {
  const std::unique_ptr<Backend> backend = this->backend();
  EXPECT_EQ(backend->start(events), (std::vector<int>{0, 1, 2}));
  const std::vector<Event> got = events_until(events, 3);
  std::multiset<std::string> output;
  for (const Event& e : got) {
    if (e.type == Event::Type::kOutput) output.insert(e.data);
    if (e.type == Event::Type::kExit) {
      EXPECT_EQ(e.status, ExitStatus{});
    }
  }
  EXPECT_EQ(output, (std::multiset<std::string>{"rank 0\n", "rank 1\n", "rank 2\n"}));
  backend->finish();

  const std::vector<std::string> connected = connector.connected();
  const std::set<std::string> logins(connected.begin(), connected.end());
  EXPECT_EQ(logins, (std::set<std::string>{"n1", "n2"}));
  for (const char* host : {"n1", "n2"}) {
    EXPECT_EQ(connector.host(host).commands, std::vector<std::string>{kAgent}) << host;
    const FakeRemote& remote = *connector.host(host).remotes.at(0);
    EXPECT_EQ(frame_types(remote.written()), "UJG") << host;  // the job, its frame, then go
    EXPECT_TRUE(remote.closed()) << host;
  }
  // The job frame names the host's index and the rendezvous on rank 0's host (n1's hello).
  const std::vector<ssh::Frame> jobs =
      frames_of(connector.host("n2").remotes.at(0)->written(), ssh::FrameType::kJob);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].id, 1);
  const std::vector<ssh::Frame> bytes =
      frames_of(connector.host("n2").remotes.at(0)->written(), ssh::FrameType::kJobBytes);
  ASSERT_EQ(bytes.size(), 1u);
  EXPECT_EQ(decode_job(bytes[0].payload).argv, std::vector<std::string>{"train"});
  base::net::Decoder in(jobs[0].payload, "job frame");
  EXPECT_EQ(in.str(), "");  // the job's bytes came once, before
  EXPECT_EQ(in.str(), "10.9.9.9");
  EXPECT_EQ(in.u32(), 5000u);
}

TEST_F(SshBackendTest, ReadsExitsWhileTheSupervisorHasNoRoomForOutput) {
  // The supervisor's output is full (a reader that does not read). The
  // channels are read all the same (the output windows bound them), so the ranks' exits come
  // past the output that waits; each host got its window with go, and no more since.
  for (int i = 0; i < 5; ++i)
    events.push(Event{Event::Type::kOutput, 9, 0, Stream::kStdout, std::string(1 << 20, 'x'), {}});
  ASSERT_TRUE(events.output_full());
  const std::unique_ptr<Backend> backend = this->backend();
  backend->start(events);
  std::set<int> exited;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (exited.size() < 3 && std::chrono::steady_clock::now() < until) {
    const std::optional<Event> e = events.pop(until, /*take_output=*/false);
    if (e && e->type == Event::Type::kExit) exited.insert(e->rank);
  }
  EXPECT_EQ(exited, (std::set<int>{0, 1, 2}));
  EXPECT_TRUE(events.has_output(0));  // rank 0's line, read and waiting for room
  backend->finish();
  for (const char* host : {"n1", "n2"}) {
    const std::vector<ssh::Frame> windows =
        frames_of(connector.host(host).remotes.at(0)->written(), ssh::FrameType::kOutputCredit);
    ASSERT_EQ(windows.size(), 1u) << host;
    EXPECT_EQ(windows[0].id, 1 << 20) << host;
  }
  EXPECT_EQ(ssh::output_window(2), size_t{1} << 20);
  EXPECT_EQ(ssh::output_window(40), (size_t{16} << 20) / 40);
  EXPECT_EQ(ssh::output_window(4608), size_t{64} << 10);
}

TEST_F(SshBackendTest, QuotesTheAgentsPathForTheRemoteShell) {
  LaunchOptions o = options();
  o.ddlrun_path = "/opt/dd lrun/it's/ddlrun";
  const std::unique_ptr<Backend> backend = this->backend(o);
  backend->start(events);
  events_until(events, 3);
  backend->finish();
  EXPECT_EQ(connector.host("n1").commands,
            std::vector<std::string>{"'/opt/dd lrun/it'\\''s/ddlrun' --agent"});
}

TEST_F(SshBackendTest, AHostThatSaysNoStartsNothing) {
  connector.host("n2").refuse = "connection refused (10.0.0.2:22)";
  const std::unique_ptr<Backend> backend = this->backend();
  EXPECT_EQ(start_failure(*backend, events),
            "1: cannot start the job on 1 of 2 hosts:\n"
            "  n2: connection refused (10.0.0.2:22)\n" +
                kFixThem);
  // n1's agent never got the job, and its channel is closed (so it exits).
  const FakeRemote& n1 = *connector.host("n1").remotes.at(0);
  EXPECT_EQ(frame_types(n1.written()), "");
  EXPECT_TRUE(n1.closed());
}

TEST_F(SshBackendTest, AFailedExecNamesTheCommand) {
  connector.host("n1").exec_error = "channel open refused";
  const std::unique_ptr<Backend> backend = this->backend();
  EXPECT_EQ(start_failure(*backend, events),
            "1: cannot start the job on 1 of 2 hosts:\n"
            "  n1: cannot run '/opt/ddlrun/bin/ddlrun --agent' on n1:22: channel open "
            "refused\n" +
                kFixThem);
}

TEST_F(SshBackendTest, AnAgentThatEndsBeforeHelloIsNotInstalled) {
  connector.host("n2").program = [](FakeRemote& r) {
    r.print("bash: /opt/ddlrun/bin/ddlrun: No such file or directory\n", ddl::ssh::Stream::kStderr);
    r.end(127);
  };
  const std::unique_ptr<Backend> backend = this->backend();
  EXPECT_EQ(start_failure(*backend, events),
            "1: cannot start the job on 1 of 2 hosts:\n"
            "  n2: '/opt/ddlrun/bin/ddlrun --agent' exited before it said hello (exit status 127: "
            "ddlrun is not installed at /opt/ddlrun/bin/ddlrun there)\n" +
                kFixThem);
  // The agent's stderr is passed on as a note from its host.
  bool noted = false;
  while (std::optional<Event> e = events.pop(std::chrono::steady_clock::now())) {
    noted = noted || e->data == "n2: bash: /opt/ddlrun/bin/ddlrun: No such file or directory\n";
  }
  EXPECT_TRUE(noted);
}

TEST_F(SshBackendTest, AnAgentThatRefusesTheJobGivesItsStatus) {
  connector.host("n2").program =
      ScriptedAgent{"n2", {2}, "n2: program 'train' not found in PATH", 127};
  const std::unique_ptr<Backend> backend = this->backend();
  EXPECT_EQ(start_failure(*backend, events),
            "127: cannot start the job on 1 of 2 hosts:\n"
            "  n2: n2: program 'train' not found in PATH\n"
            "install the program on those hosts at the same path, or give its full path");
  // Nobody got go.
  EXPECT_EQ(frame_types(connector.host("n1").remotes.at(0)->written()), "UJ");
  EXPECT_EQ(frame_types(connector.host("n2").remotes.at(0)->written()), "UJ");
}

TEST_F(SshBackendTest, AChannelThatClosesWhileRanksRunLosesTheHost) {
  connector.host("n1").program = ScriptedAgent{"n1", {0, 1}, "", 1, 1};  // rank 1 never ends
  const std::unique_ptr<Backend> backend = this->backend();
  backend->start(events);
  std::vector<std::string> failures;
  for (const Event& e : events_until(events, 3)) {
    if (e.type == Event::Type::kHostFailure)
      failures.push_back(std::to_string(e.host) + ": " + e.data);
  }
  EXPECT_EQ(failures, std::vector<std::string>{"0: the connection to its agent closed"});
  backend->finish();
}

TEST_F(SshBackendTest, AnAgentThatFallsSilentIsLost) {
  // n2's agent says hello, then nothing at all (these doubles send no heartbeats).
  connector.host("n2").program = [](FakeRemote& r) { r.print(hello_frame("n2")); };
  LaunchOptions o = options();
  o.heartbeat_timeout = milliseconds(300);
  const std::unique_ptr<Backend> backend = this->backend(o);
  const std::string failure = start_failure(*backend, events);
  EXPECT_NE(failure.find("\n  n2: no heartbeat for 0.3 s (the host is unreachable, or its agent is "
                         "stopped or hung)"),
            std::string::npos)
      << failure;
  EXPECT_TRUE(connector.host("n2").stopped_blocking);  // closing does not wait for it
}

// A session the probe kept whose agent's channel ended (no host below it started): the launch
// runs its agent again on it, logging in no second time.
TEST_F(SshBackendTest, RunsTheAgentAgainOnAKeptSessionWhoseChannelEnded) {
  auto kept = std::make_shared<ssh::AgentTree>();
  kept->put("n1", ssh::AgentTree::Kept{connector.connect("n1", {}), {}, {}, {}});
  LaunchOptions o = options();
  o.agents = kept;
  const std::unique_ptr<Backend> backend = this->backend(o);
  EXPECT_EQ(backend->start(events), (std::vector<int>{0, 1, 2}));
  events_until(events, 3);
  backend->finish();
  EXPECT_EQ(connector.host("n1").logins, 1);
  EXPECT_EQ(connector.host("n1").commands,
            std::vector<std::string>{"/opt/ddlrun/bin/ddlrun --agent"});
}

// A session the probe kept whose agent has ended, having started no host below it: the launch
// logs in to its host again and starts a new agent there.
TEST_F(SshBackendTest, LogsInAgainWhereAKeptAgentEndedHavingStartedNothing) {
  auto kept = std::make_shared<ssh::AgentTree>();
  std::unique_ptr<ddl::ssh::Session> session = connector.connect("n1", {});
  std::unique_ptr<ddl::ssh::Channel> channel = session->exec("/x/ddlrun --probe-agent");
  connector.host("n1").remotes.back()->end(1);
  kept->put("n1", ssh::AgentTree::Kept{std::move(session), std::move(channel), {}, {}});
  LaunchOptions o = options();
  o.agents = kept;
  const std::unique_ptr<Backend> backend = this->backend(o);
  EXPECT_EQ(backend->start(events), (std::vector<int>{0, 1, 2}));
  events_until(events, 3);
  backend->finish();
  EXPECT_EQ(connector.host("n1").logins, 2);
  EXPECT_EQ(
      connector.host("n1").commands,
      (std::vector<std::string>{"/x/ddlrun --probe-agent", "/opt/ddlrun/bin/ddlrun --agent"}));
}

TEST_F(SshBackendTest, TakesTheProbesSessionAndAgent) {
  // n1's probe left its session, whose channel already runs the agent (it said hello).
  auto kept = std::make_shared<ssh::AgentTree>();
  std::unique_ptr<ddl::ssh::Session> session = connector.connect("n1", {});
  std::unique_ptr<ddl::ssh::Channel> channel = session->exec("/x/ddlrun --probe-agent");
  // The probe already read the hello: it is handed over as pending bytes.
  char buf[4096];
  const int n = channel->read(buf, sizeof buf, ddl::ssh::Stream::kStdout);
  ASSERT_GT(n, 0);
  kept->put("n1", ssh::AgentTree::Kept{std::move(session), std::move(channel),
                                       std::string(buf, static_cast<size_t>(n)),
                                       "/x/ddlrun --probe-agent"});
  LaunchOptions o = options();
  o.agents = kept;
  const std::unique_ptr<Backend> backend = this->backend(o);
  EXPECT_EQ(backend->start(events), (std::vector<int>{0, 1, 2}));
  events_until(events, 3);
  backend->finish();
  EXPECT_EQ(connector.host("n1").logins, 1);  // the probe's only
  EXPECT_EQ(connector.host("n1").commands, std::vector<std::string>{"/x/ddlrun --probe-agent"});
  EXPECT_EQ(frame_types(connector.host("n1").remotes.at(0)->written()), "UJG");
  EXPECT_EQ(kept->size(), 0u);
}

// An inventory's answer that comes after the probe gave up on it (Hw, protocol.h) is stale,
// not a broken agent: the job starts.
TEST_F(SshBackendTest, AnInventoryAnswerThatComesLateIsPassedBy) {
  ScriptedAgent late{"n2", {2}};
  late.late_inventory = true;
  connector.host("n2").program = late;
  const std::unique_ptr<Backend> backend = this->backend();
  EXPECT_EQ(backend->start(events), (std::vector<int>{0, 1, 2}));
  events_until(events, 3);
  backend->finish();
}

TEST_F(SshBackendTest, SignalsAndStdinGoDownTheChannels) {
  // Ranks that never end.
  connector.host("n1").program = ScriptedAgent{"n1", {0, 1}, {}, 1, -1, true};
  connector.host("n2").program = ScriptedAgent{"n2", {2}, {}, 1, -1, true};
  const std::unique_ptr<Backend> backend = this->backend();
  backend->start(events);
  backend->signal(SIGTERM);
  backend->write_stdin("data");
  backend->close_stdin();
  const auto sent = [&](const char* host) {
    return frame_types(connector.host(host).remotes.at(0)->written());
  };
  for (int i = 0; i < 250 && (sent("n1") != "UJGSIE" || sent("n2") != "UJGS"); ++i)
    std::this_thread::sleep_for(milliseconds(20));
  EXPECT_EQ(sent("n1"), "UJGSIE");  // rank 0's host gets stdin
  EXPECT_EQ(sent("n2"), "UJGS");
  const std::vector<ssh::Frame> stdin_frames =
      frames_of(connector.host("n1").remotes.at(0)->written(), ssh::FrameType::kStdin);
  ASSERT_EQ(stdin_frames.size(), 1u);
  EXPECT_EQ(stdin_frames[0].payload, "data");
  EXPECT_EQ(
      frames_of(connector.host("n2").remotes.at(0)->written(), ssh::FrameType::kSignal).at(0).id,
      SIGTERM);
  // finish() with ranks still running: SIGKILL goes out, the agents end them and say done.
  const auto start = std::chrono::steady_clock::now();
  backend->finish();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));  // no grace
  EXPECT_EQ(sent("n2"), "UJGSS");
  EXPECT_EQ(
      frames_of(connector.host("n2").remotes.at(0)->written(), ssh::FrameType::kSignal).at(1).id,
      SIGKILL);
  EXPECT_TRUE(connector.host("n2").remotes.at(0)->closed());
  const std::vector<Event> got = events_until(events, 3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].status.signal, SIGKILL);
}

}  // namespace
}  // namespace ddl::launcher
