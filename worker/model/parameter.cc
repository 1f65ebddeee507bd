#include "worker/model/parameter.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pipetrain::model {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

// Uniform in (0, 1].
double Uniform(uint64_t bits) { return (static_cast<double>(bits >> 11) + 1.0) * 0x1.0p-53; }

}  // namespace

std::vector<float> NormalValues(uint64_t seed, int global_layer, const std::string& name,
                                int64_t count, float stddev) {
  const uint64_t key =
      SplitMix64(SplitMix64(seed) ^ SplitMix64(static_cast<uint64_t>(global_layer) + 0x1234567ULL) ^
                 Fnv1a(name));
  std::vector<float> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t pair = static_cast<uint64_t>(i / 2);
    const double u1 = Uniform(SplitMix64(key ^ (2 * pair)));
    const double u2 = Uniform(SplitMix64(key ^ (2 * pair + 1)));
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double z = (i % 2 == 0) ? r * std::cos(2 * M_PI * u2) : r * std::sin(2 * M_PI * u2);
    out[i] = static_cast<float>(z * stddev);
  }
  return out;
}

absl::StatusOr<Parameter> MakeParameter(kernels::Backend* backend, uint64_t seed, int global_layer,
                                        std::string name, ParameterKind kind,
                                        const kernels::Shape& shape, Init init, float stddev) {
  Parameter p;
  p.global_layer = global_layer;
  p.kind = kind;
  const std::string tag = absl::StrCat("param L", global_layer, " ", name);
  const int64_t n = kernels::NumElements(shape);
  switch (init) {
    case Init::kZeros: {
      PT_ASSIGN_OR_RETURN(p.value, backend->Zeros(shape, tag));
      break;
    }
    case Init::kOnes: {
      PT_ASSIGN_OR_RETURN(p.value, backend->Empty(shape, tag));
      PT_RETURN_IF_ERROR(backend->Fill(1.0f, &p.value));
      break;
    }
    case Init::kNormal: {
      PT_ASSIGN_OR_RETURN(
          p.value,
          backend->FromHost(shape, NormalValues(seed, global_layer, name, n, stddev), tag));
      break;
    }
  }
  PT_ASSIGN_OR_RETURN(p.grad, backend->Zeros(shape, tag + " grad"));
  PT_ASSIGN_OR_RETURN(p.adam_m, backend->Zeros(shape, tag + " adam_m"));
  PT_ASSIGN_OR_RETURN(p.adam_v, backend->Zeros(shape, tag + " adam_v"));
  p.name = std::move(name);
  return p;
}

}  // namespace pipetrain::model
