// libFuzzer target for the LSF parsers. The first byte picks the parser (odd: $LSB_MCPU_HOSTS,
// even: the $LSB_DJOB_HOSTFILE text); the rest is its input. Only InputError may escape.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hostfiles/host_list.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (data[0] % 2 == 1) {
      (void)ddl::hostfiles::parse_lsf_mcpu_hosts(text);
    } else {
      (void)ddl::hostfiles::parse_lsf_djob_hostfile(text, "/tmp/hostfile");
    }
  } catch (const ddl::hostfiles::InputError&) {
  }
  return 0;
}
