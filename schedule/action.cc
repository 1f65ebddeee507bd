#include "schedule/action.h"

#include <array>
#include <cctype>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace pipetrain::schedule {
namespace {

struct KindNames {
  ActionKind kind;
  absl::string_view token;
  absl::string_view label;
};

constexpr std::array<KindNames, kNumActionKinds> kKinds = {{
    {ActionKind::kF, "F", "F"},
    {ActionKind::kB, "I", "B"},
    {ActionKind::kW, "W", "W"},
    {ActionKind::kBW, "B", "BW"},
    {ActionKind::kSendAct, "SEND_F", "SA"},
    {ActionKind::kRecvAct, "RECV_F", "RA"},
    {ActionKind::kSendGrad, "SEND_B", "SG"},
    {ActionKind::kRecvGrad, "RECV_B", "RG"},
    {ActionKind::kOffload, "OFFLOAD", "OFF"},
    {ActionKind::kReload, "RELOAD", "RL"},
    {ActionKind::kRelease, "RELEASE", "REL"},
    {ActionKind::kOverlapF, "OVERLAP_F", "OF"},
}};

const KindNames& Names(ActionKind kind) { return kKinds[static_cast<int>(kind)]; }

}  // namespace

bool IsCompute(ActionKind kind) {
  return kind == ActionKind::kF || kind == ActionKind::kB || kind == ActionKind::kW ||
         kind == ActionKind::kBW || kind == ActionKind::kOverlapF;
}
bool IsSend(ActionKind kind) {
  return kind == ActionKind::kSendAct || kind == ActionKind::kSendGrad;
}
bool IsRecv(ActionKind kind) {
  return kind == ActionKind::kRecvAct || kind == ActionKind::kRecvGrad;
}
bool IsTransfer(ActionKind kind) { return IsSend(kind) || IsRecv(kind); }
bool IsOffload(ActionKind kind) {
  return kind == ActionKind::kOffload || kind == ActionKind::kReload ||
         kind == ActionKind::kRelease;
}

int PeerStage(const Action& action) {
  switch (action.kind) {
    case ActionKind::kSendAct:
    case ActionKind::kRecvGrad:
      return action.stage + 1;
    case ActionKind::kRecvAct:
    case ActionKind::kSendGrad:
      return action.stage - 1;
    default:
      return action.stage;
  }
}

absl::string_view KindToken(ActionKind kind) { return Names(kind).token; }
absl::string_view KindLabel(ActionKind kind) { return Names(kind).label; }

std::string ToString(const Action& action) {
  return absl::StrCat(action.stage, KindToken(action.kind), action.microbatch);
}

absl::StatusOr<Action> ParseAction(absl::string_view text) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  size_t j = i;
  while (j < s.size() && (std::isupper(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad action \"", s, "\": ", why,
        "; expected <stage><kind><microbatch> with kind one of F, I, W, B (or BW), SEND_F, "
        "RECV_F, SEND_B, RECV_B, OFFLOAD, RELOAD, RELEASE, OVERLAP_F, e.g. \"3F12\""));
  };
  if (i == 0) return bad("missing stage number");
  if (j == i) return bad("missing kind");
  if (j == s.size()) return bad("missing microbatch number");
  for (size_t k = j; k < s.size(); ++k) {
    if (!std::isdigit(static_cast<unsigned char>(s[k]))) return bad("trailing characters");
  }
  Action action;
  if (!absl::SimpleAtoi(s.substr(0, i), &action.stage)) return bad("stage out of range");
  if (!absl::SimpleAtoi(s.substr(j), &action.microbatch)) return bad("microbatch out of range");
  absl::string_view token = s.substr(i, j - i);
  if (token == "BW") {
    action.kind = ActionKind::kBW;
    return action;
  }
  for (const KindNames& k : kKinds) {
    if (k.token == token) {
      action.kind = k.kind;
      return action;
    }
  }
  return bad(absl::StrCat("unknown kind \"", token, "\""));
}

}  // namespace pipetrain::schedule
