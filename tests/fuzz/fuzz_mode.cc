// libFuzzer target for ddl::comm::parse_mode (DDL mode strings such as "p:6x2x1x1"). Only
// ModeError may escape; a mode that parses must read back equal from its canonical text.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "comm/mode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ddl::comm::Mode mode;
  try {
    mode = ddl::comm::parse_mode(text);
  } catch (const ddl::comm::ModeError&) {
    return 0;
  }
  (void)mode.ranks();
  const std::string canonical = mode.str();
  try {
    if (!(ddl::comm::parse_mode(canonical) == mode)) {
      std::fprintf(stderr, "fuzz_mode: '%s' reads back differently\n", canonical.c_str());
      std::abort();
    }
  } catch (const ddl::comm::ModeError& e) {
    std::fprintf(stderr, "fuzz_mode: canonical '%s' does not parse: %s\n", canonical.c_str(),
                 e.what());
    std::abort();
  }
  return 0;
}
