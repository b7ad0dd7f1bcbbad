// The steps every external launcher's backend takes (see external.h), and the
// backend that runs the launcher program as the job's single process.

#include "launcher/external.h"

#include <algorithm>
#include <iostream>

#include "base/check.h"
#include "launcher/process.h"

namespace ddl::launcher {

namespace {

class CommandBackend : public Backend {
 public:
  CommandBackend(std::string name, std::vector<std::string> argv, std::vector<EnvVar> env,
                 const LaunchOptions& options)
      : name_(std::move(name)), argv_(std::move(argv)), env_(std::move(env)), options_(options) {}
  ~CommandBackend() override { finish(); }

  std::string_view name() const override { return name_; }

  std::vector<int> start(EventQueue& events) override {
    procs_ = std::make_unique<ProcessSet>(events);
    SpawnSpec spec;
    spec.argv = argv_;
    spec.env = merge_environment(
        options_.environ.empty() ? current_environment() : options_.environ, env_);
    spec.pipe_stdin = true;
    try {
      procs_->start(-1, spec, "");
    } catch (...) {
      procs_->finish();
      throw;
    }
    return {-1};
  }
  void signal(int sig) override {
    if (procs_) procs_->signal(sig);
  }
  void write_stdin(std::string_view data) override {
    if (procs_) procs_->write_stdin(-1, data);
  }
  void close_stdin() override {
    if (procs_) procs_->close_stdin(-1);
  }
  void finish() override {
    if (procs_) procs_->finish();
  }

 private:
  std::string name_;
  std::vector<std::string> argv_;
  std::vector<EnvVar> env_;
  LaunchOptions options_;
  std::unique_ptr<ProcessSet> procs_;
};

/// Steps 2 and 3: the program's path on $PATH, checked.
std::string find_program(ExternalLauncher& launcher, const LaunchOptions& options) {
  const std::string path =
      find_in_path(std::string(launcher.names().program),
                   environ_value(options.environ, "PATH").value_or("/usr/bin:/bin"));
  if (path.empty()) throw LaunchError(std::string(launcher.names().missing));
  launcher.check_program(path, options);
  return path;
}

/// "mpirun launcher"
std::string launcher_name(const ExternalLauncher& launcher) {
  return std::string(launcher.names().program) + " launcher";
}

}  // namespace

void ExternalLauncher::check_site(const Job&, const LaunchOptions&) {}

void ExternalLauncher::check_program(const std::string&, const LaunchOptions&) {}

JobEnvironment ExternalLauncher::environment(const Job& job, const Rendezvous& rendezvous,
                                             const LaunchOptions& options) const {
  return job_environment(job, rendezvous, options.environ);
}

void ExternalLauncher::describe(std::ostream& out, const ExternalCommand& command) const {
  out << "ddlrun: " << names_.program << " command: " << shell_join(command.argv) << std::endl;
}

ExternalCommand preview_external(ExternalLauncher& launcher, const Job& job,
                                 const LaunchOptions& options) {
  DDL_CHECK(!options.work_dir.empty(), launcher_name(launcher) + ": no work directory for the " +
                                           std::string(launcher.names().work_file_what));
  const JobEnvironment env =
      launcher.environment(job, external_rendezvous(job, options.rendezvous_port), options);
  return launcher.command(job, options, env,
                          options.work_dir + "/" + std::string(launcher.names().work_file));
}

std::unique_ptr<Backend> make_external_backend(ExternalLauncher& launcher, const Job& job,
                                               const LaunchOptions& options) {
  launcher.check_site(job, options);
  const std::string program = find_program(launcher, options);
  ExternalCommand command = preview_external(launcher, job, options);
  command.argv[0] = program;
  if (!command.work_file.path.empty()) {
    write_work_file(command.work_file.path, command.work_file.text, launcher_name(launcher));
  }
  if (!command.note.empty()) std::cerr << "ddlrun: warning: " << command.note << std::endl;
  if (options.verbosity > 0) launcher.describe(std::cerr, command);
  return make_command_backend(std::string(launcher.names().program), std::move(command.argv),
                              std::move(command.env), options);
}

std::unique_ptr<Backend> make_command_backend(std::string name, std::vector<std::string> argv,
                                              std::vector<EnvVar> env,
                                              const LaunchOptions& options) {
  return std::make_unique<CommandBackend>(std::move(name), std::move(argv), std::move(env),
                                          options);
}

std::vector<const comm::RankPlacement*> ranks_in_order(const comm::Topology& topology) {
  std::vector<const comm::RankPlacement*> ranks;
  for (const comm::RankPlacement& r : topology.ranks)
    ranks.push_back(&r);
  std::sort(
      ranks.begin(), ranks.end(),
      [](const comm::RankPlacement* a, const comm::RankPlacement* b) { return a->rank < b->rank; });
  return ranks;
}

std::string host_name_of(const comm::Topology& topology, int index) {
  const comm::Host* h = topology.find_host(index);
  return h != nullptr ? h->name : "?";
}

std::string rankfile_lines(const comm::Topology& topology,
                           const std::vector<const comm::RankPlacement*>& ranks) {
  std::string out;
  for (const comm::RankPlacement* r : ranks) {
    out += "rank " + std::to_string(r->rank) + "=" + host_name_of(topology, r->host) +
           " slot=" + (r->cpus.empty() ? "0" : r->cpus.str()) + "\n";
  }
  return out;
}

void append_open_mpi_tail(std::vector<std::string>& argv, const JobEnvironment& env,
                          const LaunchOptions& options, const Job& job) {
  for (const std::string& name : env.names)
    argv.insert(argv.end(), {"-x", name});
  argv.insert(argv.end(), options.mpiargs.begin(), options.mpiargs.end());
  for (const std::string& w : rank_exec_command(options.ddlrun_path, job.argv))
    argv.push_back(w);
}

}  // namespace ddl::launcher
