#include "ddlrun/show/report.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <optional>
#include <sstream>

#include "base/text.h"
#include "ddl_config.h"
#include "ddlrun/backends.h"
#include "ddlrun/run/launch.h"
#include "ddlrun/shell_words.h"
#include "ddlrun/show/picture_layout.h"
#include "ddlrun/show/plan_picture.h"
#include "ddlrun/show/predict_report.h"
#include "launcher/launcher.h"

namespace ddl::ddlrun {

namespace {

/// `s` as a JSON string; bytes that are not UTF-8 become U+FFFD (base::valid_utf8), so that
/// every JSON parser reads it.
void json_string(std::string& out, const std::string& raw) {
  const std::string s = base::valid_utf8(raw);
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

std::string number(double d) {
  std::ostringstream s;
  s.precision(17);
  s << d;
  return s.str();
}

/// Text being written: handed to `spill` (when set) once it is long, at the end of a line (where
/// printable() cannot split a character), as printable() shows it, so that a document of a
/// million ranks is never held whole.
struct SpilledText {
  std::string text;
  std::ostream* spill = nullptr;

  SpilledText& operator+=(std::string_view s) {
    text += s;
    return *this;
  }
  SpilledText& operator+=(char c) {
    text += c;
    return *this;
  }
  void line_ended() {
    if (spill != nullptr && text.size() >= (size_t{1} << 20)) {
      *spill << hostfiles::printable(text);
      text.clear();
    }
  }
};

/// The items of a Generated list, as json_block takes them.
struct GeneratedItems {
  const Value::Generated& g;
  size_t size() const { return g.count; }
  bool empty() const { return g.count == 0; }
  Value operator[](size_t i) const { return g.item(i); }
};

/// Writes `items` between the brackets of `empty` ("[]" or "{}"), one a line indented by
/// `indent + 2` spaces, commas between them; `empty` alone when there are none.
template <typename Items, typename WriteItem>
void json_block(SpilledText& out, const Items& items, int indent, std::string_view empty,
                WriteItem write_item) {
  if (items.empty()) {
    out += empty;
    return;
  }
  const std::string pad(static_cast<size_t>(indent + 2), ' ');
  out += empty[0];
  out += '\n';
  for (size_t i = 0; i < items.size(); ++i) {
    out += pad;
    write_item(items[i]);
    out += i + 1 < items.size() ? ",\n" : "\n";
    out.line_ended();
  }
  out += std::string(static_cast<size_t>(indent), ' ');
  out += empty[1];
}

void json(SpilledText& out, const Value& value, int indent) {
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::nullptr_t>) {
          out += "null";
        } else if constexpr (std::is_same_v<T, bool>) {
          out += x ? "true" : "false";
        } else if constexpr (std::is_same_v<T, int64_t>) {
          out += std::to_string(x);
        } else if constexpr (std::is_same_v<T, double>) {
          out += number(x);
        } else if constexpr (std::is_same_v<T, std::string>) {
          json_string(out.text, x);
        } else if constexpr (std::is_same_v<T, Value::List>) {
          json_block(out, x, indent, "[]", [&](const Value& item) { json(out, item, indent + 2); });
        } else if constexpr (std::is_same_v<T, Value::Generated>) {
          json_block(out, GeneratedItems{x}, indent, "[]",
                     [&](const Value& item) { json(out, item, indent + 2); });
        } else {
          json_block(out, x, indent, "{}", [&](const std::pair<std::string, Value>& entry) {
            json_string(out.text, entry.first);
            out += ": ";
            json(out, entry.second, indent + 2);
          });
        }
      },
      value.v);
}

/// True when `s` reads back from YAML as this same string without quotes: it starts with a
/// letter or '/', holds only letters, digits and "._/-", and is not a YAML 1.1 boolean or null.
bool plain_yaml(const std::string& s) {
  static const std::array<std::string_view, 10> kReserved = {"y",   "n",    "yes",   "no",   "on",
                                                             "off", "true", "false", "null", "~"};
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '/')) return false;
  std::string lower;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) &&
        std::string_view("._/-").find(c) == std::string_view::npos) {
      return false;
    }
    lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return std::find(kReserved.begin(), kReserved.end(), lower) == kReserved.end();
}

