// `ddlrun --agent`: the per-host side of the ssh launcher (protocol.h).
//
// How it works: the agent says hello (its host name, the address ddlrun reached it at from
// $SSH_CONNECTION, and two free ports for the rendezvous should rank 0 live here), then reads
// the job. It writes the topology file into a private directory, checks that the program can
// be run here, and says ready or why not. On "go" it starts this host's ranks with a
// ProcessSet (the same code as the local launcher: environment, CPU binding, process groups,
// PR_SET_PDEATHSIG) and from then on relays their output and exits up the channel while a
// reader thread applies signals and stdin coming down. Neither direction buffers without
// bound: output goes up only as far as the window ddlrun grants (M) and otherwise waits in the
// ProcessSet's bounded queue (which then stops reading the ranks), while exits pass it, so
// the channel itself never fills behind a slow reader; stdin comes in a window that the agent
// reopens (Z) as rank 0 takes it. If the channel closes first, ddlrun is
// gone: the ranks get SIGTERM, then SIGKILL after two seconds, and the agent exits.
//
// From its hello on, a heartbeat thread sends a heartbeat frame every second, and a watchdog
// thread (which never blocks on the channel) takes SIGTERM, SIGINT and SIGHUP (blocked in every
// other thread) and watches the time since anything last came from ddlrun: on a signal, or after
// the heartbeat deadline of silence (a cut-off host, a stopped or hung ddlrun), it stops the
// ranks the same way, removes the agent's directory and exits, whatever the other threads are
// blocked in.
//
// The agent is also its host's PMIx server (pmix_server/): it registers the job before the
// ranks start and gives each its PMIx variables. When this host's ranks have all entered a
// fence it sends their contribution up (C) and completes the fence when ddlrun sends the
// combined data of every host (B); a Get of data that no fence collected asks ddlrun (Q),
// which asks the rank's own agent and passes its answer (P) back; PMIx_Abort goes up as A.
//
// In a launch tree (tree.h) a subtree frame (W) makes the agent an interior one: its Relay
// (relay.h) starts the children's agents from here, routed frames (T) from ddlrun go down to
// them, and theirs come up through it. The agent says done for its own ranks as before, but
// leaves only once every child's conversation has ended (or ddlrun is gone), so its channel
// stays open for the frames of the hosts below it.
//
// While it waits for its job, N frames (--probe-links down the tree) run this host's link
// agent in a thread of its own and carry its lines (tree_links.h); the job stops it. An
// inventory request (Hw) is answered at once on the reader's thread with this host's
// inventory (AgentServices::inventory, ddlrun's hwloc/NVML probe), or why it has none.

#include "launcher/ssh/agent.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "base/fd.h"
#include "base/net/codec.h"
#include "launcher/job.h"
#include "launcher/keeper.h"
#include "launcher/pmix_server/server.h"
#include "launcher/process.h"
#include "launcher/ssh/protocol.h"
#include "launcher/ssh/relay.h"
#include "launcher/supervise.h"

namespace ddl::launcher {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kLostGrace = std::chrono::seconds(2);
/// The heartbeat deadline while the job is suspended (Ctrl-Z): ddlrun is stopped too.
constexpr auto kSuspendedTimeout = std::chrono::milliseconds(24 * 3600 * 1000);

std::string host_name();
std::string ssh_connection_field(int index);

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch())
      .count();
}

class Agent : private pmix_server::Host {
 public:
  /// `liveness`: the heartbeat and watchdog threads (start_liveness), with SIGTERM, SIGINT and
  /// SIGHUP blocked for the watchdog to take; off only in tests.
  Agent(int in_fd, int out_fd, bool liveness, ddl::ssh::Connector& connector,
        AgentServices services)
      : in_(in_fd),
        out_(out_fd),
        liveness_(liveness),
        connector_(connector),
        services_(std::move(services)),
        last_heard_ms_(now_ms()) {}

  /// The whole conversation; returns the agent's exit status.
  int run();
  /// Stops the PMIx server and removes the agent's directory.
  void remove_files() {
    pmix_.reset();
    std::lock_guard lock(procs_mutex_);
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }

