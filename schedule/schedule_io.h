// Text and CSV import/export of whole schedules (strings only; callers do the file I/O).
//
// CSV is PyTorch pipelining's format: one row per worker (row w = worker w), cells are action
// tokens (`0F0,0F1,0I0,0W0`), no header. It carries no placement or microbatch count, so
// import infers them: num_stages = highest stage + 1, each stage on the worker whose row
// holds its compute actions, num_microbatches = highest microbatch + 1. An overlapped pair
// (OVERLAP_F + the backward after it, action.h) is one cell in PyTorch's form,
// `(0F4;7B2)OVERLAP_F_B`, and comes back as the two actions.
// The text form is self-describing and round-trips exactly:
//   pipetrain-schedule v1
//   name 1f1b
//   workers 2
//   microbatches 2
//   placement 0 1
//   worker 0: 0F0 0F1 0B0 0B1
//   worker 1: 1F0 1B0 1F1 1B1
// Import does not validate the schedule; call ValidateSchedule.
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_SCHEDULE_SCHEDULE_IO_H_
#define PIPETRAIN_SCHEDULE_SCHEDULE_IO_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "schedule/schedule.h"

namespace pipetrain::schedule {

std::string ScheduleToCsv(const Schedule& schedule);
absl::StatusOr<Schedule> ScheduleFromCsv(absl::string_view csv, std::string name = "csv");

std::string ScheduleToText(const Schedule& schedule);
absl::StatusOr<Schedule> ScheduleFromText(absl::string_view text);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_SCHEDULE_IO_H_
