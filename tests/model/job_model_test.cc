// The job's model description: spec defaults (checked against job.proto's own comments), the
// declared data shape and the model shape, all without opening any data.
#include "model/job_model.h"

#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace pipetrain::model {
namespace {

// "Message.field" -> the literal after "default " in the field's comment (the comment lines
// right above it and the one after it), for every field whose default is a plain literal.
std::map<std::string, std::string> DocumentedDefaults() {
  std::ifstream in(std::string(PIPETRAIN_SOURCE_DIR) + "/proto/pipetrain/v1/job.proto");
  EXPECT_TRUE(in) << "job.proto not found";
  const std::regex message_re(R"(^message (\w+) \{)");
  const std::regex field_re(R"(^\s+(?:repeated )?[\w.]+ (\w+) = \d+;\s*(?://\s*(.*))?$)");
  const std::regex comment_re(R"(^\s+//\s?(.*)$)");
  // A literal ends the sentence: a number, an identifier or a quoted string, then "." or end.
  const std::regex default_re(R"(\bdefault ("[^"]*"|[\w+\-]+(?:\.\d+)?(?:e-?\d+)?)\.?\s*$)");
  std::map<std::string, std::string> out;
  std::string message, comment;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, message_re)) {
      message = m[1];
      comment.clear();
    } else if (std::regex_match(line, m, comment_re)) {
      comment += " " + m[1].str();
    } else if (std::regex_match(line, m, field_re)) {
      const std::string text = comment + " " + m[2].str();
      std::smatch d;
      // Only the sentence that ends the comment states the default.
      if (std::regex_search(text, d, default_re)) {
        std::string literal = d[1];
        if (literal.size() >= 2 && literal.front() == '"') literal = literal.substr(1, literal.size() - 2);
        out[message + "." + m[1].str()] = literal;
      }
      comment.clear();
    } else {
      comment.clear();
    }
  }
  return out;
}

// The value WithDefaults gives `field` of `message` (found anywhere in an empty JobSpec's tree),
// as text comparable with the documented literal.
std::string AppliedDefault(const google::protobuf::Message& root, const std::string& message,
                           const std::string& field) {
  const google::protobuf::Descriptor* d = root.GetDescriptor();
  const google::protobuf::Reflection* r = root.GetReflection();
  if (d->name() == message) {
    const google::protobuf::FieldDescriptor* f = d->FindFieldByName(field);
    if (f == nullptr) return "<no such field>";
    switch (f->cpp_type()) {
      case google::protobuf::FieldDescriptor::CPPTYPE_DOUBLE:
        return std::to_string(r->GetDouble(root, f));
      case google::protobuf::FieldDescriptor::CPPTYPE_INT32:
        return std::to_string(r->GetInt32(root, f));
      case google::protobuf::FieldDescriptor::CPPTYPE_INT64:
        return std::to_string(r->GetInt64(root, f));
      case google::protobuf::FieldDescriptor::CPPTYPE_STRING:
        return r->GetString(root, f);
      case google::protobuf::FieldDescriptor::CPPTYPE_ENUM:
        return r->GetEnum(root, f)->name();
      case google::protobuf::FieldDescriptor::CPPTYPE_BOOL:
        return r->GetBool(root, f) ? "true" : "false";
      default:
        return "<unsupported type>";
    }
  }
  for (int i = 0; i < d->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = d->field(i);
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE || f->is_repeated()) {
      continue;
    }
    std::string found = AppliedDefault(r->GetMessage(root, f), message, field);
    if (!found.empty()) return found;
  }
  return "";
}

// A documented literal as the applied value prints (numbers through std::to_string).
std::string Normalised(const std::string& literal, const std::string& applied) {
  char* end = nullptr;
  const double x = std::strtod(literal.c_str(), &end);
  if (end != literal.c_str() && *end == '\0' && applied.find('.') != std::string::npos) {
    return std::to_string(x);
  }
  return literal;
}

