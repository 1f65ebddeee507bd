#include "schedule/render_trace.h"

#include "nlohmann/json.hpp"

namespace pipetrain::schedule {

std::string RenderChromeTrace(const Schedule& schedule, const SimResult& sim, double us_per_unit) {
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", 0},
                    {"tid", 0},
                    {"args", {{"name", "pipetrain " + schedule.name}}}});
  for (int w = 0; w < schedule.num_workers; ++w) {
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", 0},
                      {"tid", w},
                      {"args", {{"name", "worker " + std::to_string(w)}}}});
    events.push_back({{"name", "thread_sort_index"},
                      {"ph", "M"},
                      {"pid", 0},
                      {"tid", w},
                      {"args", {{"sort_index", w}}}});
  }
  for (const TimedAction& t : sim.timeline) {
    events.push_back({{"name", ToString(t.action)},
                      {"cat", std::string(KindLabel(t.action.kind))},
                      {"ph", "X"},
                      {"pid", 0},
                      {"tid", t.worker},
                      {"ts", t.start * us_per_unit},
                      {"dur", (t.end - t.start) * us_per_unit},
                      {"args",
                       {{"stage", t.action.stage},
                        {"microbatch", t.action.microbatch},
                        {"kind", std::string(KindToken(t.action.kind))}}}});
  }
  nlohmann::json doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  return doc.dump() + "\n";
}

}  // namespace pipetrain::schedule
