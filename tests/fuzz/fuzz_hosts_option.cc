// libFuzzer target for parse_hosts_option (-H / --hosts). Only InputError may escape the parser.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hostfiles/host_list.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const ddl::hostfiles::HostList hosts = ddl::hostfiles::parse_hosts_option(text, "-H");
    (void)hosts.total_slots();
  } catch (const ddl::hostfiles::InputError&) {
  }
  return 0;
}
