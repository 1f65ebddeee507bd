#include "schedule/render_trace.h"

#include "nlohmann/json.hpp"

namespace pipetrain::schedule {
namespace {

void Name(nlohmann::json* events, int pid, int tid, const std::string& name, int sort_index) {
  events->push_back({{"name", "thread_name"},
                     {"ph", "M"},
                     {"pid", pid},
                     {"tid", tid},
                     {"args", {{"name", name}}}});
  events->push_back({{"name", "thread_sort_index"},
                     {"ph", "M"},
                     {"pid", pid},
                     {"tid", tid},
                     {"args", {{"sort_index", sort_index}}}});
}

// The events of one process: the workers' tracks (tid w) and, with sums, their sum tracks
// (tid p + w, sorted right under worker w).
void AppendProcess(nlohmann::json* events, int pid, const std::string& process,
                   const Schedule& schedule, const SimResult& sim,
                   const std::vector<GradientSumInterval>* sums, double us_per_unit) {
  const int p = schedule.num_workers;
  events->push_back({{"name", "process_name"},
                     {"ph", "M"},
                     {"pid", pid},
                     {"tid", 0},
                     {"args", {{"name", process}}}});
  for (int w = 0; w < p; ++w) {
    Name(events, pid, w, "worker " + std::to_string(w), sums != nullptr ? 2 * w : w);
    if (sums != nullptr) {
      Name(events, pid, p + w, "worker " + std::to_string(w) + ": gradient sums", 2 * w + 1);
    }
  }
  for (const TimedAction& t : sim.timeline) {
    events->push_back({{"name", ToString(t.action)},
                       {"cat", std::string(KindLabel(t.action.kind))},
                       {"ph", "X"},
                       {"pid", pid},
                       {"tid", t.worker},
                       {"ts", t.start * us_per_unit},
                       {"dur", (t.end - t.start) * us_per_unit},
                       {"args",
                        {{"stage", t.action.stage},
                         {"microbatch", t.action.microbatch},
                         {"kind", std::string(KindToken(t.action.kind))}}}});
  }
  if (sums == nullptr) return;
  for (const GradientSumInterval& g : *sums) {
    events->push_back({{"name", "sum " + std::to_string(g.stage)},
                       {"cat", "gradient sum"},
                       {"ph", "X"},
                       {"pid", pid},
                       {"tid", p + g.worker},
                       {"ts", g.start * us_per_unit},
                       {"dur", (g.end - g.start) * us_per_unit},
                       {"args", {{"stage", g.stage}}}});
  }
}

}  // namespace

std::string RenderChromeTrace(const Schedule& schedule, const SimResult& sim, double us_per_unit) {
  nlohmann::json events = nlohmann::json::array();
  AppendProcess(&events, 0, "pipetrain " + schedule.name, schedule, sim, nullptr, us_per_unit);
  nlohmann::json doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  return doc.dump() + "\n";
}

std::string RenderChromeTrace(const Schedule& schedule,
                              const std::vector<ReplicaTimeline>& replicas, double us_per_unit) {
  nlohmann::json events = nlohmann::json::array();
  for (size_t q = 0; q < replicas.size(); ++q) {
    AppendProcess(&events, static_cast<int>(q),
                  "pipetrain " + schedule.name + " replica " + std::to_string(q), schedule,
                  replicas[q].sim, &replicas[q].gradient_sums, us_per_unit);
  }
  nlohmann::json doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  return doc.dump() + "\n";
}

}  // namespace pipetrain::schedule
