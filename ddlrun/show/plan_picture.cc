// From a JobPlan to what its picture shows (picture::Model); the layout and drawing need no
// plan. Ranks are drawn in the package of their GPU, else of their first CPU, else in a column
// of ranks without a package; racks come from the mode's dimension after those inside a host.
#include "ddlrun/show/plan_picture.h"

#include <algorithm>
#include <map>
#include <string>

#include "ddlrun/backends.h"

namespace ddl::ddlrun {

namespace {

using picture::HostInfo;
using picture::Model;
using picture::PackageInfo;
using picture::RankInfo;

std::string rank_detail(const comm::RankPlacement& r, const std::string& host) {
  std::string s = "rank " + std::to_string(r.rank) + " on " + host + ", local rank " +
                  std::to_string(r.local_rank);
  if (r.gpu >= 0) {
    s += ", GPU " + std::to_string(r.gpu);
    if (!r.gpu_bus_id.empty()) s += " (" + r.gpu_bus_id + ")";
  }
  s += r.cpus.empty() ? ", not bound" : ", CPUs " + r.cpus.str();
  if (!r.nic.empty()) s += ", NIC " + r.nic;
  if (!r.address.empty()) s += " (" + r.address + ")";
  return s;
}

std::vector<RankInfo> rank_infos(const JobPlan& plan, const std::map<std::string, int>& index) {
  std::vector<RankInfo> out;
  for (const comm::RankPlacement& r : plan.topology.ranks) {
    const std::string& host = plan.topology.hosts[static_cast<size_t>(r.host)].name;
    out.push_back(
        {r.rank, index.at(host), r.local_rank, r.gpu, r.cpus.str(), r.nic, rank_detail(r, host)});
  }
  return out;
}

/// The package (by position in inventory.packages) holding `pu`, or -1.
int package_of_pu(const mapper::Inventory& inventory, int pu) {
  for (size_t p = 0; p < inventory.packages.size(); ++p) {
    for (const mapper::Core& core : inventory.packages[p].cores) {
      for (int x : core.pus)
        if (x == pu) return static_cast<int>(p);
    }
  }
  return -1;
}

/// The package (by position) a rank is drawn in: its GPU's, else its first CPU's, else -1.
int package_of_rank(const mapper::Inventory& inventory, const comm::RankPlacement& r) {
  const mapper::Gpu* gpu = r.gpu_bus_id.empty() ? nullptr : inventory.find_gpu(r.gpu_bus_id);
  if (gpu && gpu->locality.package) {
    for (size_t p = 0; p < inventory.packages.size(); ++p)
      if (inventory.packages[p].os_index == *gpu->locality.package) return static_cast<int>(p);
  }
  return r.cpus.empty() ? -1 : package_of_pu(inventory, r.cpus.pus().front());
}

/// Each package of `inventory` with its cores' owners and GPUs; NICs and ranks not yet assigned.
std::vector<PackageInfo> packages_of(const mapper::Inventory& inventory,
                                     const std::map<int, int>& owner_of_pu) {
  std::vector<PackageInfo> out;
  for (const mapper::Package& package : inventory.packages) {
    PackageInfo p;
    p.os_index = package.os_index;
    for (const mapper::Core& core : package.cores) {
      int owner = -1;
      for (int pu : core.pus) {
        if (auto it = owner_of_pu.find(pu); it != owner_of_pu.end() && owner < 0)
          owner = it->second;
      }
      p.core_owner.push_back(owner);
    }
    for (const mapper::Gpu& gpu : inventory.gpus)
      if (gpu.locality.package == package.os_index) p.gpus.push_back(gpu.index);
    out.push_back(std::move(p));
  }
  return out;
}

/// Adds the NICs worth drawing (used by a rank, or physical) to their packages, those of no
/// known package to `other`.
void add_nics(const mapper::Inventory& inventory, const std::vector<int>& ranks,
              const JobPlan& plan, std::vector<PackageInfo>& packages, PackageInfo& other) {
  for (const mapper::Nic& nic : inventory.nics) {
    bool used = false;
    for (int r : ranks)
      used = used || plan.topology.ranks[static_cast<size_t>(r)].nic == nic.name;
    if (!used && nic.pci_bus_id.empty()) continue;
    PackageInfo* into = &other;
    for (PackageInfo& p : packages)
      if (nic.locality.package && p.os_index == *nic.locality.package) into = &p;
    into->nics.push_back(nic.name);
  }
}

/// The packages of one host, each with the ranks drawn in it.
std::vector<PackageInfo> host_packages(const JobPlan& plan, const mapper::HostUse& host) {
  std::vector<PackageInfo> packages;
  PackageInfo other;  // os_index -1: ranks and NICs of no known package
  if (host.inventory) {
    std::map<int, int> owner_of_pu;
    for (int r : host.ranks)
      for (int pu : plan.topology.ranks[static_cast<size_t>(r)].cpus.pus())
        owner_of_pu[pu] = r;
    packages = packages_of(*host.inventory, owner_of_pu);
    add_nics(*host.inventory, host.ranks, plan, packages, other);
  }
  for (int r : host.ranks) {
    const int p = host.inventory ? package_of_rank(*host.inventory,
                                                   plan.topology.ranks[static_cast<size_t>(r)])
                                 : -1;
    (p < 0 ? other : packages[static_cast<size_t>(p)]).ranks.push_back(r);
  }
  if (!other.ranks.empty() || !other.nics.empty()) packages.push_back(std::move(other));
  return packages;
}

/// Hosts per rack: the mode's dimension right after those that multiply to the ranks per host,
/// when every host runs as many ranks; else all hosts in one rack.
std::vector<std::vector<int>> racks_of(const JobPlan& plan, int hosts) {
  const int per_host = hosts ? plan.placement.ranks / hosts : 0;
  size_t d = 0;
  int inside = 1;
  while (d < plan.mode.dims.size() && inside < per_host)
    inside *= plan.mode.dims[d++];
  int per_rack = hosts;
  if (inside == per_host && per_host * hosts == plan.placement.ranks && d < plan.mode.dims.size())
    per_rack = std::max(plan.mode.dims[d], 1);
  std::vector<std::vector<int>> racks;
  for (int h = 0; h < hosts; ++h) {
    if (h % per_rack == 0) racks.emplace_back();
    racks.back().push_back(h);
  }
  return racks;
}

}  // namespace

picture::Legend plan_legend(const JobPlan& plan) {
  const int used =
      static_cast<int>(std::count_if(plan.placed.hosts.begin(), plan.placed.hosts.end(),
                                     [](const mapper::HostUse& h) { return h.count > 0; }));
  const std::vector<std::vector<int>> racks = racks_of(plan, used);
  std::string hosts = std::to_string(used);
  if (racks.size() > 1) {
    hosts +=
        " in " + std::to_string(racks.size()) + " racks of " + std::to_string(racks.front().size());
  }
  return {{{"mode", plan.mode.str() + " (" + plan.mode_reason + ")"},
           {"ranks", std::to_string(plan.placement.ranks) + " (" + plan.placement.describe() + ")"},
           {"hosts", hosts},
           {"launcher", std::string(chosen_backend(plan).name)}}};
}

picture::Model picture_model(const JobPlan& plan) {
  Model model;
  std::map<std::string, int> index;
  for (const mapper::HostUse& host : plan.placed.hosts) {
    if (host.count == 0) continue;
    index[host.name] = static_cast<int>(model.hosts.size());
    model.hosts.push_back({host.name, host_packages(plan, host)});
  }
  model.ranks = rank_infos(plan, index);
  model.racks = racks_of(plan, static_cast<int>(model.hosts.size()));
  model.rings = plan.topology.rings;
  return model;
}

std::string plan_svg(const JobPlan& plan, const picture::Legend& legend) {
  return picture::model_svg(picture_model(plan), "ddlrun plan: " + plan.mode.str(), legend);
}

}  // namespace ddl::ddlrun
