// Plans whole machines offline from an hwloc XML recording, the way
// `ddlrun --dry-run --host-xml '*=FILE' -H node[0001-4608]` does, and prints the time of each
// phase, the peak RSS and the topology file's size, beside Open MPI's mapper on the same hosts.
//
// Usage: plan_bench [--quick] [--no-peer] [--topologies DIR] [DIR]
//   --quick       only the small sizes (a smoke run; ctest bench.plan_smoke)
//   --no-peer     do not run Open MPI's mpirun
//   --topologies  where summit-ac922.xml and gpu8-nic-per-pair.xml are (default: the source
//                 tree's tests/topologies)
//   DIR           where to write the topology files (default: a new directory under $TMPDIR)
//
// How it works: every scenario runs in a fresh process (this program re-executed with
// --child-plan), which loads the XML, expands the host list, places, draws the rings, writes the
// file and reads it back, then reports its VmHWM. A second fresh process (--child-read) reads the
// file alone: what one rank pays at init. The peer, `mpirun --do-not-launch --display-map`, runs
// in a private network namespace holding only loopback, with a launch agent of /bin/false: it
// looks the host names up (they end in .invalid), and outside the namespace that would be DNS
// traffic. Its map is checked (one "Process rank" line per rank) before its numbers are shown.

#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/subprocess.h"
#include "comm/comm.h"
#include "hostfiles/hostfiles.h"
#include "mapper/place.h"
#include "mapper/probe_hwloc.h"
#include "mapper/racks.h"

#ifndef DDL_TOPOLOGIES_DIR
#define DDL_TOPOLOGIES_DIR "tests/topologies"
#endif

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kPeerTimeoutS = 120;
constexpr double kTargetSeconds = 0.5;
constexpr double kTargetMiB = 256;

struct Scenario {
  const char* name;
  const char* xml;     // file name under the topologies folder
  int hosts_per_rack;  // racks of this many hosts when they divide the host count
  int gpus;            // GPUs per host, for the peer's slots=
  int hosts;
};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// This process's peak resident set (VmHWM) in KiB, -1 when unknown.
long vm_hwm_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  }
  return -1;
}

std::string self_exe() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return {};
  buf[n] = '\0';
  return buf;
}

// ---- children: one scenario each, in a fresh process --------------------------------------

// --child-plan XML HOSTS HOSTS_PER_RACK PATH: plans and prints one line of results.
int child_plan(const std::string& xml, int hosts, int hosts_per_rack, const std::string& path) {
  namespace mapper = ddl::mapper;
  const Clock::time_point start = Clock::now();
  Clock::time_point t = start;
  const auto lap = [&t] {
    const double s = seconds_since(t);
    t = Clock::now();
    return s;
  };
  mapper::ProbeOptions probe;
  probe.xml_path = xml;
  probe.use_nvml = false;
  const mapper::Inventory inventory = mapper::probe_hwloc(probe);
  const double xml_s = lap();

  const int width = hosts >= 10000 ? 5 : 4;
  char range[64];
  std::snprintf(range, sizeof range, "node[%0*d-%0*d]", width, 1, width, hosts);
  const ddl::hostfiles::HostList list = ddl::hostfiles::parse_hosts_option(range, "-H");
  const double hostlist_s = lap();

  std::map<std::string, const mapper::Inventory*> inventories;  // --host-xml '*=FILE'
  for (const ddl::hostfiles::Host& h : list.hosts())
    inventories.emplace_hint(inventories.end(), h.name, &inventory);
  const mapper::Placement placement = mapper::place(list, inventories, {});
  const double place_s = lap();

  int per_host = 0;
  int used = 0;
  for (const mapper::HostUse& h : placement.hosts) {
    if (h.count == 0) continue;
    per_host = h.count;
    ++used;
  }
  ddl::comm::Mode mode;
  mode.dims = mapper::ring_dims(
      per_host, used,
      used % hosts_per_rack == 0 ? std::optional<int>(hosts_per_rack) : std::nullopt, std::nullopt);
  const ddl::comm::Topology topology = mapper::make_topology(placement, mode, "plan-bench");
  const double topology_s = lap();

  ddl::comm::write_topology_file(topology, path);
  const double write_s = lap();
  const long plan_hwm = vm_hwm_kib();

  const ddl::comm::Topology back = ddl::comm::read_topology_file(path);
  const double read_s = lap();
  if (back.ranks.size() != topology.ranks.size()) {
    std::fprintf(stderr, "plan_bench: read back %zu ranks, wrote %zu\n", back.ranks.size(),
                 topology.ranks.size());
    return 1;
  }
  const double total_s = seconds_since(start);
  struct stat st {};
  stat(path.c_str(), &st);
  std::printf("%zu %s %.6f %.6f %.6f %.6f %.6f %.6f %.6f %ld %ld %lld\n", topology.ranks.size(),
              topology.mode.str().c_str(), xml_s, hostlist_s, place_s, topology_s, write_s, read_s,
              total_s, plan_hwm, vm_hwm_kib(), static_cast<long long>(st.st_size));
  return 0;
}

