#include <array>

#include "base/text.h"
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

/// The slot counts one line gives: ":N" after the host, then its slots=N and max_slots=N words.
class HostKeys {
 public:
  explicit HostKeys(std::optional<int> colon_slots)
      : colon_slots_(colon_slots), slots_(colon_slots) {}

  /// Reads one word after the host, which must be slots=N, max_slots=N or max-slots=N, each at
  /// most once.
  void read(const detail::Word& word, const Position& where) {
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
      read_slots(word, value, value_at, where);
    } else if (key == "max_slots" || key == "max-slots") {
      if (max_slots_) {
        detail::fail(where, word.offset, "'max_slots' is given twice: keep one", word.text.size());
      }
      max_slots_ = detail::parse_count(value, "max_slots", where, value_at);
      max_at_ = value_at;
      max_size_ = value.size();
    } else {
      const std::string hint = base::did_you_mean(key, kKeys);
      detail::fail(where, word.offset,
                   "unknown key '" + std::string(key) + "'" +
                       (hint.empty() ? ": use slots=N or max_slots=N" : hint),
                   key.size());
    }
  }

  /// Checks max_slots against the slots once the line is read; as in Open MPI, max_slots alone
  /// sets the slots too.
  void settle(const Position& where) {
    if (!max_slots_) return;
    if (*max_slots_ == 0) {
      detail::fail(where, max_at_,
                   "max_slots must be at least 1: leave the host out to give it no ranks",
                   max_size_);
    }
    if (!slots_) slots_ = max_slots_;
    if (*max_slots_ < *slots_) {
      detail::fail(where, max_at_,
                   "max_slots " + std::to_string(*max_slots_) + " is less than slots " +
                       std::to_string(*slots_) + ": raise max_slots or lower slots",
                   max_size_);
    }
  }

  std::optional<int> slots() const { return slots_; }
  std::optional<int> max_slots() const { return max_slots_; }

 private:
  void read_slots(const detail::Word& word, std::string_view value, size_t value_at,
                  const Position& where) {
    if (colon_slots_) {
      detail::fail(
          where, word.offset,
          "both ':" + std::to_string(*colon_slots_) + "' and 'slots=' give a slot count: keep one",
          word.text.size());
    }
    if (slots_key_) {
      detail::fail(where, word.offset, "'slots' is given twice: keep one", word.text.size());
    }
    slots_ = detail::parse_slot_count(value, where, value_at);
    slots_key_ = true;
  }

  std::optional<int> colon_slots_;
  std::optional<int> slots_;
  bool slots_key_ = false;
  std::optional<int> max_slots_;
  size_t max_at_ = 0;    ///< where max_slots' value starts, for errors
  size_t max_size_ = 0;  ///< and its length
};

/// What the lines read so far show, which decides the file's kind.
struct FileShape {
  bool any_keys = false;    ///< some line has key=value words: Open MPI
  bool any_counts = false;  ///< some host has ":N": MPICH
};

/// Adds the hosts of one line (split into `words`, the first the host) to `staged`.
void stage_line(const std::vector<detail::Word>& words, Position where, FileShape& shape,
                HostList& staged) {
  const detail::Word& host = words.front();
  if (host.text.find('=') != std::string_view::npos) {
    detail::fail(
        where, host.offset,
        "missing host name before '" + std::string(host.text) + "': start the line with the host",
        host.text.size());
  }
  detail::HostSpec spec = detail::parse_host_spec(host.text, where, host.offset);
  HostKeys keys(spec.slots);
  for (size_t k = 1; k < words.size(); ++k)
    keys.read(words[k], where);
  keys.settle(where);
  shape.any_keys = shape.any_keys || words.size() > 1;
  shape.any_counts = shape.any_counts || spec.slots.has_value();
  const std::string origin = where.source + ":" + std::to_string(where.line);
  where.column = detail::column_of(host.offset);
  for (std::string& name : spec.names) {
    staged.add(Host{std::move(name), keys.slots().value_or(1), keys.max_slots(),
                    keys.slots().has_value(), SourceKind::kPlainHostfile, origin},
               where);
  }
}

}  // namespace

// How it works: each line is a host entry (a name, a range, "[ipv6]", optionally ":N") and
// key=value words, '#' starts a comment. Hosts are staged with a provisional kind, which is
// fixed once the whole file is known: Open MPI when any line has keys, MPICH when any host
// has ":N", else plain.
HostList parse_hostfile(std::string_view text, std::string_view source) {
  HostList staged;
  FileShape shape;
  detail::LineCursor lines(text);
  std::string_view line;
  while (lines.next(line)) {
    const std::vector<detail::Word> words = detail::split_words(line.substr(0, line.find('#')));
    if (words.empty()) continue;
    stage_line(words, Position{std::string(source), lines.number(), 1, std::string(line)}, shape,
               staged);
  }
  if (staged.empty()) {
    throw InputError(Position{std::string(source), 0, 0, {}},
                     "no hosts in hostfile: list one host per line, such as 'node1 slots=4'");
  }
  const SourceKind kind = shape.any_keys     ? SourceKind::kOpenMpiHostfile
                          : shape.any_counts ? SourceKind::kMpichHostfile
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
  return parse_hostfile(detail::read_input_file(path, Position{path, 0, 0, {}}, "hostfile"), path);
}

}  // namespace ddl::hostfiles
