// What a rank is told, and the job as bytes for the agents.
//
// rank_environment() is the single place that decides the variables every rank starts with, so
// the local launcher, the ssh agents and `ddlrun --rank-exec` (under mpirun, srun, prterun and
// jsrun) give a program the same environment. encode_job()/decode_job() carry a Job to an agent
// as length-prefixed fields: every string travels byte for byte (quotes, newlines, NULs), so
// arguments arrive exactly as given.

#include "launcher/job.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>

#include "base/digest.h"
#include "base/net/codec.h"
#include "base/net/listener.h"

namespace ddl::launcher {

namespace {

/// True when `dir` is an environment's site-packages (or Debian's dist-packages), which holds
/// other packages than ddl: torch, numpy, ...
bool is_site_directory(const std::string& dir) {
  const size_t slash = dir.find_last_not_of('/');
  const std::string trimmed = dir.substr(0, slash == std::string::npos ? 0 : slash + 1);
  return trimmed.ends_with("/site-packages") || trimmed.ends_with("/dist-packages");
}

/// The PYTHONPATH rule of rank_environment(): job.python_dir's hook directory first, then
/// job.python_dir itself unless it is a whole site-packages (whose torch would replace that of
/// another interpreter the ranks run: the hook then serves ddl alone from it).
void add_python_path(const Job& job, const Inherited& inherited, std::vector<EnvVar>& env) {
  if (job.python_dir.empty()) return;
  const std::string ours = job.python_dir + "/ddl/_site" +
                           (is_site_directory(job.python_dir) ? "" : ":" + job.python_dir);
  const auto exported =
      std::find_if(env.begin(), env.end(), [](const EnvVar& e) { return e.first == "PYTHONPATH"; });
  const std::string rest = exported != env.end() ? exported->second : inherited.python_path;
  std::string value = ours;
  if (rest == ours || rest.rfind(ours + ":", 0) == 0) {
    value = rest;
  } else if (!rest.empty()) {
    value += ":" + rest;
  }
  set_variable(env, "PYTHONPATH", value);
}

}  // namespace

void set_variable(std::vector<EnvVar>& env, const std::string& name, const std::string& value) {
  const auto it =
      std::find_if(env.begin(), env.end(), [&](const EnvVar& e) { return e.first == name; });
  if (it == env.end()) {
    env.emplace_back(name, value);
  } else {
    it->second = value;
  }
}

Inherited inherited_from(const std::vector<std::string>& environ) {
  Inherited in;
  for (const std::string& e : environ) {
    if (e.rfind("OMP_NUM_THREADS=", 0) == 0 && e.size() > 16) in.omp_num_threads = true;
    if (e.rfind("PYTHONPATH=", 0) == 0) in.python_path = e.substr(11);
  }
  return in;
}

using base::net::put_str;
using base::net::put_u32;

std::vector<EnvVar> rank_environment(const Job& job, int rank, const Rendezvous& rendezvous,
                                     const std::string& topology_path, const Inherited& inherited) {
  const comm::Topology& t = job.topology;
  const comm::RankPlacement* r = t.find_rank(rank);
  if (r == nullptr) {
    throw comm::TopologyError("rank " + std::to_string(rank) + " is not in the topology of job " +
                              t.job_id + " (it has " + std::to_string(t.ranks.size()) + " ranks)");
  }
  int local_size = 0;
  for (const comm::RankPlacement& p : t.ranks)
    local_size += p.host == r->host ? 1 : 0;
  const std::string size = std::to_string(t.ranks.size());
  std::vector<EnvVar> env = {
      {"DDL_RANK", std::to_string(rank)},
      {"DDL_SIZE", size},
      {"DDL_LOCAL_RANK", std::to_string(r->local_rank)},
      {"DDL_LOCAL_SIZE", std::to_string(local_size)},
      {"DDL_HOST_INDEX", std::to_string(r->host)},
      {"DDL_NUM_HOSTS", std::to_string(t.hosts.size())},
      {"DDL_GPU", std::to_string(r->gpu)},
      {"DDL_CPUS", r->cpus.str()},
      {"DDL_JOB_ID", t.job_id},
      {"DDL_TOPOLOGY_FILE", topology_path},
      {"DDL_RENDEZVOUS",
       base::net::join_host_port(
           rendezvous.ddl_address.empty() ? rendezvous.address : rendezvous.ddl_address,
           rendezvous.ddl_port)},
      {"DDL_JOB_TOKEN", job.token},
      {"DDL_OPTIONS", "-mode " + t.mode.str()},
      {"RANK", std::to_string(rank)},
      {"LOCAL_RANK", std::to_string(r->local_rank)},
      {"WORLD_SIZE", size},
      {"LOCAL_WORLD_SIZE", std::to_string(local_size)},
      {"GROUP_RANK", std::to_string(r->host)},
      {"ROLE_RANK", std::to_string(rank)},
      {"ROLE_WORLD_SIZE", size},
      {"MASTER_ADDR", rendezvous.address},
      {"MASTER_PORT", std::to_string(rendezvous.master_port)},
  };
  if (!inherited.omp_num_threads && !r->cpus.empty()) {
    int cores = static_cast<size_t>(rank) < job.cores.size() ? job.cores[rank] : 0;
    if (cores <= 0) cores = r->cpus.size();
    env.emplace_back("OMP_NUM_THREADS", std::to_string(cores));
  }
  for (const EnvVar& e : job.exports)
    set_variable(env, e.first, e.second);
  add_python_path(job, inherited, env);
  return env;
}

std::string encode_job(const Job& job) {
  std::string out = "DDLJOB2";
  put_str(out, comm::format_topology(job.topology));
  put_u32(out, static_cast<uint32_t>(job.argv.size()));
  for (const std::string& a : job.argv)
    put_str(out, a);
  put_u32(out, static_cast<uint32_t>(job.exports.size()));
  for (const EnvVar& e : job.exports) {
    put_str(out, e.first);
    put_str(out, e.second);
  }
  put_str(out, job.topology_path);
  put_str(out, job.token);
  put_str(out, job.cwd);
  put_u32(out, static_cast<uint32_t>(job.cores.size()));
  for (int c : job.cores)
    put_u32(out, static_cast<uint32_t>(c));
  put_str(out, job.python_dir);
  return out;
}

Job decode_job(const std::string& bytes) {
  if (bytes.rfind("DDLJOB2", 0) != 0) throw std::runtime_error("malformed job: bad header");
  base::net::Decoder in(std::string_view(bytes).substr(7), "job");
  Job job;
  job.topology = comm::parse_topology(in.str(), "the job's topology");
  for (uint32_t n = in.count(4); n > 0; --n)
    job.argv.push_back(in.str());
  for (uint32_t n = in.count(8); n > 0; --n) {
    std::string k = in.str();
    job.exports.emplace_back(std::move(k), in.str());
  }
  job.topology_path = in.str();
  job.token = in.str();
  job.cwd = in.str();
  for (uint32_t n = in.count(4); n > 0; --n)
    job.cores.push_back(in.i32());
  job.python_dir = in.str();
  in.expect_done();
  return job;
}

namespace {

/// Listens on the wildcard address at `port` (0: the kernel picks; base::net::listen_tcp) and
/// returns the port it got, 0 when it cannot. The socket is closed again.
int bind_wildcard(int port) {
  const base::net::Listening l = base::net::listen_tcp("", port, 1);
  if (l.fd >= 0) close(l.fd);
  return l.fd >= 0 ? l.port : 0;
}

}  // namespace

int free_tcp_port() {
  // The port is released before the rank that serves it binds it (torch's store, seconds
  // later), so it is taken below the kernel's ephemeral range: no socket bound to port 0 and
  // no outgoing connection can be given it meanwhile, as could happen with an ephemeral one
  // on a busy host (two jobs then meet at one store and wait for each other forever).
  int low = 32768;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    int lo = 0, hi = 0;
    if (std::fscanf(f, "%d %d", &lo, &hi) == 2 && lo > 0) low = lo;
    std::fclose(f);
  }
  constexpr int kFirst = 20000;
  if (low > kFirst + 1000) {
    std::random_device seed;
    std::mt19937 pick(seed());
    std::uniform_int_distribution<int> port(kFirst, low - 1);
    for (int tries = 0; tries < 64; ++tries) {
      const int p = port(pick);
      if (bind_wildcard(p) == p) return p;
    }
  }
  return bind_wildcard(0);
}

std::string make_token() {
  try {
    return base::hex(base::random_bytes(32));
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("cannot make the job's token: ") + e.what());
  }
}

}  // namespace ddl::launcher
