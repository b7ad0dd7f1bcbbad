#include "hostfiles/rankfile.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <unordered_map>

#include "base/text.h"
#include "hostfiles/parse_util.h"

namespace ddl::hostfiles {

// How it works
//
// parse_rankfile reads the text one line at a time. A '#' ends the useful part of a line; what
// is left, if not blank, must be
//
//   rank N = HOST [slot = SPEC]
//
// with any run of spaces or tabs around '=' and between fields. A Line holds the text and a read
// offset; each field is taken as a token (a run of characters up to a space, a tab or, where the
// field may be followed by '=', an '='), checked, and on a fault thrown as an InputError whose
// column and length cover that token. SPEC is split on ';' into groups, a group on its first ':'
// into socket and cores, and a list on ',' into "N" or "N-M" items; each piece keeps its offset
// into the line so an error points at the piece itself.
//
// Ranks are checked for duplicates as lines are read (the error names the first line), and once
// the file is read the entries are sorted by rank and must be exactly 0..N-1.

namespace {

constexpr int kMaxRank = 1048575;
constexpr int kMaxCpu = 65535;

bool is_blank(char c) {
  return c == ' ' || c == '\t';
}

/// `text` made safe to quote in a message (control bytes escaped).
std::string printable(std::string_view text) {
  std::string out;
  for (char c : text)
    out += detail::escaped_char(c);
  return out;
}

/// A decimal number 0..max, digits only (no sign, no spaces); nullopt otherwise.
std::optional<int> parse_number(std::string_view text, int max) {
  if (text.empty() || !std::all_of(text.begin(), text.end(), detail::is_digit)) return std::nullopt;
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value > static_cast<uint64_t>(max)) {
    return std::nullopt;
  }
  return static_cast<int>(value);
}

/// One line of the file being parsed, with a read offset, and the means to throw an InputError
/// pointing into it.
class Line {
 public:
  Line(std::string_view source, int number, std::string_view text, size_t end)
      : source_(source), number_(number), text_(text), end_(end) {}

  [[noreturn]] void fail(size_t offset, size_t length, std::string message) const {
    detail::fail(base(), offset, std::move(message), length);
  }

  /// The start of the line, for the detail:: helpers that take a base position and an offset.
  Position base() const { return Position{std::string(source_), number_, 1, std::string(text_)}; }

  void skip_blanks() {
    while (pos_ < end_ && is_blank(text_[pos_]))
      ++pos_;
  }
  bool at_end() const { return pos_ >= end_; }
  char peek() const { return text_[pos_]; }
  size_t pos() const { return pos_; }
  void advance() { ++pos_; }

  /// Reads a run of characters up to a blank (and up to '=' when `stop_at_equals`).
  std::string_view token(bool stop_at_equals) {
    const size_t start = pos_;
    while (pos_ < end_ && !is_blank(text_[pos_]) && !(stop_at_equals && text_[pos_] == '=')) {
      ++pos_;
    }
    return text_.substr(start, pos_ - start);
  }

  int number() const { return number_; }