TEST(JobDefaultsTest, EveryLiteralDefaultInJobProtoIsTheAppliedOne) {
  const std::map<std::string, std::string> documented = DocumentedDefaults();
  // The fields whose defaults were once applied differently from their comment must be among
  // the documented ones (the parser cannot lose them silently).
  for (const char* field :
       {"OptimizerSpec.name", "OptimizerSpec.learning_rate", "OptimizerSpec.beta1",
        "OptimizerSpec.beta2", "OptimizerSpec.epsilon", "OptimizerSpec.weight_decay",
        "DataSpec.source", "ParallelismSpec.schedule", "MemorySpec.offload",
        "CheckpointSpec.keep_last", "JobSpec.max_restarts"}) {
    EXPECT_EQ(documented.count(field), 1u) << field << " states no literal default in job.proto";
  }
  const v1::JobSpec applied = WithDefaults(v1::JobSpec());
  for (const auto& [name, literal] : documented) {
    const size_t dot = name.find('.');
    const std::string value = AppliedDefault(applied, name.substr(0, dot), name.substr(dot + 1));
    EXPECT_EQ(Normalised(literal, value), value)
        << name << ": job.proto says default " << literal << ", WithDefaults applies " << value;
  }
}

TEST(JobDefaultsTest, BetaDefaultsAreTheDocumentedOnes) {
  // The contradiction this file exists for: proto 0.95, runtime 0.99, kernels 0.999.
  const v1::OptimizerSpec o = WithDefaults(v1::JobSpec()).training().optimizer();
  EXPECT_EQ(o.beta1(), 0.9);
  EXPECT_EQ(o.beta2(), 0.95);
  EXPECT_EQ(o.epsilon(), 1e-8);
  EXPECT_EQ(o.learning_rate(), 3e-3);
}

TEST(JobDefaultsTest, ShapeDefaultsFollowTheModelAndTheData) {
  v1::JobSpec spec;
  spec.mutable_model()->set_hidden(96);
  v1::JobSpec s = WithDefaults(spec);
  EXPECT_EQ(s.model().ffn_hidden(), 4 * 96);
  EXPECT_EQ(s.model().seq_len(), 3 * kDefaultTaskDigits + 2);
  EXPECT_EQ(s.model().vocab_size(), 12);
  spec.mutable_training()->mutable_data()->set_source("text");
  s = WithDefaults(spec);
  EXPECT_EQ(s.model().seq_len(), 64);
  EXPECT_EQ(s.model().vocab_size(), 256);
  // Set fields stay; applying twice changes nothing.
  spec.mutable_model()->set_seq_len(32);
  spec.mutable_training()->mutable_optimizer()->set_beta2(0.98);
  spec.set_max_restarts(-1);
  s = WithDefaults(spec);
  EXPECT_EQ(s.model().seq_len(), 32);
  EXPECT_EQ(s.training().optimizer().beta2(), 0.98);
  EXPECT_EQ(s.max_restarts(), -1);
  EXPECT_EQ(WithDefaults(s).SerializeAsString(), s.SerializeAsString());
}

// The training recipe's fields (lr schedule, decay groups) state their defaults, so the test
// above checks them against WithDefaults.
TEST(JobDefaultsTest, RecipeFieldsStateTheirDefaults) {
  const std::map<std::string, std::string> documented = DocumentedDefaults();
  for (const char* field :
       {"OptimizerSpec.lr_schedule", "OptimizerSpec.warmup_steps", "OptimizerSpec.min_lr_ratio",
        "OptimizerSpec.decay_embeddings", "OptimizerSpec.decay_norms_and_biases",
        "OptimizerSpec.clip_grad_norm"}) {
    EXPECT_EQ(documented.count(field), 1u) << field << " states no literal default in job.proto";
  }
  EXPECT_EQ(WithDefaults(v1::JobSpec()).training().optimizer().lr_schedule(), "constant");
}