/// A double-quoted YAML scalar: JSON's escapes, plus DEL, the C1 controls and the byte-order
/// mark, which YAML does not let a double-quoted scalar hold raw.
void yaml_quoted(std::string& out, const std::string& raw) {
  std::string json;
  json_string(json, raw);
  for (size_t i = 0; i < json.size(); ++i) {
    const auto c = static_cast<unsigned char>(json[i]);
    const auto next = i + 1 < json.size() ? static_cast<unsigned char>(json[i + 1]) : 0;
    if (c == 0x7f) {
      out += "\\x7f";
    } else if (c == 0xc2 && next >= 0x80 && next <= 0x9f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", next);
      out += buf;
      ++i;
    } else if (c == 0xef && json.compare(i, 3, "\xef\xbb\xbf") == 0) {
      out += "\\ufeff";
      i += 2;
    } else {
      out += static_cast<char>(c);
    }
  }
}

void yaml_string(std::string& out, const std::string& s) {
  if (plain_yaml(s)) {
    out += s;
  } else {
    yaml_quoted(out, s);
  }
}

/// Whether `value` is written as a block (indented lines): a list or map with entries.
bool yaml_block(const Value& value) {
  if (const auto* list = std::get_if<Value::List>(&value.v)) return !list->empty();
  if (const auto* map = std::get_if<Value::Map>(&value.v)) return !map->empty();
  if (const auto* gen = std::get_if<Value::Generated>(&value.v)) return gen->count > 0;
  return false;
}

/// A value on one line: a scalar, or an empty list or map ([] or {}).
void yaml_flow(std::string& out, const Value& value) {
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::nullptr_t>) {
          out += "~";
        } else if constexpr (std::is_same_v<T, bool>) {
          out += x ? "true" : "false";
        } else if constexpr (std::is_same_v<T, int64_t>) {
          out += std::to_string(x);
        } else if constexpr (std::is_same_v<T, double>) {
          out += number(x);
        } else if constexpr (std::is_same_v<T, std::string>) {
          yaml_string(out, x);
        } else if constexpr (std::is_same_v<T, Value::Map>) {
          out += "{}";
        } else {
          out += "[]";
        }
      },
      value.v);
}

// Block-style YAML, written while the value is walked (yaml-cpp's emitter took 53 s for the
// plan of 262,144 ranks and held it whole).
//
// How it works: yaml_node writes a block (a list or map with entries) as one entry a line at
// `indent` spaces: "- item" for a list, "key: value" for a map. An entry whose value is itself
// a block ends its line after "-" or "key:" and writes the value at indent + 2, except a map
// inside a list, whose first key follows the "- " (`inline_first`), as yaml-cpp and most
// writers do. Everything else is one flow token (yaml_flow). Each finished line may spill the
// text to the stream (SpilledText), so a million ranks are never held as text at once.
void yaml_node(SpilledText& out, const Value& value, int indent, bool inline_first);

void yaml_entry_value(SpilledText& out, const Value& value, int indent) {
  if (yaml_block(value)) {
    out += '\n';
    yaml_node(out, value, indent + 2, false);
  } else {
    out += ' ';
    yaml_flow(out.text, value);
    out += '\n';
    out.line_ended();
  }
}

void yaml_list_item(SpilledText& out, const Value& item, int indent) {
  out += std::string(static_cast<size_t>(indent), ' ');
  out += '-';
  if (std::holds_alternative<Value::Map>(item.v) && yaml_block(item)) {
    out += ' ';
    yaml_node(out, item, indent + 2, true);
  } else {
    yaml_entry_value(out, item, indent);
  }
}

void yaml_node(SpilledText& out, const Value& value, int indent, bool inline_first) {
  if (const auto* map = std::get_if<Value::Map>(&value.v)) {
    bool first = true;
    for (const auto& [key, item] : *map) {
      if (!(first && inline_first)) out += std::string(static_cast<size_t>(indent), ' ');
      first = false;
      yaml_string(out.text, key);
      out += ':';
      yaml_entry_value(out, item, indent);
    }
  } else if (const auto* list = std::get_if<Value::List>(&value.v)) {
    for (const Value& item : *list)
      yaml_list_item(out, item, indent);
  } else if (const auto* gen = std::get_if<Value::Generated>(&value.v)) {
    for (size_t i = 0; i < gen->count; ++i)
      yaml_list_item(out, gen->item(i), indent);
  }
}

