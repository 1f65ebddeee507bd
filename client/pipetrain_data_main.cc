// `pipetrain-data`: the training-data tool, run as `pipetrain data ...` (the pipetrain CLI
// hands it everything after `data`) or on its own. A binary of its own because it links
// libsentencepiece, which must not share a process with protobuf
// (client/sentencepiece_tokenizer.h). Only flag parsing lives here; the logic is
// client/data_prepare.h and client/tokenize_command.h (`encode`/`decode`, which `pipetrain
// generate` runs). Exit codes: 0 ok, 1 runtime failure, 2 bad input (a flag, an unreadable
// corpus).
#include <iostream>
#include <string>

#include "CLI/CLI.hpp"
#include "client/data_prepare.h"
#include "client/tokenize_command.h"
#include "common/command_line.h"
#include "common/version.h"

int main(int argc, char** argv) {
  CLI::App app{"pipetrain data: prepare training data for the \"tokens\" source (docs/data.md)"};
  app.name("pipetrain data");
  app.set_version_flag("--version", pipetrain::VersionLine("pipetrain-data"));
  app.require_subcommand(1);
  pipetrain::client::DataPrepareOptions options;
  CLI::App* prepare = app.add_subcommand(
      "prepare",
      "Train a SentencePiece tokenizer on a text corpus, encode it and write DIR/train.bin, "
      "DIR/val.bin, DIR/tokenizer.model and DIR/meta.json; print the job-file lines that use DIR");
  prepare->add_option("--input", options.input, "The corpus: a UTF-8 text file")->required();
  prepare->add_option("--output", options.output, "The directory to write (created if missing)")
      ->required();
  prepare
      ->add_option("--vocab-size", options.vocab_size,
                   "Tokenizer vocabulary, " + std::to_string(pipetrain::client::kMinPrepareVocab) +
                       ".." + std::to_string(pipetrain::client::kMaxPrepareVocab) +
                       " (ids are uint16 up to 65536, else uint32)")
      ->required();
  prepare
      ->add_option("--val-fraction", options.val_fraction,
                   "The corpus's last fraction (from a line start) becomes val.bin, 0..0.5; 0: "
                   "none")
      ->capture_default_str();
  prepare->add_option("--model-type", options.model_type, "Tokenizer model: bpe or unigram")
      ->capture_default_str();
  prepare
      ->add_option("--threads", options.threads,
                   "Threads for training and encoding; 0 = all hardware threads")
      ->capture_default_str();
  std::string tokenizer, text, ids;
  CLI::App* encode = app.add_subcommand(
      "encode", "Print the ids of --text under a SentencePiece --tokenizer, space-separated");
  encode->add_option("--tokenizer", tokenizer, "A tokenizer.model file")->required();
  encode->add_option("--text", text, "The text to encode")->required();
  CLI::App* decode = app.add_subcommand(
      "decode", "Print the text of --ids (space-separated) under a SentencePiece --tokenizer");
  decode->add_option("--tokenizer", tokenizer, "A tokenizer.model file")->required();
  decode->add_option("--ids", ids, "Space-separated ids")->required();
  // CLI11 would only say that a subcommand is required.
  if (argc >= 2 && argv[1][0] != '-' && std::string(argv[1]) != "prepare" &&
      std::string(argv[1]) != "encode" && std::string(argv[1]) != "decode") {
    std::cerr << "pipetrain data: unknown subcommand \"" << argv[1]
              << "\"; allowed: prepare, encode, decode\n";
    return 2;
  }
  if (std::optional<int> code =
          pipetrain::ParseCommandLine(app, argc, argv, "pipetrain data")) {
    return *code;
  }
  const char* name = "pipetrain data prepare";
  absl::Status status;
  if (encode->parsed()) {
    name = "pipetrain data encode";
    status = pipetrain::client::EncodeCommand(tokenizer, text, std::cout);
  } else if (decode->parsed()) {
    name = "pipetrain data decode";
    status = pipetrain::client::DecodeCommand(tokenizer, ids, std::cout);
  } else {
    status = pipetrain::client::DataPrepareCommand(options, std::cout, std::cerr);
  }
  if (status.ok()) return 0;
  std::cerr << name << ": " << status.message() << "\n";
  return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}
