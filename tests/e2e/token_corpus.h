// Token data for the end-to-end jobs on the "tokens" source: a directory made from the
// repository's own docs by the real `pipetrain data prepare`, and a job that trains on it.
#ifndef PIPETRAIN_TESTS_E2E_TOKEN_CORPUS_H_
#define PIPETRAIN_TESTS_E2E_TOKEN_CORPUS_H_

#include <string>

#include "pipetrain/v1/job.pb.h"

namespace pipetrain::testing {

struct TokenCorpus {
  std::string dir;  // train.bin, val.bin, tokenizer.model, meta.json
  int vocab_size = 0;
};

// Runs `<client_bin> data prepare` on docs/*.md into `<dir>/tokens` (vocab_size ids, uint16);
// fails the test if it does not succeed.
TokenCorpus PrepareDocsCorpus(const std::string& client_bin, const std::string& dir,
                              int vocab_size);

// `path`'s uint16 ids rewritten as uint32 into `out` (the same corpus in the other width).
std::string WidenToUint32(const std::string& path, const std::string& out);

// `spec` reading "tokens" from `path` with sequences of seq_len.
v1::JobSpec WithTokens(v1::JobSpec spec, const std::string& path, int vocab_size,
                       const std::string& dtype, int seq_len);

// Whether process `pid` has `path` mapped (/proc/<pid>/maps).
bool MapsFile(int pid, const std::string& path);

}  // namespace pipetrain::testing

#endif  // PIPETRAIN_TESTS_E2E_TOKEN_CORPUS_H_
