// libFuzzer target for parse_topology (topology files, ddl-topology(5)). Only TopologyError may
// escape. Whenever the fast line reader takes a text, the yaml-cpp reader must give the same
// topology, or both the same error; a topology that parses must read back equal from
// format_topology through both readers, and the fast one may only pass on a written text when it
// holds an escape or a non-ASCII byte.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "comm/topology.h"

namespace {

using ddl::comm::Topology;
using ddl::comm::TopologyError;

// What a reader gave: a topology, nothing (the fast reader passed), or an error.
struct Outcome {
  std::optional<Topology> topology;
  std::string error;
};

std::string show(const Outcome& o) {
  if (o.topology) return ddl::comm::format_topology(*o.topology);
  return o.error.empty() ? std::string("(not taken)") : "error: " + o.error;
}

[[noreturn]] void fail(const char* what, std::string_view input, const Outcome& a,
                       const Outcome& b) {
  std::fprintf(
      stderr, "fuzz_topology: %s\n--- input ---\n%.*s\n--- first ---\n%s\n--- second ---\n%s\n",
      what, static_cast<int>(input.size()), input.data(), show(a).c_str(), show(b).c_str());
  std::abort();
}

Outcome fast(std::string_view text) {
  Outcome o;
  try {
    o.topology = ddl::comm::parse_topology_fast(text, "fuzz");
  } catch (const TopologyError& e) {
    o.error = e.what();
  }
  return o;
}

Outcome generic(std::string_view text) {
  Outcome o;
  try {
    o.topology = ddl::comm::parse_topology_generic(text, "fuzz");
  } catch (const TopologyError& e) {
    o.error = e.what();
  }
  return o;
}

bool needs_yaml_cpp(std::string_view written) {
  for (const char c : written) {
    if (c == '\\' || static_cast<unsigned char>(c) >= 0x80) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  Outcome parsed;
  try {
    parsed.topology = ddl::comm::parse_topology(input, "fuzz");
  } catch (const TopologyError& e) {
    parsed.error = e.what();
  }

  const Outcome by_fast = fast(input);
  if (by_fast.topology || !by_fast.error.empty()) {
    const Outcome by_generic = generic(input);
    if (by_fast.topology != by_generic.topology || by_fast.error != by_generic.error) {
      fail("the fast and the yaml-cpp reader disagree", input, by_fast, by_generic);
    }
  }
  if (!parsed.topology) return 0;

  const Topology& t = *parsed.topology;
  const std::string written = ddl::comm::format_topology(t);
  const Outcome again_fast = fast(written);
  if (again_fast.topology ? !(*again_fast.topology == t)
                          : !again_fast.error.empty() || !needs_yaml_cpp(written)) {
    fail("the fast reader does not read the written text back", written, parsed, again_fast);
  }
  const Outcome again_generic = generic(written);
  if (!again_generic.topology || !(*again_generic.topology == t)) {
    fail("the yaml-cpp reader does not read the written text back", written, parsed, again_generic);
  }
  return 0;
}
