// The ssh backend: ddlrun's own multi-host launcher.
//
// How it works: the job goes down ddlrun's agents (agent_tree.h), one conversation per
// first-level host of their launch tree (below), on a fixed pool of threads that does not grow
// with the hosts (tree.h: kTalkThreads). The agents come started, as ddlrun's probe left them
// (LaunchOptions::agents: one login per host and job); those missing are started first the same
// way (ask_agents over the ssh::Connector: ssh config, keys only, strict host keys, connect
// timeout, at most ssh.max_parallel logins at once, each agent hearing ddlrun's heartbeat while
// the others log in, so a slow login holds up no agent). Each conversation goes to a talk thread
// (a talker per kHostsPerTalker hosts, host i to talker i mod their number), which gives each of
// its conversations a turn (below) that never waits, and waits, when a round read nothing, in one
// poll() on all their sockets for at most 20 ms; each session stays with one thread at a time.
// start() waits for every hello: if a host failed, every channel is closed
// (so the agents that did start exit) and one LaunchError lists each failed host with its reason.
// Then the job goes to every agent with the rendezvous of rank 0's host (the address ddlrun reached
// it at, and its free ports); each agent checks the program and writes its topology file; only when
// all are ready do they get "go", so a program missing on one host starts nothing anywhere. From
// then on each turn turns frames into events (output, exits) and writes queued frames (signals,
// stdin, output windows) between reads, never waiting: what the remote window or the socket does
// not take (a host cut off without a RST fills its socket's buffer) waits in the conversation for
// POLLOUT, so one host never holds up its talker's others, and a host that takes none of it for the
// heartbeat deadline is lost ("took no data for 10 s (N bytes wait for it: ...)"; ssh::Outbox:
// only time in which no byte moves counts, so a slow link that drains a write over more than
// the deadline is not lost; the relay applies the same rule to its children). Every channel is
// read all the time: output comes in a window per host (protocol.h: M, output_window()), which
// a conversation grants back as it reads output only while the supervisor's event queue is not
// output_full(), so a slow reader stops the agents, and the agents stop reading their ranks,
// while heartbeats, exits and lost-host notes still come (a full channel would hold them back).
// Stdin goes in a window (protocol.h: Z) so no side queues more than kStdinWindow of it. A
// channel that closes before its agent said "done" is a lost host.
//
// PMIx across hosts: each agent is its host's PMIx server. ddlrun joins the hosts' fence
// contributions in one FenceCombiner (any host's conversation adds what its agent sent, and
// the last one sends the combined data down to every host taking part; every turn checks the
// fences' timeouts), passes direct modex requests to the rank's host and the
// answers back, and turns a PMIx_Abort into the rank's failure (pmix_server::abort_events).
// Data is collected when the ranks ask for it (PMIX_COLLECT_DATA); otherwise a Get of another
// host's key is a direct modex.
//
// The launch tree (tree.h; --tree-width K, beyond K hosts): the conversations above are the
// first level's only, at most K of them, so ddlrun's sessions do not grow with the hosts. Each
// first-level conversation sends its agent a subtree frame (W: the hosts below it and how to log in
// to them), and its agent starts theirs (relay.h). The other hosts keep their HostConn and their
// own HostTalk (phase, ranks, frames), driven by the conversation of the first-level host above
// them: what ddlrun sends them goes routed (T) down that channel, what they send comes up routed,
// so hello/ready/go, output, stdin, signals, exits and PMIx work as they do flat. A host below is
// timed by its tree parent, which reports it lost (L); a lost host takes the hosts below it along,
// reported after it as "lost with its tree parent X" (the lost host is the job's reason, and a
// restart keeps the others). The launch takes the agents' tree over as it is: a first-level
// session comes with its subtree started by the probe (its W is not sent again, and the hosts'
// hellos wait in the kept channel's bytes), each host's id in the tree's frames (its route) stays
// the one the probe gave it while its job frame carries its index in this job (a restart numbers
// the hosts again), and a host of the tree without ranks (its probe failed, or the plan gave it
// none) gets no job: nothing is awaited from it, and only its loss counts, when hosts with ranks
// lie below it. A first-level agent --probe-links lost (AgentTree::Kept::lost), or found gone
// when the launch takes it (a new agent would log in to the hosts below a second time), fails
// that host with the hosts below it, logging in to none of them again.

#include "launcher/ssh/ssh.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <semaphore>
#include <set>
#include <thread>

#include "base/net/codec.h"
#include "launcher/external.h"
#include "launcher/pmix_server/fence.h"
#include "launcher/pmix_server/server.h"
#include "launcher/process.h"
#include "launcher/ssh/agent_link.h"
#include "launcher/ssh/protocol.h"
#include "launcher/ssh/tree.h"

namespace ddl::launcher {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kPollMs = 20;

/// Where a host's conversation stands.
enum class Phase { kConnecting, kHello, kReady, kRunning, kDone, kFailed };

struct HostConn {
  int index = 0;
  std::string name;
  std::vector<int> ranks;
  Phase phase = Phase::kConnecting;
  std::string error;  ///< kFailed: why
  int status = 1;     ///< kFailed: ddlrun's exit status for it
  // The hello.
  std::string reached_address;
  bool answered = false;  ///< its agent said hello: the ssh login worked
  int master_port = 0;
  int ddl_port = 0;
  std::string job_frame;  ///< set by start() when the job may be sent
  bool go = false;
  std::string outgoing;      ///< frames to write (signals, PMIx)
  std::string stdin_frames;  ///< stdin to write after `outgoing` (at most kStdinWindow)
  // The launch tree.
  /// Its id in the tree's frames (T, L, the subtree frames): the agents' tree's (plan_tree).
  int route = 0;
  bool first_level = true;              ///< ddlrun talks to its agent itself
  std::vector<HostConn*> subtree;       ///< every host below it, at every level
  std::string subtree_frame;            ///< the first level's W frame, when it has hosts below
  std::vector<ssh::TreeHost> children;  ///< the first level's, with their subtrees
  bool collateral = false;              ///< failed only because its tree parent was lost
  bool quiet = false;  ///< said done or was lost: no more output comes (guarded by the mutex)
};

class SshBackend : public Backend {
 public:
  SshBackend(const Job& job, const LaunchOptions& options, ddl::ssh::Connector& connector)
      : job_(job), options_(options), connector_(connector) {
    for (const comm::Host& h : job_.topology.hosts) {
      auto c = std::make_unique<HostConn>();
      c->index = h.index;
      c->route = h.index;
      c->name = h.name;
      for (const comm::RankPlacement& r : job_.topology.ranks) {
        if (r.host == h.index) c->ranks.push_back(r.rank);
      }
      if (!c->ranks.empty()) hosts_.push_back(std::move(c));
    }
    output_window_ = ssh::output_window(hosts_.size());
    plan_tree();
  }
  ~SshBackend() override { finish(); }