 private:
  // The steps of run(). Those returning an optional give the exit status when the agent stops
  // there (after telling ddlrun why, when it can), nullopt to go on.
  void block_stop_signals();
  /// Says hello: this host's name, the address ddlrun reached it at, two free ports.
  bool say_hello();
  /// Reads the job frame into job_ and rv_ and enters the job's directory.
  std::optional<int> receive_job();
  /// Writes the topology file into a private directory, starts the PMIx server and checks that
  /// the program can run here (make_specs).
  std::optional<int> prepare();
  /// The ranks' spawn specs (specs_, one per mine_); throws when the program cannot run.
  void make_specs();
  /// Says ready and waits for go.
  std::optional<int> await_go();
  /// Starts the ranks and relays them until they end (or ddlrun is lost); the exit status.
  int run_ranks();
  std::optional<int> start_ranks(ProcessSet& procs);
  /// The reader thread: signals, stdin and PMIx answers from ddlrun, until the channel ends.
  void read_commands(ProcessSet& procs, EventQueue& events,
                     const std::function<void(size_t)>& stdin_passed);
  /// Sends the ranks' output and exits up the channel until every rank ended; true when
  /// ddlrun was lost first (the ranks then get SIGTERM, and SIGKILL after kLostGrace).
  bool relay(EventQueue& events, ProcessSet& procs, std::atomic<size_t>& stdin_gone);
  void relay_event(const Event& e);

  /// Starts the heartbeat and watchdog threads (detached: the agent leaves with _exit).
  void start_liveness();
  /// The watchdog's way out: SIGTERM to the ranks, SIGKILL after kLostGrace, the directory
  /// removed, exit with `status`. Says `why` on stderr first, without blocking.
  [[noreturn]] void abandon(const std::string& why, int status);

