#pragma once
// A launcher backend as one row of a table: everything ddlrun asks about a backend (its
// --launcher name, when auto picks it, how to make it, what it would run, its traits) is in
// its BackendDescriptor, so that the core asks the table and never branches on a name.
//
// How it works. Each backend folder defines its descriptor (local/, ssh/, mpirun/, prterun/,
// srun/; lsf/ adds jsrun's); builtin_backends() lists launcher's, in --launcher's order, and
// ddlrun appends lsf's. Two rows start nothing themselves and pick another: `auto` asks the
// rows with a rule by rising auto_rank and takes the first whose rule holds (jsrun inside LSF,
// srun inside Slurm, local when every host is this host, else ssh); `pmix` asks only the rows
// that serve PMIx. choose() resolves a name to the row that starts the job, with the reason the
// dry run and -v print.

#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "launcher/backend.h"
#include "launcher/choose.h"
#include "launcher/external.h"
#include "launcher/job.h"
#include "launcher/launch_options.h"

namespace ddl::launcher {

/// An option of one backend's own: ddlrun offers it under the backend's section of --help
/// ("Launcher jsrun") and keeps its value, as given, in LaunchOptions::settings under its
/// name, where the backend reads it (BackendDescriptor::setting: the default when not given).
struct BackendOption {
  std::string_view name = "";        ///< "--jsrun-mode"
  std::string_view value_name = "";  ///< what --help shows after it: "erf|rs"
  std::string_view help = "";        ///< --help's line
  std::string_view default_value = "";
  /// The values it takes (others refused with did-you-mean); empty: any one word.
  std::span<const std::string_view> choices{};
};

/// One backend (or one name that picks a backend): a row of the table of backends.
struct BackendDescriptor {
  /// Which rows a name that starts no backend of its own picks from.
  enum class Picks { kNothing, kAnyRule, kPmixServers };

  std::string_view name = "";  ///< --launcher NAME
  Picks picks = Picks::kNothing;
  /// The automatic choice asks the rows that have a rule by rising auto_rank.
  int auto_rank = 0;
  /// Whether the automatic choice (or pmix, among the rows serving PMIx) takes it; null: never.
  bool (*automatic)(const Situation& situation) = nullptr;
  std::string_view why = "";       ///< why the rule took it: "every host is this host"
  std::string_view why_auto = "";  ///< the same when auto took it, where it says more; "": why
  /// ddlrun's own launchers: the backend for a job; null for the others.
  std::unique_ptr<Backend> (*make_backend)(const Job& job, const LaunchOptions& options) = nullptr;
  /// The external launchers: what make_external_backend runs; null for ddlrun's own. May
  /// throw LaunchError (an option it cannot use).
  std::unique_ptr<ExternalLauncher> (*make_launcher)(const LaunchOptions& options) = nullptr;
  bool takes_mpiarg = false;  ///< --mpiarg goes on its command line
  bool serves_pmix = false;   ///< ddlrun's own PMIx server serves its ranks (`--launcher pmix`)
  bool runs_here = false;     ///< every rank on this host: the rendezvous listens on loopback
  /// Takes over the ssh probe's sessions (one login per host); others close them.
  bool keeps_probe_sessions = false;
  /// Its own options (ddlrun's --help shows them under "Launcher NAME").
  std::span<const BackendOption> options{};

  /// The value of its option `name` in `settings` (LaunchOptions::settings), or that option's
  /// default when not there; an internal error for a name not among its options.
  std::string setting(const std::map<std::string, std::string, std::less<>>& settings,
                      std::string_view name) const;
  /// Whether ddlrun starts the ranks itself (no other program runs them).
  bool own() const { return make_backend != nullptr; }
  /// The backend for `job`; throws LaunchError when it cannot start it here.
  std::unique_ptr<Backend> make(const Job& job, const LaunchOptions& options) const;
  /// What the backend would run, for the dry run (preview_external); an internal error for
  /// ddlrun's own launchers, which run no other program.
  ExternalCommand preview(const Job& job, const LaunchOptions& options) const;
};

/// A table of backends: pointers to rows, in --launcher's order.
using BackendTable = std::span<const BackendDescriptor* const>;

/// launcher's own rows (auto, local, ssh, mpirun, pmix, prterun, srun, flux), in --launcher's
/// order.
BackendTable builtin_backends();

/// The row called `name`, or nullptr.
const BackendDescriptor* find_backend(BackendTable table, std::string_view name);

/// Resolves --launcher `requested` (a name of `table`; an internal error otherwise) to the row
/// that starts the job: a backend is kept ("asked for with --launcher mpirun"); auto and pmix
/// pick one (see the top of the file).
Choice choose(BackendTable table, std::string_view requested, const Situation& situation);

}  // namespace ddl::launcher
