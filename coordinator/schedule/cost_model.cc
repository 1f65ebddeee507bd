#include "coordinator/schedule/cost_model.h"

namespace pipetrain::schedule {

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
