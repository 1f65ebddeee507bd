// JobSeries: the Prometheus series that belong to one pipetrain job (labelled job_id), removed a
// set time after the job ends, so that a daemon's exposition does not grow with every job it
// ever ran. Both daemons keep their per-job series here.
//
// A series is created through Get (the family's Add, remembered under the job). Ended(job)
// starts the job's retention; Sweep removes every series of every job whose retention has
// passed. collectable() is what an Exposer serves: it sweeps, then collects the registry, so an
// expired job's series are gone from the first scrape after the retention. A job that gets a new
// series after Ended (a worker given the same job again) is running again: its end is
// forgotten until the next Ended.
//
// Thread-safety: thread-safe. A reference returned by Get stays valid until its job's
// retention has passed after Ended and a sweep ran: callers must not use a job's references
// after calling Ended for it (they may Get them again).
#ifndef PIPETRAIN_COMMON_JOB_SERIES_H_
#define PIPETRAIN_COMMON_JOB_SERIES_H_

#include <prometheus/collectable.h>
#include <prometheus/family.h>
#include <prometheus/labels.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace pipetrain {

struct JobSeriesOptions {
  // How long a job's series stay after it ends (its final values stay scrapeable this long).
  // Zero: removed at the next scrape.
  absl::Duration retention = absl::Minutes(10);
  const Clock* clock = Clock::Real();  // never null; tests pass a ManualClock
};

class JobSeries {
 public:
  JobSeries(std::shared_ptr<prometheus::Registry> registry, JobSeriesOptions options);
  JobSeries(const JobSeries&) = delete;
  JobSeries& operator=(const JobSeries&) = delete;

  // family.Add(labels, args...) (labels must include job_id = `job_id`), remembered under the
  // job so that it is removed with the job's other series. `family` must be registered in the
  // registry given to the constructor.
  template <typename T, typename... Args>
  T& Get(prometheus::Family<T>& family, const std::string& job_id,
         const prometheus::Labels& labels, Args&&... args) {
    absl::MutexLock lock(&state_->mu);  // so that no sweep removes it between Add and Remember
    T& metric = family.Add(labels, std::forward<Args>(args)...);
    state_->RememberLocked(job_id, Key(family.GetName(), labels),
                           [&family, &metric] { family.Remove(&metric); });
    return metric;
  }

  // The job ended now: its series go once the retention has passed. Unknown jobs are ignored.
  void Ended(const std::string& job_id);
  // Removes the series of every job whose retention has passed.
  void Sweep() { state_->Sweep(); }

  // Jobs whose series are held (ended or not), in id order.
  std::vector<std::string> Jobs() const;
  absl::Duration retention() const { return state_->options.retention; }

  // For an Exposer: sweeps, then collects the registry. It keeps what it needs alive, so it
  // may outlive this object.
  std::shared_ptr<prometheus::Collectable> collectable() const { return collectable_; }

 private:
  struct Job {
    std::set<std::string> keys;                   // family name + labels, once each
    std::vector<std::function<void()>> removers;  // one per key
    std::optional<int64_t> ended_ns;
  };
  // Shared with the collectable.
  struct State {
    std::shared_ptr<prometheus::Registry> registry;
    JobSeriesOptions options;
    absl::Mutex mu;
    std::map<std::string, Job> jobs ABSL_GUARDED_BY(mu);

    void RememberLocked(const std::string& job_id, const std::string& key,
                        std::function<void()> remover) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
    void Sweep();
  };
  class SweepingCollectable;

  static std::string Key(const std::string& family, const prometheus::Labels& labels);

  std::shared_ptr<State> state_;
  std::shared_ptr<prometheus::Collectable> collectable_;
};

}  // namespace pipetrain

#endif  // PIPETRAIN_COMMON_JOB_SERIES_H_
