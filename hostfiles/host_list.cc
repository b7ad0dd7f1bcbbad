#include "hostfiles/host_list.h"

#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "base/check.h"
#include "base/table.h"
#include "hostfiles/parse_util.h"

namespace ddl::hostfiles {

namespace {

constexpr std::pair<SourceKind, std::string_view> kSourceNames[] = {
    {SourceKind::kDefault, "default"},
    {SourceKind::kHostsOption, "-H"},
    {SourceKind::kOpenMpiHostfile, "openmpi-hostfile"},
    {SourceKind::kMpichHostfile, "mpich-hostfile"},
    {SourceKind::kPlainHostfile, "plain-hostfile"},
    {SourceKind::kLsfHostfile, "lsf-hostfile"},
    {SourceKind::kLsfMcpuHosts, "lsf-mcpu-hosts"},
    {SourceKind::kSlurm, "slurm"},
    {SourceKind::kRankfile, "rankfile"}};

}  // namespace

std::string_view to_string(SourceKind kind) {
  return base::lookup(kSourceNames, kind).value_or("unknown");
}

namespace {

bool gave_count(const Host& host) {
  return host.slots_given || host.max_slots.has_value();
}

}  // namespace

void HostList::add(Host host, const Position& where) {
  std::string key = detail::lowercase(host.name);
  const auto it = index_.find(key);
  if (it == index_.end()) {
    if (hosts_.size() == detail::kMaxNames) {
      throw InputError(where, "more than " + std::to_string(detail::kMaxNames) +
                                  " hosts, the most a host list may hold (as its ranges do): "
                                  "list fewer hosts");
    }
    index_.emplace(std::move(key), hosts_.size());
    hosts_.push_back(std::move(host));
    return;
  }
  Host& first = hosts_[it->second];
  if (gave_count(first) || gave_count(host)) {
    std::string message = "host '" + host.name + "' is already listed";
    if (!first.origin.empty()) message += " at " + first.origin;
    if (first.name != host.name) message += " (as '" + first.name + "')";
    throw InputError(where, message + ": list each host once, with all its slots");
  }
  const int64_t slots = int64_t{first.slots} + int64_t{host.slots};
  if (slots > detail::kMaxSlots) {
    throw InputError(where, "host '" + first.name + "' has more than " +
                                std::to_string(detail::kMaxSlots) + " slots: list it fewer times");
  }
  first.slots = static_cast<int>(slots);
}

int HostList::total_slots() const {
  int64_t total = 0;
  for (const Host& h : hosts_) {
    total += h.slots;
    if (total >= INT_MAX) return INT_MAX;
  }
  return static_cast<int>(total);
}

const Host* HostList::find(std::string_view name) const {
  const auto it = index_.find(detail::lowercase(name));
  return it == index_.end() ? nullptr : &hosts_[it->second];
}

bool is_launch_node_name(std::string_view name) {
  return detail::starts_with_nocase(name, "batch") || detail::starts_with_nocase(name, "login");
}

std::optional<std::string> process_getenv(const char* name, void* /*context*/) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

namespace {

/// Every Slurm node with one slot, when $SLURM_TASKS_PER_NODE is not set.
HostList slurm_nodes_alone(std::string_view nodelist) {
  const Position where{"$SLURM_JOB_NODELIST", 1, 1, std::string(nodelist)};
  HostList list;
  for (std::string& name : expand_hostlist(nodelist, where)) {
    list.add(
        Host{std::move(name), 1, std::nullopt, false, SourceKind::kSlurm, "$SLURM_JOB_NODELIST"},
        where);
  }
  return list;
}

}  // namespace

std::optional<HostList> allocation_from_environment(GetEnv getenv_fn, void* context) {
  if (getenv_fn == nullptr) getenv_fn = process_getenv;
  // An empty variable counts as unset.
  const auto get = [&](const char* name) -> std::optional<std::string> {
    std::optional<std::string> value = getenv_fn(name, context);
    if (value && value->empty()) return std::nullopt;
    return value;
  };
  if (get("LSB_JOBID")) {
    if (const auto path = get("LSB_DJOB_HOSTFILE")) {
      const std::string text = detail::read_input_file(
          *path, Position{"$LSB_DJOB_HOSTFILE", 0, 0, {}}, "'" + *path + "'");
      return parse_lsf_djob_hostfile(text, *path);
    }
    if (const auto value = get("LSB_MCPU_HOSTS")) return parse_lsf_mcpu_hosts(*value);
    if (const auto value = get("LSB_HOSTS")) return parse_lsf_hosts(*value);
  }
  if (get("SLURM_JOB_ID")) {
    if (const auto nodelist = get("SLURM_JOB_NODELIST")) {
      if (const auto tasks = get("SLURM_TASKS_PER_NODE")) return parse_slurm(*nodelist, *tasks);
      return slurm_nodes_alone(*nodelist);
    }
  }
  // The hostfile mpirun itself would read: what Kubeflow's MPIJob gives its launcher pod.
  for (const char* name : kMpiHostfileVariables) {
    if (const auto path = get(name)) {
      const std::string text = detail::read_input_file(
          *path, Position{std::string("$") + name, 0, 0, {}}, "'" + *path + "'");
      return parse_hostfile(text, *path);
    }
  }
  return std::nullopt;
}

namespace detail {

std::vector<Word> split_words(std::string_view text) {
  std::vector<Word> words;
  size_t i = 0;
  while (i < text.size()) {
    if (is_space(text[i])) {
      ++i;
      continue;
    }
    const size_t start = i;
    while (i < text.size() && !is_space(text[i])) {
      ++i;
    }
    words.push_back(Word{text.substr(start, i - start), start});
  }
  return words;
}

int parse_count(std::string_view token, std::string_view label, const Position& base,
                size_t offset) {
  const std::string name(label);
  if (token.empty()) fail(base, offset, "missing " + name + ": write a whole number such as 4");
  const std::string shown(token);
  if (token.front() == '-' && all_digits(token.substr(1))) {
    fail(base, offset, name + " '" + shown + "' is negative: write a whole number of at least 1",
         token.size());
  }
  if (!all_digits(token)) {
    fail(base, offset, "invalid " + name + " '" + shown + "': write a whole number such as 4",
         token.size());
  }
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (ec != std::errc() || end != token.data() + token.size() || value > kMaxSlots) {
    fail(base, offset,
         name + " '" + shown + "' is too large: use at most " + std::to_string(kMaxSlots),
         token.size());
  }
  return static_cast<int>(value);
}

int parse_slot_count(std::string_view token, const Position& base, size_t offset) {
  const int slots = parse_count(token, "slot count", base, offset);
  if (slots == 0) {
    fail(base, offset, "slot count must be at least 1: leave the host out to give it no ranks",
         token.size());
  }
  return slots;
}

void bad_host_char(std::string_view name, size_t index, const Position& base, size_t offset) {
  const char c = name[index];
  std::string message =
      "invalid character " + show_char(c) + " in host name '" + std::string(name) + "': ";
  message += c == '@' ? "give the user name in ~/.ssh/config instead"
                      : "use letters, digits, '-', '.' and '_'";
  fail(base, offset + index, std::move(message));
}

void check_host_name(std::string_view name, const Position& base, size_t offset) {
  if (name.empty()) fail(base, offset, "empty host name: give a name or an address");
  for (size_t i = 0; i < name.size(); ++i) {
    if (!is_host_char(name[i])) bad_host_char(name, i, base, offset);
  }
  if (name.front() == '-') {
    fail(base, offset,
         "host name '" + std::string(name) +
             "' starts with '-': check for an option given where a host was expected",
         name.size());
  }
  if (name.size() > kMaxHostNameLength) {
    fail(base, offset,
         "host name is longer than " + std::to_string(kMaxHostNameLength) +
             " characters: use a shorter name or the address",
         name.size());
  }
}

std::string read_input_file(const std::string& path, const Position& where, std::string_view what) {
  const auto fail = [&](int error) {
    throw InputError(where, "cannot read " + std::string(what) + ": " + base::errno_text(error));
  };
  errno = 0;
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) fail(errno != 0 ? errno : EIO);
  std::string text;
  std::vector<char> buffer(size_t{1} << 16);
  int error = 0;
  for (size_t n = buffer.size(); n == buffer.size() && error == 0;) {
    n = std::fread(buffer.data(), 1, buffer.size(), file);
    text.append(buffer.data(), n);
    if (text.size() > kMaxFileBytes) {
      error = EFBIG;
    } else if (n < buffer.size() && std::ferror(file)) {
      error = errno != 0 ? errno : EIO;
    }
  }
  std::fclose(file);
  if (error != 0) fail(error);
  return text;
}

}  // namespace detail

}  // namespace ddl::hostfiles