  std::string_view name() const override { return "ssh"; }

  std::vector<int> start(EventQueue& events) override {
    events_ = &events;
    fences_ = std::make_unique<pmix_server::FenceCombiner>(pmix_server::make_layout(job_.topology),
                                                           default_fence_timeout());
    take_agents();
    start_pool();
    // Each level logs in after the one above it said hello.
    const auto connect_limit =
        (options_.ssh.connect_timeout * 4 + std::chrono::seconds(5)) * std::max(depth_, 1);
    if (!wait_for(Phase::kHello, connect_limit)) {
      throw_failures("cannot start the job on");
    }
    // The rendezvous lives on rank 0's host.
    const HostConn* first = nullptr;
    for (const auto& h : hosts_) {
      if (std::find(h->ranks.begin(), h->ranks.end(), 0) != h->ranks.end()) first = h.get();
    }
    if (first == nullptr) first = hosts_.front().get();
    Rendezvous rv;
    const comm::Host* host0 = job_.topology.find_host(first->index);
    rv.address = !first->reached_address.empty() ? first->reached_address
                 : host0 != nullptr              ? host0->address
                                                 : first->name;
    rv.master_port = first->master_port;
    // ddlrun's rendezvous server; each agent fills in the address ddlrun came from.
    rv.ddl_port = options_.rendezvous_port;
    set_job_frames(rv);
    changed_.notify_all();
    if (!wait_for(Phase::kReady, options_.ssh.command_timeout)) {
      throw_failures("cannot start the job on");
    }
    std::vector<int> ranks;
    {
      std::lock_guard lock(mutex_);
      for (auto& h : hosts_) {
        h->go = true;
        ranks.insert(ranks.end(), h->ranks.begin(), h->ranks.end());
      }
    }
    changed_.notify_all();
    std::sort(ranks.begin(), ranks.end());
    return ranks;
  }

  void signal(int sig) override {
    {
      std::lock_guard lock(mutex_);
      if (sig == SIGKILL) killed_ = true;
      for (auto& h : hosts_)
        h->outgoing += ssh::encode_frame(ssh::FrameType::kSignal, sig, {});
    }
  }
  void write_stdin(std::string_view data) override {
    std::unique_lock lock(mutex_);
    HostConn* h = rank0_host();
    while (h != nullptr && !data.empty()) {
      // Waits for window; gives up when the stdin or the host is gone.
      changed_.wait(lock, [&] {
        return stdin_window_ > 0 || stop_ || stdin_closed_ || h->phase >= Phase::kDone;
      });
      if (stdin_window_ == 0) return;
      const size_t n = std::min(stdin_window_, data.size());
      h->stdin_frames += ssh::encode_frame(ssh::FrameType::kStdin, 0, data.substr(0, n));
      stdin_window_ -= n;
      data.remove_prefix(n);
    }
  }
  void close_stdin() override {
    {
      std::lock_guard lock(mutex_);
      if (stdin_closed_) return;
      stdin_closed_ = true;
      if (HostConn* h = rank0_host())
        h->stdin_frames += ssh::encode_frame(ssh::FrameType::kStdinEof, 0, {});
    }
    changed_.notify_all();
  }
  bool output_may_follow() override {
    std::lock_guard lock(mutex_);
    return !stop_ && std::any_of(hosts_.begin(), hosts_.end(), [](const auto& h) {
      return h->phase == Phase::kRunning && !h->quiet;
    });
  }
  void finish() override {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    join_pool();
  }

