// ddlrun's PMIx server (server.h): PMIx_server_init, the job's namespace and clients, and the
// upcalls handed to the launcher's Host.

#include "launcher/pmix_server/server.h"

#include <pmix.h>
#include <pmix_server.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <mutex>
#include <vector>

#include "base/check.h"
#include "launcher/backend.h"
#include "launcher/keeper.h"
#include "launcher/pmix_topo.h"

namespace ddl::launcher::pmix_server {

struct Server::Impl {
  Host* host = nullptr;
  std::string nspace;
  JobLayout layout;
  std::vector<int> local;  ///< this host's ranks
  mutable std::mutex mutex;
  std::map<int, ClientState> states;
  std::map<std::string, int> fences_seen;  ///< by participants: fences so far
  /// False once the server is going: callbacks from the Host that come later are dropped.
  std::shared_ptr<std::atomic<bool>> alive = std::make_shared<std::atomic<bool>>(true);
};

namespace {

// PMIx's upcalls carry no context of ours: the job of this process's server. PMIx is
// initialized once per process and never finalized: PMIx 4.2 cannot start a server again in
// a process where PMIx_server_finalize ran (its listener thread aborts on a closed fd), and
// ddlrun's tests run several jobs in one process.
std::mutex g_mutex;
std::shared_ptr<Server::Impl> g_impl;
bool g_initialized = false;
std::string g_owned_dir;  ///< the directory made for PMIx's files when none was given
std::function<HostTopology()> g_topology_source;  ///< provide_host_topology()'s

std::shared_ptr<Server::Impl> current() {
  std::lock_guard lock(g_mutex);
  return g_impl;
}

void remove_owned_dir() {
  std::error_code ec;
  if (!g_owned_dir.empty()) std::filesystem::remove_all(g_owned_dir, ec);
}

std::string status_text(pmix_status_t rc) {
  return PMIx_Error_string(rc);
}

/// Waits for a PMIx operation that reports through a pmix_op_cbfunc_t.
struct Waiter {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  pmix_status_t status = PMIX_SUCCESS;