  /// Sends one frame; false when the channel is gone.
  bool send(ssh::FrameType type, int32_t id, std::string_view payload = {}) {
    const std::string bytes = ssh::encode_frame(type, id, payload);
    std::lock_guard lock(out_mutex_);
    return base::write_all(out_, bytes) == 0;
  }
  /// Blocks for the next frame from ddlrun for this host (a subtree frame and routed frames
  /// go to the relay meanwhile); nullopt when the channel closed.
  std::optional<ssh::Frame> receive() {
    for (;;) {
      if (auto f = reader_.next()) {
        if (f->type == ssh::FrameType::kSubtree) {
          start_relay(f->payload);
        } else if (f->type == ssh::FrameType::kRouted) {
          if (relay_) relay_->down(f->id, f->payload);
        } else if (f->type == ssh::FrameType::kLinkLine) {
          link_line(f->id, f->payload);
        } else if (f->type == ssh::FrameType::kInventory) {
          answer_inventory();
        } else if (f->type == ssh::FrameType::kJobBytes) {
          if (relay_) relay_->broadcast(ssh::encode_frame(f->type, f->id, f->payload));
          job_bytes_ = std::move(f->payload);
        } else {
          return f;
        }
        continue;
      }
      char buf[65536];
      const ssize_t n = read(in_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return std::nullopt;
      last_heard_ms_ = now_ms();
      reader_.feed(std::string_view(buf, static_cast<size_t>(n)));
    }
  }
  /// The next frame that is not a heartbeat.
  std::optional<ssh::Frame> receive_command() {
    for (;;) {
      std::optional<ssh::Frame> f = receive();
      if (!f || f->type != ssh::FrameType::kHeartbeat) return f;
    }
  }
  /// Becomes an interior agent of the launch tree: starts the children's agents (relay.h).
  void start_relay(std::string_view payload);
  /// An N frame: a line for this host's --probe-links agent, started by the first
  /// (tree_links.h).
  void link_line(int port, const std::string& line) {
    if (job_came_) return;  // the measurement is over
    if (!links_) {
      links_ = std::make_unique<ssh::LinkAgentThread>(
          [this](std::string_view frames) {
            std::lock_guard lock(out_mutex_);
            return base::write_all(out_, frames) == 0;
          },
          ddlrun_address_, services_.links);
    }
    links_->take(port, line);
  }
  /// An inventory request (Hw): this host's inventory goes up (id 0), or why not (id 1).
  void answer_inventory() {
    if (!services_.inventory) {
      send(ssh::FrameType::kInventory, 1, "this agent cannot probe its host");
      return;
    }
    try {
      send(ssh::FrameType::kInventory, 0, services_.inventory());
    } catch (const std::exception& e) {
      send(ssh::FrameType::kInventory, 1, e.what());
    }
  }
  int fail(int status, const std::string& message) {
    send(ssh::FrameType::kFailure, status, message);
    return status;
  }

  // pmix_server::Host, on PMIx's thread: up the channel; the answers come to the reader.
  void fence(pmix_server::Contribution c, pmix_server::DataDone done) override {
    {
      std::lock_guard lock(pmix_mutex_);
      fences_[c.key] = std::move(done);
    }
    send(ssh::FrameType::kFence, host_index_,
         ssh::encode(ssh::FenceFrame{c.key, c.participants, c.timeout_s, std::move(c.data)}));
  }
  void abort(int rank, int status, const std::string& message) override {
    send(ssh::FrameType::kAbort, rank, ssh::encode(ssh::AbortFrame{status, message}));
  }
  void direct_modex(int rank, pmix_server::DataDone done) override {
    int id;
    {
      std::lock_guard lock(pmix_mutex_);
      id = next_modex_++;
      modex_[id] = std::move(done);
    }
    send(ssh::FrameType::kModexRequest, id, ssh::encode(ssh::ModexRequest{host_index_, rank}));
  }
  /// A PMIx frame from ddlrun (on the reader thread).
  void pmix_frame(const ssh::Frame& f);
  /// Calls, outside the lock, the callback waiting under `key` in `waiting` (fences_ or
  /// modex_) with ddlrun's answer, and forgets it; nothing when none waits.
  template <typename Key>
  void answer(std::map<Key, pmix_server::DataDone>& waiting, const Key& key, int status,
              std::string data);

  int in_;
  int out_;
  bool liveness_;
  ddl::ssh::Connector& connector_;     ///< logs in to this agent's children in the launch tree
  std::unique_ptr<ssh::Relay> relay_;  ///< its children, once a subtree frame came
  AgentServices services_;             ///< --probe-links' agent and the inventory (ddlrun's)
  std::unique_ptr<ssh::LinkAgentThread> links_;  ///< --probe-links' agent, until the job
  std::atomic<bool> job_came_{false};            ///< (or the channel ended)
  std::string ddlrun_address_;                   ///< ddlrun's host, from the subtree frame
  std::string job_bytes_;  ///< the job (U), for a job frame that does not carry it
  std::mutex out_mutex_;
  ssh::FrameReader reader_;
  std::atomic<int64_t> last_heard_ms_;  ///< when bytes last came from ddlrun
  std::atomic<int64_t> deadline_ms_{ssh::kDefaultHeartbeatTimeout.count()};
  std::atomic<bool> suspended_{false};  ///< the job is stopped (Ctrl-Z): kSuspendedTimeout
  /// Bytes of output ddlrun has room for (M frames less what went up); output waits at 0.
  std::atomic<int64_t> output_credit_{0};
  std::mutex procs_mutex_;
  ProcessSet* procs_ = nullptr;  ///< the ranks, once started; guarded by procs_mutex_
  std::string dir_;              ///< written before the watchdog reads it, under procs_mutex_
  int host_index_ = 0;
  Job job_;
  Rendezvous rv_;
  std::vector<comm::RankPlacement> mine_;  ///< this host's ranks, by rank
  std::vector<SpawnSpec> specs_;           ///< one per mine_
  std::mutex pmix_mutex_;
  std::unique_ptr<pmix_server::Server> pmix_;            ///< guarded by pmix_mutex_ once ranks run
  std::map<std::string, pmix_server::DataDone> fences_;  ///< by key: waiting for ddlrun
  std::map<int, pmix_server::DataDone> modex_;           ///< by request id
  int next_modex_ = 0;
};

template <typename Key>
void Agent::answer(std::map<Key, pmix_server::DataDone>& waiting, const Key& key, int status,
                   std::string data) {
  pmix_server::DataDone done;
  {
    std::lock_guard lock(pmix_mutex_);
    auto it = waiting.find(key);
    if (it == waiting.end()) return;  // nothing waits for it
    done = std::move(it->second);
    waiting.erase(it);
  }
  done(status, std::move(data));
}

void Agent::pmix_frame(const ssh::Frame& f) {
  switch (f.type) {
    case ssh::FrameType::kFenceResult: {
      ssh::FenceResultFrame r = ssh::decode_fence_result(f.payload);
      answer(fences_, r.key, r.status, std::move(r.data));
      return;
    }
    case ssh::FrameType::kModexResponse: {
      ssh::ModexResponse r = ssh::decode_modex_response(f.payload);
      answer(modex_, f.id, r.status, std::move(r.data));
      return;
    }
    case ssh::FrameType::kModexRequest: {
      const ssh::ModexRequest q = ssh::decode_modex_request(f.payload);
      const int id = f.id;
      std::lock_guard lock(pmix_mutex_);
      if (!pmix_) return;
      pmix_->local_modex(q.rank, [this, id, host = q.host](int st, std::string bytes) {
        send(ssh::FrameType::kModexResponse, id,
             ssh::encode(ssh::ModexResponse{host, st, std::move(bytes)}));
      });
      return;
    }
    default:
      return;
  }
}

void Agent::start_relay(std::string_view payload) {
  if (relay_) throw std::runtime_error("a second subtree frame");
  ssh::SubtreeFrame spec;
  try {
    spec = ssh::decode_subtree(payload);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("cannot read the launch tree: ") + e.what() +
                             " (is ddlrun the same version on every host?)");
  }
  if (spec.ddlrun_address.empty()) spec.ddlrun_address = ssh_connection_field(0);
  ddlrun_address_ = spec.ddlrun_address;
  deadline_ms_ = spec.heartbeat_timeout.count();
  relay_ = std::make_unique<ssh::Relay>(
      std::move(spec), host_name(),
      [this](std::string_view frames) {
        std::lock_guard lock(out_mutex_);
        return base::write_all(out_, frames) == 0;
      },
      connector_);
  relay_->start();
}