 private:
  std::string_view source_;
  int number_;
  std::string_view text_;
  size_t end_;  ///< where the comment starts, or the line's length
  size_t pos_ = 0;
};

/// Parses a number in `text` (at `offset` in the line) or throws "<what> must be ...".
int number_or_fail(const Line& line, std::string_view text, size_t offset, int max,
                   std::string_view what) {
  const auto value = parse_number(text, max);
  if (!value) {
    line.fail(offset, text.size(),
              std::string(what) + " must be a number from 0 to " + std::to_string(max) + ", not '" +
                  printable(text) + "'");
  }
  return *value;
}

/// Parses "0-3,8" (at `offset` in the line) into ranges; `what` is "CPU" or "core".
std::vector<CpuRange> parse_cpu_list(const Line& line, std::string_view list, size_t offset,
                                     std::string_view what) {
  std::vector<CpuRange> ranges;
  const std::string number_name = std::string(what) + " number";
  size_t start = 0;
  while (true) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string_view item = list.substr(start, comma - start);
    const size_t at = offset + start;
    if (item.empty()) {
      line.fail(at, 1,
                "empty item in the " + std::string(what) + " list '" + printable(list) +
                    "': remove the extra ','");
    }
    // A leading '-' is a sign, not a range: "-1" is reported as a bad number.
    const size_t dash = item.find('-', 1);
    if (dash == std::string_view::npos) {
      const int cpu = number_or_fail(line, item, at, kMaxCpu, number_name);
      ranges.push_back({cpu, cpu});
    } else {
      const std::string_view first_text = item.substr(0, dash);
      const std::string_view last_text = item.substr(dash + 1);
      if (last_text.empty()) {
        line.fail(at + dash, 1,
                  "missing number after '-' in '" + printable(item) + "': write a range as 'N-M'");
      }
      const int first = number_or_fail(line, first_text, at, kMaxCpu, number_name);
      const int last = number_or_fail(line, last_text, at + dash + 1, kMaxCpu, number_name);
      if (first > last) {
        line.fail(at, item.size(),
                  "reversed range '" + printable(item) + "': write the lower number first ('" +
                      std::to_string(last) + "-" + std::to_string(first) + "')");
      }
      ranges.push_back({first, last});
    }
    if (comma == list.size()) break;
    start = comma + 1;
  }
  return ranges;
}

/// Parses one ';'-separated group: "1:0-2,4", "1:*" or "0-3,8".
SlotSpec parse_slot_group(const Line& line, std::string_view group, size_t offset) {
  SlotSpec spec;
  const size_t colon = group.find(':');
  if (colon == std::string_view::npos) {
    if (group == "*") {
      line.fail(offset, 1, "'*' needs a socket: write 'S:*' for every core of socket S");
    }
    spec.cpus = parse_cpu_list(line, group, offset, "CPU");
    return spec;
  }
  const std::string_view socket_text = group.substr(0, colon);
  const std::string_view cores = group.substr(colon + 1);
  if (socket_text.empty()) {
    line.fail(offset, 1, "missing socket number before ':': write 'S:CORES'");
  }
  spec.socket = number_or_fail(line, socket_text, offset, kMaxCpu, "socket");
  const size_t cores_at = offset + colon + 1;
  if (cores.empty()) {
    line.fail(cores_at - 1, 1,
              "missing cores after '" + std::string(socket_text) + ":': write '" +
                  std::string(socket_text) + ":*' for every core of socket " +
                  std::to_string(*spec.socket));
  }
  if (const size_t second = cores.find(':'); second != std::string_view::npos) {
    line.fail(cores_at + second, 1,
              "too many ':' in '" + printable(group) +
                  "': write 'S:CORES' and separate sockets with ';'");
  }
  if (cores == "*") {
    spec.all_cores = true;
  } else {
    spec.cpus = parse_cpu_list(line, cores, cores_at, "core");
  }
  return spec;
}

/// Parses the value of slot= (at `offset` in the line).
std::vector<SlotSpec> parse_slot_list(const Line& line, std::string_view value, size_t offset) {
  std::vector<SlotSpec> slots;
  size_t start = 0;
  while (true) {
    const size_t semi = std::min(value.find(';', start), value.size());
    const std::string_view group = value.substr(start, semi - start);
    if (group.empty()) {
      line.fail(offset + start, 1,
                "empty group in the slot list '" + printable(value) + "': remove the extra ';'");
    }
    slots.push_back(parse_slot_group(line, group, offset + start));
    if (semi == value.size()) break;
    start = semi + 1;
  }
  return slots;
}

