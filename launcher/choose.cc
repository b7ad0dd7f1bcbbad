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

constexpr std::array<std::string_view, 8> kNames = {"auto", "local",   "ssh",  "mpirun",
                                                    "pmix", "prterun", "srun", "jsrun"};

bool iequals(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

}  // namespace

std::string_view to_string(Kind kind) {
  return kNames[static_cast<size_t>(kind)];
}

std::optional<Kind> kind_from_string(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) return static_cast<Kind>(i);
  }
  return std::nullopt;
}

std::span<const std::string_view> kind_names() {
  return kNames;
}

Choice choose(Kind requested, const Situation& s) {
  if (requested == Kind::kPmix) {
    return s.all_hosts_local
               ? Choice{Kind::kLocal,
                        "asked for with --launcher pmix: ddlrun's own launcher with its PMIx "
                        "server (local: every host is this host)"}
               : Choice{Kind::kSsh,
                        "asked for with --launcher pmix: ddlrun's own launcher with its PMIx "
                        "server (ssh: some hosts are remote)"};
  }
  if (requested != Kind::kAuto) {
    return {requested, "asked for with --launcher " + std::string(to_string(requested))};
  }
  if (s.in_lsf_job) return {Kind::kJsrun, "inside an LSF job ($LSB_JOBID is set)"};
  if (s.in_slurm_job) return {Kind::kSrun, "inside a Slurm job ($SLURM_JOB_ID is set)"};
  if (s.all_hosts_local) return {Kind::kLocal, "every host is this host"};
  return {Kind::kSsh, "some hosts are remote and no batch system was found"};
}

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