  static void callback(pmix_status_t status, void* cbdata) {
    auto* w = static_cast<Waiter*>(cbdata);
    // Notified under the lock: a waiter whose deadline passed may see `done`, delete itself
    // and its condition variable as soon as it has the lock.
    std::lock_guard lock(w->mutex);
    w->status = status;
    w->done = true;
    w->cv.notify_all();
  }
};

/// How long the end of a job waits for PMIx to deregister its clients (deregister()).
constexpr std::chrono::seconds kDeregisterWait{5};

/// An operation started with a Waiter (start_op); `waiter` is null when PMIx answered at once,
/// with `status`.
struct Started {
  Waiter* waiter = nullptr;
  pmix_status_t status = PMIX_SUCCESS;
};

/// Runs `call`, which starts the operation with the callback and its data and returns what PMIx
/// returned.
template <typename Call>
Started start_op(Call call) {
  auto* w = new Waiter;
  const pmix_status_t rc = call(&Waiter::callback, static_cast<void*>(w));
  if (rc == PMIX_SUCCESS) return {w, PMIX_SUCCESS};
  delete w;
  return {nullptr, rc == PMIX_OPERATION_SUCCEEDED ? PMIX_SUCCESS : rc};
}

/// The answer to `op`: PMIX_ERR_TIMEOUT when none came by `deadline`, in which case the waiter
/// is left to PMIx, which may still answer.
pmix_status_t await_op(const Started& op, std::chrono::steady_clock::time_point deadline) {
  Waiter* w = op.waiter;
  if (w == nullptr) return op.status;
  bool answered;
  {
    std::unique_lock lock(w->mutex);
    answered = w->cv.wait_until(lock, deadline, [w] { return w->done; });
  }
  if (!answered) return PMIX_ERR_TIMEOUT;
  const pmix_status_t status = w->status;
  delete w;
  return status;
}

/// start_op, then await_op within `limit`.
template <typename Call>
pmix_status_t wait_op(Call call, std::chrono::seconds limit = std::chrono::seconds(30)) {
  return await_op(start_op(call), std::chrono::steady_clock::now() + limit);
}

void set_state(const pmix_proc_t* proc, ClientState state) {
  std::shared_ptr<Server::Impl> s = current();
  if (s == nullptr || proc == nullptr) return;
  std::lock_guard lock(s->mutex);
  s->states[static_cast<int>(proc->rank)] = state;
}

pmix_status_t on_connected(const pmix_proc_t* proc, void*, pmix_op_cbfunc_t cbfunc, void* cbdata) {
  set_state(proc, ClientState::kConnected);
  if (cbfunc != nullptr) cbfunc(PMIX_SUCCESS, cbdata);
  return PMIX_SUCCESS;
}

pmix_status_t on_finalized(const pmix_proc_t* proc, void*, pmix_op_cbfunc_t cbfunc, void* cbdata) {
  set_state(proc, ClientState::kFinalized);
  if (cbfunc != nullptr) cbfunc(PMIX_SUCCESS, cbdata);
  return PMIX_SUCCESS;
}

pmix_status_t on_abort(const pmix_proc_t* proc, void*, int status, const char msg[], pmix_proc_t[],
                       size_t, pmix_op_cbfunc_t cbfunc, void* cbdata) {
  // Every process of the job goes (what ddlrun does on any failure), whichever `procs` named.
  if (std::shared_ptr<Server::Impl> s = current(); s != nullptr && proc != nullptr) {
    s->host->abort(static_cast<int>(proc->rank), status, msg != nullptr ? msg : "");
  }
  if (cbfunc != nullptr) cbfunc(PMIX_SUCCESS, cbdata);
  return PMIX_SUCCESS;
}

void release_blob(void* cbdata) {
  std::free(cbdata);
}

/// A DataDone that hands the bytes to PMIx's modex callback (PMIx frees them through
/// release_blob), unless the server has gone meanwhile.
DataDone modex_done(const std::shared_ptr<std::atomic<bool>>& alive, pmix_modex_cbfunc_t cbfunc,
                    void* cbdata) {
  return [alive, cbfunc, cbdata](int status, std::string bytes) {
    if (!*alive || cbfunc == nullptr) return;
    char* copy = nullptr;
    if (!bytes.empty()) {
      copy = static_cast<char*>(std::malloc(bytes.size()));
      std::memcpy(copy, bytes.data(), bytes.size());
    }
    cbfunc(status, copy, bytes.size(), cbdata, release_blob, copy);
  };
}

int timeout_of(const pmix_info_t info[], size_t ninfo) {
  for (size_t i = 0; i < ninfo; ++i) {
    if (!PMIX_CHECK_KEY(&info[i], PMIX_TIMEOUT)) continue;
    const pmix_value_t& v = info[i].value;
    switch (v.type) {
      case PMIX_INT:
        return v.data.integer;
      case PMIX_INT32:
        return v.data.int32;
      case PMIX_UINT32:
        return static_cast<int>(v.data.uint32);
      default:
        return 0;
    }
  }
  return 0;
}

pmix_status_t on_fence(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[],
                       size_t ninfo, char* data, size_t ndata, pmix_modex_cbfunc_t cbfunc,
                       void* cbdata) {
  std::shared_ptr<Server::Impl> s = current();
  if (s == nullptr) return PMIX_ERR_NOT_AVAILABLE;
  Contribution c;
  bool all = nprocs == 0;
  for (size_t i = 0; i < nprocs; ++i) {
    if (procs[i].rank == PMIX_RANK_WILDCARD) all = true;
    c.participants.push_back(static_cast<int>(procs[i].rank));
  }
  std::sort(c.participants.begin(), c.participants.end());
  c.participants.erase(std::unique(c.participants.begin(), c.participants.end()),
                       c.participants.end());
  if (all) c.participants.clear();
  std::string signature = all ? "*" : "";
  for (size_t i = 0; !all && i < c.participants.size(); ++i)
    signature += (i > 0 ? "," : "") + std::to_string(c.participants[i]);
  {
    std::lock_guard lock(s->mutex);
    c.key = signature + "#" + std::to_string(s->fences_seen[signature]++);
  }
  c.timeout_s = timeout_of(info, ninfo);
  if (data != nullptr && ndata > 0) c.data.assign(data, ndata);
  s->host->fence(std::move(c), modex_done(s->alive, cbfunc, cbdata));
  return PMIX_SUCCESS;
}

pmix_status_t on_direct_modex(const pmix_proc_t* proc, const pmix_info_t[], size_t,
                              pmix_modex_cbfunc_t cbfunc, void* cbdata) {
  std::shared_ptr<Server::Impl> s = current();
  if (s == nullptr || proc == nullptr) return PMIX_ERR_NOT_AVAILABLE;
  if (s->nspace != proc->nspace) return PMIX_ERR_NOT_FOUND;
  s->host->direct_modex(static_cast<int>(proc->rank), modex_done(s->alive, cbfunc, cbdata));
  return PMIX_SUCCESS;
}

void dmodex_response(pmix_status_t status, char* data, size_t size, void* cbdata) {
  std::unique_ptr<DataDone> done(static_cast<DataDone*>(cbdata));
  (*done)(status, data != nullptr ? std::string(data, size) : std::string());
}

/// A PMIx info list being built (PMIx_Info_list_*), released when it goes.
class InfoList {
 public:
  /// A key and where its value is (PMIx copies it).
  struct Entry {
    const char* key;
    const void* value;
    pmix_data_type_t type;
  };
  InfoList() : list_(PMIx_Info_list_start()) {}
  ~InfoList() { PMIx_Info_list_release(list_); }
  InfoList(const InfoList&) = delete;
  InfoList& operator=(const InfoList&) = delete;

