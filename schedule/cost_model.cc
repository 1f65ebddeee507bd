#include "schedule/cost_model.h"

namespace pipetrain::schedule {

double CostModel::OffloadBytes(int stage) const {
  const StageCost& s = stages[stage];
  if (s.offload_bytes >= 0) return s.offload_bytes;
  return bytes_per_unit > 0 ? s.activation * bytes_per_unit : s.activation;
}

double CostModel::OffloadTime(int stage) const {
  return offload + (d2h_bytes_per_s > 0 ? OffloadBytes(stage) / d2h_bytes_per_s : 0.0);
}

double CostModel::ReloadTime(int stage) const {
  return reload + (h2d_bytes_per_s > 0 ? OffloadBytes(stage) / h2d_bytes_per_s : 0.0);
}

CostModel UniformCostModel(int num_workers, int chunks_per_worker, double f, double b, double w,
                           double comm) {
  CostModel model;
  const double v = chunks_per_worker;
  StageCost stage;
  stage.f = f / v;
  stage.b = b / v;
  stage.w = w / v;
  stage.activation = 1.0 / v;
  model.stages.assign(num_workers * chunks_per_worker, stage);
  model.comm = comm;
  return model;
}

std::vector<double> ChainMemoryTime(const CostModel& costs, const std::vector<int>& stage_to_worker,
                                    int num_workers) {
  const int n = static_cast<int>(costs.stages.size());
  if (n != static_cast<int>(stage_to_worker.size()) || num_workers < 1) return {};
  std::vector<double> held(num_workers, 0.0);
  double chain = 0.0;  // L_s
  for (int st = n - 1; st >= 0; --st) {
    const StageCost& c = costs.stages[st];
    const int w = stage_to_worker[st];
    if (!(c.f >= 0 && c.b >= 0 && c.activation >= 0 && costs.comm >= 0) || w < 0 ||
        w >= num_workers) {
      return {};
    }
    chain += c.f + c.b;
    if (st + 1 < n && w != stage_to_worker[st + 1]) chain += 2 * costs.comm;
    held[w] += c.activation * chain;
  }
  return held;
}

}  // namespace pipetrain::schedule
