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

}  // namespace pipetrain::schedule