v1::JobSpec SmallSpec() {
  v1::JobSpec spec;
  spec.mutable_model()->set_num_layers(4);
  spec.mutable_model()->set_hidden(32);
  spec.mutable_model()->set_num_heads(4);
  spec.mutable_training()->set_global_batch(8);
  spec.mutable_training()->set_microbatch_size(2);
  return spec;
}

TEST(JobModelTest, ModelConfigNeedsNoData) {
  v1::JobSpec spec = SmallSpec();
  spec.mutable_training()->mutable_data()->set_source("text");
  spec.mutable_training()->mutable_data()->set_path("/nonexistent/only/workers/see/this");
  spec.mutable_model()->set_seq_len(16);
  absl::StatusOr<GptConfig> c = ModelConfig(spec);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->seq_len, 16);
  EXPECT_EQ(c->vocab, 256);
  EXPECT_EQ(c->ffn, 128);
  EXPECT_EQ(NumMicrobatches(spec), 4);
  EXPECT_EQ(TokensPerStep(spec), 8 * 16);
}

TEST(JobModelTest, ShapeErrorsNameTheField) {
  v1::JobSpec spec = SmallSpec();
  spec.mutable_model()->set_seq_len(9);  // the addition task has 8
  absl::StatusOr<GptConfig> c = ModelConfig(spec);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("model.seq_len"), std::string::npos) << c.status();
  spec.mutable_model()->set_seq_len(0);
  spec.mutable_model()->set_vocab_size(11);
  c = ModelConfig(spec);
  EXPECT_NE(c.status().message().find("model.vocab_size"), std::string::npos) << c.status();
  spec.mutable_model()->set_vocab_size(0);
  spec.mutable_training()->mutable_data()->set_source("images");
  c = ModelConfig(spec);
  EXPECT_NE(c.status().message().find("training.data.source"), std::string::npos) << c.status();
  EXPECT_EQ(TokensPerStep(spec), 0);
}

// Token datasets (training.data.source "tokens", docs/data.md): the shape comes from the spec
// alone, and the defaults WithDefaults applies are the ones job.proto states.
TEST(JobModelTest, TokensShapeAndDefaultsComeFromTheSpec) {
  v1::JobSpec spec = SmallSpec();
  spec.mutable_training()->mutable_data()->set_source("tokens");
  spec.mutable_training()->mutable_data()->set_path("/nonexistent/only/workers/see/this");
  absl::StatusOr<GptConfig> c = ModelConfig(spec);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("model.vocab_size: required"), std::string::npos)
      << c.status();
  spec.mutable_model()->set_vocab_size(5000);
  c = ModelConfig(spec);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->vocab, 5000);
  const v1::JobSpec s = WithDefaults(spec);
  EXPECT_EQ(TokensPerStep(spec), 8 * s.model().seq_len());
  spec.mutable_model()->set_seq_len(100);
  EXPECT_EQ(ModelConfig(spec)->seq_len, 100);
  spec.mutable_training()->mutable_data()->set_source("text");
  EXPECT_EQ(WithDefaults(spec).training().data().token_dtype(), "");  // tokens only

  // job.proto's words for both defaults.
  std::ifstream in(std::string(PIPETRAIN_SOURCE_DIR) + "/proto/pipetrain/v1/job.proto");
  const std::string proto((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::smatch m;
  ASSERT_TRUE(std::regex_search(proto, m, std::regex(R"(tokens (\d+)\)\.\n\s+int32 seq_len)")))
      << "model.seq_len's comment states no default for tokens";
  EXPECT_EQ(s.model().seq_len(), std::stoi(m[1]));
  ASSERT_TRUE(std::regex_search(
      proto, m, std::regex(R"re(where the default is "(\w+)"[^\n]*\n\s+string token_dtype)re")))
      << "training.data.token_dtype's comment states no default";
  EXPECT_EQ(s.training().data().token_dtype(), m[1].str());
}

}  // namespace
}  // namespace pipetrain::model
