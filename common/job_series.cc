#include "common/job_series.h"

#include "absl/strings/str_cat.h"

namespace pipetrain {

class JobSeries::SweepingCollectable : public prometheus::Collectable {
 public:
  explicit SweepingCollectable(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    state_->Sweep();
    return state_->registry->Collect();
  }

 private:
  const std::shared_ptr<State> state_;
};

JobSeries::JobSeries(std::shared_ptr<prometheus::Registry> registry, JobSeriesOptions options)
    : state_(std::make_shared<State>()) {
  state_->registry = std::move(registry);
  state_->options = options;
  collectable_ = std::make_shared<SweepingCollectable>(state_);
}

std::string JobSeries::Key(const std::string& family, const prometheus::Labels& labels) {
  std::string key = family;
  for (const auto& label : labels) absl::StrAppend(&key, "\x1f", label.first, "=", label.second);
  return key;
}

void JobSeries::State::RememberLocked(const std::string& job_id, const std::string& key,
                                      std::function<void()> remover) {
  Job& job = jobs[job_id];
  job.ended_ns.reset();  // a series added after the end: the job runs again
  if (job.keys.insert(key).second) job.removers.push_back(std::move(remover));
}

void JobSeries::Ended(const std::string& job_id) {
  absl::MutexLock lock(&state_->mu);
  auto it = state_->jobs.find(job_id);
  if (it != state_->jobs.end()) it->second.ended_ns = state_->options.clock->NowNs();
}

void JobSeries::State::Sweep() {
  absl::MutexLock lock(&mu);
  const int64_t now = options.clock->NowNs();
  const int64_t retention_ns = absl::ToInt64Nanoseconds(options.retention);
  for (auto it = jobs.begin(); it != jobs.end();) {
    const std::optional<int64_t>& ended = it->second.ended_ns;
    if (ended.has_value() && now - *ended >= retention_ns) {
      for (const std::function<void()>& remove : it->second.removers) remove();
      it = jobs.erase(it);
    } else {
      ++it;
    }
  }
}

std::vector<std::string> JobSeries::Jobs() const {
  absl::MutexLock lock(&state_->mu);
  std::vector<std::string> ids;
  for (const auto& entry : state_->jobs) ids.push_back(entry.first);
  return ids;
}

}  // namespace pipetrain
