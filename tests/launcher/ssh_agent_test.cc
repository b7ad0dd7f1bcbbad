// `ddlrun --agent` (launcher/ssh/agent.cc) driven frame by frame: the test plays ddlrun on the
// other end of a socket pair, in place of the ssh channel. Without liveness threads, so nothing
// exits the test; the agent's reader thread may outlive a test, so the sockets stay open.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <optional>
#include <thread>

#include "base/net/codec.h"
#include "launcher/job.h"
#include "launcher/ssh/agent.h"
#include "launcher/ssh/protocol.h"
#include "launcher/ssh/tree.h"
#include "mapper/inventory.h"
#include "mapper/link_probe.h"
#include "mapper/probe_hwloc.h"
#include "tests/ssh/fake_ssh.h"

namespace ddl::launcher {
namespace {

/// ddlrun's end of an agent's channel; the agent runs on its own thread.
class AgentPeer {
 public:
  /// `connector`: how it logs in to its children, should it get a subtree (W).
  /// `links`: its --probe-links agent (tree_links.h); `inventory`: its host's inventory.
  explicit AgentPeer(ddl::ssh::Connector& connector = ddl::ssh::libssh_connector(),
                     ssh::LinkAgentRunner links = {}, std::function<std::string()> inventory = {}) {
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds_), 0);
    agent_ = std::thread([this, &connector, links, inventory] {
      status_ = converse_as_agent(fds_[1], fds_[1], false, connector, {links, inventory});
    });
  }
  ~AgentPeer() {
    if (agent_.joinable()) {
      shutdown(fds_[0], SHUT_WR);
      agent_.join();
    }
  }

