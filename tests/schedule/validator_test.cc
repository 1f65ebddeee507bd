// ValidateSchedule: accepts good schedules and rejects each kind of broken one with a message
// that names the offending action and ends with the marked step x worker grid.
#include "schedule/validator.h"

#include <string>

#include "gtest/gtest.h"
#include "schedule/passes.h"
#include "tests/schedule/test_util.h"

namespace pipetrain::schedule {
namespace {

using ::pipetrain::schedule::testing::FromRows;

// 2 workers, 2 microbatches, 1F1B with fused backward ("B" is PyTorch's full backward).
Schedule Good() { return FromRows(2, {0, 1}, {"0F0 0F1 0B0 0B1", "1F0 1B0 1F1 1B1"}); }

void ExpectRejected(const Schedule& s, const std::string& kind, const std::string& action,
                    absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
  absl::Status st = ValidateSchedule(s);
  ASSERT_FALSE(st.ok()) << "expected rejection: " << kind;
  EXPECT_EQ(st.code(), code) << st;
  const std::string msg(st.message());
  EXPECT_NE(msg.find(kind), std::string::npos) << msg;
  EXPECT_NE(msg.find(action), std::string::npos) << msg;
  EXPECT_NE(msg.find("step"), std::string::npos) << "no grid: " << msg;
  EXPECT_NE(msg.find(" w0"), std::string::npos) << "no grid: " << msg;
}

TEST(ValidatorTest, AcceptsGoodSchedules) {
  EXPECT_TRUE(ValidateSchedule(Good()).ok());
  Schedule split = FromRows(2, {0, 1}, {"0F0 0F1 0I0 0W0 0I1 0W1", "1F0 1I0 1F1 1I1 1W0 1W1"});
  EXPECT_TRUE(ValidateSchedule(split).ok()) << ValidateSchedule(split);
}

TEST(ValidatorTest, MissingF) {
  ExpectRejected(FromRows(2, {0, 1}, {"0F0 0B0 0B1", "1F0 1B0 1F1 1B1"}), "missing F", "0F1");
}

TEST(ValidatorTest, DuplicateF) {
  Schedule s = FromRows(2, {0, 1}, {"0F0 0F0 0F1 0B0 0B1", "1F0 1B0 1F1 1B1"});
  ExpectRejected(s, "duplicate F", "0F0");
  // The duplicate's cell is marked in the grid.
  EXPECT_NE(std::string(ValidateSchedule(s).message()).find("[0F0]"), std::string::npos);
}

TEST(ValidatorTest, MissingBackward) {
  ExpectRejected(FromRows(2, {0, 1}, {"0F0 0F1 0B0", "1F0 1B0 1F1 1B1"}), "missing backward",
                 "0B1");
}

TEST(ValidatorTest, BWithoutW) {
  ExpectRejected(FromRows(2, {0, 1}, {"0F0 0F1 0B0 0B1", "1F0 1I0 1F1 1B1"}), "B without W", "1I0");
}

TEST(ValidatorTest, BothBWAndB) {
  ExpectRejected(FromRows(2, {0, 1}, {"0F0 0F1 0B0 0B1", "1F0 1I0 1W0 1B0 1F1 1B1"}),
                 "both BW and B", "1B0");
}

TEST(ValidatorTest, WBeforeB) {
  ExpectRejected(FromRows(2, {0, 1}, {"0F0 0F1 0B0 0B1", "1F0 1W0 1I0 1F1 1B1"}), "W before B",
                 "1W0");
}

TEST(ValidatorTest, FAfterItsBackward) {
  ExpectRejected(FromRows(2, {0, 1}, {"0F0 0F1 0B0 0B1", "1B0 1F0 1F1 1B1"}),
                 "F after its backward", "1F0");
}

TEST(ValidatorTest, ActionOnWrongWorker) {
  ExpectRejected(FromRows(2, {0, 1}, {"0F0 0F1 0B0 0B1 1F0", "1B0 1F1 1B1"}), "wrong worker",
                 "1F0");
}

TEST(ValidatorTest, StageOutOfRange) {
  ExpectRejected(FromRows(2, {0, 1}, {"0F0 0F1 0B0 0B1 5F0", "1F0 1B0 1F1 1B1"}), "out of range",
                 "5F0");
}

TEST(ValidatorTest, MicrobatchOutOfRange) {
  ExpectRejected(FromRows(2, {0, 1}, {"0F0 0F1 0F7 0B0 0B1", "1F0 1B0 1F1 1B1"}), "out of range",
                 "0F7");
}

TEST(ValidatorTest, PlacementSizeMismatch) {
  Schedule s = Good();
  s.stage_to_worker.push_back(1);
  ExpectRejected(s, "placement size mismatch", "num_stages");
}

TEST(ValidatorTest, CrossWorkerCycleIsDeadlock) {
  // Worker 0 waits for B0 from worker 1 before it sends F1; worker 1 needs F1 before B0.
  ExpectRejected(FromRows(2, {0, 1}, {"0F0 0B0 0F1 0B1", "1F0 1F1 1B0 1B1"}), "deadlock", "1F1",
                 absl::StatusCode::kFailedPrecondition);
}

Schedule GoodWithTransfers() {
  auto s = AddTransfers(Good());
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

void Erase(Schedule& s, int worker, const std::string& token) {
  auto& list = s.worker_actions[worker];
  for (auto it = list.begin(); it != list.end(); ++it) {
    if (ToString(*it) == token) {
      list.erase(it);
      return;
    }
  }
  ADD_FAILURE() << token << " not on worker " << worker;
}

TEST(ValidatorTest, UnmatchedSend) {
  Schedule s = GoodWithTransfers();
  Erase(s, 1, "1RECV_F1");
  ExpectRejected(s, "unmatched SEND", "0SEND_F1");
}

TEST(ValidatorTest, UnmatchedRecv) {
  Schedule s = GoodWithTransfers();
  Erase(s, 1, "1SEND_B0");
  ExpectRejected(s, "unmatched RECV", "0RECV_B0");
}

TEST(ValidatorTest, RecvOnWrongWorker) {
  Schedule s = GoodWithTransfers();
  Erase(s, 1, "1RECV_F0");
  s.worker_actions[0].push_back({ActionKind::kRecvAct, 1, 0});
  ExpectRejected(s, "RECV on the wrong worker", "1RECV_F0");
}

TEST(ValidatorTest, TransferBetweenStagesOnSameWorker) {
  Schedule s = FromRows(1, {0, 0}, {"0F0 0SEND_F0 1RECV_F0 1F0 1B0 0B0"});
  ExpectRejected(s, "transfer between stages", "0SEND_F0");
}

TEST(ValidatorTest, TransferOverMissingEdge) {
  Schedule s = GoodWithTransfers();
  s.worker_actions[1].push_back({ActionKind::kSendAct, 1, 0});
  ExpectRejected(s, "does not exist", "1SEND_F0");
}

TEST(ValidatorTest, SendBeforeProducer) {
  Schedule s = FromRows(2, {0, 1},
                        {"0SEND_F0 0F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1",
                         "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1"});
  ExpectRejected(s, "SEND before its producer", "0SEND_F0");
}

TEST(ValidatorTest, MissingTransferWhenOthersExplicit) {
  Schedule s = GoodWithTransfers();
  Erase(s, 0, "0SEND_F1");
  Erase(s, 1, "1RECV_F1");
  ExpectRejected(s, "missing transfer", "0SEND_F1");
}

TEST(ValidatorTest, ReloadWithoutOffload) {
  ExpectRejected(FromRows(2, {0, 1}, {"0F0 0F1 0RELOAD0 0B0 0B1", "1F0 1B0 1F1 1B1"}),
                 "RELOAD without OFFLOAD", "0RELOAD0");
}

TEST(ValidatorTest, OffloadWithoutReload) {
  ExpectRejected(FromRows(2, {0, 1}, {"0F0 0OFFLOAD0 0F1 0B0 0B1", "1F0 1B0 1F1 1B1"}),
                 "OFFLOAD without RELOAD", "0OFFLOAD0");
}

TEST(ValidatorTest, ReloadAfterBackward) {
  ExpectRejected(FromRows(2, {0, 1}, {"0F0 0OFFLOAD0 0F1 0B0 0RELOAD0 0B1", "1F0 1B0 1F1 1B1"}),
                 "RELOAD after the backward", "0RELOAD0");
}

TEST(ValidatorTest, AcceptsOffloadRoundTrip) {
  Schedule s = FromRows(2, {0, 1}, {"0F0 0OFFLOAD0 0F1 0RELOAD0 0B0 0B1", "1F0 1B0 1F1 1B1"});
  EXPECT_TRUE(ValidateSchedule(s).ok()) << ValidateSchedule(s);
}

}  // namespace
}  // namespace pipetrain::schedule