void Agent::start_liveness() {
  std::thread([this] {
    for (;;) {
      std::this_thread::sleep_for(ssh::kHeartbeatInterval);
      if (!send(ssh::FrameType::kHeartbeat, 0)) return;
    }
  }).detach();
  std::thread([this] {
    sigset_t stop;
    sigemptyset(&stop);
    for (int s : {SIGTERM, SIGINT, SIGHUP})
      sigaddset(&stop, s);
    const timespec slice{0, 250'000'000};
    for (;;) {
      const int sig = sigtimedwait(&stop, nullptr, &slice);
      if (sig > 0) abandon("got " + signal_name(sig), 128 + sig);
      const int64_t silent_ms = now_ms() - last_heard_ms_;
      const int64_t deadline = suspended_ ? kSuspendedTimeout.count() : deadline_ms_.load();
      if (silent_ms > deadline) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "no heartbeat from ddlrun for %g s",
                      static_cast<double>(deadline) / 1000.0);
        abandon(buf, 1);
      }
    }
  }).detach();
}

void Agent::abandon(const std::string& why, int status) {
  const std::string line = "ddlrun agent on " + host_name() + ": " + why + "; stopping its ranks\n";
  fcntl(2, F_SETFL, fcntl(2, F_GETFL) | O_NONBLOCK);  // a full stderr must not stop us
  [[maybe_unused]] ssize_t n = write(2, line.data(), line.size());
  const auto signal_ranks = [this](int sig) {
    std::lock_guard lock(procs_mutex_);
    if (procs_ != nullptr) procs_->signal(sig);
    return procs_ != nullptr ? procs_->running() : 0;
  };
  if (signal_ranks(SIGTERM) > 0) {
    const Clock::time_point kill_at = Clock::now() + kLostGrace;
    while (Clock::now() < kill_at && signal_ranks(0) > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    signal_ranks(SIGKILL);
  }
  {
    std::lock_guard lock(procs_mutex_);
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }
  _exit(status);
}

std::string host_name() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

/// Field `index` of $SSH_CONNECTION ("client-address client-port server-address
/// server-port"): 0 is where ddlrun connected from, 2 the address this host was reached at.
std::string ssh_connection_field(int index) {
  const char* c = std::getenv("SSH_CONNECTION");
  if (c == nullptr) return "";
  std::string s(c);
  size_t pos = 0;
  for (int field = 0; field < index; ++field) {
    pos = s.find(' ', pos);
    if (pos == std::string::npos) return "";
    ++pos;
  }
  return s.substr(pos, s.find(' ', pos) - pos);
}

/// Enters the directory the job's ranks start in (ddlrun's own, or --wdir), which must exist
/// here: a missing one is reported before anything starts on any host, never replaced by the
/// login directory (a relative "./train" would then fail as "no such file" without saying
/// why). Returns the problem, or "" once entered.
std::string enter_working_directory(const Job& job) {
  if (job.cwd.empty()) return "";
  if (std::string problem = working_directory_problem(job.cwd); !problem.empty()) return problem;
  if (chdir(job.cwd.c_str()) != 0) {
    return "cannot enter working directory " + job.cwd + ": " + std::strerror(errno);
  }
  return "";
}

int Agent::run() {
  // The agent's side of the conversation (protocol.h), one step per phase: hello, the job,
  // ready (or why not), go, then the ranks relayed until they end, and done.
  signal(SIGPIPE, SIG_IGN);
  if (liveness_) block_stop_signals();
  if (!say_hello()) return 1;
  if (liveness_) start_liveness();
  if (const std::optional<int> stop = receive_job()) return *stop;
  if (const std::optional<int> stop = prepare()) return *stop;
  if (const std::optional<int> stop = await_go()) return *stop;
  return run_ranks();
}

void Agent::block_stop_signals() {
  // Every thread inherits this mask; the watchdog takes these signals (start_liveness).
  sigset_t stop;
  sigemptyset(&stop);
  for (int s : {SIGTERM, SIGINT, SIGHUP})
    sigaddset(&stop, s);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
}

bool Agent::say_hello() {
  const int master_port = free_tcp_port();
  int ddl_port = free_tcp_port();
  while (ddl_port != 0 && ddl_port == master_port)
    ddl_port = free_tcp_port();
  std::string hello;
  base::net::put_str(hello, host_name());
  base::net::put_str(hello, ssh_connection_field(2));
  base::net::put_u32(hello, static_cast<uint32_t>(master_port));
  base::net::put_u32(hello, static_cast<uint32_t>(ddl_port));
  return send(ssh::FrameType::kHello, 0, hello);
}

std::optional<int> Agent::receive_job() {
  std::optional<ssh::Frame> f;
  try {
    f = receive_command();
  } catch (const std::exception& e) {
    return fail(1, e.what());
  }
  job_came_ = true;  // the measurement is over: no N frame starts a link agent again
  if (links_) links_->stop();
  if (!f) return 1;  // ddlrun gave up before sending the job (another host failed)
  if (f->type != ssh::FrameType::kJob) return fail(1, "expected the job first");
  host_index_ = f->id;
  try {
    base::net::Decoder in(f->payload, "job frame");
    const std::string bytes = in.str();
    if (bytes.empty() && job_bytes_.empty())
      throw std::runtime_error("the job's bytes are missing");
    job_ = decode_job(bytes.empty() ? job_bytes_ : bytes);
    job_bytes_.clear();
    rv_.address = in.str();
    rv_.master_port = static_cast<int>(in.u32());
    rv_.ddl_port = static_cast<int>(in.u32());
    rv_.ddl_address = in.str();
    deadline_ms_ = in.u32();
    in.expect_done();
    if (rv_.ddl_address.empty()) {
      rv_.ddl_address = !ddlrun_address_.empty() ? ddlrun_address_ : ssh_connection_field(0);
    }
  } catch (const std::exception& e) {
    return fail(1, std::string("cannot read the job: ") + e.what() +
                       " (is ddlrun the same version on every host?)");
  }
  if (const std::string problem = enter_working_directory(job_); !problem.empty()) {
    return fail(1, problem);
  }
  return std::nullopt;
}

std::optional<int> Agent::prepare() {
  const comm::Host* me = job_.topology.find_host(host_index_);
  const std::string where = me != nullptr ? me->name : host_name();
  // The topology file, private to this job.
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/ddlrun-agent.XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    return fail(
        1, where + ": cannot create a directory like " + pattern + ": " + std::strerror(errno));
  }
  {
    std::lock_guard lock(procs_mutex_);
    dir_ = pattern;
  }
  keeper_remove_dir(dir_);
  for (const comm::RankPlacement& r : job_.topology.ranks) {
    if (r.host == host_index_) mine_.push_back(r);
  }
  std::sort(mine_.begin(), mine_.end(),
            [](const auto& a, const auto& b) { return a.rank < b.rank; });
  try {
    make_specs();
  } catch (const LaunchError& e) {
    return fail(e.status(), e.what());
  } catch (const std::exception& e) {
    return fail(1, where + ": " + e.what());
  }
  return std::nullopt;
}