 private:
  /// The launch tree (tree.h): the agents' (LaunchOptions::agents), each host's id in it its
  /// route, with the hosts with ranks it lacks on its first level and every host of it without
  /// ranks a HostConn of its own that gets no job; or, with no agents given, launch_tree's over
  /// the hosts with ranks. Which hosts ddlrun talks to itself, and the subtree frame each of
  /// those sends on.
  void plan_tree() {
    agents_ = options_.agents ? options_.agents : std::make_shared<ssh::AgentTree>();
    std::vector<ssh::TreeHost> first = agents_->tree();
    std::map<std::string, HostConn*> by_name;
    int next_id = 0;
    for (auto& h : hosts_)
      by_name[h->name] = h.get();
    for (const std::string& name : ssh::tree_names(first)) {
      if (!by_name.contains(name)) by_name[name] = add_rankless(name);
    }
    const std::function<void(std::vector<ssh::TreeHost>&)> route = [&](auto& level) {
      for (ssh::TreeHost& t : level) {
        by_name.at(t.name)->route = t.index;
        next_id = std::max(next_id, t.index + 1);
        t.command.clear();  // their probes ran: the launch starts only agents
        route(t.children);
      }
    };
    route(first);
    std::vector<std::pair<int, std::string>> missing;
    for (auto& h : hosts_) {
      if (!h->ranks.empty() && !ssh::in_tree(first, h->name)) {
        h->route = first.empty() ? h->index : next_id++;
        missing.emplace_back(h->route, h->name);
      }
    }
    if (first.empty())
      first = ssh::launch_tree(missing, options_.tree_width);
    else
      for (const auto& [id, name] : missing)
        first.push_back({id, name, {}, {}});
    shape(first);
  }
  /// A host of the agents' tree without ranks: ddlrun talks to it only to reach the hosts below.
  HostConn* add_rankless(const std::string& name) {
    auto c = std::make_unique<HostConn>();
    c->index = -1;
    c->name = name;
    hosts_.push_back(std::move(c));
    return hosts_.back().get();
  }
  /// Each host's place in the launch tree `first` (hosts by route).
  void shape(const std::vector<ssh::TreeHost>& first) {
    std::map<int, HostConn*> by_route;
    for (auto& h : hosts_)
      by_route[h->route] = h.get();
    depth_ = ssh::tree_depth(first);
    for (auto& h : hosts_)
      h->first_level = false;
    for (const ssh::TreeHost& t : first) {
      HostConn* c = by_route.at(t.index);
      c->first_level = true;
      note_subtree(t, by_route);
      if (t.children.empty()) continue;
      c->children = t.children;
      c->subtree_frame = ssh::encode_frame(
          ssh::FrameType::kSubtree, 0,
          ssh::encode(ssh::subtree_frame(options_.ssh, options_.ddlrun_path,
                                         options_.heartbeat_timeout, t.children)));
    }
  }
  /// The job, once down each channel (U), and each host's job frame, which refers to it.
  void set_job_frames(const Rendezvous& rv) {
    std::lock_guard lock(mutex_);
    job_bytes_frame_ = ssh::encode_frame(ssh::FrameType::kJobBytes, 0, encode_job(job_));
    for (auto& h : hosts_) {
      if (h->ranks.empty()) continue;  // it only relays
      std::string payload;
      base::net::put_str(payload, {});  // the job: the U before
      base::net::put_str(payload, rv.address);
      base::net::put_u32(payload, static_cast<uint32_t>(rv.master_port));
      base::net::put_u32(payload, static_cast<uint32_t>(rv.ddl_port));
      base::net::put_str(payload, rv.ddl_address);
      base::net::put_u32(payload, static_cast<uint32_t>(std::min<int64_t>(
                                      options_.heartbeat_timeout.count(), UINT32_MAX)));
      h->job_frame = ssh::encode_frame(ssh::FrameType::kJob, h->index, payload);
    }
  }
  /// Each first-level host's agent, taken from the agents' tree: those it lacks are started
  /// now (ask_agents, as the probe starts them, waiting for their hello; at most
  /// ssh.max_parallel logins at once), but not those with no ranks at or below them; a host
  /// whose agent could not start fails, with the hosts below it. The sessions kept for hosts
  /// below the first level are closed (their tree parents start them).
  void take_agents() {
    std::vector<HostConn*> starting;
    std::vector<std::string> names;
    for (auto& h : hosts_) {
      if (!h->first_level) agents_->take(h->name);
      if (!h->first_level || !has_ranks(*h)) continue;
      ssh::AgentTree::Kept kept = agents_->take(h->name);
      if (needs_agent(kept)) {
        starting.push_back(h.get());
        names.push_back(h->name);
      } else {
        agents_->put(h->name, std::move(kept));  // its conversation takes it
      }
    }
    if (starting.empty()) return;
    ssh::keep_agents_alive(*agents_);
    const std::vector<ssh::AgentAnswer> answers = ssh::ask_agents(
        connector_, names, options_.ssh, agent_command(), *agents_, ssh::Ask::kHello);
    for (size_t i = 0; i < starting.size(); ++i) {
      if (answers[i].output) note_stderr(*starting[i], answers[i].output->err);
      if (!agents_->has(names[i])) start_failed(*starting[i], answers[i]);
    }
  }
  /// Whether a first-level host whose kept agent is `kept` needs an agent started: none is kept,
  /// or the one kept is gone and started no host below (a new one logs in to none twice). One
  /// lost with hosts below, or gone after starting them, fails in its conversation instead.
  static bool needs_agent(ssh::AgentTree::Kept& kept) {
    if (!kept.lost.empty()) return false;
    if (!kept.session) return true;
    const bool alive = kept.session->connected() && (!kept.channel || kept.channel->open());
    return !alive && kept.subtree.empty();
  }
  /// What `c`'s agent said on stderr before its hello: a note from its host per line.
  void note_stderr(const HostConn& c, const std::string& err) {
    for (size_t at = 0; at < err.size();) {
      const size_t nl = std::min(err.find('\n', at), err.size());
      events_->push(Event{Event::Type::kOutput,
                          -1,
                          c.index,
                          Stream::kStderr,
                          c.name + ": " + err.substr(at, nl - at) + "\n",
                          {}});
      at = nl + 1;
    }
  }
  std::string agent_command() const { return shell_join({options_.ddlrun_path}) + " --agent"; }
  /// Whether `c` or a host below it has ranks.
  static bool has_ranks(const HostConn& c) {
    return !c.ranks.empty() || std::any_of(c.subtree.begin(), c.subtree.end(),
                                           [](const HostConn* d) { return !d->ranks.empty(); });
  }
  /// First-level host `c`, whose agent gave `a` instead of its hello, fails: why, in the launch's
  /// words, and the hosts below it with it.
  void start_failed(HostConn& c, const ssh::AgentAnswer& a) {
    std::string why = a.error;
    if (a.ended) {
      why = ssh::exited_before_hello_text(agent_command(), a.output->exit_status,
                                          options_.ddlrun_path);
    } else if (why.empty()) {
      why = "protocol error: '" + agent_command() + "' printed what is not the agent's frames";
    }
    fail(c, why);
    for (HostConn* d : c.subtree)
      fail(*d, ssh::lost_with_parent_text(c.name), 1, true);
  }
  /// Fills in the subtree of `t` and of every host below it (`by_route`: the hosts by route).
  static void note_subtree(const ssh::TreeHost& t, const std::map<int, HostConn*>& by_route) {
    HostConn* c = by_route.at(t.index);
    for (const ssh::TreeHost& child : t.children) {
      note_subtree(child, by_route);
      HostConn* below = by_route.at(child.index);
      c->subtree.push_back(below);
      c->subtree.insert(c->subtree.end(), below->subtree.begin(), below->subtree.end());
    }
  }
  HostConn* rank0_host() {
    for (auto& h : hosts_) {
      if (std::find(h->ranks.begin(), h->ranks.end(), 0) != h->ranks.end()) return h.get();
    }
    return nullptr;
  }

  /// Waits until every host reached `phase` (or went past it) or one failed; false on a
  /// failure or after `limit`, when the failure has been recorded.
  bool wait_for(Phase phase, std::chrono::milliseconds limit) {
    // A host with ranks that has neither failed nor reached `phase` (one without ranks awaits
    // nothing).
    const auto behind = [phase](const HostConn& h) {
      return !h.ranks.empty() && h.phase != Phase::kFailed &&
             static_cast<int>(h.phase) < static_cast<int>(phase);
    };
    const auto any = [&](const auto& pred) {
      return std::any_of(hosts_.begin(), hosts_.end(), [&](const auto& h) { return pred(*h); });
    };
    const auto failed_one = [](const HostConn& h) { return h.phase == Phase::kFailed; };
    std::unique_lock lock(mutex_);
    const bool all =
        changed_.wait_for(lock, limit, [&] { return any(failed_one) || !any(behind); });
    const bool failed = any(failed_one);
    if (!all) {
      for (auto& h : hosts_) {
        if (behind(*h)) {
          h->phase = Phase::kFailed;
          h->error =
              "no answer from its agent after " +
              std::to_string(std::chrono::duration_cast<std::chrono::seconds>(limit).count()) +
              " s";
        }
      }
      return false;
    }
    if (failed) {
      // Give the others a moment to report theirs too, so one message names every host.
      changed_.wait_for(lock, std::chrono::milliseconds(300), [&] { return !any(behind); });
    }
    return !failed;
  }

