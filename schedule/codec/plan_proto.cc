#include "schedule/codec/plan_proto.h"

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "schedule/validator.h"

namespace pipetrain::schedule {
namespace {

v1::ActionKind KindToProtoImpl(ActionKind kind) {
  switch (kind) {
    case ActionKind::kF: return v1::ACTION_KIND_F;
    case ActionKind::kB: return v1::ACTION_KIND_B;
    case ActionKind::kW: return v1::ACTION_KIND_W;
    case ActionKind::kBW: return v1::ACTION_KIND_BW;
    case ActionKind::kSendAct: return v1::ACTION_KIND_SEND_ACT;
    case ActionKind::kRecvAct: return v1::ACTION_KIND_RECV_ACT;
    case ActionKind::kSendGrad: return v1::ACTION_KIND_SEND_GRAD;
    case ActionKind::kRecvGrad: return v1::ACTION_KIND_RECV_GRAD;
    case ActionKind::kOffload: return v1::ACTION_KIND_OFFLOAD;
    case ActionKind::kReload: return v1::ACTION_KIND_RELOAD;
    case ActionKind::kRelease: return v1::ACTION_KIND_RELEASE;
    case ActionKind::kOverlapF: return v1::ACTION_KIND_OVERLAP_F;
  }
  return v1::ACTION_KIND_UNSPECIFIED;
}

absl::StatusOr<ActionKind> KindFromProto(v1::ActionKind kind) {
  switch (kind) {
    case v1::ACTION_KIND_F: return ActionKind::kF;
    case v1::ACTION_KIND_B: return ActionKind::kB;
    case v1::ACTION_KIND_W: return ActionKind::kW;
    case v1::ACTION_KIND_BW: return ActionKind::kBW;
    case v1::ACTION_KIND_SEND_ACT: return ActionKind::kSendAct;
    case v1::ACTION_KIND_RECV_ACT: return ActionKind::kRecvAct;
    case v1::ACTION_KIND_SEND_GRAD: return ActionKind::kSendGrad;
    case v1::ACTION_KIND_RECV_GRAD: return ActionKind::kRecvGrad;
    case v1::ACTION_KIND_OFFLOAD: return ActionKind::kOffload;
    case v1::ACTION_KIND_RELOAD: return ActionKind::kReload;
    case v1::ACTION_KIND_RELEASE: return ActionKind::kRelease;
    case v1::ACTION_KIND_OVERLAP_F: return ActionKind::kOverlapF;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("plan.workers[].actions[].kind: unknown action kind ", kind,
                       "; allowed: F, B, W, BW, SEND_ACT, RECV_ACT, SEND_GRAD, RECV_GRAD, "
                       "OFFLOAD, RELOAD, RELEASE, OVERLAP_F"));
  }
}

}  // namespace

v1::ActionKind ActionKindToProto(ActionKind kind) { return KindToProtoImpl(kind); }

absl::StatusOr<std::vector<MeasuredAction>> MeasuredActionsFromProto(const v1::StepReport& report) {
  std::vector<MeasuredAction> actions;
  actions.reserve(report.timings_size());
  for (const v1::ActionTiming& t : report.timings()) {
    PT_ASSIGN_OR_RETURN(ActionKind kind, KindFromProto(t.action().kind()));
    actions.push_back(MeasuredAction{Action{kind, t.action().stage(), t.action().microbatch()},
                                     t.start_ns(), t.end_ns(), t.bytes()});
  }
  return actions;
}

