// The modulo-scheduled building blocks (v_modulo_block.h) as candidates of the V generators'
// plan choice (v_finalists.h), and the thread that searches them while the plan's other
// candidates are timed.
//
// ModuloBlockVariants: the shortest period, up to 50% above the busiest worker's work, at which
// the bounded beam finds blocks within the cap. The work's own period first (it often fits),
// else a bisection up to +20%, else one from there to +50% (a longer period rarely fits worse,
// but the bounded beam is narrower where a period has more layouts, so the near range is
// settled first); each search is bounded, the beam narrows with p.
//
// The span to beat: the longest worker span some other candidate already reaches at m
// microbatches. A repeated block at period P spans at least (m - 1) P + one microbatch's chain
// (every pass of the chain and its transfers) on worker 0, so periods past that cannot win and
// are not searched (only on a grid where the costs are exact, so that the real period is the
// grid's). At p = 64, m = 1024, 1:1.5:0.5 with comm 0.2, V-Half's pattern (4092) rules out
// periods past +26%, where the searches that found the (losing) blocks ran.
//
// Why the span may come late: the searches take longer than the patterns' timing that gives it
// (p = 64, m = 1024: 33 ms against 10 ms), and only the longest period worth searching needs
// it. Until it is known the searches run as if nothing bounded the period, kept by period; the
// bisection then repeats with the bound and takes the searches it shares from there (each a
// pure function of its period), so the blocks are the same as with the bound known from the
// start.
//
// Thread-safety: ModuloBlockVariants is a pure function (it calls beat_span from its thread);
// ModuloLane's SetBeat may be called from any thread, Take from the one that made it.
#ifndef PIPETRAIN_SCHEDULE_V_MODULO_VARIANTS_H_
#define PIPETRAIN_SCHEDULE_V_MODULO_VARIANTS_H_

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>
#include <vector>

#include "schedule/cost_model.h"
#include "schedule/v_finalists.h"

namespace pipetrain::schedule {

// The blocks as candidates (VVariant::fixed_block), shortest period first; empty when no
// period up to +50% (or up to the bound) has one. `beat_span(wait)`: the span to beat (1e300:
// none), or nullopt while it is not known yet (wait = false); with wait = true it returns once
// it is known (nullopt then only when the caller gave up: no blocks).
std::vector<VVariant> ModuloBlockVariants(
    int p, const CostModel& costs, double cap, int m,
    const std::function<std::optional<double>(bool wait)>& beat_span);

// ModuloBlockVariants on a thread of its own from construction (`own_thread`, by default where
// the machine has more than one core), so that its searches overlap the caller's other work;
// else it runs in Take, with the span known. `costs` must outlive the lane.
class ModuloLane {
 public:
  ModuloLane(int p, const CostModel& costs, double cap, int m,
             bool own_thread = std::thread::hardware_concurrency() > 1);

  // The span the blocks must beat.
  void SetBeat(double span);

  // The blocks (after SetBeat; once).
  std::vector<VVariant> Take();

 private:
  std::vector<VVariant> Run(std::stop_token stop);

  const int p_;
  const CostModel& costs_;
  const double cap_;
  const int m_;
  std::mutex mu_;
  std::condition_variable_any known_;
  std::optional<double> beat_;  // guarded by mu_
  std::vector<VVariant> blocks_;
  std::jthread thread_;  // last: stopped and joined before the members it uses go
};

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_V_MODULO_VARIANTS_H_
