#include "schedule/plan_json.h"

#include "nlohmann/json.hpp"

namespace pipetrain::schedule {

std::string PlanToJson(const Schedule& schedule, const SimResult& sim, const CostModel& costs) {
  nlohmann::json predictions = {{"makespan", sim.makespan},
                                {"bubble_ratio", sim.bubble_ratio},
                                {"step_bubble_ratio", sim.step_bubble_ratio},
                                {"peak_activation_units", sim.peak_memory},
                                {"busy", sim.busy},
                                {"span", sim.span}};
  if (costs.bytes_per_unit > 0) {
    std::vector<double> bytes;
    for (double u : sim.peak_memory) bytes.push_back(u * costs.bytes_per_unit);
    predictions["peak_activation_bytes"] = bytes;
  }
  nlohmann::json actions = nlohmann::json::array();
  for (const auto& list : schedule.worker_actions) {
    nlohmann::json row = nlohmann::json::array();
    for (const Action& a : list) row.push_back(ToString(a));
    actions.push_back(row);
  }
  nlohmann::json timeline = nlohmann::json::array();
  for (const TimedAction& t : sim.timeline) {
    timeline.push_back(
        {{"worker", t.worker}, {"action", ToString(t.action)}, {"start", t.start}, {"end", t.end}});
  }
  nlohmann::json doc = {
      {"schedule", schedule.name},
      {"workers", schedule.num_workers},
      {"stages", schedule.num_stages},
      {"microbatches", schedule.num_microbatches},
      {"chunks_per_worker", schedule.ChunksPerWorker()},
      {"placement", schedule.stage_to_worker},
      {"units",
       {{"time", "cost-model time units (the --costs unit)"},
        {"memory", "one microbatch's activations for a worker's whole share of layers"}}},
      {"predictions", predictions},
      {"actions", actions},
      {"timeline", timeline},
  };
  return doc.dump(2) + "\n";
}

}  // namespace pipetrain::schedule
