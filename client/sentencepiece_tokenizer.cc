// No abseil header may be included here (see the header).
#include "client/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <unordered_map>

namespace pipetrain::client {
namespace {

class Iterator : public sentencepiece::SentenceIterator {
 public:
  explicit Iterator(SentenceSource* source) : source_(source) { Next(); }
  bool done() const override { return done_; }
  const std::string& value() const override { return value_; }
  void Next() override {
    std::string_view s;
    done_ = !source_->Next(&s);
    if (!done_) value_.assign(s.data(), s.size());
  }
  sentencepiece::util::Status status() const override { return sentencepiece::util::Status(); }

 private:
  SentenceSource* source_;
  std::string value_;
  bool done_ = false;
};

class SentencePieceTokenizer : public Tokenizer {
 public:
  int vocab_size() const override { return processor_.GetPieceSize(); }
  std::string Encode(std::string_view text, std::vector<int>* ids) const override {
    std::vector<int> out;
    const sentencepiece::util::Status status = processor_.Encode(text, &out);
    if (!status.ok()) return status.ToString();
    ids->insert(ids->end(), out.begin(), out.end());
    return "";
  }
  std::string Decode(const std::vector<int>& ids, std::string* text) const override {
    const sentencepiece::util::Status status = processor_.Decode(ids, text);
    return status.ok() ? "" : status.ToString();
  }
  sentencepiece::SentencePieceProcessor processor_;
};

}  // namespace

std::string TrainTokenizer(const TokenizerTrainOptions& options, SentenceSource* source,
                           std::string* model) {
  const std::unordered_map<std::string, std::string> args = {
      {"model_type", options.model_type},
      {"vocab_size", std::to_string(options.vocab_size)},
      {"num_threads", std::to_string(options.threads)},
      {"input_sentence_size", "0"},  // all of them, in order: no random sample
      {"max_sentence_length", std::to_string(options.max_sentence_bytes)},
      // Lossless (see the header).
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},
      {"byte_fallback", "true"},
      {"split_digits", "true"},
      {"minloglevel", "1"},  // its INFO lines are many; warnings and errors still show
  };
  Iterator iterator(source);
  const sentencepiece::util::Status status =
      sentencepiece::SentencePieceTrainer::Train(args, &iterator, model);
  return status.ok() ? "" : status.ToString();
}

std::unique_ptr<Tokenizer> Tokenizer::FromSerialized(const std::string& model, std::string* error) {
  auto tokenizer = std::make_unique<SentencePieceTokenizer>();
  const sentencepiece::util::Status status = tokenizer->processor_.LoadFromSerializedProto(model);
  if (!status.ok()) {
    *error = status.ToString();
    return nullptr;
  }
  return tokenizer;
}

}  // namespace pipetrain::client
