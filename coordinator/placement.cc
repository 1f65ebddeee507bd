#include "coordinator/placement.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace pipetrain::coordinator {
namespace {

// Free workers grouped by zone, then host, each list in registry order.
struct Pool {
  // zone -> host -> worker indices (a worker without a host is a host of its own: "#<index>").
  std::map<std::string, std::map<std::string, std::vector<int>>> zones;

  int ZoneSize(const std::string& zone) const {
    int n = 0;
    for (const auto& [host, list] : zones.at(zone)) n += static_cast<int>(list.size());
    return n;
  }
  // Takes `count` workers of `zone`, fullest hosts first (ties: host name order).
  void TakeFromZone(const std::string& zone, int count, std::vector<int>* out) {
    auto& hosts = zones.at(zone);
    while (count > 0 && !hosts.empty()) {
      auto fullest = hosts.begin();
      for (auto it = hosts.begin(); it != hosts.end(); ++it) {
        if (it->second.size() > fullest->second.size()) fullest = it;
      }
      std::vector<int>& list = fullest->second;
      const int n = std::min<int>(count, static_cast<int>(list.size()));
      out->insert(out->end(), list.begin(), list.begin() + n);
      list.erase(list.begin(), list.begin() + n);
      count -= n;
      if (list.empty()) hosts.erase(fullest);
    }
    if (hosts.empty()) zones.erase(zone);
  }
};

}  // namespace

std::vector<int> PlaceRanks(const std::vector<WorkerLocation>& workers, int pipeline_ranks) {
  const int n = static_cast<int>(workers.size());
  std::vector<int> identity(n);
  std::iota(identity.begin(), identity.end(), 0);
  const int p = pipeline_ranks;
  // One rank per pipeline: nothing to keep together.
  if (p <= 1 || n % p != 0) return identity;
  Pool pool;
  for (int i = 0; i < n; ++i) {
    const std::string host = workers[i].host.empty() ? "#" + std::to_string(i) : workers[i].host;
    pool.zones[workers[i].zone][host].push_back(i);
  }
  std::vector<int> out;
  out.reserve(n);
  for (int q = 0; q < n / p; ++q) {
    std::vector<int> replica;
    // 1. One host with p free: the one with the fewest that are enough.
    const std::string* best_zone = nullptr;
    const std::string* best_host = nullptr;
    size_t best = 0;
    for (const auto& [zone, hosts] : pool.zones) {
      for (const auto& [host, list] : hosts) {
        if (static_cast<int>(list.size()) >= p && (best_host == nullptr || list.size() < best)) {
          best_zone = &zone;
          best_host = &host;
          best = list.size();
        }
      }
    }
    if (best_host != nullptr) {
      const std::string zone = *best_zone, host = *best_host;
      std::vector<int>& list = pool.zones[zone][host];
      replica.assign(list.begin(), list.begin() + p);
      list.erase(list.begin(), list.begin() + p);
      if (list.empty()) pool.zones[zone].erase(host);
      if (pool.zones[zone].empty()) pool.zones.erase(zone);
    } else {
      // 2. One zone with p free (the fewest that are enough), else 3. the fullest zones.
      std::string zone_fit;
      int fit = -1;
      for (const auto& [zone, hosts] : pool.zones) {
        const int size = pool.ZoneSize(zone);
        if (size >= p && (fit < 0 || size < fit)) {
          zone_fit = zone;
          fit = size;
        }
      }
      if (fit >= 0) {
        pool.TakeFromZone(zone_fit, p, &replica);
      } else {
        while (static_cast<int>(replica.size()) < p && !pool.zones.empty()) {
          std::string fullest;
          int most = -1;
          for (const auto& [zone, hosts] : pool.zones) {
            const int size = pool.ZoneSize(zone);
            if (size > most) {
              fullest = zone;
              most = size;
            }
          }
          pool.TakeFromZone(fullest, p - static_cast<int>(replica.size()), &replica);
        }
      }
    }
    // Neighbours next to each other: by zone, then host (stable: registry order within a host).
    std::stable_sort(replica.begin(), replica.end(), [&workers](int a, int b) {
      if (workers[a].zone != workers[b].zone) return workers[a].zone < workers[b].zone;
      return workers[a].host < workers[b].host;
    });
    out.insert(out.end(), replica.begin(), replica.end());
  }
  return out;
}

}  // namespace pipetrain::coordinator
