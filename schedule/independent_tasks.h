// RunIndependentTasks: runs task(0) .. task(n-1) on up to `max_threads` threads (the caller's
// included), each task once.
//
// Why: `auto` generates a dozen schedules that share nothing (each generator is a pure
// function of the spec), and at p = 64, m = 1024 they take most of a second one after the
// other. The tasks must only write their own result slot; the caller then reads the slots in
// index order, so what it computes does not depend on which thread ran which task or when:
// the result is the same as a sequential loop's, only sooner on more cores.
//
// Thread-safety: `task` is called concurrently for different indices.
#ifndef PIPETRAIN_SCHEDULE_INDEPENDENT_TASKS_H_
#define PIPETRAIN_SCHEDULE_INDEPENDENT_TASKS_H_

#include <functional>

namespace pipetrain::schedule {

// At most one thread per hardware thread, and at most max_threads (<= 0: no other limit).
// Tasks start in index order (put the long ones
// first for an even spread); returns when all have finished.
void RunIndependentTasks(int n, const std::function<void(int)>& task, int max_threads = 0);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_INDEPENDENT_TASKS_H_
