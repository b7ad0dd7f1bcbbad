// format_topology: one line per host, per rank and per ring, so that the fast reader
// (fast_reader.cc) can take the file line by line. Every string is double-quoted, every number is
// decimal.

#include <algorithm>
#include <charconv>
#include <type_traits>

#include "comm/topology.h"
#include "comm/topology/internal.h"

namespace ddl::comm {

namespace {

/// An int or a double, as to_chars writes it (a double: the shortest text that reads back).
template <typename Number>
void put_number(std::string& out, Number value) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  out.append(buf, end);
}

bool needs_escape(unsigned char c) {
  return c < 0x20 || c == '"' || c == '\\' || c >= 0x7f;
}

void put_quoted(std::string& out, std::string_view s) {
  out += '"';
  if (std::none_of(s.begin(), s.end(), [](char c) { return needs_escape(c); })) {
    out += s;
  } else {
    for (const char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      if (c == '"' || c == '\\') {
        out += '\\';
        out += ch;
      } else if (c < 0x20 || c == 0x7f) {
        constexpr std::string_view kHex = "0123456789abcdef";
        out += "\\x";
        out += kHex[c >> 4];
        out += kHex[c & 15];
      } else {
        out += ch;  // UTF-8 passes through
      }
    }
  }
  out += '"';
}

// `key` (with the separator before it), then the value.
template <typename Number>
requires std::is_arithmetic_v<Number>
void put_field(std::string& out, std::string_view key, Number value) {
  out += key;
  put_number(out, value);
}

void put_field(std::string& out, std::string_view key, std::string_view value) {
  out += key;
  put_quoted(out, value);
}

void put_header(std::string& out, const Topology& t) {
  out += "# ddlrun topology: where each rank runs and the rings it joins; see ddl-topology(5).\n";
  // Format 1.0 unless the file holds what only 1.1 has, so that older readers take it fast.
  out += "version: \"" + std::to_string(kTopologyFormatMajor) + "." +
         std::to_string(t.links ? kTopologyFormatMinor : 0) + "\"\n";
  put_field(out, "job_id: ", t.job_id);
  put_field(out, "\nmode: ", t.mode.str());
}

void put_host(std::string& out, const Host& h) {
  put_field(out, "  - {index: ", h.index);
  put_field(out, ", name: ", h.name);
  put_field(out, ", address: ", h.address);
  out += ", nics: [";
  for (size_t i = 0; i < h.nics.size(); ++i) {
    put_field(out, i ? ", {name: " : "{name: ", h.nics[i].name);
    put_field(out, ", kind: ", h.nics[i].kind);
    put_field(out, ", address: ", h.nics[i].address);
    out += '}';
  }
  out += "]}\n";
}

void put_rank(std::string& out, const RankPlacement& r) {
  put_field(out, "  - {rank: ", r.rank);
  put_field(out, ", local_rank: ", r.local_rank);
  put_field(out, ", host: ", r.host);
  put_field(out, ", gpu: ", r.gpu);
  put_field(out, ", gpu_bus_id: ", r.gpu_bus_id);
  put_field(out, ", gpu_uuid: ", r.gpu_uuid);
  put_field(out, ", cpus: ", r.cpus.str());
  put_field(out, ", nic: ", r.nic);
  put_field(out, ", address: ", r.address);
  out += "}\n";
}

/// "[1, 2, 3]".
void put_int_list(std::string& out, const std::vector<int>& values) {
  out += '[';
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ", ";
    put_number(out, values[i]);
  }
  out += ']';
}

/// `key` + " []" for no items, else `key` and a line `indent`"- " + put_item(item) per item.
template <typename T, typename PutItem>
void put_list(std::string& out, std::string_view key, std::string_view indent,
              const std::vector<T>& items, PutItem put_item) {
  out += key;
  out += items.empty() ? " []\n" : "\n";
  for (const T& item : items) {
    out += indent;
    out += "- ";
    put_item(item);
    out += '\n';
  }
}

/// The measured links (format 1.1), after the ring orders.
void put_links(std::string& out, const LinkMeasurement& links) {
  put_field(out, "links:\n  seconds: ", links.seconds);
  put_list(out, "\n  racks:", "    ", links.racks,
           [&](const std::vector<int>& rack) { put_int_list(out, rack); });
  put_list(out, "  levels:", "    ", links.levels, [&](const MeasuredLevel& level) {
    put_field(out, "{name: ", level.name);
    put_field(out, ", bytes_per_s: ", level.bytes_per_s);
    put_field(out, ", latency_s: ", level.latency_s);
    out += '}';
  });
  put_list(out, "  pairs:", "    ", links.pairs, [&](const LinkSample& pair) {
    put_field(out, "{a: ", pair.a);
    put_field(out, ", b: ", pair.b);
    put_field(out, ", bytes_per_s: ", pair.bytes_per_s);
    put_field(out, ", latency_s: ", pair.latency_s);
    out += '}';
  });
}

/// The text collected so far goes to the sink once it holds `chunk` bytes: a file of a million
/// ranks (200 MB) is never held whole.
class Chunks {
 public:
  Chunks(const topology::TextSink& sink, size_t chunk) : sink_(sink), chunk_(chunk) {
    out.reserve(chunk + 4096);
  }
  /// After each line: hands the text over when it is long enough. False once the sink said no.
  bool flush(bool last = false) {
    if (ok_ && (last || out.size() >= chunk_)) {
      ok_ = sink_(out);
      out.clear();
    }
    return ok_;
  }

  std::string out;

 private:
  const topology::TextSink& sink_;
  size_t chunk_;
  bool ok_ = true;
};

void put_rings(Chunks& c, int d, const std::vector<Ring>& rings) {
  c.out += "  - dimension: ";
  put_number(c.out, d);
  c.out += "\n    rings:";
  c.out += rings.empty() ? " []\n" : "\n";
  for (const Ring& ring : rings) {
    c.out += "      - ";
    put_int_list(c.out, ring);
    c.out += '\n';
    if (!c.flush()) return;
  }
}

}  // namespace

namespace topology {

bool write_topology_text(const Topology& t, const TextSink& sink, size_t chunk) {
  Chunks c(sink, chunk);
  put_header(c.out, t);
  c.out += t.hosts.empty() ? "\nhosts: []\n" : "\nhosts:\n";
  for (const Host& h : t.hosts) {
    put_host(c.out, h);
    if (!c.flush()) return false;
  }
  c.out += t.ranks.empty() ? "ranks: []\n" : "ranks:\n";
  for (const RankPlacement& r : t.ranks) {
    put_rank(c.out, r);
    if (!c.flush()) return false;
  }
  c.out += t.rings.empty() ? "ring_orders: []\n" : "ring_orders:\n";
  for (size_t d = 0; d < t.rings.size(); ++d)
    put_rings(c, static_cast<int>(d), t.rings[d]);
  if (t.links) put_links(c.out, *t.links);
  return c.flush(true);
}

}  // namespace topology

std::string format_topology(const Topology& t) {
  std::string out;
  out.reserve(256 + t.hosts.size() * 160 + t.ranks.size() * (180 + 8 * t.rings.size()));
  topology::write_topology_text(
      t,
      [&](std::string_view text) {
        out += text;
        return true;
      },
      size_t{1} << 16);
  return out;
}

}  // namespace ddl::comm
