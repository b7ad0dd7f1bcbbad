#include "hostfiles/host_list.h"
#include "hostfiles/parse_util.h"

namespace ddl::hostfiles {

namespace detail {

namespace {

/// Checks the address between the brackets of `spec` ("[fe80::1%eth0]:2"), which ends at
/// `close`; `spec` is written at `offset` right of `base`.
void check_ipv6(std::string_view spec, size_t close, const Position& base, size_t offset) {
  const std::string_view address = spec.substr(1, close - 1);
  if (address.empty()) {
    fail(base, offset, "empty IPv6 address '[]': write an address such as '[fe80::1]'", 2);
  }
  const size_t percent = address.find('%');
  const std::string_view ip = address.substr(0, percent);
  if (ip.find(':') == std::string_view::npos) {
    fail(base, offset,
         "'" + std::string(spec.substr(0, close + 1)) +
             "' is not an IPv6 address: put a name before a range ('node[01-04]') or write an "
             "address such as '[fe80::1]'",
         close + 1);
  }
  for (size_t i = 0; i < ip.size(); ++i) {
    if (!is_hex_digit(ip[i]) && ip[i] != ':' && ip[i] != '.') {
      fail(base, offset + 1 + i,
           "invalid character " + show_char(ip[i]) + " in IPv6 address '" + std::string(address) +
               "': use hex digits, ':' and '.'");
    }
  }
  if (percent == std::string_view::npos) return;
  const std::string_view zone = address.substr(percent + 1);
  if (zone.empty()) {
    fail(base, offset + 1 + percent,
         "empty zone after '%' in IPv6 address '" + std::string(address) +
             "': add an interface such as '%eth0' or drop the '%'");
  }
  for (size_t i = 0; i < zone.size(); ++i) {
    if (!is_host_char(zone[i])) {
      fail(base, offset + 2 + percent + i,
           "invalid character " + show_char(zone[i]) + " in the zone of IPv6 address '" +
               std::string(address) + "': use letters, digits, '-', '.' and '_'");
    }
  }
  if (address.size() > kMaxHostNameLength) {
    fail(base, offset,
         "IPv6 address is longer than " + std::to_string(kMaxHostNameLength) +
             " characters: check the address",
         close + 1);
  }
}

}  // namespace

HostSpec parse_host_spec(std::string_view spec, const Position& base, size_t offset) {
  HostSpec out;
  std::string_view count;
  size_t count_at = 0;
  bool has_count = false;
  if (!spec.empty() && spec.front() == '[') {
    // A leading '[' starts an IPv6 literal: "[fe80::1]" or "[fe80::1]:4".
    const size_t close = spec.find(']');
    if (close == std::string_view::npos) {
      fail(base, offset, "unclosed '[' in '" + std::string(spec) + "': add ']' after the address",
           spec.size());
    }
    check_ipv6(spec, close, base, offset);
    const std::string_view rest = spec.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') {
        const std::string address(spec.substr(0, close + 1));
        fail(base, offset + close + 1,
             "unexpected '" + std::string(rest) + "' after ']': write '" + address + "' or '" +
                 address + ":4'",
             rest.size());
      }
      has_count = true;
      count = rest.substr(1);
      count_at = close + 2;
    }
    out.names.emplace_back(spec.substr(1, close - 1));
  } else {
    // A ':' outside brackets starts the slot count: "node[01-04]:2".
    size_t colon = std::string_view::npos;
    bool inside = false;
    for (size_t i = 0; i < spec.size() && colon == std::string_view::npos; ++i) {
      if (spec[i] == '[') inside = true;
      if (spec[i] == ']') inside = false;
      if (spec[i] == ':' && !inside) colon = i;
    }
    std::string_view name = spec;
    if (colon != std::string_view::npos) {
      name = spec.substr(0, colon);
      count = spec.substr(colon + 1);
      count_at = colon + 1;
      has_count = true;
      if (count.find(':') != std::string_view::npos) {
        fail(base, offset,
             "IPv6 address '" + std::string(spec) + "' needs brackets: write '[" +
                 std::string(spec) + "]'",
             spec.size());
      }
      if (name.empty()) {
        fail(base, offset,
             "missing host name before ':" + std::string(count) +
                 "': write 'node1:" + std::string(count) + "'");
      }
    }
    out.names = expand_names(name, base, offset);
  }
  if (has_count) out.slots = parse_slot_count(count, base, offset + count_at);
  return out;
}

}  // namespace detail

HostList parse_hosts_option(std::string_view text, std::string_view source) {
  Position where{std::string(source), 1, 1, std::string(text)};
  if (detail::trim(text).empty()) {
    throw InputError(
        where, "empty host list: give hosts such as '" + std::string(source) + " node1:4,node2:4'");
  }
  HostList list;
  // Split at the commas outside brackets: "node[01-04,07]:2,gpu1".
  bool inside = false;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] == '[') inside = true;
    if (i < text.size() && text[i] == ']') inside = false;
    if (i < text.size() && (text[i] != ',' || inside)) continue;
    std::string_view entry = text.substr(start, i - start);
    size_t at = start;
    start = i + 1;
    while (!entry.empty() && detail::is_space(entry.front())) {
      entry.remove_prefix(1);
      ++at;
    }
    while (!entry.empty() && detail::is_space(entry.back())) {
      entry.remove_suffix(1);
    }
    if (entry.empty()) detail::fail(where, at, "empty host name: remove the extra ','");
    detail::HostSpec spec = detail::parse_host_spec(entry, where, at);
    where.column = detail::column_of(at);
    for (std::string& name : spec.names) {
      list.add(Host{std::move(name), spec.slots.value_or(1), std::nullopt, spec.slots.has_value(),
                    SourceKind::kHostsOption, std::string(source)},
               where);
    }
    where.column = 1;
  }
  return list;
}

}  // namespace ddl::hostfiles