/// Parses the text after "rank N=" up to the first blank: a host name or "+nK".
void parse_host(Line& line, RankfileEntry& entry, std::string_view rank_text) {
  line.skip_blanks();
  const size_t at = line.pos();
  const std::string_view host = line.token(false);
  if (host.empty()) {
    line.fail(
        at, 1,
        "missing host after 'rank " + std::string(rank_text) + "=': write 'rank N=HOST slot=SPEC'");
  }
  if (host[0] == '+') {
    const std::string_view digits = host.size() >= 2 && host[1] == 'n' ? host.substr(2) : "";
    const auto node = parse_number(digits, kMaxRank);
    if (!node) {
      line.fail(at, host.size(),
                "relative node must be '+n' and a number from 0 to " + std::to_string(kMaxRank) +
                    ", not '" + printable(host) + "'");
    }
    entry.relative_node = *node;
    return;
  }
  detail::check_host_name(host, line.base(), at);
  entry.host = std::string(host);
}

/// Parses the fields after the host: at most one "slot=SPEC".
void parse_keys(Line& line, RankfileEntry& entry) {
  static constexpr std::string_view kKeys[] = {"slot"};
  bool have_slot = false;
  while (true) {
    line.skip_blanks();
    if (line.at_end()) return;
    const size_t key_at = line.pos();
    const std::string_view key = line.token(true);
    if (key.empty()) {
      line.fail(key_at, 1, "unexpected '=' after the host: write 'slot=SPEC'");
    }
    line.skip_blanks();
    if (line.at_end() || line.peek() != '=') {
      if (key == "slot") {
        line.fail(key_at, key.size(), "expected '=' after 'slot': write 'slot=SPEC'");
      }
      line.fail(key_at, key.size(),
                "unexpected '" + printable(key) + "' after the host: only 'slot=SPEC' may follow");
    }
    if (key != "slot") {
      const std::string hint = base::did_you_mean(key, kKeys);
      line.fail(key_at, key.size(),
                "unknown key '" + printable(key) + "'" +
                    (hint.empty() ? ": the only key a rankfile line takes is 'slot'" : hint));
    }
    if (have_slot) {
      line.fail(key_at, key.size(), "slot= is given twice: join the lists with ';'");
    }
    have_slot = true;
    line.advance();  // '='
    line.skip_blanks();
    const size_t value_at = line.pos();
    const std::string_view value = line.token(false);
    if (value.empty()) {
      line.fail(value_at, 1,
                "empty slot list after 'slot=': give CPUs such as 'slot=0:0-6', or leave out "
                "'slot='");
    }
    entry.slots = parse_slot_list(line, value, value_at);
  }
}

/// Parses one non-blank line into an entry.
RankfileEntry parse_line(Line& line) {
  RankfileEntry entry;
  entry.line = line.number();
  line.skip_blanks();
  const size_t keyword_at = line.pos();
  const std::string_view keyword = line.token(true);
  if (keyword != "rank") {
    const std::string_view shown = keyword.empty() ? std::string_view("=") : keyword;
    line.fail(keyword_at, shown.size(),
              "a rankfile line must start with 'rank', not '" + printable(shown) +
                  "': write 'rank N=HOST slot=SPEC'");
  }
  line.skip_blanks();
  const size_t rank_at = line.pos();
  const std::string_view rank_text = line.token(true);
  if (rank_text.empty()) {
    line.fail(rank_at, 1, "missing rank number after 'rank': write 'rank N=HOST slot=SPEC'");
  }
  entry.rank = number_or_fail(line, rank_text, rank_at, kMaxRank, "rank");
  line.skip_blanks();
  if (line.at_end() || line.peek() != '=') {
    line.fail(
        line.pos(), 1,
        "expected '=' after 'rank " + std::string(rank_text) + "': write 'rank N=HOST slot=SPEC'");
  }
  line.advance();
  parse_host(line, entry, rank_text);
  parse_keys(line, entry);
  return entry;
}

std::string relative_node_text(int node) {
  return "+n" + std::to_string(node);
}

std::string origin_of(std::string_view source, int line) {
  Position where{std::string(source), line, 0, {}};
  return where.str();
}

}  // namespace

