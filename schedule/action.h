// Action: one step of one worker's pipeline program, as plain data.
//
// The text form follows PyTorch pipelining's action grammar so schedules can be exchanged:
// `<stage><token><microbatch>`, e.g. `3F12`. Tokens (PyTorch's names, ours in brackets):
//   F        forward                           [kF]
//   I        backward, input gradient only     [kB]  (the papers' "B")
//   W        backward, weight gradient only    [kW]
//   B        full backward, input + weight     [kBW] (parse also accepts "BW")
//   SEND_F / RECV_F   activation transfer      [kSendAct / kRecvAct]
//   SEND_B / RECV_B   gradient transfer        [kSendGrad / kRecvGrad]
//   OFFLOAD / RELOAD  activation offload to host memory and back (pipetrain extension)
//   RELEASE  free the device copy an OFFLOAD was reading from (pipetrain extension)
//   OVERLAP_F forward overlapped with the backward right after it  [kOverlapF]
// An overlapped pair, PyTorch's OVERLAP_F_B, is two list entries: an OVERLAP_F action followed
// immediately by a B or BW (the validator enforces the adjacency). A worker with one compute
// stream runs it as the F, then the backward; the pair says that a runtime with a second stream
// (or an all-to-all to hide) may run them together. Its inputs are received before the pair and
// its outputs sent after it. The CSV form writes a pair as one cell, `(0F4;7B2)OVERLAP_F_B`.
// Transfers name the stage on this worker's side: SEND_F of stage s goes to stage s+1, RECV_F
// of stage s comes from s-1, SEND_B of stage s goes to s-1, RECV_B of stage s comes from s+1.
//
// Thread-safety: value type; free functions are pure.
#ifndef PIPETRAIN_SCHEDULE_ACTION_H_
#define PIPETRAIN_SCHEDULE_ACTION_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace pipetrain::schedule {

enum class ActionKind : uint8_t {
  kF,         // forward
  kB,         // backward, input gradient (paper's B)
  kW,         // backward, weight gradient
  kBW,        // fused backward
  kSendAct,   // send output activation of `stage` to stage + 1
  kRecvAct,   // receive input activation of `stage` from stage - 1
  kSendGrad,  // send input gradient of `stage` to stage - 1
  kRecvGrad,  // receive output gradient of `stage` from stage + 1
  kOffload,   // move the activations F(stage, microbatch) stored to host memory
  kReload,    // bring them back before the backward needs them
  // Free the device copy of that stash's OFFLOAD, waiting for the copy if it is still running.
  // Without a RELEASE the device copy is freed at the end of the next compute action after the
  // OFFLOAD (which waits for the copy); with one, that compute end leaves it alone, so a copy
  // longer than the next compute need not stall the worker. Placed by the offload pass where the
  // copy is planned to be done (PipeOffload's OFFLOAD_SEND_END).
  kRelease,
  // Forward of (stage, microbatch) overlapped with the B or BW that follows it in the list
  // (the header comment). Depends and allocates exactly as kF.
  kOverlapF,
};

inline constexpr int kNumActionKinds = 12;

struct Action {
  ActionKind kind = ActionKind::kF;
  int stage = 0;       // virtual stage (chunk) index in model order, 0-based
  int microbatch = 0;  // 0-based within the step

  friend bool operator==(const Action&, const Action&) = default;
};

bool IsCompute(ActionKind kind);   // F, B, W, BW, OVERLAP_F
// F or OVERLAP_F: a forward, whether overlapped or not.
inline bool IsForward(ActionKind kind) {
  return kind == ActionKind::kF || kind == ActionKind::kOverlapF;
}
bool IsTransfer(ActionKind kind);  // SEND_*/RECV_*
bool IsSend(ActionKind kind);
bool IsRecv(ActionKind kind);
bool IsOffload(ActionKind kind);   // OFFLOAD, RELOAD, RELEASE

// For a transfer, the stage on the other end (see the header comment). Undefined otherwise.
int PeerStage(const Action& action);

// The kind's token in the text form ("F", "I", "SEND_F", ...).
absl::string_view KindToken(ActionKind kind);
// Short label used by renderers: F, B, W, BW, SA, RA, SG, RG, OFF, RL, REL, OF.
absl::string_view KindLabel(ActionKind kind);

// "3F12", "2SEND_F0". Round-trips with ParseAction.
std::string ToString(const Action& action);
// Parses the text form; whitespace around it is ignored. InvalidArgument names the problem.
absl::StatusOr<Action> ParseAction(absl::string_view text);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_ACTION_H_