// --child-read PATH: reads the file as a rank does at init, prints seconds and VmHWM.
int child_read(const std::string& path) {
  const Clock::time_point start = Clock::now();
  const ddl::comm::Topology t = ddl::comm::read_topology_file(path);
  std::printf("%.6f %ld %zu\n", seconds_since(start), vm_hwm_kib(), t.ranks.size());
  return 0;
}

// Runs this program with `args` in a fresh process, its stderr passed on; its stdout, or
// nullopt when it failed.
std::optional<std::string> run_self(const std::vector<std::string>& args) {
  static const std::string exe = self_exe();
  std::vector<std::string> argv = {exe};
  argv.insert(argv.end(), args.begin(), args.end());
  ddl::base::CaptureOptions options;
  for (char** e = environ; *e != nullptr; ++e)
    options.environ.emplace_back(*e);
  const ddl::base::Captured c = ddl::base::run_capture(argv, options);
  std::fputs(c.err.c_str(), stderr);
  if (c.exit_status != 0) return std::nullopt;
  return c.out;
}

// ---- the peer: Open MPI's mpirun, mapping only ------------------------------------------

struct PeerResult {
  enum Kind { kOk, kTimeout, kFailed, kUnavailable } kind = kFailed;
  double seconds = 0;
  long maxrss_kib = 0;
  std::string why;  // for kFailed / kUnavailable
};

constexpr int kExitNoNetns = 90;
constexpr int kExitNoLoopback = 91;
constexpr int kExitNoExec = 92;

// Brings up loopback in this (new, empty) network namespace; mpirun needs one interface.
bool loopback_up() {
  const int s = socket(AF_INET, SOCK_DGRAM, 0);
  if (s < 0) return false;
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  bool ok = ioctl(s, SIOCGIFFLAGS, &ifr) == 0;
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
  ok = ok && ioctl(s, SIOCSIFFLAGS, &ifr) == 0;
  close(s);
  return ok;
}

std::string last_line_of(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" -\t") != std::string::npos) last = line;
  }
  return last;
}