  /// $DDL_PMIX_FENCE_TIMEOUT (seconds) of ddlrun's environment: how long a fence that
  /// carries no PMIX_TIMEOUT waits for the other hosts; 0 (or unset): forever.
  std::chrono::milliseconds default_fence_timeout() const {
    const std::optional<std::string> v =
        environ_value(options_.environ.empty() ? current_environment() : options_.environ,
                      "DDL_PMIX_FENCE_TIMEOUT");
    if (!v || v->empty()) return std::chrono::milliseconds(0);
    char* end = nullptr;
    const double seconds = std::strtod(v->c_str(), &end);
    if (end == nullptr || *end != '\0' || !(seconds > 0)) return std::chrono::milliseconds(0);
    return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  }

  /// The connection to host `index`, or nullptr.
  HostConn* host_by_index(int index) {
    for (auto& h : hosts_) {
      if (h->index == index) return h.get();
    }
    return nullptr;
  }

  /// Sends a finished fence to its hosts (mutex_ held); a failed one is also a note.
  void deliver(const pmix_server::FenceResult& r) {
    const std::string frame =
        ssh::encode_frame(ssh::FrameType::kFenceResult, 0,
                          ssh::encode(ssh::FenceResultFrame{r.key, r.status, r.data, r.error}));
    for (int h : r.hosts) {
      if (HostConn* c = host_by_index(h)) c->outgoing += frame;
    }
    if (r.status != 0) {
      events_->push(
          Event{Event::Type::kOutput, -1, -1, Stream::kStderr, "ddlrun: " + r.error + "\n", {}});
    }
  }

  /// A PMIx frame from host `c`'s agent.
  void pmix_frame(HostConn& c, const ssh::Frame& f) {
    switch (f.type) {
      case ssh::FrameType::kFence: {
        ssh::FenceFrame in = ssh::decode_fence(f.payload);
        pmix_server::Contribution contribution{std::move(in.key), std::move(in.participants),
                                               in.timeout_s, std::move(in.data)};
        std::lock_guard lock(mutex_);
        if (auto done = fences_->add(c.index, std::move(contribution), Clock::now())) {
          deliver(*done);
        }
        break;
      }
      case ssh::FrameType::kAbort: {
        const ssh::AbortFrame a = ssh::decode_abort(f.payload);
        for (Event& e : pmix_server::abort_events(f.id, a.status, a.message)) {
          e.host = c.index;
          events_->push(std::move(e));
        }
        break;
      }
      case ssh::FrameType::kModexRequest: {
        ssh::ModexRequest q = ssh::decode_modex_request(f.payload);
        q.host = c.index;
        const comm::RankPlacement* r = job_.topology.find_rank(q.rank);
        std::lock_guard lock(mutex_);
        HostConn* owner = r != nullptr ? host_by_index(r->host) : nullptr;
        if (owner == nullptr) {
          c.outgoing += ssh::encode_frame(ssh::FrameType::kModexResponse, f.id,
                                          ssh::encode(ssh::ModexResponse{c.index, kNotFound, {}}));
        } else {
          owner->outgoing += ssh::encode_frame(ssh::FrameType::kModexRequest, f.id, ssh::encode(q));
        }
        break;
      }
      case ssh::FrameType::kModexResponse: {
        const ssh::ModexResponse a = ssh::decode_modex_response(f.payload);
        std::lock_guard lock(mutex_);
        if (HostConn* asker = host_by_index(a.host)) {
          asker->outgoing += ssh::encode_frame(ssh::FrameType::kModexResponse, f.id, f.payload);
        }
        break;
      }
      default:
        break;
    }
  }
  static constexpr int kNotFound = -46;  // PMIX_ERR_NOT_FOUND

  [[noreturn]] void throw_failures(const std::string& what) {
    std::string message;
    int status = 1;
    int failed = 0;
    bool unreached = false;  // some host failed before its agent answered
    std::vector<std::string> names;
    std::string reason;
    {
      std::lock_guard lock(mutex_);
      for (auto& h : hosts_) {
        if (h->phase != Phase::kFailed || h->collateral) continue;
        ++failed;
        unreached = unreached || !h->answered;
        message += "\n  " + h->name + ": " + h->error;
        reason += (reason.empty() ? "" : "; ") + h->name + ": " + h->error;
        names.push_back(h->name);
        if (status == 1) status = h->status;
      }
    }
    finish();
    const size_t with_ranks = static_cast<size_t>(std::count_if(
        hosts_.begin(), hosts_.end(), [](const auto& h) { return !h->ranks.empty(); }));
    const std::string head =
        what + " " + std::to_string(failed) + " of " + std::to_string(with_ranks) + " hosts:";
    std::string next;
    if (status == 127) {
      next = "\ninstall the program on those hosts at the same path, or give its full path";
    } else if (status == 1 && unreached) {
      next =
          "\nfix them (each must pass 'ssh -o BatchMode=yes HOST ddlrun --version'), or leave "
          "them out of the host list";
    }
    // A host that failed is lost to a restart (elastic.h), unless the program is missing.
    if (status != 1) names.clear();
    throw LaunchError(head + message + next, status, std::move(names), reason);
  }

  /// Host `c` cannot start: why, and ddlrun's status for it; `collateral`: only because its
  /// tree parent was lost (not listed, and not dropped from a restart).
  void fail(HostConn& c, const std::string& error, int status = 1, bool collateral = false) {
    {
      std::lock_guard lock(mutex_);
      if (c.phase == Phase::kFailed) return;
      c.phase = Phase::kFailed;
      c.error = error;
      c.status = status;
      c.collateral = collateral;
    }
    changed_.notify_all();
  }

  void set_phase(HostConn& c, Phase p) {
    {
      std::lock_guard lock(mutex_);
      c.phase = p;
    }
    changed_.notify_all();
  }

  class HostTalk;
  class Conversation;
  class Talker;
  /// The head's threads: each first-level conversation goes to one of at most kTalkThreads
  /// talkers.
  void start_pool();
  /// Waits for the pool's threads (after stop_, or once every conversation ended).
  void join_pool();

