// JobWatch: one watcher's ordered queue of JobEvents for one job. The job manager pushes every
// state change and every completed step into the queue of every watcher of the job, and ends
// the queue when the job ends; the watcher drains it with Next. The queue is unbounded, so a
// slow watcher never loses events (each event is small: plans travel without action lists).
//
// Thread-safety: thread-safe; one producer (the job manager, under its lock) and one consumer.
#ifndef PIPETRAIN_COORDINATOR_JOB_WATCH_H_
#define PIPETRAIN_COORDINATOR_JOB_WATCH_H_

#include <deque>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "pipetrain/v1/coordinator.pb.h"

namespace pipetrain::coordinator {

class JobWatch {
 public:
  enum class Result { kEvent, kEnded, kTimeout };

  // Waits up to `timeout` for the next event. kEnded once the job ended and every event was
  // taken (or the watch was closed).
  Result Next(absl::Duration timeout, v1::JobEvent* event);
  // The consumer is done; the producer drops the watch.
  void Close();
  bool closed() const;

  // Producer side.
  void Push(const v1::JobEvent& event);
  void End();

 private:
  mutable absl::Mutex mu_;
  std::deque<v1::JobEvent> events_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace pipetrain::coordinator

#endif  // PIPETRAIN_COORDINATOR_JOB_WATCH_H_
