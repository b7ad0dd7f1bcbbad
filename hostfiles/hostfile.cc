#include <array>

#include "hostfiles/host_list.h"
#include "hostfiles/parse_util.h"

namespace ddl::hostfiles {

namespace {

constexpr std::array<std::string_view, 3> kKeys = {"slots", "max_slots", "max-slots"};

/// Throws for a word after the host that is not key=value.
[[noreturn]] void unexpected_word(const detail::Word& word, const Position& where) {
  const std::string text(word.text);
  if (detail::all_digits(word.text)) {
    detail::fail(
        where, word.offset,
        "unexpected '" + text + "' after the host name (did you mean 'slots=" + text + "'?)",
        word.text.size());
  }
  for (std::string_view key : kKeys) {
    if (word.text == key) {
      detail::fail(where, word.offset,
                   "'" + text + "' needs a value: write '" + text + "=4' with no spaces",
                   word.text.size());
    }
  }
  detail::fail(where, word.offset,
               "unexpected '" + text +
                   "' after the host name: give one host per line, then slots=N or max_slots=N",
               word.text.size());
}

}  // namespace

HostList parse_hostfile(std::string_view text, std::string_view source) {
  // Hosts are gathered with a provisional kind, which is fixed once the whole file is known.
  HostList staged;
  bool any_keys = false;
  bool any_counts = false;
  detail::LineCursor lines(text);
  std::string_view line;
  while (lines.next(line)) {
    const std::vector<detail::Word> words = detail::split_words(line.substr(0, line.find('#')));
    if (words.empty()) continue;
    Position where{std::string(source), lines.number(), 1, std::string(line)};
    const detail::Word& host = words.front();
    if (host.text.find('=') != std::string_view::npos) {
      detail::fail(
          where, host.offset,
          "missing host name before '" + std::string(host.text) + "': start the line with the host",
          host.text.size());
    }
    detail::HostSpec spec = detail::parse_host_spec(host.text, where, host.offset);
    std::optional<int> slots = spec.slots;
    std::optional<int> max_slots;
    size_t max_at = 0;
    size_t max_size = 0;
    bool slots_key = false;
    for (size_t k = 1; k < words.size(); ++k) {
      const detail::Word& word = words[k];
      const size_t eq = word.text.find('=');
      if (eq == std::string_view::npos) unexpected_word(word, where);
      const std::string_view key = word.text.substr(0, eq);
      const std::string_view value = word.text.substr(eq + 1);
      const size_t value_at = word.offset + eq + 1;
      if (key.empty()) {
        detail::fail(
            where, word.offset,
            "missing key before '" + std::string(word.text) + "': write slots=N or max_slots=N",
            word.text.size());
      }
      if (key == "slots") {
        if (spec.slots) {
          detail::fail(where, word.offset,
                       "both ':" + std::to_string(*spec.slots) +
                           "' and 'slots=' give a slot count: keep one",
                       word.text.size());
        }
        if (slots_key) {
          detail::fail(where, word.offset, "'slots' is given twice: keep one", word.text.size());
        }
        slots = detail::parse_slot_count(value, where, value_at);
        slots_key = true;
      } else if (key == "max_slots" || key == "max-slots") {
        if (max_slots) {
          detail::fail(where, word.offset, "'max_slots' is given twice: keep one",
                       word.text.size());
        }
        max_slots = detail::parse_count(value, "max_slots", where, value_at);
        max_at = value_at;
        max_size = value.size();
      } else {
        const std::string hint = did_you_mean(key, kKeys);
        detail::fail(where, word.offset,
                     "unknown key '" + std::string(key) + "'" +
                         (hint.empty() ? ": use slots=N or max_slots=N" : hint),
                     key.size());
      }
    }
    if (max_slots) {
      if (*max_slots == 0) {
        detail::fail(where, max_at,
                     "max_slots must be at least 1: leave the host out to give it no ranks",
                     max_size);
      }
      // As in Open MPI, max_slots alone sets the slots too.
      if (!slots) slots = max_slots;
      if (*max_slots < *slots) {
        detail::fail(where, max_at,
                     "max_slots " + std::to_string(*max_slots) + " is less than slots " +
                         std::to_string(*slots) + ": raise max_slots or lower slots",
                     max_size);
      }
    }
    any_keys = any_keys || words.size() > 1;
    any_counts = any_counts || spec.slots.has_value();
    const std::string origin = std::string(source) + ":" + std::to_string(lines.number());
    where.column = detail::column_of(host.offset);
    for (std::string& name : spec.names) {
      staged.add(Host{std::move(name), slots.value_or(1), max_slots, slots.has_value(),
                      SourceKind::kPlainHostfile, origin},
                 where);
    }
  }
  if (staged.empty()) {
    throw InputError(Position{std::string(source), 0, 0, {}},
                     "no hosts in hostfile: list one host per line, such as 'node1 slots=4'");
  }
  const SourceKind kind = any_keys     ? SourceKind::kOpenMpiHostfile
                          : any_counts ? SourceKind::kMpichHostfile
                                       : SourceKind::kPlainHostfile;
  HostList list;
  const Position where{std::string(source), 0, 0, {}};
  for (Host host : staged.hosts()) {
    host.kind = kind;
    list.add(std::move(host), where);
  }
  return list;
}

HostList read_hostfile(const std::string& path) {
  std::string text;
  int error = 0;
  if (!detail::read_text_file(path, text, error)) {
    throw InputError(Position{path, 0, 0, {}},
                     "cannot read hostfile: " + detail::error_text(error));
  }
  return parse_hostfile(text, path);
}

}  // namespace ddl::hostfiles
