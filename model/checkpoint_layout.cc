#include "model/checkpoint_layout.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/crc32.h"
#include "common/status_macros.h"

namespace pipetrain::model {

std::string CheckpointStepDir(const std::string& dir, int64_t step) {
  return absl::StrCat(dir, "/step-", step);
}

std::string StageCheckpointPath(const std::string& dir, int64_t step, int stage) {
  return absl::StrCat(CheckpointStepDir(dir, step), "/stage-", stage, ".ckpt");
}

std::optional<int64_t> LatestCompleteCheckpointStep(const std::string& dir, int num_stages) {
  std::error_code ec;
  std::optional<int64_t> best;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    int64_t step = 0;
    if (name.rfind("step-", 0) != 0 || !absl::SimpleAtoi(name.substr(5), &step)) continue;
    if (best && step <= *best) continue;
    bool complete = true;
    for (int s = 0; s < num_stages && complete; ++s) {
      complete = std::filesystem::is_regular_file(StageCheckpointPath(dir, step, s), ec);
    }
    if (complete) best = step;
  }
  return best;
}

std::string CheckpointManifestPath(const std::string& dir) { return dir + "/MANIFEST"; }

namespace {

std::string ManifestBody(const CheckpointManifest& m) {
  return absl::StrCat("pipetrain-checkpoint-manifest 1\nstep ", m.step, "\nstages ", m.num_stages,
                      "\n");
}

}  // namespace

absl::Status WriteCheckpointManifest(const std::string& dir, const CheckpointManifest& manifest) {
  if (manifest.num_stages <= 0 || manifest.step <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint manifest: step ", manifest.step, " stages ", manifest.num_stages));
  }
  std::error_code ec;
  for (int s = 0; s < manifest.num_stages; ++s) {
    const std::string stage = StageCheckpointPath(dir, manifest.step, s);
    if (!std::filesystem::is_regular_file(stage, ec)) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint manifest ", CheckpointManifestPath(dir), ": step ",
                       manifest.step, " is not complete: ", stage, " does not exist"));
    }
  }
  const std::string body = ManifestBody(manifest);
  return WriteFileAtomically(
      CheckpointManifestPath(dir),
      absl::StrCat(body, "crc32 ", Crc32(0, body.data(), body.size()), "\n"));
}

absl::StatusOr<CheckpointManifest> ReadCheckpointManifest(const std::string& dir) {
  const std::string path = CheckpointManifestPath(dir);
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("checkpoint manifest ", path, ": cannot open"));
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CheckpointManifest m;
  int64_t stages = 0;
  uint32_t crc = 0;
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t nl; (nl = data.find('\n', start)) != std::string::npos; start = nl + 1) {
    lines.push_back(data.substr(start, nl - start));
  }
  const bool ok =
      start == data.size() && lines.size() == 4 && lines[0] == "pipetrain-checkpoint-manifest 1" &&
      lines[1].rfind("step ", 0) == 0 && absl::SimpleAtoi(lines[1].substr(5), &m.step) &&
      lines[2].rfind("stages ", 0) == 0 && absl::SimpleAtoi(lines[2].substr(7), &stages) &&
      lines[3].rfind("crc32 ", 0) == 0 && absl::SimpleAtoi(lines[3].substr(6), &crc);
  if (!ok) {
    return absl::DataLossError(absl::StrCat("checkpoint manifest ", path, ": malformed"));
  }
  if (crc != Crc32(0, data.data(), data.size() - lines[3].size() - 1)) {
    return absl::DataLossError(absl::StrCat("checkpoint manifest ", path, ": checksum mismatch"));
  }
  m.num_stages = static_cast<int>(stages);
  return m;
}

absl::StatusOr<std::vector<int64_t>> PruneCheckpoints(const std::string& dir, int keep_last) {
  if (keep_last < 1) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint.keep_last: ", keep_last,
                                                   " is not allowed; allowed: >= 1"));
  }
  absl::StatusOr<CheckpointManifest> manifest = ReadCheckpointManifest(dir);
  if (absl::IsNotFound(manifest.status())) return std::vector<int64_t>();
  PT_RETURN_IF_ERROR(manifest.status());
  std::error_code ec;
  std::vector<int64_t> steps;  // step directories at or below the manifest's step
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    int64_t step = 0;
    if (!entry.is_directory() || name.rfind("step-", 0) != 0 ||
        !absl::SimpleAtoi(name.substr(5), &step) || step > manifest->step) {
      continue;
    }
    steps.push_back(step);
  }
  if (ec) {
    return absl::InternalError(absl::StrCat("checkpoint dir ", dir, ": ", ec.message()));
  }
  std::sort(steps.begin(), steps.end(), std::greater<>());
  std::vector<int64_t> removed;
  int kept = 0;
  for (int64_t step : steps) {
    bool complete = true;
    for (int s = 0; s < manifest->num_stages && complete; ++s) {
      complete = std::filesystem::is_regular_file(StageCheckpointPath(dir, step, s), ec);
    }
    if (step == manifest->step || (complete && kept < keep_last)) {
      ++kept;
      continue;
    }
    std::filesystem::remove_all(CheckpointStepDir(dir, step), ec);
    if (ec) {
      return absl::InternalError(absl::StrCat("checkpoint dir ", CheckpointStepDir(dir, step),
                                              ": remove: ", ec.message()));
    }
    removed.push_back(step);
  }
  std::sort(removed.begin(), removed.end());
  return removed;
}

}  // namespace pipetrain::model