void yaml(SpilledText& out, const Value& value) {
  if (yaml_block(value)) {
    yaml_node(out, value, 0, false);
  } else {
    yaml_flow(out.text, value);
    out += '\n';
  }
}

Value strings(const std::vector<std::string>& words) {
  Value::List list;
  for (const std::string& w : words)
    list.emplace_back(w);
  return list;
}

std::string rank_range(const mapper::HostRanks& r) {
  if (r.count == 0) return "-";
  if (r.count == 1) return std::to_string(r.first_rank);
  return std::to_string(r.first_rank) + "-" + std::to_string(r.first_rank + r.count - 1);
}

// Large plans. Up to kListedHosts hosts (as many as the picture draws one by one,
// picture_layout.h) the text plan lists every host and rank. Above, it lists the first
// kHeadHosts hosts and the last, and the ranks of the first and the last used host, with a row
// "..." where it leaves out, and says how many it left out and that JSON and YAML list them
// all: a million rows help no reader, and building them cost most of the dry run's time.
constexpr size_t kListedHosts = picture::kMaxDetailedHosts;
constexpr size_t kHeadHosts = 3;

/// Whether the text plan summarises the hosts and ranks of `plan`.
bool summarised(const JobPlan& plan) {
  return plan.hosts.size() > kListedHosts;
}

/// The line after a summarised table: how many entries it left out.
void left_out_line(std::ostream& out, size_t left_out, const char* what) {
  out << "  (" << left_out << " " << what << " not listed: above " << kListedHosts
      << " hosts the text plan shows the first and the last; --output json or yaml lists them "
         "all)\n";
}

/// Positions 0..n-1 of a list to show in a summarised table: the first `head` and the last
/// `tail`, with -1 where the others are left out; all of them when that leaves out none.
std::vector<long> shown_positions(size_t n, size_t head, size_t tail) {
  std::vector<long> at;
  for (size_t i = 0; i < n; ++i) {
    if (i == head && n > head + tail) {
      at.push_back(-1);
      i = n - tail;
    }
    at.push_back(static_cast<long>(i));
  }
  return at;
}

/// One line per rank: host, local rank, GPU, CPUs, NIC and address; summarised ranks (the
/// first and the last used host's) above kListedHosts hosts.
void rank_table(std::ostream& out, const JobPlan& plan) {
  const std::vector<comm::RankPlacement>& ranks = plan.topology.ranks;
  std::vector<std::vector<std::string>> rows = {
      {"RANK", "HOST", "LOCAL", "GPU", "BUS ID", "CPUS", "NIC", "ADDRESS"}};
  size_t head = ranks.size();
  size_t tail = 0;
  if (summarised(plan) && !ranks.empty()) {
    head = static_cast<size_t>(std::count_if(
        ranks.begin(), ranks.end(), [&](const auto& r) { return r.host == ranks.front().host; }));
    tail = static_cast<size_t>(std::count_if(
        ranks.begin(), ranks.end(), [&](const auto& r) { return r.host == ranks.back().host; }));
  }
  const std::vector<long> shown = shown_positions(ranks.size(), head, tail);
  const auto dash = [](const std::string& s) { return s.empty() ? std::string("-") : s; };
  for (const long i : shown) {
    if (i < 0) {
      rows.push_back({"..."});
      continue;
    }
    const comm::RankPlacement& r = ranks[static_cast<size_t>(i)];
    rows.push_back({std::to_string(r.rank), plan.topology.hosts[r.host].name,
                    std::to_string(r.local_rank), r.gpu < 0 ? "-" : std::to_string(r.gpu),
                    dash(r.gpu_bus_id), dash(r.cpus.str()), dash(r.nic), dash(r.address)});
  }
  table(out, rows);
  if (shown.size() < ranks.size()) left_out_line(out, ranks.size() + 1 - shown.size(), "ranks");
}

/// "[0 1 2 3]"; with `shown` set and a longer ring, its first `shown` members, "...", the
/// last, and how many: "[0 1 2 ... 262143] (262144 ranks)".
std::string ring_text(const comm::Ring& ring, size_t shown = 0) {
  const bool cut = shown > 0 && ring.size() > shown + 1;
  std::string s = "[";
  for (size_t i = 0; i < ring.size(); ++i) {
    if (cut && i == shown) {
      s += " ...";
      i = ring.size() - 1;
    }
    s += (i ? " " : "") + std::to_string(ring[i]);
  }
  return s + "]" + (cut ? " (" + std::to_string(ring.size()) + " ranks)" : "");
}