  Job job_;
  LaunchOptions options_;
  ddl::ssh::Connector& connector_;
  std::shared_ptr<ssh::AgentTree> agents_;  ///< the launch tree's agents (plan_tree)
  std::vector<std::unique_ptr<HostConn>> hosts_;
  int depth_ = 1;             ///< levels of the launch tree
  size_t output_window_ = 0;  ///< each host's output window (protocol.h: M)
  EventQueue* events_ = nullptr;
  std::unique_ptr<pmix_server::FenceCombiner> fences_;  ///< guarded by mutex_
  std::mutex mutex_;
  std::condition_variable changed_;
  bool stop_ = false;
  size_t stdin_window_ = ssh::kStdinWindow;  ///< stdin bytes rank 0's agent can take now
  bool stdin_closed_ = false;
  bool killed_ = false;          ///< SIGKILL went out: finish() waits for no more exits
  std::string job_bytes_frame_;  ///< U, once start() has the rendezvous; guarded by mutex_
  // The pool (start_pool).
  std::atomic<bool> handing_{true};               ///< conversations are still being handed out
  std::vector<std::unique_ptr<Talker>> talkers_;  ///< at most kTalkThreads
};

// What ddlrun knows of one host's conversation, whether its frames come on the host's own
// channel (the first level of the launch tree, or every host when flat) or routed through the
// agents above it (tree.h): its phase, its ranks not yet ended, and what to do with each frame
// of its agent. The Conversation of the first-level host above it (or its own) drives it.
class SshBackend::HostTalk {
 public:
  HostTalk(SshBackend& backend, HostConn& c, bool routed)
      : b_(backend), c_(c), routed_(routed), passive_(c.ranks.empty()), unfinished_(c.ranks) {}
  /// Its conversation is over: nothing more comes from it, whatever it said.
  ~HostTalk() { quieten(); }

  HostConn& conn() { return c_; }
  bool hello() const { return hello_; }
  bool running() const { return running_; }
  /// Said done, or lost, or has no ranks: nothing more is awaited from it.
  bool ended() const { return done_ || lost_ || passive_; }
  /// It has no ranks: it gets no job, and only its loss (with hosts below it) counts.
  bool passive() const { return passive_; }
  bool done() const { return done_; }
  /// Nothing more to wait for while ddlrun stops the job.
  bool stopped() const { return ended() || !running_ || unfinished_.empty(); }
  bool has_unfinished() const { return !ended() && !unfinished_.empty(); }

  /// What to send it now, under the lock (wrapped in a routed frame when routed): the job, go
  /// with its output window, and (once running) the frames queued for it, control before stdin
  /// so that stdin never holds a signal or a fence result back, and, when the supervisor has
  /// `room` for output, the window for the output read since (M).
  std::string due_frames(bool room) {
    std::string to_send;
    if (c_.phase == Phase::kHello && !c_.job_frame.empty()) {
      to_send = std::move(c_.job_frame);
      c_.job_frame.clear();
    }
    if (c_.phase == Phase::kReady && c_.go) {
      to_send = ssh::encode_frame(ssh::FrameType::kGo, 0, {});
      owed_ = b_.output_window_;
      c_.phase = Phase::kRunning;
      running_ = true;
    }
    if (running_) {
      if (owed_ > 0 && (room || !granted_)) {
        to_send +=
            ssh::encode_frame(ssh::FrameType::kOutputCredit, static_cast<int32_t>(owed_), {});
        owed_ = 0;
        granted_ = true;
      }
      to_send += c_.outgoing;
      c_.outgoing.clear();
      to_send += c_.stdin_frames;
      c_.stdin_frames.clear();
    }
    return wrap(to_send);
  }
  /// `frames` as they travel to it.
  std::string wrap(const std::string& frames) const {
    return routed_ && !frames.empty() ? ssh::route(c_.route, frames) : frames;
  }

  void on_frame(ssh::Frame& f) {
    switch (f.type) {
      case ssh::FrameType::kHello:
        return on_hello(f);
      case ssh::FrameType::kReady:
        return b_.set_phase(c_, Phase::kReady);
      case ssh::FrameType::kFailure:
        return on_failure(f);
      case ssh::FrameType::kStdout:
      case ssh::FrameType::kStderr:
        if (f.id >= 0) owed_ += f.payload.size();  // a rank's: in its window (not an agent's note)
        return b_.events_->push(
            Event{Event::Type::kOutput,
                  f.id,
                  c_.index,
                  f.type == ssh::FrameType::kStdout ? Stream::kStdout : Stream::kStderr,
                  std::move(f.payload),
                  {}});
      case ssh::FrameType::kExit:
        return on_exit(f);
      case ssh::FrameType::kDone:
        done_ = true;
        return quieten();
      case ssh::FrameType::kStdinCredit:
        return on_stdin_credit(f);
      case ssh::FrameType::kHeartbeat:
      case ssh::FrameType::kOutput:     // a probe's, late: the probe already gave up on it
      case ssh::FrameType::kLinkLine:   // --probe-links' agent's, late (its end)
      case ssh::FrameType::kInventory:  // an inventory's answer, late: the probe gave up on it
        return;
      case ssh::FrameType::kFence:
      case ssh::FrameType::kAbort:
      case ssh::FrameType::kModexRequest:
      case ssh::FrameType::kModexResponse:
        return b_.pmix_frame(c_, f);
      default:
        throw std::runtime_error("unexpected frame from the agent");
    }
  }

  /// The host is lost: before the job ran a failure to start; after, a lost host while some
  /// of its ranks have not ended, or while `hosts_below` it in the tree still run.
  void lost(const std::string& why, bool hosts_below = false) {
    if (lost_) return;
    lost_ = true;
    quieten();
    if (passive_) return relay_lost(why, hosts_below);
    if (!running_) {
      b_.fail(c_, why);
    } else if (!unfinished_.empty() || hosts_below) {
      b_.events_->push(Event{Event::Type::kHostFailure, -1, c_.index, Stream::kStdout, why, {}});
    }
    unfinished_.clear();
  }
  /// Lost because its tree parent `parent` was: before the job ran a failure that is not its
  /// own, after a lost host "lost with its tree parent PARENT" (which a rank's error that
  /// leads here names); either way not a lost host of its own, so a restart keeps it.
  void lost_with(const std::string& parent) {
    if (ended()) return;
    lost_ = true;
    quieten();
    if (!running_) {
      b_.fail(c_, ssh::lost_with_parent_text(parent), 1, true);
    } else if (!unfinished_.empty()) {
      Event e{Event::Type::kHostFailure,          -1, c_.index, Stream::kStdout,
              ssh::lost_with_parent_text(parent), {}};
      e.with_parent = true;
      b_.events_->push(std::move(e));
    }
    unfinished_.clear();
  }

