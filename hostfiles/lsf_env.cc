#include "hostfiles/host_list.h"
#include "hostfiles/parse_util.h"

namespace ddl::hostfiles {

namespace {

/// The hosts of a list with one word per slot ($LSB_DJOB_HOSTFILE, $LSB_HOSTS), whose repeats
/// `staged` has already added up: the first host is dropped when it is a launch node, and every
/// count is marked as given, since LSF gave it.
HostList counted_slots(const HostList& staged, const Position& where) {
  HostList list;
  for (size_t i = 0; i < staged.size(); ++i) {
    Host host = staged.hosts()[i];
    if (i == 0 && is_launch_node_name(host.name)) continue;
    host.slots_given = true;
    list.add(std::move(host), where);
  }
  return list;
}

[[noreturn]] void only_launch_node(const Position& where, std::string_view name) {
  throw InputError(where, "no compute hosts: only the launch node '" + std::string(name) +
                              "' is listed; ask LSF for compute nodes");
}

}  // namespace

HostList parse_lsf_mcpu_hosts(std::string_view value) {
  const std::string source = "$LSB_MCPU_HOSTS";
  Position where{source, 1, 1, std::string(value)};
  const std::vector<detail::Word> words = detail::split_words(value);
  if (words.empty()) {
    throw InputError(where, "no hosts: expected pairs of host and slot count such as 'node1 42'");
  }
  if (words.size() % 2 != 0) {
    const detail::Word& last = words.back();
    detail::fail(where, last.offset,
                 "odd number of words (" + std::to_string(words.size()) +
                     "): expected pairs of host and slot count such as 'node1 42'",
                 last.text.size());
  }
  HostList list;
  for (size_t i = 0; i < words.size(); i += 2) {
    const detail::Word& name = words[i];
    const detail::Word& count = words[i + 1];
    detail::check_host_name(name.text, where, name.offset);
    const int slots = detail::parse_slot_count(count.text, where, count.offset);
    if (i == 0 && is_launch_node_name(name.text)) {
      if (words.size() == 2) only_launch_node(where, name.text);
      continue;
    }
    where.column = detail::column_of(name.offset);
    list.add(
        Host{std::string(name.text), slots, std::nullopt, true, SourceKind::kLsfMcpuHosts, source},
        where);
    where.column = 1;
  }
  return list;
}

HostList parse_lsf_djob_hostfile(std::string_view text, std::string_view source) {
  HostList staged;
  detail::LineCursor lines(text);
  std::string_view line;
  while (lines.next(line)) {
    const std::vector<detail::Word> words = detail::split_words(line);
    if (words.empty()) continue;
    const Position where{std::string(source), lines.number(), 1, std::string(line)};
    if (words.size() > 1) {
      detail::fail(where, words[1].offset,
                   "unexpected '" + std::string(words[1].text) +
                       "' after the host name: an LSF hostfile lists one host per line",
                   words[1].text.size());
    }
    detail::check_host_name(words[0].text, where, words[0].offset);
    staged.add(Host{std::string(words[0].text), 1, std::nullopt, false, SourceKind::kLsfHostfile,
                    std::string(source) + ":" + std::to_string(lines.number())},
               detail::shifted(where, words[0].offset));
  }
  const Position where{std::string(source), 0, 0, {}};
  if (staged.empty()) {
    throw InputError(where, "no hosts in LSF hostfile: expected one host name per line");
  }
  HostList list = counted_slots(staged, where);
  if (list.empty()) only_launch_node(where, staged.hosts().front().name);
  return list;
}

HostList parse_lsf_hosts(std::string_view value) {
  const std::string source = "$LSB_HOSTS";
  Position where{source, 1, 1, std::string(value)};
  const std::vector<detail::Word> words = detail::split_words(value);
  if (words.empty()) throw InputError(where, "no hosts: expected host names such as 'node1 node1'");
  HostList staged;
  for (const detail::Word& word : words) {
    detail::check_host_name(word.text, where, word.offset);
    where.column = detail::column_of(word.offset);
    staged.add(
        Host{std::string(word.text), 1, std::nullopt, false, SourceKind::kLsfHostfile, source},
        where);
    where.column = 1;
  }
  HostList list = counted_slots(staged, where);
  if (list.empty()) only_launch_node(where, staged.hosts().front().name);
  return list;
}

}  // namespace ddl::hostfiles