PeerResult run_mpirun(int hosts, int slots, const std::string& dir) {
  PeerResult r;
  const std::string hostfile = dir + "/mpirun-hosts";
  const std::string out_path = dir + "/mpirun-map.txt";
  const std::string err_path = dir + "/mpirun-err.txt";
  {
    std::ofstream hf(hostfile);
    char line[64];
    for (int h = 1; h <= hosts; ++h) {
      std::snprintf(line, sizeof line, "node%04d.invalid slots=%d\n", h, slots);
      hf << line;
    }
  }
  const std::string np = std::to_string(static_cast<long>(hosts) * slots);
  const std::vector<std::string> args = {"mpirun",
                                         "--allow-run-as-root",
                                         "--oversubscribe",
                                         "--do-not-launch",
                                         "--display-map",
                                         "--hostfile",
                                         hostfile,
                                         "-np",
                                         np,
                                         "/bin/true"};
  std::fflush(stdout);
  const Clock::time_point start = Clock::now();
  const pid_t pid = fork();
  if (pid < 0) {
    r.why = std::string("fork: ") + std::strerror(errno);
    return r;
  }
  if (pid == 0) {
    setpgid(0, 0);
    // Nothing may leave this host: a namespace with only loopback, and no launch agent.
    if (unshare(CLONE_NEWNET) != 0) _exit(kExitNoNetns);
    if (!loopback_up()) _exit(kExitNoLoopback);
    setenv("OMPI_MCA_plm_rsh_agent", "/bin/false", 1);
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (out < 0 || err < 0) _exit(kExitNoExec);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    std::vector<char*> argv;
    for (const std::string& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp("mpirun", argv.data());
    _exit(kExitNoExec);
  }
  int status = 0;
  rusage usage{};
  bool timed_out = false;
  for (;;) {
    const pid_t done = wait4(pid, &status, WNOHANG, &usage);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) break;
    if (!timed_out && seconds_since(start) > kPeerTimeoutS) {
      timed_out = true;
      kill(-pid, SIGKILL);  // the process group of this mpirun, which we started
      kill(pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(timed_out ? 1 : 5));
  }
  r.seconds = seconds_since(start);
  r.maxrss_kib = usage.ru_maxrss;
  int mapped = 0;
  {
    std::ifstream map(out_path);
    std::string line;
    while (std::getline(map, line)) {
      if (line.find("Process rank:") != std::string::npos) ++mapped;
    }
  }
  const std::string last_error = last_line_of(err_path);
  std::remove(hostfile.c_str());
  std::remove(out_path.c_str());
  std::remove(err_path.c_str());
  if (timed_out) {
    r.kind = PeerResult::kTimeout;
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == kExitNoNetns) {
    r.kind = PeerResult::kUnavailable;
    r.why =
        "cannot make a private network namespace (unshare(CLONE_NEWNET) refused), and "
        "outside one mpirun would look the host names up over DNS";
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == kExitNoLoopback) {
    r.kind = PeerResult::kUnavailable;
    r.why = "cannot bring up loopback in a private network namespace, which mpirun needs";
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == kExitNoExec) {
    r.kind = PeerResult::kUnavailable;
    r.why = "mpirun not found on $PATH";
  } else if (mapped == std::stoi(np)) {
    r.kind = PeerResult::kOk;  // it exits after the map (its exit status says nothing more)
  } else {
    r.kind = PeerResult::kFailed;
    r.why = "mapped " + std::to_string(mapped) + " of " + np +
            " ranks: " + (last_error.empty() ? "no message" : last_error);
  }
  return r;
}

std::string mpirun_version() {
  FILE* p = popen("mpirun --version 2>/dev/null", "r");
  if (!p) return {};
  char buf[256] = {};
  const bool got = std::fgets(buf, sizeof buf, p) != nullptr;
  pclose(p);
  if (!got) return {};
  std::string s = buf;
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r'))
    s.pop_back();
  return s;
}

// ---- the table -------------------------------------------------------------------------------

std::string with_commas(long long n) {
  std::string s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3)
    s.insert(static_cast<size_t>(i), ",");
  return s;
}

double mib(long kib) {
  return static_cast<double>(kib) / 1024.0;
}

struct Row {
  long ranks = 0;
  std::string mode;
  double xml = 0, hostlist = 0, place = 0, topology = 0, write = 0, read = 0, total = 0;
  long plan_hwm = 0, hwm = 0;
  long long size = 0;
  double rank_read = 0;
  long rank_hwm = 0;
};

std::optional<Row> run_scenario(const Scenario& s, const std::string& topologies,
                                const std::string& dir) {
  const std::string path = dir + "/" + s.name + "-" + std::to_string(s.hosts) + ".yaml";
  const std::optional<std::string> out =
      run_self({"--child-plan", topologies + "/" + s.xml, std::to_string(s.hosts),
                std::to_string(s.hosts_per_rack), path});
  if (!out) return std::nullopt;
  Row row;
  std::istringstream in(*out);
  in >> row.ranks >> row.mode >> row.xml >> row.hostlist >> row.place >> row.topology >>
      row.write >> row.read >> row.total >> row.plan_hwm >> row.hwm >> row.size;
  if (!in) return std::nullopt;
  if (const auto reader = run_self({"--child-read", path})) {
    std::istringstream r(*reader);
    r >> row.rank_read >> row.rank_hwm;
  }
  std::remove(path.c_str());
  return row;
}