void Agent::make_specs() {
  const std::string topology_path = dir_ + "/topology.yaml";
  comm::write_topology_file(job_.topology, topology_path);
  pmix_ = pmix_server::Server::start(dir_, *this);
  pmix_->register_job(job_, {host_index_});
  const std::vector<std::string> base = current_environment();
  const Inherited inherited = inherited_from(base);
  for (const comm::RankPlacement& r : mine_) {
    SpawnSpec spec;
    spec.argv = job_.argv;
    std::vector<EnvVar> env = rank_environment(job_, r.rank, rv_, topology_path, inherited);
    pmix_server::add_environment(env, pmix_->fork_environment(r.rank), job_.exports, base);
    spec.env = merge_environment(base, env);
    spec.cpus = r.cpus;
    spec.pipe_stdin = r.rank == 0;
    specs_.push_back(std::move(spec));
  }
  if (!specs_.empty()) resolve_program(job_.argv.at(0), specs_.front().env, "");
}

std::optional<int> Agent::await_go() {
  if (!send(ssh::FrameType::kReady, 0)) return 1;
  std::optional<ssh::Frame> f;
  try {
    f = receive_command();
  } catch (const std::exception& e) {
    return fail(1, e.what());
  }
  if (!f || f->type != ssh::FrameType::kGo) return 1;  // another host was not ready
  return std::nullopt;
}

