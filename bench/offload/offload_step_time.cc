// Step time with and without activation offload, real pipetrain-worker processes on the CPU
// backend (see CMakeLists.txt). Prints one markdown table row per configuration and the ratio.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/subprocess.h"
#include "coordinator/planner.h"
#include "coordinator/schedule/codec/plan_proto.h"
#include "pipetrain/v1/worker.pb.h"

namespace pt = pipetrain;

namespace {

constexpr int kWorkers = 2, kMicrobatches = 4, kSteps = 6;

pt::v1::JobSpec Job() {
  pt::v1::JobSpec spec;
  spec.set_name("offload-bench");
  spec.mutable_model()->set_num_layers(8);
  spec.mutable_model()->set_hidden(128);
  spec.mutable_model()->set_num_heads(4);
  spec.mutable_model()->set_ffn_hidden(512);
  spec.mutable_training()->set_steps(kSteps);
  spec.mutable_training()->set_microbatch_size(8);
  spec.mutable_training()->set_global_batch(8 * kMicrobatches);
  spec.mutable_training()->set_seed(7);
  spec.mutable_training()->mutable_optimizer()->set_learning_rate(1e-3);
  spec.mutable_parallelism()->set_num_workers(kWorkers);
  spec.mutable_parallelism()->set_schedule("interleaved-1f1b");
  return spec;
}

// Mean step time (ms) over steps 1.. of rank 0, or -1 on failure.
double Run(const pt::v1::JobSpec& spec, const pt::v1::Plan& plan, double copy_bandwidth) {
  const std::string dir = pt::subprocess::TempDir();
  pt::v1::PrepareRequest request;
  request.set_job_id("bench");
  *request.mutable_spec() = spec;
  *request.mutable_plan() = plan;
  for (int r = 0; r < kWorkers; ++r) {
    pt::v1::Peer* peer = request.add_peers();
    peer->set_rank(r);
    peer->set_address(absl::StrCat("127.0.0.1:", pt::subprocess::FreePort()));
  }
  const std::string path = dir + "/plan.json";
  std::ofstream(path) << *pt::schedule::ToJson(request);
  std::vector<pt::subprocess::Process> workers;
  for (int r = 0; r < kWorkers; ++r) {
    workers.push_back(pt::subprocess::Spawn(
        {PIPETRAIN_WORKER_BIN, "--plan", path, "--rank", std::to_string(r), "--copy-bandwidth",
         absl::StrCat(copy_bandwidth)},
        absl::StrCat(dir, "/rank", r)));
  }
  for (auto& w : workers) {
    auto code = pt::subprocess::WaitFor(w, absl::Seconds(300));
    if (!code.has_value() || *code != 0) {
      std::fprintf(stderr, "worker failed: %s\n", pt::subprocess::ReadFile(w.stderr_path).c_str());
      return -1;
    }
  }
  double sum = 0;
  int n = 0;
  for (absl::string_view line :
       absl::StrSplit(pt::subprocess::ReadFile(workers[0].stdout_path), '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    int step = 0;
    double ms = 0;
    if (f.size() < 8 || f[0] != "rank" || !absl::SimpleAtoi(f[3], &step) ||
        !absl::SimpleAtod(f[7], &ms) || step == 0) {
      continue;
    }
    sum += ms;
    ++n;
  }
  return n > 0 ? sum / n : -1;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 3;
  double faster = 1;  // cap = the plan's link x this (the plan itself stays the k = 0.2 one)
  if (argc > 1) absl::SimpleAtoi(argv[1], &rounds);
  if (argc > 2) absl::SimpleAtod(argv[2], &faster);
  const pt::v1::JobSpec plain = Job();
  auto base = pt::coordinator::PlanJob(plain);
  if (!base.ok()) {
    std::fprintf(stderr, "%s\n", std::string(base.status().message()).c_str());
    return 1;
  }
  double link = 0;  // every stage's copy <= 0.2 of its modelled F+B+W
  for (const auto& c : base->costs.stages) link = std::max(link, c.activation / (0.2 * (c.f + c.b + c.w)));
  pt::v1::JobSpec spec = plain;
  spec.mutable_memory()->set_offload(pt::v1::OFFLOAD_POLICY_FULL);
  spec.mutable_memory()->set_host_link_bytes_per_s(link);
  auto planned = pt::coordinator::PlanJob(spec);
  if (!planned.ok()) {
    std::fprintf(stderr, "%s\n", std::string(planned.status().message()).c_str());
    return 1;
  }
  int offloads = 0;
  for (const auto& list : planned->schedule.worker_actions) {
    for (const auto& a : list) offloads += a.kind == pt::schedule::ActionKind::kOffload;
  }
  std::vector<double> without, with;
  for (int r = 0; r < rounds; ++r) {  // alternate, so drift in machine load hits both
    without.push_back(Run(plain, base->plan, 0));
    with.push_back(Run(spec, planned->plan, link * faster));
  }
  std::sort(without.begin(), without.end());
  std::sort(with.begin(), with.end());
  const double a = without[without.size() / 2], b = with[with.size() / 2];
  std::printf("interleaved-1f1b p=%d m=%d, 8 layers h=128 ffn=512 mbs=8; %d OFFLOADs per step; "
              "plan for a %.3g B/s link (k = 0.2 modelled), copy cap %.3g B/s; predicted step "
              "%.1f ms without, %.1f ms with\n",
              kWorkers, kMicrobatches, offloads, link, link * faster, base->sim.makespan * 1e3,
              planned->sim.makespan * 1e3);
  std::printf("| run | median step (ms), %d rounds | predicted peak rank 0 (bytes) |\n|---|---|---|\n",
              rounds);
  std::printf("| no offload | %.1f | %.0f |\n| full offload | %.1f | %.0f |\n", a,
              base->sim.peak_memory[0], b, planned->sim.peak_memory[0]);
  std::printf("ratio with/without: %.3f\n", b / a);
  return 0;
}