/// Each dimension's rings: the first few of each, and how many more; with `long_rings_cut`,
/// each ring's first members only.
void ring_lines(std::ostream& out, const comm::Topology& t, bool long_rings_cut) {
  constexpr size_t kShown = 6;
  for (size_t d = 0; d < t.rings.size(); ++d) {
    const auto& rings = t.rings[d];
    const size_t size = rings.empty() ? 0 : rings[0].size();
    if (size == 1) {
      out << "  dim " << d << ": size 1, nothing to reduce\n";
      continue;
    }
    out << "  dim " << d << ": " << rings.size() << (rings.size() == 1 ? " ring" : " rings")
        << " of " << size << ":";
    for (size_t i = 0; i < rings.size() && i < kShown; ++i)
      out << " " << ring_text(rings[i], long_rings_cut ? 8 : 0);
    if (rings.size() > kShown) out << " ... (" << rings.size() - kShown << " more)";
    out << "\n";
  }
}

/// Seconds with two decimals: "0.42".
std::string seconds_text(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", seconds);
  return buf;
}

/// A host's name in the measured links (Host::index).
const std::string& link_host(const JobPlan& plan, int index) {
  return plan.topology.hosts[static_cast<size_t>(index)].name;
}

/// Up to this many hosts, the dry run prints the whole bandwidth matrix.
constexpr size_t kMatrixHosts = 8;

/// The measured pairs as a matrix of MB/s ("-" on the diagonal and for pairs not measured).
void link_matrix(std::ostream& out, const JobPlan& plan, const comm::LinkMeasurement& links) {
  const size_t n = plan.topology.hosts.size();
  std::vector<std::vector<std::string>> rows(n + 1, std::vector<std::string>(n + 1, "-"));
  rows[0][0] = "MB/s";
  for (size_t i = 0; i < n; ++i)
    rows[0][i + 1] = rows[i + 1][0] = link_host(plan, static_cast<int>(i));
  for (const comm::LinkSample& p : links.pairs) {
    const std::string mb = std::to_string(static_cast<long>(p.bytes_per_s / 1e6 + 0.5));
    rows[static_cast<size_t>(p.a) + 1][static_cast<size_t>(p.b) + 1] = mb;
    rows[static_cast<size_t>(p.b) + 1][static_cast<size_t>(p.a) + 1] = mb;
  }
  table(out, rows);
}

/// What --probe-links measured: how much and how long, the spread, the levels, the racks, and
/// for a few hosts the matrix.
void links_text(std::ostream& out, const JobPlan& plan) {
  const comm::LinkMeasurement& links = *plan.links;
  const size_t n = plan.topology.hosts.size();
  std::vector<double> bw;
  for (const comm::LinkSample& p : links.pairs)
    bw.push_back(p.bytes_per_s);
  std::sort(bw.begin(), bw.end());
  out << "links:     " << links.pairs.size() << " of " << n * (n - 1) / 2
      << " host pairs measured in " << seconds_text(links.seconds) << " s (--probe-links)\n";
  if (!bw.empty()) {
    out << "  bandwidth: min " << mapper::bandwidth_text(bw.front()) << ", median "
        << mapper::bandwidth_text(bw[bw.size() / 2]) << ", max "
        << mapper::bandwidth_text(bw.back()) << "\n";
  }
  for (const comm::MeasuredLevel& level : links.levels) {
    out << "  level " << level.name << ": " << mapper::bandwidth_text(level.bytes_per_s) << ", "
        << mapper::duration_text(level.latency_s) << "\n";
  }
  out << "  racks:   " << links.racks.size() << (links.racks.size() == 1 ? " rack" : " racks")
      << " of " << (links.racks.empty() ? 0 : links.racks.front().size()) << " hosts:";
  for (size_t r = 0; r < links.racks.size(); ++r) {
    out << (r ? " |" : "");
    for (int h : links.racks[r])
      out << " " << link_host(plan, h);
  }
  out << "\n";
  if (n <= kMatrixHosts) link_matrix(out, plan, links);
}

std::string mode_text(const JobPlan& plan) {
  std::string s = plan.mode.str();
  return s + " (" + plan.mode_reason + ")";
}