int Agent::run_ranks() {
  EventQueue events;
  // Stdin bytes passed on (or dropped), to grant back to ddlrun as window (Z).
  static_assert(ssh::kStdinWindow < ProcessSet::kStdinLimit);
  std::atomic<size_t> stdin_gone{0};
  const auto stdin_passed = [&](size_t n) {
    stdin_gone += n;
    events.push(Event{});
  };
  ProcessSet procs(events);
  procs.on_stdin_gone(stdin_passed);
  if (const std::optional<int> stop = start_ranks(procs)) return *stop;
  // Down the channel: signals and stdin; its end means ddlrun is gone.
  std::thread([&] { read_commands(procs, events, stdin_passed); }).detach();
  // (it blocks in read(); the process exits under it)
  const bool lost = relay(events, procs, stdin_gone);
  {
    std::lock_guard lock(procs_mutex_);
    procs_ = nullptr;
  }
  procs.finish();
  {
    std::unique_ptr<pmix_server::Server> server;
    {
      std::lock_guard lock(pmix_mutex_);
      server = std::move(pmix_);
    }
  }
  if (!lost) send(ssh::FrameType::kDone, 0);
  // The hosts below this one still talk through it (their frames, ddlrun's to them).
  if (!lost && relay_) relay_->wait();
  return lost ? 1 : 0;
}

std::optional<int> Agent::start_ranks(ProcessSet& procs) {
  {
    std::lock_guard lock(procs_mutex_);
    procs_ = &procs;
  }
  size_t started = 0;
  try {
    for (size_t i = 0; i < mine_.size(); ++i) {
      procs.start(mine_[i].rank, specs_[i], "");
      ++started;
    }
  } catch (const LaunchError& e) {
    {
      std::lock_guard lock(procs_mutex_);
      procs_ = nullptr;
    }
    procs.finish();
    for (size_t i = 0; i < started; ++i) {
      std::string status;
      base::net::put_u32(status, 0);
      base::net::put_u32(status, SIGKILL);
      send(ssh::FrameType::kExit, mine_[i].rank, status);
    }
    return fail(e.status(), e.what());
  }
  return std::nullopt;
}

