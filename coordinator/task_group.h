// TaskGroup: background threads (dispatches, aborts) that must be joined before their owner is
// destroyed. Finished threads are reaped on the next Spawn.
//
// Thread-safety: thread-safe.
#ifndef PIPETRAIN_COORDINATOR_TASK_GROUP_H_
#define PIPETRAIN_COORDINATOR_TASK_GROUP_H_

#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace pipetrain::coordinator {

class TaskGroup {
 public:
  TaskGroup() = default;
  ~TaskGroup() { JoinAll(); }
  TaskGroup(const TaskGroup&) = delete;
  TaskGroup& operator=(const TaskGroup&) = delete;

  void Spawn(std::function<void()> fn) {
    std::list<Task> done;
    {
      absl::MutexLock lock(&mu_);
      for (auto it = tasks_.begin(); it != tasks_.end();) {
        if (it->done->load()) {
          done.splice(done.end(), tasks_, it++);
        } else {
          ++it;
        }
      }
      auto flag = std::make_shared<std::atomic<bool>>(false);
      tasks_.push_back(Task{std::thread([fn = std::move(fn), flag] {
                              fn();
                              flag->store(true);
                            }),
                            flag});
    }
    for (Task& t : done) t.thread.join();
  }

  // Joins every task, including ones spawned while joining.
  void JoinAll() {
    for (;;) {
      std::list<Task> tasks;
      {
        absl::MutexLock lock(&mu_);
        tasks.swap(tasks_);
      }
      if (tasks.empty()) return;
      for (Task& t : tasks) t.thread.join();
    }
  }

 private:
  struct Task {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  absl::Mutex mu_;
  std::list<Task> tasks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pipetrain::coordinator

#endif  // PIPETRAIN_COORDINATOR_TASK_GROUP_H_