v1::Plan PlanToProto(const Schedule& schedule, const CostModel& costs, const SimResult* sim) {
  v1::Plan plan;
  plan.set_schedule(schedule.name);
  plan.set_num_stages(schedule.num_stages);
  plan.set_num_microbatches(schedule.num_microbatches);
  for (int w : schedule.stage_to_worker) plan.add_stage_to_worker(w);
  plan.set_forward_only(schedule.forward_only);
  for (const auto& list : schedule.worker_actions) {
    v1::WorkerActions* out = plan.add_workers();
    for (const Action& a : list) {
      v1::Action* pa = out->add_actions();
      pa->set_kind(KindToProtoImpl(a.kind));
      pa->set_stage(a.stage);
      pa->set_microbatch(a.microbatch);
      pa->set_peer_worker(IsTransfer(a.kind) ? schedule.WorkerOf(PeerStage(a)) : -1);
    }
  }
  const double bytes_per_unit = costs.bytes_per_unit;
  plan.set_comm_s(costs.comm);
  plan.set_d2h_bytes_per_s(costs.d2h_bytes_per_s);
  plan.set_h2d_bytes_per_s(costs.h2d_bytes_per_s);
  plan.set_half_duplex_link(!costs.duplex);
  plan.set_offload_s(costs.offload);
  plan.set_reload_s(costs.reload);
  for (const StageCost& c : costs.stages) {
    v1::StageCost* pc = plan.add_costs();
    pc->set_forward_s(c.f);
    pc->set_backward_input_s(c.b);
    pc->set_backward_weight_s(c.w);
    pc->set_activation_bytes(static_cast<int64_t>(c.activation * bytes_per_unit));
    pc->set_freed_by_b_bytes(static_cast<int64_t>(c.freed_by_b * bytes_per_unit));
    if (c.bw >= 0) pc->set_fused_backward_s(c.bw);
    if (c.offload_bytes >= 0) pc->set_offload_bytes(static_cast<int64_t>(c.offload_bytes));
  }
  if (sim != nullptr) {
    v1::Prediction* p = plan.mutable_prediction();
    p->set_makespan_s(sim->makespan);
    p->set_bubble_ratio(sim->bubble_ratio);
    p->set_step_bubble_ratio(sim->step_bubble_ratio);
    for (double units : sim->peak_memory) {
      p->add_peak_activation_units(units);
      p->add_peak_activation_bytes(static_cast<int64_t>(units * bytes_per_unit));
    }
    for (double busy : sim->busy) p->add_busy_s(busy);
  }
  return plan;
}

absl::StatusOr<Schedule> ScheduleFromProto(const v1::Plan& plan) {
  Schedule schedule;
  schedule.name = plan.schedule();
  schedule.num_workers = plan.workers_size();
  schedule.num_stages = plan.num_stages();
  schedule.num_microbatches = plan.num_microbatches();
  schedule.stage_to_worker.assign(plan.stage_to_worker().begin(), plan.stage_to_worker().end());
  schedule.forward_only = plan.forward_only();
  schedule.worker_actions.resize(plan.workers_size());
  for (int w = 0; w < plan.workers_size(); ++w) {
    for (const v1::Action& pa : plan.workers(w).actions()) {
      PT_ASSIGN_OR_RETURN(ActionKind kind, KindFromProto(pa.kind()));
      schedule.worker_actions[w].push_back(Action{kind, pa.stage(), pa.microbatch()});
    }
  }
  PT_RETURN_IF_ERROR(ValidateSchedule(schedule));
  for (int w = 0; w < plan.workers_size(); ++w) {
    for (const v1::Action& pa : plan.workers(w).actions()) {
      Action a{KindFromProto(pa.kind()).value(), pa.stage(), pa.microbatch()};
      if (IsTransfer(a.kind) && pa.peer_worker() != schedule.WorkerOf(PeerStage(a))) {
        return absl::InvalidArgumentError(absl::StrCat(
            "plan.workers[", w, "]: action ", ToString(a), " names peer worker ",
            pa.peer_worker(), " but the placement puts its peer stage on worker ",
            schedule.WorkerOf(PeerStage(a))));
      }
    }
  }
  return schedule;
}

CostModel CostModelFromProto(const v1::Plan& plan) {
  CostModel costs;
  costs.bytes_per_unit = 1.0;  // the plan stores bytes
  costs.comm = plan.comm_s();
  costs.d2h_bytes_per_s = plan.d2h_bytes_per_s();
  costs.h2d_bytes_per_s = plan.h2d_bytes_per_s();
  costs.duplex = !plan.half_duplex_link();
  costs.offload = plan.offload_s();
  costs.reload = plan.reload_s();
  for (const v1::StageCost& pc : plan.costs()) {
    StageCost c;
    c.f = pc.forward_s();
    c.b = pc.backward_input_s();
    c.w = pc.backward_weight_s();
    c.activation = static_cast<double>(pc.activation_bytes());
    c.freed_by_b = static_cast<double>(pc.freed_by_b_bytes());
    if (pc.has_fused_backward_s()) c.bw = pc.fused_backward_s();
    if (pc.has_offload_bytes()) c.offload_bytes = static_cast<double>(pc.offload_bytes());
    costs.stages.push_back(c);
  }
  return costs;
}

absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  auto status = google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!status.ok()) return absl::InternalError(std::string(status.message()));
  return out;
}

absl::Status FromJson(const std::string& json, google::protobuf::Message* message) {
  auto status = google::protobuf::util::JsonStringToMessage(json, message);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("bad JSON for ", message->GetTypeName(), ": ",
                                                   std::string(status.message())));
  }
  return absl::OkStatus();
}

}  // namespace pipetrain::schedule
