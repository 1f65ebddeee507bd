// The training recipe's shared pieces (model/): the learning-rate schedule at its turning points,
// the model presets and their overrides, the parameter count, and the validation of every new
// OptimizerSpec / ModelSpec field (InvalidArgument naming the field and the allowed values).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "model/cost_model.h"
#include "model/job_model.h"
#include "model/lr_schedule.h"
#include "model/model_presets.h"
#include "planner/job_spec_validation.h"

namespace pipetrain::model {
namespace {

LrSchedule Cosine(int64_t warmup, int64_t total, double min_ratio) {
  return LrSchedule{LrScheduleKind::kCosine, warmup, total, min_ratio};
}

TEST(LearningRateTest, ConstantWithoutWarmupIsThePeakAtEveryStep) {
  const LrSchedule constant;
  for (int64_t t : {1, 2, 1000}) EXPECT_EQ(LearningRate(constant, 3e-3, t), 3e-3) << t;
  // The float the kernels get is the one the spec's peak always gave (the default job's curve).
  EXPECT_EQ(static_cast<float>(LearningRate(constant, static_cast<float>(3e-3), 7)),
            static_cast<float>(3e-3));
}

TEST(LearningRateTest, WarmupRampsLinearlyToThePeak) {
  const LrSchedule s = Cosine(/*warmup=*/10, /*total=*/110, /*min_ratio=*/0.1);
  EXPECT_EQ(LearningRate(s, 1e-3, 1), 1e-3 * 1 / 10);  // warmup start: 1/W of the peak
  EXPECT_EQ(LearningRate(s, 1e-3, 5), 1e-3 * 5 / 10);
  EXPECT_EQ(LearningRate(s, 1e-3, 10), 1e-3);  // warmup end: exactly the peak
  // Warmup works the same before a constant rate.
  const LrSchedule c{LrScheduleKind::kConstant, 4, 100, 0};
  EXPECT_EQ(LearningRate(c, 2.0, 1), 0.5);
  EXPECT_EQ(LearningRate(c, 2.0, 4), 2.0);
  EXPECT_EQ(LearningRate(c, 2.0, 5), 2.0);
  EXPECT_EQ(LearningRate(c, 2.0, 100), 2.0);
}

TEST(LearningRateTest, CosineDecaysFromThePeakToTheFloor) {
  const LrSchedule s = Cosine(10, 110, 0.1);
  const double peak = 1e-3, floor = 0.1 * peak;
  // Mid-cosine (progress 1/2): halfway between peak and floor; a quarter: (1 + cos(pi/4)) / 2.
  EXPECT_DOUBLE_EQ(LearningRate(s, peak, 60), floor + (peak - floor) * 0.5);
  EXPECT_DOUBLE_EQ(LearningRate(s, peak, 35),
                   floor + (peak - floor) * 0.5 * (1 + std::cos(M_PI / 4)));
  // The first decay step is just below the peak; decay is monotone.
  EXPECT_LT(LearningRate(s, peak, 11), peak);
  for (int64_t t = 11; t < 110; ++t) {
    EXPECT_LT(LearningRate(s, peak, t + 1), LearningRate(s, peak, t)) << t;
  }
  // The last step reaches the floor exactly, and it stays there (a run given more steps).
  EXPECT_EQ(LearningRate(s, peak, 110), floor);
  EXPECT_EQ(LearningRate(s, peak, 500), floor);
  // Floor 0 (the default): down to 0.
  EXPECT_EQ(LearningRate(Cosine(0, 20, 0), 1.0, 20), 0.0);
  EXPECT_DOUBLE_EQ(LearningRate(Cosine(0, 20, 0), 1.0, 10), 0.5);
  // No decay phase (warmup takes every step): the ramp, ending at the peak.
  EXPECT_EQ(LearningRate(Cosine(8, 8, 0.5), 1.0, 8), 1.0);
}

TEST(LearningRateTest, ScheduleComesFromTheSpec) {
  v1::JobSpec spec;
  spec.mutable_training()->set_steps(300);
  absl::StatusOr<LrSchedule> s = LrScheduleOf(spec);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->kind, LrScheduleKind::kConstant);  // the default keeps today's behaviour
  EXPECT_EQ(s->warmup_steps, 0);
  v1::OptimizerSpec* o = spec.mutable_training()->mutable_optimizer();
  o->set_lr_schedule("cosine");
  o->set_warmup_steps(30);
  o->set_min_lr_ratio(0.1);
  s = LrScheduleOf(spec);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->kind, LrScheduleKind::kCosine);
  EXPECT_EQ(s->warmup_steps, 30);
  EXPECT_EQ(s->total_steps, 300);
  EXPECT_EQ(s->min_lr_ratio, 0.1);
  o->set_lr_schedule("linear");
  s = LrScheduleOf(spec);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("training.optimizer.lr_schedule"), std::string::npos);
  EXPECT_NE(s.status().message().find("constant, cosine"), std::string::npos);
}