 private:
  /// A host without ranks lost: it matters only to the `hosts_below` it; before the job went, a
  /// failure to start, after, a lost host.
  void relay_lost(const std::string& why, bool hosts_below) {
    if (!hosts_below) return;
    if (!job_went()) return b_.fail(c_, why);
    b_.events_->push(Event{Event::Type::kHostFailure, -1, c_.index, Stream::kStdout, why, {}});
  }
  bool job_went() {
    std::lock_guard lock(b_.mutex_);
    return c_.go;
  }

  void on_hello(const ssh::Frame& f) {
    base::net::Decoder in(f.payload, "hello");
    in.str();  // its host name
    const std::string reached = in.str();
    const int mp = static_cast<int>(in.u32());
    const int dp = static_cast<int>(in.u32());
    {
      std::lock_guard lock(b_.mutex_);
      c_.reached_address = reached;
      c_.answered = true;
      c_.master_port = mp;
      c_.ddl_port = dp;
    }
    b_.set_phase(c_, Phase::kHello);
    hello_ = true;
  }

  void on_failure(const ssh::Frame& f) {
    if (running_) {
      b_.events_->push(
          Event{Event::Type::kHostFailure, -1, c_.index, Stream::kStdout, f.payload, {f.id, 0}});
      unfinished_.clear();
    } else {
      b_.fail(c_, f.payload, f.id);
    }
  }

  void on_exit(const ssh::Frame& f) {
    base::net::Decoder in(f.payload, "exit");
    ExitStatus st;
    st.code = in.i32();
    st.signal = in.i32();
    unfinished_.erase(std::remove(unfinished_.begin(), unfinished_.end(), f.id), unfinished_.end());
    b_.events_->push(Event{Event::Type::kExit, f.id, c_.index, Stream::kStdout, {}, st});
  }

  /// No more output comes from it: the supervisor may stop waiting for it (output_may_follow).
  void quieten() {
    {
      std::lock_guard lock(b_.mutex_);
      c_.quiet = true;
    }
    if (b_.events_ != nullptr) b_.events_->push(Event{});
  }

  void on_stdin_credit(const ssh::Frame& f) {
    {
      std::lock_guard lock(b_.mutex_);
      b_.stdin_window_ += static_cast<size_t>(std::max(f.id, 0));
    }
    b_.changed_.notify_all();
  }

  SshBackend& b_;
  HostConn& c_;
  bool routed_;
  bool passive_;
  std::vector<int> unfinished_;
  bool hello_ = false;
  bool running_ = false;
  size_t owed_ = 0;       ///< output read from it that its window has not been given back for
  bool granted_ = false;  ///< its first window (with go) went
  bool done_ = false;     ///< said done (D)
  bool lost_ = false;
};

// The conversation over one ssh channel, its agent taken from the agents' tree (which sent it
// its subtree, or the conversation does first), as a state machine whose states are its phases:
//
//   kTalk        turns until every host on the channel said done, the channel's end, silence,
//                or finish(); each turn sends what is due to each (the job once its agent said
//                hello, go once start() says so, then signals, PMIx answers and stdin; a
//                heartbeat a second), reads what came and hands each frame to its host's
//                HostTalk (routed frames to the host they come from; L loses a host below and
//                its subtree)                                      -> kClose, or kEnd when the
//                agent broke the protocol
//   kClose       say why the host (and the hosts below it) was lost, if it was  -> kEnd
// Each host's Phase (kConnecting, kHello, kReady, kRunning), which start() waits on, moves
// with its agent's frames inside kTalk. Only the channel's own host is timed: the hosts below
// are watched by their tree parents, which report a silent child with L.
class SshBackend::Conversation {
 public:
  enum class Step { kTalk, kClose, kEnd };

  /// While talking: the socket to wait on for what its agent sends (-1: none, poll instead),
  /// and whether the last turn read anything.
  int fd() { return link_ ? link_->fd() : -1; }
  /// Frames wait for the socket to take them: wait for POLLOUT too.
  bool socket_full() const { return link_ && link_->socket_full(); }
  bool heard() const { return link_ && link_->heard(); }
  /// Host `c`'s conversation with the agent `kept` runs for it.
  Conversation(SshBackend& backend, HostConn& c, ssh::AgentTree::Kept kept) : b_(backend), c_(c) {
    talks_.push_back(std::make_unique<HostTalk>(backend, c, false));
    for (HostConn* h : c.subtree) {
      talks_.push_back(std::make_unique<HostTalk>(backend, *h, true));
      by_index_[h->route] = talks_.back().get();
    }
    take(std::move(kept));
  }

  /// Runs `step`; returns the next.
  Step run(Step step) {
    switch (step) {
      case Step::kTalk:
        return talk();
      case Step::kClose:
        return close();
      case Step::kEnd:
        break;
    }
    return Step::kEnd;
  }

 private:
  HostTalk& own() { return *talks_.front(); }

  /// Takes over `kept`'s channel, its agent running, and the frames it sent meanwhile; sends it
  /// its subtree unless the agents' tree did. One lost after the probe (--probe-links) is lost
  /// at once, with the hosts below it.
  void take(ssh::AgentTree::Kept kept) {
    if (kept.lost.empty() && kept.channel && (!kept.session->connected() || !kept.channel->open()))
      kept.lost = gone(kept);
    if (kept.lost.empty() && kept.session && !kept.channel) run_agent(kept);
    if (!kept.lost.empty() || !kept.channel) {
      own().lost(ssh::tree_lost_text(kept.lost.empty() ? "its agent is gone" : kept.lost,
                                     static_cast<int>(talks_.size()) - 1));
      lose_subtree();
      ended_ = true;
      return;
    }
    const bool subtree_sent = !kept.subtree.empty();
    link_ = std::make_unique<ssh::AgentLink>(std::move(kept));
    if (!subtree_sent) link_->send(c_.subtree_frame);  // the hosts below, for its agent
  }

  /// A session whose agent's channel ended while the probe started its subtree (no host below
  /// started): its agent runs again on it, without a new login; else why not, as Kept::lost.
  void run_agent(ssh::AgentTree::Kept& kept) {
    kept.command = b_.agent_command();
    kept.subtree.clear();
    try {
      kept.channel = kept.session->exec(kept.command);
    } catch (const ddl::ssh::Error& e) {
      kept.lost = e.what();
    }
  }

