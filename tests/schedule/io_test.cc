// Round trips: action text form, schedule text form, PyTorch-style CSV.
#include <string>

#include "gtest/gtest.h"
#include "schedule/generator.h"
#include "schedule/passes.h"
#include "schedule/schedule_io.h"
#include "schedule/validator.h"

namespace pipetrain::schedule {
namespace {

void ExpectSame(const Schedule& a, const Schedule& b) {
  EXPECT_EQ(a.num_workers, b.num_workers);
  EXPECT_EQ(a.num_stages, b.num_stages);
  EXPECT_EQ(a.num_microbatches, b.num_microbatches);
  EXPECT_EQ(a.stage_to_worker, b.stage_to_worker);
  EXPECT_EQ(a.worker_actions, b.worker_actions);
}

TEST(ActionTextTest, EveryKindRoundTrips) {
  for (int k = 0; k < kNumActionKinds; ++k) {
    const Action a{static_cast<ActionKind>(k), 13, 1024};
    auto back = ParseAction(ToString(a));
    ASSERT_TRUE(back.ok()) << ToString(a);
    EXPECT_EQ(*back, a) << ToString(a);
  }
  EXPECT_EQ(ToString({ActionKind::kF, 3, 12}), "3F12");
  EXPECT_EQ(ToString({ActionKind::kB, 0, 1}), "0I1");
  EXPECT_EQ(ToString({ActionKind::kBW, 0, 1}), "0B1");
  EXPECT_EQ(ParseAction("2BW5")->kind, ActionKind::kBW);
  EXPECT_FALSE(ParseAction("F12").ok());
  EXPECT_FALSE(ParseAction("3X12").ok());
  EXPECT_FALSE(ParseAction("3F").ok());
}

class ScheduleIoTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ScheduleIoTest, TextAndCsvRoundTrip) {
  PipelineSpec spec;
  spec.num_workers = 4;
  spec.num_microbatches = 8;
  auto s = Generate(GetParam(), spec);
  ASSERT_TRUE(s.ok()) << s.status();
  for (const Schedule& sched : {*s, *AddTransfers(*s)}) {
    auto text = ScheduleFromText(ScheduleToText(sched));
    ASSERT_TRUE(text.ok()) << text.status();
    ExpectSame(*text, sched);
    EXPECT_EQ(text->name, sched.name);
    EXPECT_EQ(ScheduleToText(*text), ScheduleToText(sched));
    auto csv = ScheduleFromCsv(ScheduleToCsv(sched));
    ASSERT_TRUE(csv.ok()) << csv.status();
    ExpectSame(*csv, sched);
    EXPECT_TRUE(ValidateSchedule(*csv).ok());
  }
}

// dualpipev: overlapped F+B pairs are one CSV cell each and come back as the two actions.
INSTANTIATE_TEST_SUITE_P(Overlapped, ScheduleIoTest, ::testing::Values("dualpipev"));
INSTANTIATE_TEST_SUITE_P(Classic, ScheduleIoTest,
                         ::testing::Values("gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2"));

TEST(ScheduleIoTest, CsvIsPyTorchRows) {
  PipelineSpec spec;
  spec.num_workers = 2;
  spec.num_microbatches = 2;
  auto s = Generate("1f1b", spec);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(ScheduleToCsv(*s), "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
}

TEST(ScheduleIoTest, BadInputNamesTheLine) {
  auto r = ScheduleFromText(
      "pipetrain-schedule v1\nworkers 2\nmicrobatches 2\nplacement 0 1\n"
      "worker 0: 0F0 0Q1\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("line 5"), std::string::npos);
  EXPECT_FALSE(ScheduleFromText("hello\n").ok());
  EXPECT_FALSE(ScheduleFromCsv("0F0,2F0\n").ok());  // stage 1 has no action to place it by
  EXPECT_FALSE(ScheduleFromCsv("").ok());
}

}  // namespace
}  // namespace pipetrain::schedule
