// The local backend: every rank forked on this host by a ProcessSet, with the environment of
// rank_environment(), bound to its CPU set. The rendezvous ports are free ports of this host.
// ddlrun serves PMIx to its ranks (pmix_server/): one server, so a fence is complete as soon
// as the PMIx library has every rank's contribution, and no data is ever on another host.
// In per-node mode (LaunchOptions::only_host) it starts only this host's ranks, without PMIx,
// and they meet the other nodes' at node 0 (rendezvous_host, master_port).

#include "launcher/local/local.h"

#include <algorithm>

#include "launcher/pmix_server/server.h"
#include "launcher/process.h"

namespace ddl::launcher {

namespace {

class LocalBackend : public Backend, private pmix_server::Host {
 public:
  LocalBackend(const Job& job, const LaunchOptions& options) : job_(job), options_(options) {}
  ~LocalBackend() override { finish(); }

  std::string_view name() const override { return "local"; }

  std::vector<int> start(EventQueue& events) override {
    events_ = &events;
    procs_ = std::make_unique<ProcessSet>(events);
    const comm::Topology& t = job_.topology;
    std::vector<comm::RankPlacement> ranks = t.ranks;
    std::sort(ranks.begin(), ranks.end(),
              [](const auto& a, const auto& b) { return a.rank < b.rank; });
    Rendezvous rv;
    const comm::Host* host0 = ranks.empty() ? nullptr : t.find_host(ranks.front().host);
    rv.address = host0 != nullptr && !host0->address.empty() ? host0->address : "127.0.0.1";
    rv.master_port = options_.master_port != 0 ? options_.master_port : free_tcp_port();
    rv.ddl_address = kLocalRendezvousAddress;
    if (!options_.rendezvous_host.empty()) rv.address = rv.ddl_address = options_.rendezvous_host;
    rv.ddl_port = options_.rendezvous_port;
    const std::vector<std::string> base =
        options_.environ.empty() ? current_environment() : options_.environ;
    const Inherited inherited = inherited_from(base);
    std::vector<int> started;
    try {
      if (options_.pmix_server && !ranks.empty()) {
        pmix_ = pmix_server::Server::start("", *this);
        std::vector<int> hosts;
        for (const comm::Host& h : t.hosts)
          hosts.push_back(h.index);
        pmix_->register_job(job_, hosts);
      }
      for (const comm::RankPlacement& r : ranks) {
        if (options_.only_host && r.host != *options_.only_host) continue;
        SpawnSpec spec;
        spec.argv = job_.argv;
        std::vector<EnvVar> env = rank_environment(job_, r.rank, rv, job_.topology_path, inherited);
        if (pmix_)
          pmix_server::add_environment(env, pmix_->fork_environment(r.rank), job_.exports, base);
        spec.env = merge_environment(base, env);
        spec.cpus = r.cpus;
        spec.pipe_stdin = r.rank == 0;
        spec.cwd = job_.cwd;
        const comm::Host* h = t.find_host(r.host);
        procs_->start(r.rank, spec, h != nullptr ? h->name : "localhost");
        started.push_back(r.rank);
      }
    } catch (...) {
      procs_->finish();
      pmix_.reset();
      throw;
    }
    return started;
  }

  void signal(int sig) override {
    if (procs_) procs_->signal(sig);
  }
  void write_stdin(std::string_view data) override {
    if (procs_) procs_->write_stdin(0, data);
  }
  void close_stdin() override {
    if (procs_) procs_->close_stdin(0);
  }
  void finish() override {
    if (procs_) procs_->finish();
    pmix_.reset();
  }

 private:
  // pmix_server::Host, on PMIx's thread. One host: its contribution is the whole fence.
  void fence(pmix_server::Contribution c, pmix_server::DataDone done) override {
    done(0, std::move(c.data));
  }
  void abort(int rank, int status, const std::string& message) override {
    for (Event& e : pmix_server::abort_events(rank, status, message))
      events_->push(std::move(e));
  }
  void direct_modex(int, pmix_server::DataDone done) override {
    done(kNotFound, {});  // every rank is local: the PMIx library has all there is
  }
  static constexpr int kNotFound = -46;  // PMIX_ERR_NOT_FOUND

  Job job_;
  LaunchOptions options_;
  EventQueue* events_ = nullptr;
  std::unique_ptr<ProcessSet> procs_;
  std::unique_ptr<pmix_server::Server> pmix_;
};

}  // namespace

std::unique_ptr<Backend> make_local_backend(const Job& job, const LaunchOptions& options) {
  return std::make_unique<LocalBackend>(job, options);
}

const BackendDescriptor kLocalBackend{
    .name = "local",
    .auto_rank = 2,
    .automatic = [](const Situation& s) { return s.all_hosts_local; },
    .why = "every host is this host",
    .make_backend = make_local_backend,
    .serves_pmix = true,
    .runs_here = true};

}  // namespace ddl::launcher