TEST(ModelPresetTest, PresetsResolveAndExplicitFieldsOverrideThem) {
  v1::JobSpec spec;
  spec.mutable_model()->set_preset("gpt2-medium");
  spec.mutable_training()->mutable_data()->set_source("text");
  spec.mutable_training()->mutable_data()->set_path("/only/workers/read/this");
  absl::StatusOr<GptConfig> c = ModelConfig(spec);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_layers, 24);
  EXPECT_EQ(c->hidden, 1024);
  EXPECT_EQ(c->heads, 16);
  EXPECT_EQ(c->ffn, 4 * 1024);
  EXPECT_EQ(c->seq_len, 1024);
  EXPECT_EQ(c->vocab, 50257);
  // WithDefaults writes the preset's shape into the spec (the stored job says what it runs).
  const v1::JobSpec filled = WithDefaults(spec);
  EXPECT_EQ(filled.model().num_layers(), 24);
  EXPECT_EQ(filled.model().seq_len(), 1024);
  EXPECT_EQ(filled.model().preset(), "gpt2-medium");
  EXPECT_EQ(WithDefaults(filled).SerializeAsString(), filled.SerializeAsString());
  // Explicit fields win; the ffn default follows the overridden width.
  spec.mutable_model()->set_num_layers(6);
  spec.mutable_model()->set_hidden(512);
  spec.mutable_model()->set_num_heads(8);
  spec.mutable_model()->set_seq_len(128);
  c = ModelConfig(spec);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_layers, 6);
  EXPECT_EQ(c->hidden, 512);
  EXPECT_EQ(c->heads, 8);
  EXPECT_EQ(c->ffn, 2048);
  EXPECT_EQ(c->seq_len, 128);
  EXPECT_EQ(c->vocab, 50257);
}

TEST(ModelPresetTest, EveryGpt2PresetHasItsShapeAndParameterCount) {
  struct Want {
    const char* name;
    int layers, hidden, heads;
    int64_t params;  // untied LM head: GPT-2's count + vocab x hidden
  };
  // GPT-2's own counts (tied): 124,439,808; 354,823,168; 774,030,080; 1,557,611,200.
  for (const Want& w : {Want{"gpt2-small", 12, 768, 12, 124439808 + 50257LL * 768},
                        Want{"gpt2-medium", 24, 1024, 16, 354823168 + 50257LL * 1024},
                        Want{"gpt2-large", 36, 1280, 20, 774030080 + 50257LL * 1280},
                        Want{"gpt2-xl", 48, 1600, 25, 1557611200 + 50257LL * 1600}}) {
    v1::JobSpec spec;
    spec.mutable_model()->set_preset(w.name);
    spec.mutable_training()->mutable_data()->set_source("text");
    absl::StatusOr<GptConfig> c = ModelConfig(spec);
    ASSERT_TRUE(c.ok()) << w.name << ": " << c.status();
    EXPECT_EQ(c->num_layers, w.layers) << w.name;
    EXPECT_EQ(c->hidden, w.hidden) << w.name;
    EXPECT_EQ(c->heads, w.heads) << w.name;
    EXPECT_EQ(c->seq_len, 1024) << w.name;
    EXPECT_EQ(c->vocab, 50257) << w.name;
    EXPECT_EQ(ModelParameterCount(*c), w.params) << w.name;
  }
}

TEST(ModelPresetTest, TestPresetsTakeTheDataShape) {
  v1::JobSpec spec;
  spec.mutable_model()->set_preset("tiny");
  absl::StatusOr<GptConfig> c = ModelConfig(spec);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_layers, 2);
  EXPECT_EQ(c->hidden, 64);
  EXPECT_EQ(c->seq_len, 3 * kDefaultTaskDigits + 2);  // the addition task's
  EXPECT_EQ(c->vocab, 12);
  spec.mutable_model()->set_preset("small-test");
  c = ModelConfig(spec);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_layers, 4);
  EXPECT_EQ(c->hidden, 128);
  // 4 blocks of 12h^2 + 13h, embeddings (12 + 8) x h, final norm 2h, head h x 12.
  const int64_t h = 128;
  EXPECT_EQ(ModelParameterCount(*c), 4 * (12 * h * h + 13 * h) + 20 * h + 2 * h + 12 * h);
}

TEST(ModelPresetTest, AGpt2PresetOnTheAdditionTaskNamesTheFix) {
  v1::JobSpec spec;
  spec.mutable_model()->set_preset("gpt2-small");
  absl::StatusOr<GptConfig> c = ModelConfig(spec);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("model.seq_len: 1024 (from model.preset \"gpt2-small\")"),
            std::string::npos)
      << c.status();
  EXPECT_NE(c.status().message().find("set model.seq_len: 8"), std::string::npos) << c.status();
  spec.mutable_model()->set_seq_len(8);
  c = ModelConfig(spec);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->vocab, 50257);
}