  /// Adds the entries in order; throws LaunchError naming the first key PMIx refuses.
  void add(std::initializer_list<Entry> entries) {
    for (const Entry& e : entries) {
      const pmix_status_t rc = PMIx_Info_list_add(list_, e.key, e.value, e.type);
      if (rc != PMIX_SUCCESS) {
        throw LaunchError(std::string("PMIx server: cannot describe the job (") + e.key +
                          "): " + status_text(rc));
      }
    }
  }
  void* get() const { return list_; }

 private:
  void* list_;
};

/// An info list converted into an array (PMIx_Info_list_convert), destructed when it goes.
class InfoArray {
 public:
  explicit InfoArray(const InfoList& list) { PMIx_Info_list_convert(list.get(), &array_); }
  ~InfoArray() { PMIX_DATA_ARRAY_DESTRUCT(&array_); }
  InfoArray(const InfoArray&) = delete;
  InfoArray& operator=(const InfoArray&) = delete;
  pmix_data_array_t* get() { return &array_; }

 private:
  pmix_data_array_t array_{};
};

/// A string PMIx allocated (a regex), freed when it goes.
struct PmixText {
  char* text = nullptr;
  PmixText() = default;
  PmixText(const PmixText&) = delete;
  PmixText& operator=(const PmixText&) = delete;
  ~PmixText() { std::free(text); }
};

/// Collects the ranks of this host, which holds the hosts `host_indices`, into s.local (sorted);
/// returns the node of the first such host.
const JobLayout::Node& take_local_ranks(Server::Impl& s, const std::vector<int>& host_indices,
                                        const std::string& job_id) {
  const JobLayout::Node* me = nullptr;
  for (int h : host_indices) {
    const JobLayout::Node* n = s.layout.node(h);
    if (n == nullptr) continue;
    if (me == nullptr) me = n;
    s.local.insert(s.local.end(), n->ranks.begin(), n->ranks.end());
  }
  std::sort(s.local.begin(), s.local.end());
  DDL_CHECK(me != nullptr, "PMIx server: this host has no ranks in job " + job_id);
  return *me;
}

/// Rank `r` as PMIx describes it (PMIX_PROC_DATA): its ranks, app, node and host name.
InfoArray rank_info(const JobLayout& layout, int r) {
  const JobLayout::Node& node = layout.nodes[layout.node_of[r]];
  const pmix_rank_t rank = static_cast<pmix_rank_t>(r);
  const uint16_t local_rank = static_cast<uint16_t>(layout.local_rank[r]);
  const uint32_t node_id = static_cast<uint32_t>(layout.node_of[r]);
  const uint32_t zero = 0;
  InfoList proc;
  proc.add({{PMIX_RANK, &rank, PMIX_PROC_RANK},
            {PMIX_APPNUM, &zero, PMIX_UINT32},
            {PMIX_APP_RANK, &rank, PMIX_PROC_RANK},
            {PMIX_GLOBAL_RANK, &rank, PMIX_PROC_RANK},
            {PMIX_LOCAL_RANK, &local_rank, PMIX_UINT16},
            {PMIX_NODE_RANK, &local_rank, PMIX_UINT16},
            {PMIX_NODEID, &node_id, PMIX_UINT32},
            {PMIX_HOSTNAME, node.name.c_str(), PMIX_STRING}});
  return InfoArray(proc);
}

/// The job's namespace as this host's server registers it (`local`: this host's ranks, `me`:
/// its node): sizes, the node and process maps, this node's peers and leader, and every rank's
/// rank_info().
InfoArray job_info(const Job& job, const JobLayout& layout, const std::vector<int>& local,
                   const JobLayout::Node& me) {
  InfoList list;
  PmixText node_map, proc_map;
  pmix_status_t rc = PMIx_generate_regex(layout.node_list().c_str(), &node_map.text);
  if (rc == PMIX_SUCCESS) rc = PMIx_generate_ppn(layout.proc_list().c_str(), &proc_map.text);
  if (rc != PMIX_SUCCESS) {
    throw LaunchError("PMIx server: cannot encode the node map: " + status_text(rc));
  }
  const uint32_t size = static_cast<uint32_t>(layout.size());
  const uint32_t num_nodes = static_cast<uint32_t>(layout.nodes.size());
  const uint32_t local_size = static_cast<uint32_t>(local.size());
  const uint32_t one = 1;
  const pmix_rank_t leader = static_cast<pmix_rank_t>(local.front());
  std::string peers;
  for (int r : local)
    peers += (peers.empty() ? "" : ",") + std::to_string(r);
  list.add({{PMIX_JOBID, job.topology.job_id.c_str(), PMIX_STRING},
            {PMIX_UNIV_SIZE, &size, PMIX_UINT32},
            {PMIX_JOB_SIZE, &size, PMIX_UINT32},
            {PMIX_MAX_PROCS, &size, PMIX_UINT32},
            {PMIX_JOB_NUM_APPS, &one, PMIX_UINT32},
            {PMIX_APP_SIZE, &size, PMIX_UINT32},
            {PMIX_NUM_NODES, &num_nodes, PMIX_UINT32},
            {PMIX_NODE_MAP, node_map.text, PMIX_REGEX},
            {PMIX_PROC_MAP, proc_map.text, PMIX_REGEX},
            {PMIX_HOSTNAME, me.name.c_str(), PMIX_STRING},
            {PMIX_LOCAL_PEERS, peers.c_str(), PMIX_STRING},
            {PMIX_LOCAL_SIZE, &local_size, PMIX_UINT32},
            {PMIX_NODE_SIZE, &local_size, PMIX_UINT32},
            {PMIX_LOCALLDR, &leader, PMIX_PROC_RANK}});
  for (int r = 0; r < layout.size(); ++r) {
    InfoArray proc = rank_info(layout, r);
    list.add({{PMIX_PROC_DATA, proc.get(), PMIX_DATA_ARRAY}});
  }
  return InfoArray(list);
}

/// Registers this host's ranks as the namespace's clients: all asked for, then all awaited (one
/// round trip to PMIx's thread, not one a rank).
void register_clients(const Server::Impl& s) {
  std::vector<pmix_proc_t> procs(s.local.size());
  std::vector<Started> ops;
  for (size_t i = 0; i < s.local.size(); ++i) {
    PMIX_PROC_LOAD(&procs[i], s.nspace.c_str(), static_cast<pmix_rank_t>(s.local[i]));
    ops.push_back(start_op([&](pmix_op_cbfunc_t cb, void* data) {
      return PMIx_server_register_client(&procs[i], getuid(), getgid(), nullptr, cb, data);
    }));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::string failure;
  for (size_t i = 0; i < ops.size(); ++i) {
    const pmix_status_t rc = await_op(ops[i], deadline);
    if (rc != PMIX_SUCCESS && failure.empty()) {
      failure = "PMIx server: cannot register rank " + std::to_string(s.local[i]) + ": " +
                status_text(rc);
    }
  }
  if (!failure.empty()) throw LaunchError(failure);
}

/// Deregisters the job's clients `clients` and then its namespace `nspace`, waiting for PMIx
/// at most kDeregisterWait in all (it handles requests in order, so a later job's registration
/// comes after these). Each call takes a callback: without one, PMIx 4.2 blocks until its
/// thread has done the work, and that thread can be stuck for good (deregistering a client
/// whose connection it refused, it waited on a lock that held garbage, and ddlrun hung at the
/// end of the job until SIGKILL). What is not answered in time is left to PMIx.
void deregister(const std::string& nspace, const std::vector<int>& clients) {
  std::vector<Started> ops;
  for (int r : clients) {
    ops.push_back(start_op([&](pmix_op_cbfunc_t cb, void* data) {
      pmix_proc_t proc;
      PMIX_PROC_LOAD(&proc, nspace.c_str(), static_cast<pmix_rank_t>(r));
      PMIx_server_deregister_client(&proc, cb, data);
      return PMIX_SUCCESS;
    }));
  }
  ops.push_back(start_op([&](pmix_op_cbfunc_t cb, void* data) {
    PMIx_server_deregister_nspace(nspace.c_str(), cb, data);
    return PMIX_SUCCESS;
  }));
  const auto deadline = std::chrono::steady_clock::now() + kDeregisterWait;
  for (const Started& op : ops)
    await_op(op, deadline);
}

}  // namespace

void add_environment(std::vector<EnvVar>& env, std::vector<EnvVar> pmix,
                     const std::vector<EnvVar>& exports, const std::vector<std::string>& base) {
  for (EnvVar& v : pmix) {
    const bool exported = std::any_of(exports.begin(), exports.end(),
                                      [&](const EnvVar& x) { return x.first == v.first; });
    const bool inherited = v.first.rfind("OMPI_MCA_", 0) == 0 &&
                           std::any_of(base.begin(), base.end(), [&](const std::string& e) {
                             return e.rfind(v.first + "=", 0) == 0;
                           });
    if (!exported && !inherited) env.push_back(std::move(v));
  }
}

std::vector<Event> abort_events(int rank, int status, const std::string& message) {
  Event line;
  line.type = Event::Type::kOutput;
  line.rank = rank;
  line.stream = Stream::kStderr;
  line.data = "PMIx_Abort(status " + std::to_string(status) + ")" +
              (message.empty() ? std::string() : ": " + message) + "\n";
  Event exit;
  exit.type = Event::Type::kExit;
  exit.rank = rank;
  exit.status.code = status != 0 ? status : 1;
  return {line, exit};
}

namespace {

/// This host's topology for PMIx_server_init (topology.h), loaded once per process and never
/// freed, since PMIx keeps it; nullptr when none was provided or it could not be had.
pmix_topology_t* given_topology() {
  static HostTopology host;
  static pmix_topology_t topology = [] {
    pmix_topology_t t{};
    if (g_topology_source) {
      try {
        host = g_topology_source();
      } catch (const std::exception&) {
        host = HostTopology{};  // PMIx then tries for itself
      }
    }
    t.source = host.source.data();
    t.topology = host.topology;
    return t;
  }();
  return topology.topology != nullptr ? &topology : nullptr;
}

/// A private directory for PMIx's files, removed at exit (and by the keeper should ddlrun die).
std::string make_owned_dir() {
  const char* t = std::getenv("TMPDIR");
  std::string dir = std::string(t != nullptr && *t != '\0' ? t : "/tmp") + "/ddlrun-pmix.XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) {
    throw LaunchError("cannot create a directory like " + dir + " for the PMIx server: " +
                      std::strerror(errno) + " (set TMPDIR to a writable directory)");
  }
  g_owned_dir = dir;
  std::atexit(remove_owned_dir);
  keeper_remove_dir(dir);
  return dir;
}

/// PMIx_server_init with ddlrun's upcalls, PMIx's files in `dir` and this host's topology.
void init_pmix(const std::string& dir) {
  static pmix_server_module_t module = [] {
    pmix_server_module_t m;
    std::memset(&m, 0, sizeof m);
    m.client_connected = on_connected;
    m.client_finalized = on_finalized;
    m.abort = on_abort;
    m.fence_nb = on_fence;
    m.direct_modex = on_direct_modex;
    return m;
  }();
  // The job's data stays in the server (gds "hash"), not in shared-memory stores (ds21,
  // ds12) whose process-shared locks a rank killed at the wrong moment leaves held. PMIx
  // reads this once, here (PMIX_MCA_gds in ddlrun's environment wins).
  setenv("PMIX_MCA_gds", "hash", 0);
  pmix_info_t info[4];
  for (pmix_info_t& i : info)
    PMIX_INFO_CONSTRUCT(&i);
  bool no = false;
  PMIX_INFO_LOAD(&info[0], PMIX_SERVER_TOOL_SUPPORT, &no, PMIX_BOOL);
  PMIX_INFO_LOAD(&info[1], PMIX_SERVER_TMPDIR, dir.c_str(), PMIX_STRING);
  PMIX_INFO_LOAD(&info[2], PMIX_SYSTEM_TMPDIR, dir.c_str(), PMIX_STRING);
  size_t ninfo = 3;
  if (pmix_topology_t* topology = given_topology()) {
    // By hand, not PMIX_INFO_LOAD (which copies the topology): PMIx keeps this pointer.
    PMIX_LOAD_KEY(info[3].key, PMIX_TOPOLOGY2);
    info[3].value.type = PMIX_TOPO;
    info[3].value.data.topo = topology;
    ninfo = 4;
  }
  const pmix_status_t rc = PMIx_server_init(&module, info, ninfo);
  for (size_t i = 0; i < 3; ++i)
    PMIX_INFO_DESTRUCT(&info[i]);
  if (rc != PMIX_SUCCESS) {
    throw LaunchError("cannot start the PMIx server (files in " + dir +
                      "): PMIx_server_init: " + status_text(rc));
  }
}

}  // namespace

std::unique_ptr<Server> Server::start(const std::string& tmpdir, Host& host) {
  std::lock_guard lock(g_mutex);
  DDL_CHECK(g_impl == nullptr, "a PMIx server already serves a job in this process");
  if (!g_initialized) {
    init_pmix(tmpdir.empty() ? make_owned_dir() : tmpdir);
    g_initialized = true;
  }
  std::unique_ptr<Server> server(new Server());
  server->impl_ = std::make_shared<Impl>();
  server->impl_->host = &host;
  g_impl = server->impl_;
  return server;
}

Server::~Server() {
  if (!impl_) return;
  *impl_->alive = false;
  {
    std::lock_guard lock(g_mutex);
    g_impl.reset();
  }
  if (nspace_.empty()) return;
  // Only the clients that connected: one that never did has nothing in PMIx but its
  // registration, which the namespace's deregistration removes, and deregistering one whose
  // connection PMIx refused (another user's process) leaves PMIx 4.2's thread stuck for good.
  // (Under load that thread can get stuck all the same: hence deregister()'s deadline.)
  std::vector<int> connected;
  {
    std::lock_guard lock(impl_->mutex);
    for (int r : impl_->local) {
      auto it = impl_->states.find(r);
      if (it != impl_->states.end() && it->second != ClientState::kNotConnected)
        connected.push_back(r);
    }
  }
  deregister(nspace_, connected);
}

void Server::register_job(const Job& job, const std::vector<int>& host_indices) {
  Impl& s = *impl_;
  s.layout = make_layout(job.topology);
  const JobLayout::Node& me = take_local_ranks(s, host_indices, job.topology.job_id);
  s.nspace = "ddlrun." + (job.topology.job_id.empty() ? std::string("job") : job.topology.job_id);
  if (s.nspace.size() > PMIX_MAX_NSLEN) s.nspace.resize(PMIX_MAX_NSLEN);
  {
    std::lock_guard lock(s.mutex);
    for (int r : s.local)
      s.states[r] = ClientState::kNotConnected;
  }
  pmix_status_t rc;
  {
    InfoArray all = job_info(job, s.layout, s.local, me);
    rc = wait_op([&](pmix_op_cbfunc_t cb, void* data) {
      return PMIx_server_register_nspace(s.nspace.c_str(), static_cast<int>(s.local.size()),
                                         static_cast<pmix_info_t*>(all.get()->array),
                                         all.get()->size, cb, data);
    });
  }
  if (rc != PMIX_SUCCESS) {
    throw LaunchError("PMIx server: cannot register namespace " + s.nspace + ": " +
                      status_text(rc));
  }
  nspace_ = s.nspace;
  register_clients(s);
}

std::vector<EnvVar> Server::fork_environment(int rank) {
  pmix_proc_t proc;
  PMIX_PROC_LOAD(&proc, nspace_.c_str(), static_cast<pmix_rank_t>(rank));
  char** env = nullptr;
  const pmix_status_t rc = PMIx_server_setup_fork(&proc, &env);
  std::vector<EnvVar> out;
  for (char** e = env; e != nullptr && *e != nullptr; ++e) {
    const std::string var(*e);
    const size_t eq = var.find('=');
    if (eq != std::string::npos) out.emplace_back(var.substr(0, eq), var.substr(eq + 1));
    std::free(*e);
  }
  std::free(env);
  // Open MPI 4.1 takes a process that no orted started for a singleton unless its "schizo"
  // recognizes the launcher (Slurm, Flux, ALPS, JSM only); without schizo/orte it uses ess/pmi,
  // the PMIx client, as under srun.
  out.emplace_back("OMPI_MCA_schizo", "^orte");
  if (rc != PMIX_SUCCESS) {
    throw LaunchError("PMIx server: cannot prepare rank " + std::to_string(rank) +
                      "'s environment: " + status_text(rc));
  }
  return out;
}

void Server::local_modex(int rank, DataDone done) {
  pmix_proc_t proc;
  PMIX_PROC_LOAD(&proc, nspace_.c_str(), static_cast<pmix_rank_t>(rank));
  auto* cb = new DataDone(std::move(done));
  const pmix_status_t rc = PMIx_server_dmodex_request(&proc, dmodex_response, cb);
  if (rc != PMIX_SUCCESS) {
    std::unique_ptr<DataDone> owned(cb);
    (*owned)(rc, {});
  }
}

}  // namespace ddl::launcher::pmix_server

namespace ddl::launcher {

void provide_host_topology(std::function<HostTopology()> load) {
  std::lock_guard lock(pmix_server::g_mutex);
  pmix_server::g_topology_source = std::move(load);
}

}  // namespace ddl::launcher