  void send(ssh::FrameType type, int32_t id, std::string_view payload = {}) {
    const std::string bytes = ssh::encode_frame(type, id, payload);
    ASSERT_EQ(write(fds_[0], bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }
  /// The next frame from the agent; nullopt when it closed or after 10 s.
  std::optional<ssh::Frame> next() {
    for (;;) {
      if (auto f = reader_.next()) return f;
      pollfd p{fds_[0], POLLIN, 0};
      if (poll(&p, 1, 10'000) <= 0) return std::nullopt;
      char buf[65536];
      const ssize_t n = read(fds_[0], buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      reader_.feed(std::string_view(buf, static_cast<size_t>(n)));
    }
  }
  /// The next frame, which must be of `type`.
  ssh::Frame expect(ssh::FrameType type) {
    std::optional<ssh::Frame> f = next();
    EXPECT_TRUE(f.has_value());
    if (!f) return {};
    EXPECT_EQ(static_cast<char>(f->type), static_cast<char>(type)) << f->payload;
    return *f;
  }
  /// ddlrun goes away: the agent reads EOF.
  void hang_up() { shutdown(fds_[0], SHUT_WR); }
  /// The agent's exit status once it ended.
  int status() {
    agent_.join();
    return status_;
  }

 private:
  int fds_[2] = {-1, -1};  // never closed: the agent's reader thread may still read
  std::thread agent_;
  int status_ = -1;
  ssh::FrameReader reader_;
};

/// One host (index 0) with `ranks` ranks running `argv`.
Job one_host(std::vector<std::string> argv, int ranks = 2) {
  Job job;
  comm::Topology& t = job.topology;
  t.job_id = "job-a";
  t.hosts = {{0, "n1", "127.0.0.1", {}}};
  for (int r = 0; r < ranks; ++r)
    t.ranks.push_back({r, r, 0, -1, "", "", comm::CpuSet(), "", ""});
  t.mode = comm::parse_mode("p:1x" + std::to_string(ranks));
  t.rings = comm::default_rings({1, ranks});
  job.argv = std::move(argv);
  job.token = "abc";
  return job;
}

/// A job frame's payload carrying `job_bytes` (empty: the job came before, once per channel, U).
std::string job_payload_of(const std::string& job_bytes) {
  std::string payload;
  base::net::put_str(payload, job_bytes);
  base::net::put_str(payload, "127.0.0.1");
  base::net::put_u32(payload, 29500);
  base::net::put_u32(payload, 29501);
  base::net::put_str(payload, "127.0.0.1");
  base::net::put_u32(payload, 10'000);
  return payload;
}

std::string job_payload(const Job& job) {
  return job_payload_of(encode_job(job));
}

std::string this_host() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

TEST(SshAgent, SaysHelloFirstAndLeavesWhenDdlrunGivesUp) {
  AgentPeer peer;
  const ssh::Frame hello = peer.expect(ssh::FrameType::kHello);
  base::net::Decoder in(hello.payload, "hello");
  EXPECT_EQ(in.str(), this_host());
  in.str();  // the address ddlrun reached it at ($SSH_CONNECTION; none here)
  const uint32_t master_port = in.u32();
  const uint32_t ddl_port = in.u32();
  EXPECT_NE(master_port, 0u);
  EXPECT_NE(master_port, ddl_port);
  peer.hang_up();  // before the job: another host failed
  EXPECT_EQ(peer.status(), 1);
}

TEST(SshAgent, ExpectsTheJobFirst) {
  AgentPeer peer;
  peer.expect(ssh::FrameType::kHello);
  peer.send(ssh::FrameType::kGo, 0);
  const ssh::Frame f = peer.expect(ssh::FrameType::kFailure);
  EXPECT_EQ(f.id, 1);
  EXPECT_EQ(f.payload, "expected the job first");
  EXPECT_EQ(peer.status(), 1);
}

TEST(SshAgent, AJobItCannotReadAsksAboutTheVersion) {
  AgentPeer peer;
  peer.expect(ssh::FrameType::kHello);
  peer.send(ssh::FrameType::kJob, 0, "garbage");
  const ssh::Frame f = peer.expect(ssh::FrameType::kFailure);
  EXPECT_EQ(f.payload.rfind("cannot read the job: malformed job frame", 0), 0u) << f.payload;
  EXPECT_TRUE(f.payload.ends_with(" (is ddlrun the same version on every host?)")) << f.payload;
  EXPECT_EQ(peer.status(), 1);
}

/// A job frame without the job's bytes: those came before, once per channel (U).
std::string job_payload_without_job() {
  return job_payload_of({});
}

TEST(SshAgent, TakesTheJobsBytesSentBeforeItsJobFrame) {
  AgentPeer peer;
  peer.expect(ssh::FrameType::kHello);
  peer.send(ssh::FrameType::kJobBytes, 0, encode_job(one_host({"/bin/true"})));
  peer.send(ssh::FrameType::kJob, 0, job_payload_without_job());
  peer.expect(ssh::FrameType::kReady);
  peer.send(ssh::FrameType::kGo, 0);
  bool done = false;
  for (std::optional<ssh::Frame> f; !done && (f = peer.next());)
    done = f->type == ssh::FrameType::kDone;
  EXPECT_TRUE(done);
  EXPECT_EQ(peer.status(), 0);
}

TEST(SshAgent, AJobFrameWithoutTheJobsBytesIsNamed) {
  AgentPeer peer;
  peer.expect(ssh::FrameType::kHello);
  peer.send(ssh::FrameType::kJob, 0, job_payload_without_job());
  const ssh::Frame f = peer.expect(ssh::FrameType::kFailure);
  EXPECT_EQ(f.payload,
            "cannot read the job: the job's bytes are missing (is ddlrun the same version on "
            "every host?)");
  EXPECT_EQ(peer.status(), 1);
}

TEST(SshAgent, AProgramThatIsNotThereFailsWith127) {
  AgentPeer peer;
  peer.expect(ssh::FrameType::kHello);
  peer.send(ssh::FrameType::kJob, 0, job_payload(one_host({"ddlrun-test-no-such-program"})));
  const ssh::Frame f = peer.expect(ssh::FrameType::kFailure);
  EXPECT_EQ(f.id, 127);
  EXPECT_NE(f.payload.find("ddlrun-test-no-such-program"), std::string::npos) << f.payload;
  EXPECT_EQ(peer.status(), 127);
}

TEST(SshAgent, WaitsForGoThenRelaysTheRanksAndSaysDone) {
  AgentPeer peer;
  peer.expect(ssh::FrameType::kHello);
  peer.send(ssh::FrameType::kJob, 0, job_payload(one_host({"/bin/sh", "-c", "echo rank $RANK"})));
  peer.expect(ssh::FrameType::kReady);
  peer.send(ssh::FrameType::kGo, 0);
  peer.send(ssh::FrameType::kOutputCredit, 1 << 20);
  std::map<int, std::string> output;
  std::map<int, std::pair<uint32_t, uint32_t>> exits;
  for (;;) {
    std::optional<ssh::Frame> f = peer.next();
    ASSERT_TRUE(f.has_value());
    if (f->type == ssh::FrameType::kDone) break;
    if (f->type == ssh::FrameType::kStdout) output[f->id] += f->payload;
    if (f->type == ssh::FrameType::kExit) {
      base::net::Decoder in(f->payload, "exit");
      const uint32_t code = in.u32();
      exits[f->id] = {code, in.u32()};
    }
  }
  EXPECT_EQ(output, (std::map<int, std::string>{{0, "rank 0\n"}, {1, "rank 1\n"}}));
  EXPECT_EQ(exits.size(), 2u);
  EXPECT_EQ(exits[0], std::make_pair(0u, 0u));
  EXPECT_EQ(peer.status(), 0);
}

/// The next frame that is not a heartbeat; nullopt when none came.
std::optional<ssh::Frame> next_frame(AgentPeer& peer) {
  for (;;) {
    std::optional<ssh::Frame> f = peer.next();
    if (!f || f->type != ssh::FrameType::kHeartbeat) return f;
  }
}

TEST(SshAgent, OutputWaitsForItsWindowWhileExitsPassIt) {
  // A reader that does not read holds the ranks back, never the channel, so that
  // ddlrun learns of a failed rank at once. Rank 0 prints 3 bytes and fails; nothing of its
  // output goes before the window (M), its exit does, and done waits for the output.
  AgentPeer peer;
  peer.expect(ssh::FrameType::kHello);
  peer.send(ssh::FrameType::kJob, 0,
            job_payload(one_host({"/bin/sh", "-c", "echo hi; exit 3"}, 1)));
  peer.expect(ssh::FrameType::kReady);
  peer.send(ssh::FrameType::kGo, 0);
  std::optional<ssh::Frame> f = next_frame(peer);
  ASSERT_TRUE(f.has_value());
  ASSERT_EQ(static_cast<char>(f->type), 'X');
  base::net::Decoder in(f->payload, "exit");
  EXPECT_EQ(in.u32(), 3u);
  peer.send(ssh::FrameType::kOutputCredit, 2);  // one chunk may go past what is left
  f = next_frame(peer);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(static_cast<char>(f->type), 'O');
  EXPECT_EQ(f->payload, "hi\n");
  peer.expect(ssh::FrameType::kDone);
  EXPECT_EQ(peer.status(), 0);
}

TEST(SshAgent, WhenDdlrunIsLostTheRanksAreStopped) {
  AgentPeer peer;
  peer.expect(ssh::FrameType::kHello);
  peer.send(ssh::FrameType::kJob, 0, job_payload(one_host({"/bin/sleep", "30"}, 1)));
  peer.expect(ssh::FrameType::kReady);
  peer.send(ssh::FrameType::kGo, 0);
  const auto start = std::chrono::steady_clock::now();
  peer.hang_up();
  EXPECT_EQ(peer.status(), 1);  // no exit or done goes up: nobody is listening
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

/// Plays a child's agent below the agent under test: hello at once, its inventory when asked,
/// ready to its job, and on go done and the end (exit 0).
void child_agent(ddl::ssh::FakeRemote& r) {
  std::string hello;
  base::net::put_str(hello, "c1");
  base::net::put_str(hello, "10.9.9.9");
  base::net::put_u32(hello, 1);
  base::net::put_u32(hello, 2);
  r.print(ssh::encode_frame(ssh::FrameType::kHello, 0, hello));
  auto reader = std::make_shared<ssh::FrameReader>();
  r.on_write([reader](ddl::ssh::FakeRemote& r, std::string_view bytes) {
    reader->feed(bytes);
    while (auto f = reader->next()) {
      if (f->type == ssh::FrameType::kJob)
        r.print(ssh::encode_frame(ssh::FrameType::kReady, 0, {}));
      if (f->type == ssh::FrameType::kInventory)
        r.print(ssh::encode_frame(ssh::FrameType::kInventory, 0, "hostname: c1\n"));
      if (f->type == ssh::FrameType::kGo) {
        r.print(ssh::encode_frame(ssh::FrameType::kDone, 0, {}));
        r.end(0);
      }
    }
  });
}

/// The next frame that is not a heartbeat.
ssh::Frame next_command(AgentPeer& peer) {
  for (;;) {
    std::optional<ssh::Frame> f = peer.next();
    if (!f) return {};
    if (f->type != ssh::FrameType::kHeartbeat) return *f;
  }
}

TEST(SshAgent, AnInteriorAgentStartsItsChildAndLeavesAfterIt) {
  ddl::ssh::FakeConnector connector;
  connector.host("c1").program = child_agent;
  AgentPeer peer(connector);
  peer.expect(ssh::FrameType::kHello);
  ssh::SubtreeFrame w;
  w.ddlrun_path = "/opt/ddlrun";
  w.ddlrun_address = "10.0.0.9";
  w.children = {{1, "c1", {}}};
  peer.send(ssh::FrameType::kSubtree, 0, ssh::encode(w));
  // The child's hello comes up routed from host 1.
  ssh::Frame f = next_command(peer);
  ASSERT_EQ(f.type, ssh::FrameType::kRouted);
  EXPECT_EQ(f.id, 1);
  EXPECT_EQ(f.payload.front(), 'H');
  // The job's bytes (U) go to every child, before its job frame; its ready comes up.
  Job job = one_host({"/bin/true"}, 1);
  job.topology.hosts.push_back({1, "c1", "10.9.9.9", {}});
  peer.send(ssh::FrameType::kJobBytes, 0, encode_job(job));
  peer.send(ssh::FrameType::kRouted, 1,
            ssh::encode_frame(ssh::FrameType::kJob, 1, job_payload_without_job()));
  f = next_command(peer);
  ASSERT_EQ(f.type, ssh::FrameType::kRouted);
  EXPECT_EQ(f.payload, ssh::encode_frame(ssh::FrameType::kReady, 0, {}));
  // Its own ranks run and end; it says done, and stays until its child said done too.
  peer.send(ssh::FrameType::kJob, 0, job_payload(job));
  peer.expect(ssh::FrameType::kReady);
  peer.send(ssh::FrameType::kGo, 0);
  while ((f = next_command(peer)).type != ssh::FrameType::kDone) {
  }
  peer.send(ssh::FrameType::kRouted, 1, ssh::encode_frame(ssh::FrameType::kGo, 0, {}));
  f = next_command(peer);
  ASSERT_EQ(f.type, ssh::FrameType::kRouted);
  EXPECT_EQ(f.payload, ssh::encode_frame(ssh::FrameType::kDone, 0, {}));
  EXPECT_EQ(peer.status(), 0);
  EXPECT_EQ(connector.host("c1").commands, std::vector<std::string>{"/opt/ddlrun --agent"});
}

// --probe-links down the tree (tree_links.h): before its job the agent runs a link agent on N
// frames and sends its lines up; the job stops it (its port closes) and the job goes on.
TEST(SshAgent, RunsALinkAgentOnNFramesUntilItsJob) {
  AgentPeer peer(ddl::ssh::libssh_connector(), mapper::run_link_agent);
  peer.expect(ssh::FrameType::kHello);
  peer.send(ssh::FrameType::kLinkLine, 0, "");
  ssh::Frame f = peer.expect(ssh::FrameType::kLinkLine);
  EXPECT_EQ(f.id, 0);
  int port = 0;
  ASSERT_EQ(std::sscanf(f.payload.c_str(), "ddl-link-agent 2 %d ", &port), 1) << f.payload;
  peer.send(ssh::FrameType::kLinkLine, 0, "token abc");
  EXPECT_EQ(peer.expect(ssh::FrameType::kLinkLine).payload, "ready");
  peer.send(ssh::FrameType::kJob, 0, job_payload(one_host({"/bin/true"})));
  f = peer.expect(ssh::FrameType::kLinkLine);  // it ended
  EXPECT_EQ(f.id, 1);
  peer.expect(ssh::FrameType::kReady);
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_NE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);  // nothing listens
  close(fd);
  peer.hang_up();
  EXPECT_EQ(peer.status(), 1);
}

TEST(SshAgent, WithoutALinkAgentItSaysSoAndGoesOn) {
  AgentPeer peer;
  peer.expect(ssh::FrameType::kHello);
  peer.send(ssh::FrameType::kLinkLine, 0, "");
  const ssh::Frame f = peer.expect(ssh::FrameType::kLinkLine);
  EXPECT_EQ(f.id, 1);
  EXPECT_EQ(f.payload, "this agent cannot run a link agent");
  peer.send(ssh::FrameType::kJob, 0, job_payload(one_host({"/bin/true"})));
  peer.expect(ssh::FrameType::kReady);
  peer.hang_up();
  EXPECT_EQ(peer.status(), 1);
}

// Agents first: ddlrun plans from its agents' answers. Before its job an agent answers an
// inventory request (Hw) with its host's inventory, and the job goes on on the same channel.
TEST(SshAgent, AnswersAnInventoryRequestWithItsHostsInventoryBeforeItsJob) {
  const auto probe = [] {
    return mapper::to_yaml(mapper::probe_hwloc(mapper::this_host_cached()));
  };
  AgentPeer peer(ddl::ssh::libssh_connector(), {}, probe);
  peer.expect(ssh::FrameType::kHello);
  // This host's NICs may change meanwhile (a namespace test run beside this one adds its
  // bridge): the answer is this host's inventory from before the request or from after it.
  const mapper::Inventory before = mapper::probe_hwloc(mapper::this_host_cached());
  peer.send(ssh::FrameType::kInventory, 0);
  const ssh::Frame f = next_command(peer);
  ASSERT_EQ(f.type, ssh::FrameType::kInventory);
  EXPECT_EQ(f.id, 0) << f.payload;
  const mapper::Inventory inv = mapper::inventory_from_yaml(f.payload, "the agent's inventory");
  if (inv != before) {
    EXPECT_EQ(inv, mapper::probe_hwloc(mapper::this_host_cached()));
  }
  peer.send(ssh::FrameType::kJob, 0, job_payload(one_host({"/bin/true"})));
  peer.expect(ssh::FrameType::kReady);
  peer.hang_up();
  EXPECT_EQ(peer.status(), 1);
}

TEST(SshAgent, AnInventoryItCannotTakeIsAnsweredWithWhy) {
  AgentPeer peer(ddl::ssh::libssh_connector(), {}, []() -> std::string {
    throw mapper::ProbeError("hwloc cannot read this host's topology");
  });
  peer.expect(ssh::FrameType::kHello);
  peer.send(ssh::FrameType::kInventory, 0);
  const ssh::Frame f = next_command(peer);
  ASSERT_EQ(f.type, ssh::FrameType::kInventory);
  EXPECT_EQ(f.id, 1);
  EXPECT_EQ(f.payload, "hwloc cannot read this host's topology");
}

TEST(SshAgent, WithoutAnInventoryItSaysSoAndGoesOn) {
  AgentPeer peer;
  peer.expect(ssh::FrameType::kHello);
  peer.send(ssh::FrameType::kInventory, 0);
  const ssh::Frame f = next_command(peer);
  ASSERT_EQ(f.type, ssh::FrameType::kInventory);
  EXPECT_EQ(f.id, 1);
  EXPECT_EQ(f.payload, "this agent cannot probe its host");
  peer.send(ssh::FrameType::kJob, 0, job_payload(one_host({"/bin/true"})));
  peer.expect(ssh::FrameType::kReady);
  peer.hang_up();
  EXPECT_EQ(peer.status(), 1);
}

// Down the launch tree the request goes routed to a host below, and its answer comes up
// routed from it, through the interior agent.
TEST(SshAgent, AnInventoryRequestTravelsTheTreeToAHostBelow) {
  ddl::ssh::FakeConnector connector;
  connector.host("c1").program = child_agent;
  AgentPeer peer(connector);
  peer.expect(ssh::FrameType::kHello);
  ssh::SubtreeFrame w;
  w.ddlrun_path = "/opt/ddlrun";
  w.ddlrun_address = "10.0.0.9";
  w.children = {{1, "c1", {}}};
  peer.send(ssh::FrameType::kSubtree, 0, ssh::encode(w));
  ssh::Frame f = next_command(peer);  // the child's hello, routed
  ASSERT_EQ(f.type, ssh::FrameType::kRouted);
  peer.send(ssh::FrameType::kRouted, 1, ssh::encode_frame(ssh::FrameType::kInventory, 0, {}));
  f = next_command(peer);
  ASSERT_EQ(f.type, ssh::FrameType::kRouted);
  EXPECT_EQ(f.id, 1);
  EXPECT_EQ(f.payload, ssh::encode_frame(ssh::FrameType::kInventory, 0, "hostname: c1\n"));
  // The job then goes down the same channels; the agent leaves after its child.
  Job job = one_host({"/bin/true"}, 1);
  job.topology.hosts.push_back({1, "c1", "10.9.9.9", {}});
  peer.send(ssh::FrameType::kJobBytes, 0, encode_job(job));
  peer.send(ssh::FrameType::kRouted, 1,
            ssh::encode_frame(ssh::FrameType::kJob, 1, job_payload_without_job()));
  EXPECT_EQ(next_command(peer).payload, ssh::encode_frame(ssh::FrameType::kReady, 0, {}));
  peer.send(ssh::FrameType::kJob, 0, job_payload(job));
  peer.expect(ssh::FrameType::kReady);
  peer.send(ssh::FrameType::kGo, 0);
  while (next_command(peer).type != ssh::FrameType::kDone) {
  }
  peer.send(ssh::FrameType::kRouted, 1, ssh::encode_frame(ssh::FrameType::kGo, 0, {}));
  EXPECT_EQ(next_command(peer).payload, ssh::encode_frame(ssh::FrameType::kDone, 0, {}));
  EXPECT_EQ(peer.status(), 0);
}

}  // namespace
}  // namespace ddl::launcher