int usage(int status) {
  std::fprintf(status == 0 ? stdout : stderr,
               "usage: plan_bench [--quick] [--no-peer] [--topologies DIR] [DIR]\n");
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 5 && args[0] == "--child-plan")
      return child_plan(args[1], std::stoi(args[2]), std::stoi(args[3]), args[4]);
    if (args.size() == 2 && args[0] == "--child-read") return child_read(args[1]);
    if (args.size() == 1 && args[0] == "--child-noop") {
      std::printf("%ld\n", vm_hwm_kib());
      return 0;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "plan_bench: %s\n", e.what());
    return 1;
  }

  bool quick = false;
  bool peer = true;
  std::string topologies = DDL_TOPOLOGIES_DIR;
  std::string dir;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--quick") {
      quick = true;
    } else if (args[i] == "--no-peer") {
      peer = false;
    } else if (args[i] == "--topologies" && i + 1 < args.size()) {
      topologies = args[++i];
    } else if (args[i] == "-h" || args[i] == "--help") {
      return usage(0);
    } else if (args[i].empty() || args[i][0] == '-' || !dir.empty()) {
      return usage(2);
    } else {
      dir = args[i];
    }
  }
  bool made_dir = false;
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/plan_bench.XXXXXX";
    if (!mkdtemp(pattern.data())) {
      std::perror("plan_bench: mkdtemp");
      return 1;
    }
    dir = pattern;
    made_dir = true;
  }

  std::vector<Scenario> scenarios;
  for (int hosts : {1, 18, 256, 1152, 4608}) {
    if (!quick || hosts <= 256) scenarios.push_back({"summit", "summit-ac922.xml", 18, 6, hosts});
  }
  for (int hosts : {1024, 4096, 16384}) {
    if (!quick) scenarios.push_back({"gpu8", "gpu8-nic-per-pair.xml", 32, 8, hosts});
  }
  if (quick) scenarios.push_back({"gpu8", "gpu8-nic-per-pair.xml", 32, 8, 32});

  std::string version;
  if (peer) version = mpirun_version();
  long baseline = 0;
  if (const auto out = run_self({"--child-noop"})) baseline = std::atol(out->c_str());

  std::printf(
      "plan_bench: ddlrun's offline plan (-H node[0001-N], every host from one hwloc XML),\n"
      "each scenario in a fresh process; times in ms. Phases: xml = probe_hwloc (once);\n"
      "hostlist = parse_hosts_option; place = host->inventory map + place(); topology =\n"
      "ring_dims (racks of 18 Summit / 32 gpu8 hosts, one rack when they do not divide) +\n"
      "make_topology; write = write_topology_file (validate, fsync) in %s; read =\n"
      "read_topology_file. us/host: (total - xml) / hosts. peak: VmHWM of the scenario's\n"
      "process, all phases (a process that only loads the libraries: %.1f MiB).\n"
      "rank read: a fresh process reading the file alone, as each rank does at init.\n",
      dir.c_str(), mib(baseline));
  if (peer) {
    std::printf(
        "peer: %s: mpirun --do-not-launch --display-map --hostfile (N hosts\n"
        "node0001.invalid.., slots=GPUs) -np ranks /bin/true, plm_rsh_agent=/bin/false, in a\n"
        "private network namespace (loopback only); wall from fork to exit, maxrss from\n"
        "wait4; map checked; %d s limit, larger sizes skipped after a timeout.\n",
        version.empty() ? "Open MPI (version unknown)" : version.c_str(), kPeerTimeoutS);
  }
  std::printf("\n%-7s %6s %7s %-14s %5s %8s %6s %8s %6s %6s %7s %7s %8s %7s %9s %9s | %9s %8s\n",
              "machine", "hosts", "ranks", "mode", "xml", "hostlist", "place", "topology", "write",
              "read", "total", "us/host", "peak MiB", "file MB", "rank read", "rank MiB",
              "mpirun ms", "mpi MiB");

  bool ok = true;
  std::optional<std::string> peer_off;           // why the peer does not run any more
  std::map<std::string, int> peer_timed_out_at;  // by machine: smallest host count that timed out
  const Row* summit_4608 = nullptr;
  std::vector<Row> rows;
  rows.reserve(scenarios.size());
  std::vector<std::string> peer_notes;
  for (const Scenario& s : scenarios) {
    const std::optional<Row> row = run_scenario(s, topologies, dir);
    if (!row) {
      std::printf("%-7s %6s  failed (see the message above)\n", s.name,
                  with_commas(s.hosts).c_str());
      ok = false;
      continue;
    }
    rows.push_back(*row);
    const Row& r = rows.back();
    if (std::string(s.name) == "summit" && s.hosts == 4608) summit_4608 = &r;
    std::string peer_ms = "-", peer_mib = "-";
    if (peer && !peer_off) {
      auto limit = peer_timed_out_at.find(s.name);
      if (limit != peer_timed_out_at.end() && s.hosts >= limit->second) {
        peer_ms = "skipped";
      } else {
        const PeerResult p = run_mpirun(s.hosts, s.gpus, dir);
        char buf[32];
        switch (p.kind) {
          case PeerResult::kOk:
            std::snprintf(buf, sizeof buf, "%.1f", p.seconds * 1e3);
            peer_ms = buf;
            std::snprintf(buf, sizeof buf, "%.1f", mib(p.maxrss_kib));
            peer_mib = buf;
            break;
          case PeerResult::kTimeout:
            peer_ms = ">" + std::to_string(kPeerTimeoutS) + " s";
            std::snprintf(buf, sizeof buf, ">%.1f", mib(p.maxrss_kib));
            peer_mib = buf;
            peer_timed_out_at[s.name] = s.hosts;
            break;
          case PeerResult::kFailed:
            peer_ms = "failed";
            peer_notes.push_back(std::string(s.name) + " " + with_commas(s.hosts) +
                                 " hosts: mpirun " + p.why);
            break;
          case PeerResult::kUnavailable:
            peer_off = p.why;
            break;
        }
      }
    }
    std::printf(
        "%-7s %6s %7s %-14s %5.1f %8.1f %6.1f %8.1f %6.1f %6.1f %7.1f %7.2f %8.1f %7.2f %9.1f "
        "%9.1f | %9s %8s\n",
        s.name, with_commas(s.hosts).c_str(), with_commas(r.ranks).c_str(), r.mode.c_str(),
        r.xml * 1e3, r.hostlist * 1e3, r.place * 1e3, r.topology * 1e3, r.write * 1e3, r.read * 1e3,
        r.total * 1e3, (r.total - r.xml) * 1e6 / s.hosts, mib(r.hwm),
        static_cast<double>(r.size) / 1e6, r.rank_read * 1e3, mib(r.rank_hwm), peer_ms.c_str(),
        peer_mib.c_str());
  }
  std::printf("\n");
  for (const std::string& n : peer_notes)
    std::printf("peer: %s\n", n.c_str());
  if (peer && peer_off) std::printf("peer: Open MPI not measured: %s\n", peer_off->c_str());
  if (summit_4608) {
    const bool met = summit_4608->total <= kTargetSeconds && mib(summit_4608->hwm) <= kTargetMiB;
    std::printf(
        "target: Summit 4,608 nodes (27,648 ranks) under %.1f s and %.0f MiB, all phases: "
        "%.3f s, %.1f MiB peak: %s\n",
        kTargetSeconds, kTargetMiB, summit_4608->total, mib(summit_4608->hwm),
        met ? "met" : "MISSED");
  } else {
    std::printf("target: Summit 4,608 nodes under %.1f s and %.0f MiB (not run with --quick)\n",
                kTargetSeconds, kTargetMiB);
  }
  if (made_dir) rmdir(dir.c_str());
  return ok ? 0 : 1;
}
