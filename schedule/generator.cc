#include "schedule/generator.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "schedule/auto_planner.h"
#include "schedule/gen_dualpipev.h"
#include "schedule/gen_interleaved_zb.h"
#include "schedule/generators_classic.h"
#include "schedule/v_generators.h"
#include "schedule/validator.h"

namespace pipetrain::schedule {

// The registry: ONE table. Add new generators here (name, one-line description, function).
const std::vector<GeneratorInfo>& Generators() {
  static const auto* const kTable = new std::vector<GeneratorInfo>{
      {"gpipe", "GPipe: all forwards then all backwards; peak m units; any m", MakeGpipe},
      {"1f1b", "1F1B: one forward one backward; peak p units; any m", Make1F1B},
      {"interleaved-1f1b",
       "interleaved 1F1B (Megatron order), v chunks per worker (default 2); m a multiple of p",
       MakeInterleaved1F1B, 2, true},
      {"interleaved-group",
       "generalised interleaved 1F1B: chunks cycle over groups of group_size microbatches "
       "(default p), v chunks per worker (default 2); m a multiple of the group size",
       MakeGroupedInterleaved, 2, true},
      {"interleaved-zb",
       "interleaved zero bubble: interleaved 1F1B's order with B/W split, W's filling the waits "
       "under interleaved 1F1B's peak (or memory_limit), v chunks per worker (default 2); m a "
       "multiple of the group size",
       MakeInterleavedZb, 2, true},
      {"zb-h1", "zero bubble H1: split B/W greedy at 1F1B memory (p units); any m", MakeZbH1},
      {"zb-h2", "zero bubble H2: split B/W greedy at 2p units; any m", MakeZbH2},
      {"zb-v", "ZB-V: V-shape, backward-first greedy, peak <= p units; p >= 2, any m", MakeZbV, 2},
      {"v-zb", "V-ZB: V-shape building block, peak <= p units; p >= 2, any m", MakeVZb, 2},
      {"dualpipev",
       "DualPipeV: V-shape, overlapped F+B pairs (DeepSeek-V3), peak p units; p >= 2, m >= 2p",
       MakeDualPipeV, 2},
      {"v-half", "V-Half: V-shape, peak <= (p+2)//2 units; p >= 2, any m", MakeVHalf, 2},
      {"v-min", "V-Min: V-shape, peak <= (p+4)//3 units; p >= 2, any m", MakeVMin, 2},
      {"v-adaptive", "V-shape block search under memory_limit (> 0); p >= 2, any m",
       MakeVAdaptive, 2},
      {"auto", "fastest simulated schedule whose peak fits memory_limit", MakeAuto, 2, true},
  };
  return *kTable;
}

std::vector<std::string> GeneratorNames() {
  std::vector<std::string> names;
  for (const GeneratorInfo& g : Generators()) names.push_back(g.name);
  return names;
}

namespace {

absl::Status CheckSpec(const PipelineSpec& spec) {
  if (spec.num_workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_workers must be >= 1 (got ", spec.num_workers, ")"));
  }
  if (spec.num_microbatches < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_microbatches must be >= 1 (got ", spec.num_microbatches, ")"));
  }
  if (spec.chunks_per_worker < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunks_per_worker must be >= 0 (0 = schedule default; got ", spec.chunks_per_worker, ")"));
  }
  if (!(spec.offload_ratio >= 0) || !std::isfinite(spec.offload_ratio)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "offload_ratio must be finite and >= 0 (0 = no host link; got ", spec.offload_ratio, ")"));
  }
  for (double x : {spec.f, spec.b, spec.w, spec.comm, spec.memory_limit}) {
    if (!(x >= 0) || !std::isfinite(x)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "costs f, b, w, comm and memory_limit must be finite and >= 0 (got f=", spec.f, " b=",
          spec.b, " w=", spec.w, " comm=", spec.comm, " memory_limit=", spec.memory_limit, ")"));
    }
  }
  if (spec.f + spec.b + spec.w <= 0 && spec.stage_costs.stages.empty()) {
    return absl::InvalidArgumentError("costs f + b + w must be > 0");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<const GeneratorInfo*> FindGenerator(absl::string_view name) {
  for (const GeneratorInfo& g : Generators()) {
    if (g.name == name) return &g;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown schedule \"", name, "\"; valid: ", absl::StrJoin(GeneratorNames(), ", ")));
}

absl::StatusOr<int> ChunksPerWorker(absl::string_view name, int requested) {
  PT_ASSIGN_OR_RETURN(const GeneratorInfo* g, FindGenerator(name));
  if (requested == 0 || requested == g->chunks) return g->chunks;
  if (!g->chunks_configurable || requested < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunks_per_worker must be ", g->chunks, " for ", g->name, " (or 0 for that default; got ",
        requested, ")",
        g->chunks == 1 ? "; use interleaved-1f1b or a V-shape schedule for more chunks" : ""));
  }
  return requested;
}

absl::StatusOr<Schedule> Generate(absl::string_view name, const PipelineSpec& spec) {
  PT_ASSIGN_OR_RETURN(const GeneratorInfo* found, FindGenerator(name));
  PT_RETURN_IF_ERROR(CheckSpec(spec));
  PipelineSpec resolved = spec;
  if (found->name != "auto") {
    PT_ASSIGN_OR_RETURN(resolved.chunks_per_worker,
                        ChunksPerWorker(found->name, spec.chunks_per_worker));
  }
  PT_ASSIGN_OR_RETURN(Schedule schedule, found->fn(resolved));
  if (!spec.stage_costs.stages.empty() &&
      static_cast<int>(spec.stage_costs.stages.size()) != schedule.num_stages) {
    return absl::InvalidArgumentError(absl::StrCat("stage_costs has ",
                                                   spec.stage_costs.stages.size(), " entries but ",
                                                   name, " has ", schedule.num_stages, " stages"));
  }
  PT_RETURN_IF_ERROR(ValidateSchedule(schedule));
  return schedule;
}

}  // namespace pipetrain::schedule
