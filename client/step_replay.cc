#include "client/step_replay.h"

#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/report.h"
#include "common/status_macros.h"
#include "schedule/shared_core_simulator.h"

namespace pipetrain::client {
namespace {

using schedule::ActionKind;

// One message of replica 0: (sending rank, start) and (receiving rank, start, end), each on its
// rank's own clock (ns from that rank's step start).
struct Message {
  int from = 0, to = 0;
  int64_t sent = 0, recv_start = 0, recv_end = 0;
};

std::vector<Message> Messages(const schedule::Schedule& s, const v1::StepTrace& trace) {
  // A send of stage `stage` reaches the receive of its peer stage; both sides are keyed by
  // (receiving stage, microbatch, activation or gradient).
  using Key = std::tuple<int, int, bool>;
  std::map<Key, std::pair<int, int64_t>> sends;
  std::map<Key, std::tuple<int, int64_t, int64_t>> recvs;
  for (int r = 0; r < s.num_workers; ++r) {
    const auto& list = s.worker_actions[r];
    for (size_t i = 0; i < list.size(); ++i) {
      const schedule::Action& a = list[i];
      const v1::ActionTiming& t = trace.ranks(r).timings(static_cast<int>(i));
      const bool act = a.kind == ActionKind::kSendAct || a.kind == ActionKind::kRecvAct;
      if (schedule::IsSend(a.kind)) {
        sends[{schedule::PeerStage(a), a.microbatch, act}] = {r, t.start_ns()};
      } else if (schedule::IsRecv(a.kind)) {
        recvs[{a.stage, a.microbatch, act}] = {r, t.start_ns(), t.end_ns()};
      }
    }
  }
  std::vector<Message> out;
  for (const auto& [key, send] : sends) {
    const auto it = recvs.find(key);
    if (it == recvs.end() || std::get<0>(it->second) == send.first) continue;
    out.push_back({send.first, std::get<0>(it->second), send.second, std::get<1>(it->second),
                   std::get<2>(it->second)});
  }
  return out;
}

}  // namespace

absl::StatusOr<std::pair<double, int>> MeasuredHop(const schedule::Schedule& schedule,
                                                   const v1::StepTrace& trace) {
  PT_RETURN_IF_ERROR(MeasuredStep(schedule, trace).status());  // the trace fits the plan
  const std::vector<Message> messages = Messages(schedule, trace);
  // Apparent hop a -> b: recv_end(b's clock) - sent(a's clock) = hop + (b's offset - a's).
  // The least one each way belongs to a receiver that waited: half their difference is the
  // offset between the two clocks.
  std::map<std::pair<int, int>, int64_t> least;
  for (const Message& m : messages) {
    const auto pair = std::make_pair(m.from, m.to);
    const int64_t apparent = m.recv_end - m.sent;
    const auto it = least.find(pair);
    if (it == least.end() || apparent < it->second) least[pair] = apparent;
  }
  double sum = 0;
  int count = 0;
  for (const Message& m : messages) {
    const auto back = least.find({m.to, m.from});
    if (back == least.end()) continue;
    // b's clock reads this much more than a's at the same moment.
    const double skew = 0.5 * static_cast<double>(least.at({m.from, m.to}) - back->second);
    if (static_cast<double>(m.recv_start) - skew > static_cast<double>(m.sent)) continue;
    sum += static_cast<double>(m.recv_end - m.sent) - skew;
    ++count;
  }
  if (count == 0) return std::make_pair(0.0, 0);
  return std::make_pair(sum / count * 1e-9, count);
}

absl::StatusOr<StepReplay> ReplayStep(const schedule::Schedule& schedule,
                                      const schedule::CostModel& plan_costs,
                                      const v1::StepTrace& trace, double host_cores, int replicas,
                                      double message_cpu_s) {
  PT_ASSIGN_OR_RETURN(const auto hop, MeasuredHop(schedule, trace));
  StepReplay replay;
  replay.costs = plan_costs;
  replay.hops_measured = hop.second;
  replay.hop_s = hop.second > 0 ? hop.first : plan_costs.comm;
  replay.costs.comm = replay.hop_s;
  // Mean CPU time per (stage, compute kind) over replica 0's ranks.
  std::map<std::pair<int, ActionKind>, std::pair<double, int>> cpu;
  for (int r = 0; r < schedule.num_workers; ++r) {
    const auto& list = schedule.worker_actions[r];
    for (size_t i = 0; i < list.size(); ++i) {
      const schedule::Action& a = list[i];
      if (!schedule::IsCompute(a.kind)) continue;
      const ActionKind kind = schedule::IsForward(a.kind) ? ActionKind::kF : a.kind;
      auto& [total, n] = cpu[{a.stage, kind}];
      const int64_t ns = trace.ranks(r).timings(static_cast<int>(i)).cpu_ns();
      if (ns <= 0) {
        return absl::FailedPreconditionError(absl::StrCat(
            "rank ", r, " reported no CPU time for ", schedule::ToString(a),
            ": the replay needs CPU workers' per-action CPU times"));
      }
      total += static_cast<double>(ns) * 1e-9;
      ++n;
    }
  }
  for (const auto& [key, use] : cpu) {
    schedule::StageCost& c = replay.costs.stages[key.first];
    const double mean = use.first / use.second;
    switch (key.second) {
      case ActionKind::kF: c.f = mean; break;
      case ActionKind::kB: c.b = mean; break;
      case ActionKind::kW: c.w = mean; break;
      default: c.bw = mean; break;
    }
  }
  schedule::CoreSharing sharing;
  const int ranks = replicas * schedule.num_workers;
  sharing.host_of_worker.assign(ranks, host_cores > 0 ? 0 : -1);
  sharing.host_cores = {host_cores > 0 ? host_cores : 1.0};
  sharing.threads_of_worker.assign(ranks, 1);
  schedule::ReplicaSums sums;
  sums.replicas = replicas;
  if (replicas > 1) sums.stage_allreduce_s.assign(schedule.num_stages, 0.0);
  schedule::StepCpuWork messages;
  messages.message_cpu_s = message_cpu_s;
  replay.message_cpu_s = message_cpu_s;
  PT_ASSIGN_OR_RETURN(replay.step_s, schedule::SimulateSharedCores(schedule, replay.costs, sharing,
                                                                   sums, messages));
  return replay;
}

}  // namespace pipetrain::client