/// What the plan's external launcher would run: its command and its work file (rankfile,
/// host file, ERF; none for jsrun's resource sets), or why it cannot be built. The dry run
/// names ddlrun "ddlrun" and the private work directory "<work-dir>", so that its text is the
/// same on every machine; the variables it forwards depend on ddlrun's environment (PATH,
/// PYTHONPATH, ...).
struct LauncherPreview {
  std::vector<std::string> argv;
  std::string file_what;  ///< "erf", "rankfile", ...
  std::string file_path;
  std::string file_text;
  std::string error;
};

LauncherPreview launcher_preview(const JobPlan& plan, const Options& o) {
  LauncherPreview p;
  try {
    const launcher::Job job = make_job(plan, "<work-dir>/topology.yaml");
    launcher::LaunchOptions lo;
    lo.ddlrun_path = "ddlrun";
    lo.environ = launcher::current_environment();
    lo.mpiargs = plan.mpiargs;
    set_backend_options(lo, plan, o);
    // A rendezvous port so that the names match a real run (ddlrun serves the rendezvous).
    lo.rendezvous_port = 1;
    lo.work_dir = "<work-dir>";
    const launcher::BackendDescriptor& backend = chosen_backend(plan);
    for (char c : backend.make_launcher(lo)->names().work_file_what)
      p.file_what += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    launcher::ExternalCommand c = backend.preview(job, lo);
    p.argv = std::move(c.argv);
    p.file_path = std::move(c.work_file.path);
    p.file_text = std::move(c.work_file.text);
  } catch (const std::exception& e) {
    p.error = e.what();
  }
  return p;
}

/// "jsrun:     ": a label and its value's column.
std::string label(std::string_view name) {
  std::string s = std::string(name) + ":";
  return s + std::string(s.size() < 11 ? 11 - s.size() : 1, ' ');
}

/// An external launcher's command and work file, as the dry run shows them.
void launcher_text(std::ostream& out, const JobPlan& plan, const Options& o) {
  const std::string name(chosen_backend(plan).name);
  const LauncherPreview p = launcher_preview(plan, o);
  if (!p.error.empty()) {
    out << label(name) << "cannot be built: " << p.error << "\n";
    return;
  }
  out << label(name) << quote_shell_words(p.argv) << "\n";
  if (p.file_text.empty()) return;
  out << label(p.file_what) << p.file_path << "\n";
  std::istringstream lines(p.file_text);
  for (std::string line; std::getline(lines, line);)
    out << "  " << line << "\n";
}

/// One line per host: slots, ranks, GPUs and cores, where its hardware and its entry came from;
/// summarised (the first kHeadHosts and the last) above kListedHosts hosts.
void host_table(std::ostream& out, const JobPlan& plan) {
  std::vector<std::vector<std::string>> rows = {
      {"HOST", "SLOTS", "RANKS", "GPUS", "CORES", "HARDWARE FROM", "SOURCE"}};
  const size_t n = plan.hosts.size();
  const std::vector<long> shown = shown_positions(n, summarised(plan) ? kHeadHosts : n, 1);
  for (const long at : shown) {
    if (at < 0) {
      rows.push_back({"..."});
      continue;
    }
    const size_t i = static_cast<size_t>(at);
    const hostfiles::Host& h = plan.hosts.hosts()[i];
    std::string slots = std::to_string(h.slots);
    if (h.max_slots) slots += " (max " + std::to_string(*h.max_slots) + ")";
    std::string source = h.origin;
    if (h.kind != hostfiles::SourceKind::kHostsOption &&
        h.kind != hostfiles::SourceKind::kDefault) {
      source += " (" + std::string(hostfiles::to_string(h.kind)) + ")";
    }
    std::string gpus = "-", cores = "-", from = "not probed";
    if (auto it = plan.inventories.find(h.name); it != plan.inventories.end()) {
      gpus = std::to_string(mapper::usable_gpus(*it->second).size());
      cores = std::to_string(it->second->core_count());
    }
    if (auto it = plan.hardware_from.find(h.name); it != plan.hardware_from.end())
      from = it->second;
    rows.push_back({h.name, slots, rank_range(plan.placement.hosts[i]), gpus, cores, from, source});
  }
  table(out, rows);
  if (shown.size() < n) left_out_line(out, n + 1 - shown.size(), "hosts");
}

