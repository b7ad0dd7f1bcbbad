#include "launcher/choose.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>

namespace ddl::launcher {

namespace {

bool iequals(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

}  // namespace

std::vector<std::string> local_host_names() {
  std::vector<std::string> names = {"localhost", "127.0.0.1", "::1"};
  std::array<char, 256> buf{};
  if (gethostname(buf.data(), buf.size() - 1) == 0) {
    std::string full(buf.data());
    names.push_back(full);
    if (auto dot = full.find('.'); dot != std::string::npos) names.push_back(full.substr(0, dot));
  }
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
      if (i->ifa_addr == nullptr) continue;
      std::array<char, INET6_ADDRSTRLEN> text{};
      const void* addr = nullptr;
      if (i->ifa_addr->sa_family == AF_INET) {
        addr = &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr;
      } else if (i->ifa_addr->sa_family == AF_INET6) {
        addr = &reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr;
      }
      if (addr && inet_ntop(i->ifa_addr->sa_family, addr, text.data(), text.size())) {
        names.emplace_back(text.data());
      }
    }
    freeifaddrs(list);
  }
  return names;
}

bool is_local_host(std::string_view host, std::span<const std::string> names) {
  in_addr v4{};
  if (inet_pton(AF_INET, std::string(host).c_str(), &v4) == 1) {
    if ((ntohl(v4.s_addr) >> 24) == 127) return true;
  }
  return std::any_of(names.begin(), names.end(),
                     [&](const std::string& n) { return iequals(n, host); });
}

}  // namespace ddl::launcher