  /// Why the agent of `kept`, found gone when the launch takes it, is gone: what it said why
  /// (F) before it went, or how its channel ended. Its channel and session are closed.
  static std::string gone(ssh::AgentTree::Kept& kept) {
    std::string why = kept.session->connected()
                          ? "the connection to its agent closed"
                          : "lost the connection to " + kept.session->endpoint();
    char buf[4096];  // what it sent last, without waiting
    kept.channel->poll(std::chrono::milliseconds(0));
    for (int n = 0, i = 0; i < 256; ++i) {
      if ((n = kept.channel->read(buf, sizeof buf, ddl::ssh::Stream::kStdout)) <= 0) break;
      kept.pending.append(buf, static_cast<size_t>(n));
    }
    try {
      ssh::FrameReader reader;
      reader.feed(kept.pending);
      while (std::optional<ssh::Frame> f = reader.next())
        if (f->type == ssh::FrameType::kFailure) why = f->payload;
    } catch (const std::exception&) {  // not frames: the channel's end is the reason
    }
    kept.session->stop_blocking();  // closing never waits for a host that cannot answer
    kept.channel.reset();
    kept.session.reset();
    return why;
  }

  /// One turn of kTalk (a Talker gives each of its conversations one in turn).
  Step talk() {
    if (ended_) return Step::kEnd;
    try {
      if (turn()) return Step::kTalk;
    } catch (const std::exception& e) {
      own().lost(std::string("protocol error: ") + e.what(), subtree_open());
      lose_subtree();
      return Step::kEnd;
    }
    return Step::kClose;
  }

  /// One turn of kTalk: false once the conversation is over (open_ and lost_ say why).
  bool turn() {
    std::string to_send = due_frames();
    if (stopping_ && every([](HostTalk& t) { return t.stopped(); })) return false;
    begin_stop(to_send);
    if (Clock::now() >= stop_deadline_) return false;
    // Whatever came, output or not: the output windows (M) bound what the agents send, so the
    // channel is read even while the supervisor has no room for output, and the heartbeats
    // and exits behind that output come.
    link_->send(to_send);
    open_ = link_->turn(std::chrono::milliseconds(0));
    relay_stderr();
    lost_ = link_->lost_why(b_.options_.heartbeat_timeout);
    if (!lost_.empty()) return false;
    while (auto f = link_->next())
      dispatch(*f);
    if (own().hello()) link_->said_hello();  // from now on, silence loses the host
    return open_ && !every([](HostTalk& t) { return t.ended(); });
  }

  template <typename Pred>
  bool every(Pred pred) {
    return std::all_of(talks_.begin(), talks_.end(), [&](auto& t) { return pred(*t); });
  }
  /// Some host below this one has not said done.
  bool subtree_open() {
    return std::any_of(talks_.begin() + 1, talks_.end(), [](auto& t) { return !t->ended(); });
  }

  /// Every host's frames due now, under the lock; the fences' timeouts checked once running.
  std::string due_frames() {
    std::string to_send;
    const bool room = !b_.events_->output_full();
    std::lock_guard lock(b_.mutex_);
    stopping_ = b_.stop_;
    killed_ = b_.killed_;
    for (auto& t : talks_)
      to_send += t->due_frames(room);
    if (!job_bytes_sent_ && !b_.job_bytes_frame_.empty()) {
      to_send = b_.job_bytes_frame_ + to_send;  // before any job frame
      job_bytes_sent_ = true;
    }
    if (std::any_of(talks_.begin(), talks_.end(), [](auto& t) { return t->running(); })) {
      for (const pmix_server::FenceResult& r : b_.fences_->expire(Clock::now()))
        b_.deliver(r);
    }
    return to_send;
  }

  /// A frame on the channel: the channel's own host's, one routed from a host below, or a
  /// host below lost.
  void dispatch(ssh::Frame& f) {
    if (f.type == ssh::FrameType::kRouted) {
      HostTalk& t = talk_of(f.id);
      if (t.ended() && !t.done()) return;  // lost: what still comes from it is stale
      for (ssh::Frame& g : ssh::routed_frames(f.payload))
        t.on_frame(g);
      return;
    }
    if (f.type == ssh::FrameType::kLost) return on_lost(talk_of(f.id), f.payload);
    own().on_frame(f);
  }

  HostTalk& talk_of(int index) {
    const auto it = by_index_.find(index);
    if (it == by_index_.end()) {
      throw std::runtime_error("a frame for host " + std::to_string(index) +
                               ", which is not below " + c_.name + " in the launch tree");
    }
    return *it->second;
  }

  /// Host `t`, below this one, was lost (its tree parent said why): so are the hosts below it.
  void on_lost(HostTalk& t, const std::string& why) {
    HostConn& h = t.conn();
    const bool below_open = std::any_of(h.subtree.begin(), h.subtree.end(), [&](HostConn* d) {
      return !by_index_.at(d->route)->ended();
    });
    t.lost(ssh::tree_lost_text(why, static_cast<int>(h.subtree.size())), below_open);
    for (HostConn* d : h.subtree)
      by_index_.at(d->route)->lost_with(h.name);
  }

  /// Every host below this one goes with it.
  void lose_subtree() {
    for (size_t i = 1; i < talks_.size(); ++i)
      talks_[i]->lost_with(c_.name);
  }

  /// finish() while ranks still run (ddlrun is giving up): SIGKILL them, and close the channel
  /// after a grace even if the agent does not answer (it then kills them itself).
  void begin_stop(std::string& to_send) {
    if (!stopping_ || stop_deadline_ != Clock::time_point::max()) return;
    // Once SIGKILL went out ddlrun is leaving at once: only a moment to send it again.
    stop_deadline_ =
        Clock::now() + (killed_ ? std::chrono::milliseconds(500) : std::chrono::milliseconds(3000));
    for (auto& t : talks_)
      to_send += t->wrap(ssh::encode_frame(ssh::FrameType::kSignal, SIGKILL, {}));
  }

  /// The agent's own stderr: one note per line.
  void relay_stderr() {
    link_->read_stderr();
    for (std::string line; !(line = link_->take_line()).empty();)
      b_.events_->push(
          Event{Event::Type::kOutput, -1, c_.index, Stream::kStderr, c_.name + ": " + line, {}});
  }

