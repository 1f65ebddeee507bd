// Conversion between the schedule IR (plain C++) and the wire contract's pipetrain.v1.Plan.
// Kept out of the schedule core so that the core has no protobuf dependency; the coordinator,
// the worker and the client link this small adapter.
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_SCHEDULE_CODEC_PLAN_PROTO_H_
#define PIPETRAIN_SCHEDULE_CODEC_PLAN_PROTO_H_

#include <string>

#include "absl/status/statusor.h"
#include "pipetrain/v1/metrics.pb.h"
#include "pipetrain/v1/plan.pb.h"
#include "schedule/cost_model.h"
#include "schedule/measured_timeline.h"
#include "schedule/schedule.h"
#include "schedule/simulator.h"

namespace pipetrain::schedule {

// Fills everything but the layer split (stage_first_layer / stage_num_layers, set by whoever
// partitions the model) and the explanation. `sim` may be null (no prediction).
v1::Plan PlanToProto(const Schedule& schedule, const CostModel& costs, const SimResult* sim);

// Rebuilds the schedule (and ValidateSchedule's it): a plan from the wire is untrusted input.
absl::StatusOr<Schedule> ScheduleFromProto(const v1::Plan& plan);
// Rebuilds the cost model the plan was made with (times and bytes as stored).
CostModel CostModelFromProto(const v1::Plan& plan);

// The wire enum of an action kind.
v1::ActionKind ActionKindToProto(ActionKind kind);

// A worker's reported action timings (untrusted: an unknown kind is InvalidArgument).
absl::StatusOr<std::vector<MeasuredAction>> MeasuredActionsFromProto(const v1::StepReport& report);

// Protobuf JSON (field names as in the .proto) for plan files.
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message);
absl::Status FromJson(const std::string& json, google::protobuf::Message* message);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_CODEC_PLAN_PROTO_H_
