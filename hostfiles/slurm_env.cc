#include "hostfiles/host_list.h"
#include "hostfiles/parse_util.h"

namespace ddl::hostfiles {

namespace {

/// "1 node", "3 nodes".
std::string count_of(size_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

}  // namespace

std::vector<int> parse_slurm_tasks_per_node(std::string_view value) {
  const Position where{"$SLURM_TASKS_PER_NODE", 1, 1, std::string(value)};
  if (detail::trim(value).empty()) {
    throw InputError(where, "empty value: expected task counts such as '2(x3),1'");
  }
  std::vector<int> counts;
  size_t start = 0;
  while (start <= value.size()) {
    size_t comma = value.find(',', start);
    if (comma == std::string_view::npos) comma = value.size();
    const std::string_view item = value.substr(start, comma - start);
    const size_t at = start;
    start = comma + 1;
    if (item.empty()) detail::fail(where, at, "empty task count: remove the extra ','");
    // "N" or "N(xM)": N tasks on each of M nodes.
    const size_t paren = item.find('(');
    const int tasks = detail::parse_count(item.substr(0, paren), "task count", where, at);
    if (tasks == 0) {
      detail::fail(where, at, "task count must be at least 1: check the job's task layout",
                   paren == std::string_view::npos ? item.size() : paren);
    }
    int repeat = 1;
    if (paren != std::string_view::npos) {
      const std::string shown(item);
      if (item.back() != ')' || item.size() < paren + 2) {
        detail::fail(where, at + paren,
                     "unclosed '(' in '" + shown + "': write counts such as '2(x3)'",
                     item.size() - paren);
      }
      const std::string_view inner = item.substr(paren + 1, item.size() - paren - 2);
      if (inner.empty() || inner.front() != 'x') {
        detail::fail(where, at + paren + 1,
                     "expected 'x' after '(' in '" + shown + "': write counts such as '2(x3)'");
      }
      repeat = detail::parse_count(inner.substr(1), "repeat count", where, at + paren + 2);
      if (repeat == 0) {
        detail::fail(where, at + paren + 2,
                     "repeat count must be at least 1: write counts such as '2(x3)'",
                     inner.size() - 1);
      }
    }
    if (counts.size() + static_cast<size_t>(repeat) > detail::kMaxNames) {
      detail::fail(
          where, at,
          "more than " + std::to_string(detail::kMaxNames) + " task counts: check the value",
          item.size());
    }
    counts.insert(counts.end(), static_cast<size_t>(repeat), tasks);
  }
  return counts;
}

HostList parse_slurm(std::string_view nodelist, std::string_view tasks_per_node) {
  const std::string source = "$SLURM_JOB_NODELIST";
  std::vector<std::string> names =
      expand_hostlist(nodelist, Position{source, 1, 1, std::string(nodelist)});
  const std::vector<int> counts = parse_slurm_tasks_per_node(tasks_per_node);
  if (counts.size() != names.size()) {
    throw InputError(Position{"$SLURM_TASKS_PER_NODE", 1, 1, std::string(tasks_per_node)},
                     count_of(counts.size(), "task count") + " but " +
                         count_of(names.size(), "node") + " in " + source +
                         ": both variables must come from the same job",
                     detail::length_of(tasks_per_node.size()));
  }
  HostList list;
  const Position where{source, 1, 0, {}};
  for (size_t i = 0; i < names.size(); ++i) {
    list.add(Host{std::move(names[i]), counts[i], std::nullopt, true, SourceKind::kSlurm, source},
             where);
  }
  return list;
}

}  // namespace ddl::hostfiles