TEST(ModelPresetTest, UnknownPresetIsInvalidArgumentListingThePresets) {
  v1::JobSpec spec;
  spec.mutable_model()->set_preset("gpt3");
  absl::StatusOr<GptConfig> c = ModelConfig(spec);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find(
                "model.preset: \"gpt3\" is not allowed; allowed: gpt2-small, gpt2-medium, "
                "gpt2-large, gpt2-xl, tiny, small-test"),
            std::string::npos)
      << c.status();
}

// A valid small job; each case below breaks one new field.
v1::JobSpec ValidSpec() {
  v1::JobSpec spec;
  spec.mutable_model()->set_num_layers(2);
  spec.mutable_model()->set_hidden(32);
  spec.mutable_model()->set_num_heads(4);
  spec.mutable_training()->set_steps(100);
  spec.mutable_training()->set_global_batch(8);
  spec.mutable_training()->set_microbatch_size(2);
  spec.mutable_parallelism()->set_num_workers(2);
  return spec;
}

void ExpectRejected(const v1::JobSpec& spec, const std::string& field, const std::string& allowed) {
  const absl::Status s = planner::ValidateJobSpec(spec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << field;
  EXPECT_EQ(s.message().rfind(field + ": ", 0), 0u) << s;
  EXPECT_NE(s.message().find(allowed), std::string::npos) << s;
}

TEST(RecipeValidationTest, TheNewFieldsAcceptTheirRanges) {
  v1::JobSpec spec = ValidSpec();
  ASSERT_TRUE(planner::ValidateJobSpec(spec).ok());
  v1::OptimizerSpec* o = spec.mutable_training()->mutable_optimizer();
  o->set_lr_schedule("cosine");
  o->set_warmup_steps(100);  // every step
  o->set_min_lr_ratio(1);
  o->set_decay_embeddings(true);
  o->set_decay_norms_and_biases(true);
  o->set_clip_grad_norm(1.0);
  EXPECT_TRUE(planner::ValidateJobSpec(spec).ok()) << planner::ValidateJobSpec(spec);
  o->set_clip_grad_norm(1e-9);
  EXPECT_TRUE(planner::ValidateJobSpec(spec).ok());
  o->set_clip_grad_norm(0);
  o->set_lr_schedule("constant");
  o->set_warmup_steps(0);
  o->set_min_lr_ratio(0);
  EXPECT_TRUE(planner::ValidateJobSpec(spec).ok());
  // A preset fills the shape the range checks see: layers 0 are fine with one.
  spec = ValidSpec();
  spec.mutable_model()->clear_num_layers();
  spec.mutable_model()->clear_hidden();
  spec.mutable_model()->clear_num_heads();
  spec.mutable_model()->set_preset("tiny");
  EXPECT_TRUE(planner::ValidateJobSpec(spec).ok()) << planner::ValidateJobSpec(spec);
  spec.mutable_model()->set_num_heads(3);  // overrides tiny's 4 and does not divide 64
  ExpectRejected(spec, "model.num_heads", "divide model.hidden (64)");
}

TEST(RecipeValidationTest, BadValuesNameTheFieldAndTheAllowedValues) {
  v1::JobSpec spec = ValidSpec();
  spec.mutable_model()->set_preset("gpt-4");
  ExpectRejected(spec, "model.preset",
                 "allowed: gpt2-small, gpt2-medium, gpt2-large, gpt2-xl, tiny, small-test");

  spec = ValidSpec();
  spec.mutable_training()->mutable_optimizer()->set_lr_schedule("step");
  ExpectRejected(spec, "training.optimizer.lr_schedule", "allowed: constant, cosine");

  for (int bad : {-1, 101}) {
    spec = ValidSpec();
    spec.mutable_training()->mutable_optimizer()->set_warmup_steps(bad);
    ExpectRejected(spec, "training.optimizer.warmup_steps", "allowed: 0..training.steps (100)");
  }
  for (double bad : {-0.1, 1.5, std::numeric_limits<double>::quiet_NaN(),
                     std::numeric_limits<double>::infinity()}) {
    spec = ValidSpec();
    spec.mutable_training()->mutable_optimizer()->set_min_lr_ratio(bad);
    ExpectRejected(spec, "training.optimizer.min_lr_ratio", "allowed: 0..1");
  }
  for (double bad : {-0.5, std::numeric_limits<double>::quiet_NaN(),
                     std::numeric_limits<double>::infinity()}) {
    spec = ValidSpec();
    spec.mutable_training()->mutable_optimizer()->set_clip_grad_norm(bad);
    ExpectRejected(spec, "training.optimizer.clip_grad_norm",
                   "allowed: a finite number >= 0 (0 = no clipping)");
  }
}

}  // namespace
}  // namespace pipetrain::model
