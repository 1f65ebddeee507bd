// The three cost ratios (a worker's share of F : B : W) of the grids that compare pipetrain's
// generators with the authors' builders (tests/schedule_v and tests/schedule_zb).
#ifndef PIPETRAIN_TESTS_SCHEDULE_V_AUTHORS_COST_RATIOS_H_
#define PIPETRAIN_TESTS_SCHEDULE_V_AUTHORS_COST_RATIOS_H_

namespace pipetrain::schedule::testing {

struct CostRatio {
  double f, b, w;
};
inline constexpr CostRatio kAuthorsCostRatios[] = {{1, 1, 1}, {1, 2, 1}, {1, 1.5, 0.5}};

}  // namespace pipetrain::schedule::testing

#endif  // PIPETRAIN_TESTS_SCHEDULE_V_AUTHORS_COST_RATIOS_H_
