// libFuzzer target for expand_hostlist (Slurm-style "node[01-04,07]" ranges). Only InputError may
// escape the parser.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "hostfiles/host_list.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const ddl::hostfiles::Position where{"fuzz", 1, 1, std::string(text)};
  try {
    (void)ddl::hostfiles::expand_hostlist(text, where);
  } catch (const ddl::hostfiles::InputError&) {
  }
  return 0;
}
