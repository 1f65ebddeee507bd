#include "schedule/schedule_io.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace pipetrain::schedule {
namespace {

std::vector<absl::string_view> Lines(absl::string_view text) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && absl::StripAsciiWhitespace(lines.back()).empty()) lines.pop_back();
  return lines;
}

absl::Status LineError(int line, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", what));
}

absl::StatusOr<int> ParseInt(absl::string_view s, int line, absl::string_view field) {
  int v = 0;
  if (!absl::SimpleAtoi(s, &v) || v < 0) {
    return LineError(line, absl::StrCat(field, " must be a non-negative integer, got \"", s, "\""));
  }
  return v;
}

// PyTorch's cell for an overlapped pair: `(<F>;<backward>)OVERLAP_F_B`, the F in plain form.
constexpr absl::string_view kOverlapSuffix = ")OVERLAP_F_B";

// One CSV cell: an action, or an overlapped pair as two actions (OVERLAP_F + its backward).
absl::Status ParseCell(absl::string_view cell, std::vector<Action>* out) {
  if (!absl::StartsWith(cell, "(")) {
    auto a = ParseAction(cell);
    if (!a.ok()) return a.status();
    out->push_back(*a);
    return absl::OkStatus();
  }
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad overlapped cell \"", cell, "\": ", why,
        "; expected (<stage>F<microbatch>;<stage>B<microbatch>)OVERLAP_F_B with the backward B "
        "or I, e.g. \"(0F4;7B2)OVERLAP_F_B\""));
  };
  if (!absl::EndsWith(cell, kOverlapSuffix)) return bad("it must end in )OVERLAP_F_B");
  const absl::string_view inner = cell.substr(1, cell.size() - 1 - kOverlapSuffix.size());
  const std::vector<absl::string_view> parts = absl::StrSplit(inner, ';');
  if (parts.size() != 2) return bad("it needs exactly two sub-actions");
  auto f = ParseAction(parts[0]);
  if (!f.ok()) return f.status();
  auto b = ParseAction(parts[1]);
  if (!b.ok()) return b.status();
  if (f->kind != ActionKind::kF) return bad("the first sub-action must be a forward F");
  if (b->kind != ActionKind::kB && b->kind != ActionKind::kBW) {
    return bad("the second sub-action must be a backward B or I");
  }
  f->kind = ActionKind::kOverlapF;
  out->push_back(*f);
  out->push_back(*b);
  return absl::OkStatus();
}

}  // namespace

std::string ScheduleToCsv(const Schedule& schedule) {
  std::string out;
  for (const auto& list : schedule.worker_actions) {
    for (size_t k = 0; k < list.size(); ++k) {
      if (k > 0) out += ",";
      const Action& a = list[k];
      if (a.kind == ActionKind::kOverlapF && k + 1 < list.size()) {
        Action f = a;
        f.kind = ActionKind::kF;
        absl::StrAppend(&out, "(", ToString(f), ";", ToString(list[k + 1]), kOverlapSuffix);
        ++k;
      } else {
        out += ToString(a);
      }
    }
    out += "\n";
  }
  return out;
}

absl::StatusOr<Schedule> ScheduleFromCsv(absl::string_view csv, std::string name) {
  const std::vector<absl::string_view> rows = Lines(csv);
  if (rows.empty()) return absl::InvalidArgumentError("CSV schedule has no rows");
  const int p = static_cast<int>(rows.size());
  std::vector<std::vector<Action>> lists(p);
  int max_stage = -1, max_mb = -1;
  for (int w = 0; w < p; ++w) {
    for (absl::string_view cell : absl::StrSplit(rows[w], ',')) {
      cell = absl::StripAsciiWhitespace(cell);
      if (cell.empty()) continue;
      const size_t before = lists[w].size();
      if (absl::Status st = ParseCell(cell, &lists[w]); !st.ok()) {
        return LineError(w + 1, st.message());
      }
      for (size_t k = before; k < lists[w].size(); ++k) {
        max_stage = std::max(max_stage, lists[w][k].stage);
        max_mb = std::max(max_mb, lists[w][k].microbatch);
      }
    }
  }
  if (max_stage < 0) return absl::InvalidArgumentError("CSV schedule has no actions");
  std::vector<int> placement(max_stage + 1, -1);
  for (int w = 0; w < p; ++w) {
    for (const Action& a : lists[w]) {
      if (IsCompute(a.kind) && placement[a.stage] < 0) placement[a.stage] = w;
    }
  }
  for (int s = 0; s <= max_stage; ++s) {
    if (placement[s] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("CSV schedule: stage ", s, " has no compute action, cannot place it"));
    }
  }
  Schedule s = MakeEmptySchedule(std::move(name), p, max_mb + 1, std::move(placement));
  s.worker_actions = std::move(lists);
  return s;
}