/// What every rank runs with: transport, NIC, topology file, timeout, mpirun's arguments,
/// working directory, environment, and the program (shell-quoted and as JSON strings).
void run_settings_text(std::ostream& out, const JobPlan& plan, const Options& o) {
  out << "transport: " << (o.tcp ? "tcp (--tcp)" : "default (InfiniBand when present, else TCP)")
      << "\n";
  if (!plan.nic.names.empty()) out << "nic:       " << plan.nic.str() << "\n";
  out << "topology:  "
      << (o.topology_file.empty() ? std::string("not written (--topology-file FILE keeps it)")
                                  : "written to " + o.topology_file)
      << "\n";
  if (o.timeout) out << "timeout:   " << number(*o.timeout) << " s\n";
  if (!plan.mpiargs.empty()) out << "mpiargs:   " << quote_shell_words(plan.mpiargs) << "\n";
  if (!plan.wdir.empty()) out << "wdir:      " << quote_shell_word(plan.wdir) << "\n";
  out << "env:       DDL_OPTIONS=\"-mode " << plan.mode.str() << "\"";
  for (const auto& [k, v] : plan.exports)
    out << " " << k << "=" << quote_shell_word(v);
  out << "\n";
  out << "command:   " << quote_shell_words(plan.program) << "\n";
  out << "argv:      ";
  for (size_t i = 0; i < plan.program.size(); ++i) {
    std::string quoted;
    json_string(quoted, plan.program[i]);
    out << (i ? ", " : "[") << quoted;
  }
  out << "]\n";
}

std::string render_text(const JobPlan& plan, const Options& o) {
  std::ostringstream out;
  out << "ddlrun " << DDL_VERSION << " dry run: nothing is started\n\n";
  out << "hosts (" << plan.hosts.size() << ", " << plan.hosts.total_slots() << " slots, from "
      << plan.hosts_from << "):\n";
  host_table(out, plan);
  out << "\n";
  out << "ranks:     " << plan.placement.ranks << " (" << plan.placement.describe() << ")\n";
  rank_table(out, plan);
  out << "\n";
  out << "mode:      " << mode_text(plan) << "\n";
  out << "rings:\n";
  ring_lines(out, plan.topology, summarised(plan));
  if (plan.links) links_text(out, plan);
  prediction_text(out, plan);
  out << "job id:    " << plan.job_id << "\n";
  out << "launcher:  " << chosen_backend(plan).name << " (" << plan.launcher.reason << ")\n";
  if (!chosen_backend(plan).own()) launcher_text(out, plan, o);
  run_settings_text(out, plan, o);
  return out.str();
}

/// Each host: name, slots, its ranks, where it came from, and its hardware when known.
Value::Generated hosts_document(const JobPlan& plan) {
  return {plan.hosts.size(), [&plan](size_t i) -> Value {
            const hostfiles::Host& h = plan.hosts.hosts()[i];
            const mapper::HostRanks& r = plan.placement.hosts[i];
            Value::List ranks;
            for (int k = 0; k < r.count; ++k)
              ranks.emplace_back(r.first_rank + k);
            Value hardware;
            if (auto it = plan.inventories.find(h.name); it != plan.inventories.end()) {
              hardware = Value::Map{
                  {"gpus", static_cast<int>(mapper::usable_gpus(*it->second).size())},
                  {"cores", it->second->core_count()},
                  {"threads", it->second->pu_count()},
                  {"from", plan.hardware_from.at(h.name)},
              };
            }
            return Value::Map{
                {"name", h.name},
                {"slots", h.slots},
                {"max_slots", h.max_slots ? Value(*h.max_slots) : Value()},
                {"ranks", std::move(ranks)},
                {"source", std::string(hostfiles::to_string(h.kind))},
                {"origin", h.origin},
                {"capacity", plan.placed.hosts[i].capacity_from},
                {"hardware", std::move(hardware)},
            };
          }};
}