  Step close() {
    const bool below_open = subtree_open();
    const int below = static_cast<int>(talks_.size()) - 1;
    // Closing must not wait for a host that cannot answer (nor hold up the Talker's others).
    if (!lost_.empty() || !link_->channel().flushed()) link_->session().stop_blocking();
    if (!lost_.empty()) {
      own().lost(ssh::tree_lost_text(lost_, below), below_open);
    } else if (!open_ && (own().has_unfinished() || below_open)) {
      own().lost(ssh::tree_lost_text(link_->closed_reason(b_.options_.ddlrun_path), below),
                 below_open);
    }
    lose_subtree();
    if (!own().running() && !own().passive()) b_.fail(c_, "stopped before the job started");
    return Step::kEnd;
  }

  SshBackend& b_;
  HostConn& c_;
  std::vector<std::unique_ptr<HostTalk>> talks_;  ///< c_'s, then those of the hosts below it
  std::map<int, HostTalk*> by_index_;             ///< the hosts below, by route
  /// Its channel: an agent that reads nothing (stopped, or its host cut off) never blocks this
  /// thread, nor so the other conversations of its Talker. Null when lost before it began.
  std::unique_ptr<ssh::AgentLink> link_;
  bool ended_ = false;           ///< lost before it began (take)
  bool job_bytes_sent_ = false;  ///< U went down the channel
  Clock::time_point stop_deadline_ = Clock::time_point::max();
  bool stopping_ = false;
  bool killed_ = false;
  bool open_ = true;
  std::string lost_;  ///< why it is lost by the launch's rules (AgentLink::lost_why)
};

// One of the head's talk threads: the conversations the login threads hand it, one turn each
// in turn. No turn waits on a host: reads take what came, writes what the remote window and the
// socket take (the rest waits in the conversation, which then asks for POLLOUT too). When a
// round read nothing, it waits in poll() on their sockets and its wake-up
// eventfd (a new conversation, the last login done, or room again for output in the
// supervisor's queue, so that the output windows go at once) for at most kPollMs, so frames
// queued by other threads (signals, stdin, fence results) go within that as they did per host.
// A conversation whose channel has no socket (a test double) makes the wait short.
class SshBackend::Talker {
 public:
  explicit Talker(SshBackend& backend)
      : b_(backend), wake_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    thread_ = std::thread([this] { run(); });
  }
  ~Talker() {
    join();
    if (wake_ >= 0) ::close(wake_);
  }
  void join() {
    if (thread_.joinable()) thread_.join();
  }
  /// Takes over `c`, logged in and its agent started.
  void hand(std::unique_ptr<Conversation> c) {
    {
      std::lock_guard lock(mutex_);
      inbox_.push_back(std::move(c));
    }
    wake();
  }
  void wake() {
    const uint64_t one = 1;
    if (wake_ >= 0) (void)!::write(wake_, &one, sizeof one);
  }

 private:
  using Step = Conversation::Step;

  void run() {
    const int waker = b_.events_->add_waker([this] { wake(); });
    while (take_inbox()) {
      bool heard = false;
      for (size_t i = 0; i < mine_.size();) {
        Step step = mine_[i]->run(Step::kTalk);
        if (step == Step::kClose) step = mine_[i]->run(Step::kClose);
        heard = heard || mine_[i]->heard();
        if (step == Step::kTalk) {
          ++i;
        } else {
          mine_.erase(mine_.begin() + static_cast<std::ptrdiff_t>(i));
        }
      }
      if (!heard) idle_wait();
    }
    b_.events_->remove_waker(waker);
  }

  /// Moves what was handed over into mine_; false when it has nothing to talk to and nothing
  /// more will come.
  bool take_inbox() {
    std::lock_guard lock(mutex_);
    for (auto& c : inbox_)
      mine_.push_back(std::move(c));
    inbox_.clear();
    return !mine_.empty() || b_.handing_.load();
  }

  void idle_wait() {
    std::vector<pollfd> fds{{wake_, POLLIN, 0}};
    bool every_fd = true;
    for (auto& c : mine_) {
      const int fd = c->fd();
      every_fd = every_fd && fd >= 0;
      const short out = c->socket_full() ? POLLOUT : 0;
      if (fd >= 0) fds.push_back({fd, static_cast<short>(POLLIN | out), 0});
    }
    ::poll(fds.data(), fds.size(), every_fd ? kPollMs : kShortPollMs);
    uint64_t n = 0;
    if (wake_ >= 0) (void)!::read(wake_, &n, sizeof n);
  }

  static constexpr int kShortPollMs = 2;
  SshBackend& b_;
  int wake_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Conversation>> inbox_;  ///< guarded by mutex_
  std::vector<std::unique_ptr<Conversation>> mine_;   ///< its thread's own
  std::thread thread_;
};

void SshBackend::start_pool() {
  std::vector<std::unique_ptr<Conversation>> conversations;
  for (auto& h : hosts_) {
    if (!h->first_level) continue;
    ssh::AgentTree::Kept kept = agents_->take(h->name);  // closed unless talked to
    if (has_ranks(*h) && h->phase != Phase::kFailed)
      conversations.push_back(std::make_unique<Conversation>(*this, *h, std::move(kept)));
  }
  const size_t n = conversations.size();
  const size_t talkers =
      std::min<size_t>((n + ssh::kHostsPerTalker - 1) / ssh::kHostsPerTalker, ssh::kTalkThreads);
  for (size_t i = 0; i < talkers; ++i)
    talkers_.push_back(std::make_unique<Talker>(*this));
  for (size_t i = 0; i < n; ++i)
    talkers_[i % talkers]->hand(std::move(conversations[i]));
  handing_ = false;
  for (auto& t : talkers_)
    t->wake();  // an idle one may end now
}

void SshBackend::join_pool() {
  for (auto& t : talkers_)
    t->join();
}

}  // namespace

std::unique_ptr<Backend> make_ssh_backend(const Job& job, const LaunchOptions& options,
                                          ddl::ssh::Connector& connector) {
  return std::make_unique<SshBackend>(job, options, connector);
}

std::unique_ptr<Backend> make_ssh_backend(const Job& job, const LaunchOptions& options) {
  return make_ssh_backend(job, options, ddl::ssh::libssh_connector());
}

const BackendDescriptor kSshBackend{
    .name = "ssh",
    .auto_rank = 3,
    .automatic = [](const Situation&) { return true; },
    .why = "some hosts are remote",
    .why_auto = "some hosts are remote and no batch system was found",
    .make_backend = make_ssh_backend,
    .serves_pmix = true,
    .keeps_probe_sessions = true};

}  // namespace ddl::launcher