std::string ScheduleToText(const Schedule& schedule) {
  std::string out = "pipetrain-schedule v1\n";
  absl::StrAppend(&out, "name ", schedule.name.empty() ? "-" : schedule.name, "\n");
  absl::StrAppend(&out, "workers ", schedule.num_workers, "\n");
  absl::StrAppend(&out, "microbatches ", schedule.num_microbatches, "\n");
  absl::StrAppend(&out, "placement ", absl::StrJoin(schedule.stage_to_worker, " "), "\n");
  for (size_t w = 0; w < schedule.worker_actions.size(); ++w) {
    absl::StrAppend(&out, "worker ", w, ":");
    for (const Action& a : schedule.worker_actions[w]) absl::StrAppend(&out, " ", ToString(a));
    out += "\n";
  }
  return out;
}

absl::StatusOr<Schedule> ScheduleFromText(absl::string_view text) {
  const std::vector<absl::string_view> lines = Lines(text);
  if (lines.empty() || absl::StripAsciiWhitespace(lines[0]) != "pipetrain-schedule v1") {
    return LineError(1, "expected header \"pipetrain-schedule v1\"");
  }
  Schedule s;
  bool have_workers = false, have_mb = false, have_placement = false;
  for (int n = 1; n < static_cast<int>(lines.size()); ++n) {
    const int line = n + 1;
    absl::string_view l = absl::StripAsciiWhitespace(lines[n]);
    if (l.empty()) continue;
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(l, absl::MaxSplits(' ', 1));
    const absl::string_view key = kv.first, rest = absl::StripAsciiWhitespace(kv.second);
    if (key == "name") {
      s.name = rest == "-" ? "" : std::string(rest);
    } else if (key == "workers") {
      auto v = ParseInt(rest, line, "workers");
      if (!v.ok()) return v.status();
      s.num_workers = *v;
      s.worker_actions.assign(s.num_workers, {});
      have_workers = true;
    } else if (key == "microbatches") {
      auto v = ParseInt(rest, line, "microbatches");
      if (!v.ok()) return v.status();
      s.num_microbatches = *v;
      have_mb = true;
    } else if (key == "placement") {
      for (absl::string_view t : absl::StrSplit(rest, ' ', absl::SkipEmpty())) {
        auto v = ParseInt(t, line, "placement entry");
        if (!v.ok()) return v.status();
        s.stage_to_worker.push_back(*v);
      }
      s.num_stages = static_cast<int>(s.stage_to_worker.size());
      have_placement = true;
    } else if (key == "worker") {
      if (!have_workers) return LineError(line, "\"worker\" line before \"workers\"");
      std::pair<absl::string_view, absl::string_view> wl =
          absl::StrSplit(rest, absl::MaxSplits(':', 1));
      auto w = ParseInt(absl::StripAsciiWhitespace(wl.first), line, "worker index");
      if (!w.ok()) return w.status();
      if (*w >= s.num_workers) {
        return LineError(line, absl::StrCat("worker ", *w, " out of range 0..", s.num_workers - 1));
      }
      for (absl::string_view tok : absl::StrSplit(wl.second, ' ', absl::SkipEmpty())) {
        auto a = ParseAction(tok);
        if (!a.ok()) return LineError(line, a.status().message());
        s.worker_actions[*w].push_back(*a);
      }
    } else {
      return LineError(line, absl::StrCat("unknown key \"", key,
                                          "\"; expected name, workers, microbatches, placement "
                                          "or worker"));
    }
  }
  if (!have_workers || !have_mb || !have_placement) {
    return absl::InvalidArgumentError(
        "schedule text needs \"workers\", \"microbatches\" and \"placement\" lines");
  }
  return s;
}

}  // namespace pipetrain::schedule