/// Each rank's host, GPU, CPUs, NIC and address, made as it is written.
Value::Generated placement_document(const JobPlan& plan) {
  return {plan.topology.ranks.size(), [&plan](size_t i) -> Value {
            const comm::RankPlacement& r = plan.topology.ranks[i];
            return Value::Map{
                {"rank", r.rank},
                {"host", plan.topology.hosts[r.host].name},
                {"local_rank", r.local_rank},
                {"gpu", r.gpu < 0 ? Value() : Value(r.gpu)},
                {"gpu_bus_id", r.gpu_bus_id.empty() ? Value() : Value(r.gpu_bus_id)},
                {"gpu_uuid", r.gpu_uuid.empty() ? Value() : Value(r.gpu_uuid)},
                {"cpus", r.cpus.str()},
                {"nic", r.nic.empty() ? Value() : Value(r.nic)},
                {"address", r.address.empty() ? Value() : Value(r.address)},
            };
          }};
}

Value mode_document(const JobPlan& plan) {
  Value::List dims;
  for (int d : plan.mode.dims)
    dims.emplace_back(d);
  return Value::Map{{"string", plan.mode.str()},
                    {"algorithm", std::string(1, static_cast<char>(plan.mode.algorithm))},
                    {"dims", std::move(dims)},
                    {"given", plan.mode_given},
                    {"auto", plan.mode_auto},
                    {"reason", plan.mode_reason}};
}

/// Every dimension's rings, each a list of ranks, made as they are written.
Value::List rings_document(const comm::Topology& topology) {
  Value::List rings;
  for (const auto& dimension : topology.rings) {
    rings.emplace_back(Value::Generated{dimension.size(), [&dimension](size_t i) -> Value {
                                          Value::List members;
                                          for (int m : dimension[i])
                                            members.emplace_back(m);
                                          return members;
                                        }});
  }
  return rings;
}

/// The preview's command line; null when it could not be built (its error says why).
Value preview_command(const LauncherPreview& p) {
  return p.error.empty() ? strings(p.argv) : Value();
}

/// What the jsrun launcher would run (null for other launchers); `p`: its preview.
Value jsrun_document(const JobPlan& plan, const Options& o, const LauncherPreview* p) {
  if (p == nullptr || &chosen_backend(plan) != &backend_named("jsrun")) return Value();
  return Value::Map{{"mode", backend_named("jsrun").setting(o.backend_settings, "--jsrun-mode")},
                    {"command", preview_command(*p)},
                    {"erf_file", p->file_text.empty() ? Value() : Value(p->file_path)},
                    {"erf", p->file_text.empty() ? Value() : Value(p->file_text)},
                    {"error", p->error.empty() ? Value() : Value(p->error)}};
}

/// The launcher: its name and why; for a launcher that runs another program, that program's
/// command line (or why it cannot be built) and its work file's path; its own options' values
/// (BackendDescriptor::options), each as given or its default. `p`: the external launcher's
/// preview; null for ddlrun's own launchers.
Value launcher_document(const JobPlan& plan, const Options& o, const LauncherPreview* p) {
  const launcher::BackendDescriptor& backend = chosen_backend(plan);
  Value::Map doc{{"name", std::string(backend.name)}, {"reason", plan.launcher.reason}};
  if (p != nullptr) {
    doc.emplace_back("command", preview_command(*p));
    doc.emplace_back("work_file", p->file_path.empty() ? Value() : Value(p->file_path));
    doc.emplace_back("error", p->error.empty() ? Value() : Value(p->error));
  }
  if (!backend.options.empty()) {
    Value::Map settings;
    for (const launcher::BackendOption& option : backend.options) {
      settings.emplace_back(std::string(option.name),
                            backend.setting(o.backend_settings, option.name));
    }
    doc.emplace_back("settings", std::move(settings));
  }
  return doc;
}

/// What --probe-links measured, hosts by name.
Value links_document(const JobPlan& plan) {
  const comm::LinkMeasurement& links = *plan.links;
  const size_t n = plan.topology.hosts.size();
  Value::List racks, levels, pairs;
  for (const std::vector<int>& rack : links.racks) {
    Value::List hosts;
    for (int h : rack)
      hosts.emplace_back(link_host(plan, h));
    racks.emplace_back(std::move(hosts));
  }
  for (const comm::MeasuredLevel& level : links.levels) {
    levels.emplace_back(Value::Map{
        {"name", level.name}, {"bytes_per_s", level.bytes_per_s}, {"latency_s", level.latency_s}});
  }
  for (const comm::LinkSample& p : links.pairs) {
    pairs.emplace_back(Value::Map{{"a", link_host(plan, p.a)},
                                  {"b", link_host(plan, p.b)},
                                  {"bytes_per_s", p.bytes_per_s},
                                  {"latency_s", p.latency_s}});
  }
  return Value::Map{{"seconds", links.seconds},
                    {"pairs_measured", static_cast<int>(links.pairs.size())},
                    {"pairs_total", static_cast<int>(n * (n - 1) / 2)},
                    {"racks", std::move(racks)},
                    {"levels", std::move(levels)},
                    {"pairs", std::move(pairs)}};
}

