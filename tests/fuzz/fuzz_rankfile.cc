// libFuzzer target for parse_rankfile. A rankfile that parses must survive write_rankfile and a
// second parse unchanged, and its canonical text must be a fixed point; hosts_of is run against a
// small allocation. Only InputError may escape.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "hostfiles/rankfile.h"
#include "tests/hostfiles/rankfile_text.h"

namespace {

using ddl::hostfiles::HostList;
using ddl::hostfiles::InputError;
using ddl::hostfiles::Rankfile;

[[noreturn]] void fail(const char* what, std::string_view input, const std::string& text) {
  std::fprintf(stderr, "fuzz_rankfile: %s\n--- input ---\n%.*s\n--- written ---\n%s\n", what,
               static_cast<int>(input.size()), input.data(), text.c_str());
  std::abort();
}

HostList allocation() {
  HostList list;
  for (const char* name : {"a26n15", "b07n01", "c01n01"}) {
    ddl::hostfiles::Host host;
    host.name = name;
    host.slots = 4;
    host.slots_given = true;
    host.kind = ddl::hostfiles::SourceKind::kSlurm;
    list.add(host, ddl::hostfiles::Position{"fuzz", 0, 0, {}});
  }
  return list;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  Rankfile rankfile;
  try {
    rankfile = ddl::hostfiles::parse_rankfile(input, "fuzz");
  } catch (const InputError&) {
    return 0;
  }
  const std::string text = ddl::hostfiles::write_rankfile(rankfile);
  Rankfile again;
  try {
    again = ddl::hostfiles::parse_rankfile(text, "written");
  } catch (const InputError& e) {
    fail(e.what(), input, text);
  }
  if (!(again == rankfile)) fail("written rankfile parses differently", input, text);
  if (ddl::hostfiles::write_rankfile(again) != text) fail("canonical text changed", input, text);
  static const HostList kAllocation = allocation();
  try {
    const HostList hosts = ddl::hostfiles::hosts_of(rankfile, &kAllocation, "fuzz");
    if (hosts.total_slots() != static_cast<int>(rankfile.entries.size())) {
      fail("hosts_of lost ranks", input, text);
    }
  } catch (const InputError&) {
  }
  return 0;
}