Rankfile parse_rankfile(std::string_view text, std::string_view source) {
  Rankfile rankfile;
  std::unordered_map<int, int> line_of_rank;
  detail::LineCursor lines(text);
  for (std::string_view line_text; lines.next(line_text);) {
    const int number = lines.number();
    const size_t end = std::min(line_text.find('#'), line_text.size());
    if (std::all_of(line_text.begin(), line_text.begin() + static_cast<ptrdiff_t>(end), is_blank)) {
      continue;
    }
    Line line(source, number, line_text, end);
    RankfileEntry entry = parse_line(line);
    const auto [it, inserted] = line_of_rank.emplace(entry.rank, number);
    if (!inserted) {
      // Point at the rank number of this, the second, line.
      Line again(source, number, line_text, end);
      again.skip_blanks();
      again.token(true);
      again.skip_blanks();
      const size_t rank_at = again.pos();
      const std::string_view rank_text = again.token(true);
      again.fail(rank_at, rank_text.size(),
                 "rank " + std::to_string(entry.rank) + " is already given at " +
                     origin_of(source, it->second));
    }
    rankfile.entries.push_back(std::move(entry));
  }
  if (rankfile.entries.empty()) {
    throw InputError(Position{std::string(source), 0, 0, {}},
                     "no ranks in the rankfile: add lines such as 'rank 0=node01 slot=0:0-6'");
  }
  std::sort(rankfile.entries.begin(), rankfile.entries.end(),
            [](const RankfileEntry& a, const RankfileEntry& b) { return a.rank < b.rank; });
  for (size_t i = 0; i < rankfile.entries.size(); ++i) {
    if (rankfile.entries[i].rank != static_cast<int>(i)) {
      throw InputError(Position{std::string(source), 0, 0, {}},
                       "rank " + std::to_string(i) +
                           " is missing: a rankfile must list ranks 0 to N-1 exactly once");
    }
  }
  return rankfile;
}

Rankfile read_rankfile(const std::string& path) {
  return parse_rankfile(detail::read_input_file(path, Position{path, 0, 0, {}}, "rankfile"), path);
}

HostList hosts_of(const Rankfile& rankfile, const HostList* allocation, std::string_view source) {
  struct Counted {
    std::string name;
    int slots = 0;
    int line = 0;
  };
  std::vector<Counted> counted;
  std::unordered_map<std::string, size_t> index_of;  // lower-case name -> index in `counted`
  for (const RankfileEntry& entry : rankfile.entries) {
    std::string name = entry.host;
    if (entry.relative_node) {
      const int node = *entry.relative_node;
      const Position where{std::string(source), entry.line, 0, {}};
      if (allocation == nullptr) {
        throw InputError(where, "relative node '" + relative_node_text(node) +
                                    "' needs a batch allocation, but there is none: name the "
                                    "host instead, or run inside an LSF or Slurm job");
      }
      if (static_cast<size_t>(node) >= allocation->size()) {
        const size_t have = allocation->size();
        const std::string fix = have == 0 ? "name the host"
                                          : "use '+n0' to '" +
                                                relative_node_text(static_cast<int>(have - 1)) +
                                                "' or name the host";
        throw InputError(where, "relative node '" + relative_node_text(node) + "' needs at least " +
                                    std::to_string(node + 1) + (node == 0 ? " host" : " hosts") +
                                    " in the allocation, but it has " + std::to_string(have) +
                                    ": " + fix);
      }
      name = allocation->hosts()[static_cast<size_t>(node)].name;
    }
    const auto [it, inserted] = index_of.emplace(detail::lowercase(name), counted.size());
    if (inserted) counted.push_back({std::move(name), 0, entry.line});
    ++counted[it->second].slots;
  }
  HostList hosts;
  for (Counted& c : counted) {
    Host host;
    host.name = std::move(c.name);
    host.slots = c.slots;
    host.slots_given = true;
    host.kind = SourceKind::kRankfile;
    host.origin = origin_of(source, c.line);
    hosts.add(std::move(host), Position{std::string(source), c.line, 0, {}});
  }
  return hosts;
}

}  // namespace ddl::hostfiles