/// DDL_OPTIONS and the -x variables, in order.
Value environment_document(const JobPlan& plan) {
  Value::Map env{{"DDL_OPTIONS", "-mode " + plan.mode.str()}};
  for (const auto& [k, v] : plan.exports)
    env.emplace_back(k, v);
  return env;
}

/// The picture's legend: the plan's own lines, then the cost model's prediction.
picture::Legend legend_with_prediction(const JobPlan& plan) {
  picture::Legend legend = plan_legend(plan);
  for (auto& line : prediction_legend(plan))
    legend.lines.push_back(std::move(line));
  return legend;
}

}  // namespace

void table(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (size_t c = 0; c < row.size(); ++c)
      width[c] = std::max(width[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line = "  ";
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out << line << "\n";
  }
}

std::string to_json(const Value& value) {
  SpilledText out;
  json(out, value, 0);
  return out.text + "\n";
}

std::string to_yaml(const Value& value) {
  SpilledText out;
  yaml(out, value);
  return out.text;
}

Value plan_document(const JobPlan& plan, const Options& o) {
  // What an external launcher would run: built once, for the launcher's entry and jsrun's.
  std::optional<LauncherPreview> preview;
  if (!chosen_backend(plan).own()) preview = launcher_preview(plan, o);
  const LauncherPreview* p = preview ? &*preview : nullptr;
  Value document = Value::Map{
      {"ddlrun", DDL_VERSION},
      {"dry_run", true},
      {"hosts_from", plan.hosts_from},
      {"hosts", hosts_document(plan)},
      {"ranks", plan.placement.ranks},
      {"job_id", plan.job_id},
      {"placement", placement_document(plan)},
      {"mode", mode_document(plan)},
      {"rings", rings_document(plan.topology)},
      {"prediction", prediction_document(plan)},
      {"nic", plan.nic.names.empty() ? Value() : Value(plan.nic.str())},
      {"launcher", launcher_document(plan, o, p)},
      {"jsrun", jsrun_document(plan, o, p)},
      {"tcp", o.tcp},
      {"topology_file", o.topology_file.empty() ? Value() : Value(o.topology_file)},
      {"timeout", o.timeout ? Value(*o.timeout) : Value()},
      {"mpiargs", strings(plan.mpiargs)},
      {"wdir", plan.wdir.empty() ? Value() : Value(plan.wdir)},
      {"environment", environment_document(plan)},
      {"program", strings(plan.program)},
      {"notes", strings(plan.warnings)},
  };
  if (plan.links) {  // only then: plans without it read as before
    auto& map = std::get<Value::Map>(document.v);
    const auto after_rings = std::find_if(map.begin(), map.end(),
                                          [](const auto& entry) { return entry.first == "rings"; });
    map.insert(after_rings + 1, {"links", links_document(plan)});
  }
  return document;
}

void write_plan(std::ostream& out, const JobPlan& plan, const Options& o) {
  if (o.output == OutputFormat::kJson || o.output == OutputFormat::kYaml) {
    SpilledText text;
    text.spill = &out;
    if (o.output == OutputFormat::kJson) {
      json(text, plan_document(plan, o), 0);
      text += '\n';
    } else {
      yaml(text, plan_document(plan, o));
    }
    out << hostfiles::printable(text.text);
    return;
  }
  out << hostfiles::printable(render_plan(plan, o));
}

std::string render_plan(const JobPlan& plan, const Options& o) {
  switch (o.output) {
    case OutputFormat::kJson:
      return to_json(plan_document(plan, o));
    case OutputFormat::kYaml:
      return to_yaml(plan_document(plan, o));
    case OutputFormat::kSvg:
      return plan_svg(plan, legend_with_prediction(plan));
    case OutputFormat::kText:
      break;
  }
  return render_text(plan, o);
}

}  // namespace ddl::ddlrun