void Agent::read_commands(ProcessSet& procs, EventQueue& events,
                          const std::function<void(size_t)>& stdin_passed) {
  for (;;) {
    std::optional<ssh::Frame> cmd;
    try {
      cmd = receive();
    } catch (const std::exception&) {
      cmd.reset();
    }
    if (!cmd) break;
    switch (cmd->type) {
      case ssh::FrameType::kSignal:
        // Ctrl-Z stops ddlrun too: no heartbeats until it resumes.
        if (cmd->id == SIGSTOP) suspended_ = true;
        if (cmd->id == SIGCONT) suspended_ = false;
        procs.signal(cmd->id);
        break;
      case ssh::FrameType::kStdin:
        // Never waits: the window keeps the queue under ProcessSet::kStdinLimit.
        if (!procs.write_stdin(0, cmd->payload)) stdin_passed(cmd->payload.size());
        break;
      case ssh::FrameType::kStdinEof:
        procs.close_stdin(0);
        break;
      case ssh::FrameType::kOutputCredit:
        output_credit_ += std::max(cmd->id, 0);
        events.push(Event{});  // wakes relay(), which may hold output for it
        break;
      case ssh::FrameType::kFenceResult:
      case ssh::FrameType::kModexRequest:
      case ssh::FrameType::kModexResponse:
        try {
          pmix_frame(*cmd);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "ddlrun agent: %s\n", e.what());
        }
        break;
      default:
        break;
    }
  }
  if (relay_) relay_->upstream_gone();
  events.push(Event{Event::Type::kHostFailure, -1, host_index_, Stream::kStdout, {}, {}});
}

bool Agent::relay(EventQueue& events, ProcessSet& procs, std::atomic<size_t>& stdin_gone) {
  size_t running = mine_.size();
  bool lost = false;
  Clock::time_point kill_at = Clock::time_point::max();
  // Output waits for its window (M); exits pass it, and done waits until it has gone.
  while (running > 0 || (!lost && events.has_output())) {
    const Clock::time_point deadline = std::min(kill_at, Clock::now() + std::chrono::hours(24));
    std::optional<Event> e = events.pop(deadline, lost || output_credit_ > 0);
    if (const size_t n = stdin_gone.exchange(0); n > 0 && !lost) {
      send(ssh::FrameType::kStdinCredit, static_cast<int32_t>(n));
    }
    if (!e) {
      if (Clock::now() >= kill_at) break;
      continue;
    }
    if (e->type == Event::Type::kExit) --running;
    if (e->type == Event::Type::kHostFailure && !lost) {
      lost = true;
      procs.signal(SIGTERM);
      kill_at = Clock::now() + kLostGrace;
    }
    if (!lost) relay_event(*e);
  }
  return lost;
}

void Agent::relay_event(const Event& e) {
  if (e.type == Event::Type::kOutput) {
    output_credit_ -= static_cast<int64_t>(e.data.size());
    send(e.stream == Stream::kStdout ? ssh::FrameType::kStdout : ssh::FrameType::kStderr, e.rank,
         e.data);
  } else if (e.type == Event::Type::kExit) {
    std::string status;
    base::net::put_u32(status, static_cast<uint32_t>(e.status.code));
    base::net::put_u32(status, static_cast<uint32_t>(e.status.signal));
    send(ssh::FrameType::kExit, e.rank, status);
  }
}

}  // namespace

int converse_as_agent(int in_fd, int out_fd, bool liveness, ddl::ssh::Connector& connector,
                      AgentServices services) {
  // Never destroyed: the reader, heartbeat and watchdog threads may still use it (blocked in
  // read() or write()) until _exit ends them.
  auto* agent = new Agent(in_fd, out_fd, liveness, connector, std::move(services));
  const int status = agent->run();
  agent->remove_files();
  return status;
}

void run_agent(int in_fd, int out_fd, const AgentServices& services) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) enable_keeper(self.string());
  keeper_watch_link(out_fd);
  remove_stale_dirs();
  const int status = converse_as_agent(in_fd, out_fd, true, ddl::ssh::libssh_connector(), services);
  std::fflush(nullptr);
  _exit(status);
}

}  // namespace ddl::launcher
