#include "client/job_file.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "schedule/codec/plan_proto.h"

namespace pipetrain::client {
namespace {

// YAML scalars carry no type: numbers and booleans become JSON numbers and booleans (protobuf's
// JSON parser accepts numbers for every numeric field and names for enums).
nlohmann::json ToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json obj = nlohmann::json::object();
      for (const auto& kv : node) obj[kv.first.as<std::string>()] = ToJson(kv.second);
      return obj;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& item : node) arr.push_back(ToJson(item));
      return arr;
    }
    case YAML::NodeType::Scalar: {
      const std::string s = node.Scalar();
      if (node.Tag() == "!") return s;  // quoted: a string
      if (s == "true" || s == "false") return s == "true";
      int64_t i = 0;
      if (absl::SimpleAtoi(s, &i)) return i;
      double d = 0;
      if (absl::SimpleAtod(s, &d) && s.find_first_not_of("0123456789.eE+-") == std::string::npos) {
        return d;
      }
      return s;
    }
    default:
      return nullptr;
  }
}

void ToYaml(const nlohmann::json& j, int indent, std::ostringstream& out) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    out << std::string(indent, ' ') << it.key() << ":";
    if (it->is_object() && !it->empty()) {  // an empty message stays `{}`: set, not null
      out << "\n";
      ToYaml(*it, indent + 2, out);
    } else {
      out << " " << it->dump() << "\n";
    }
  }
}

}  // namespace

absl::StatusOr<v1::JobSpec> ParseJobSpec(const std::string& text, const std::string& name) {
  std::string json;
  if (absl::EndsWith(name, ".json")) {
    json = text;
  } else {
    try {
      const YAML::Node root = YAML::Load(text);
      if (!root.IsMap()) {
        return absl::InvalidArgumentError(absl::StrCat(
            name, ": expected a mapping of JobSpec fields (name, model, training, ...)"));
      }
      json = ToJson(root).dump();
    } catch (const YAML::Exception& e) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": not valid YAML: ", e.what()));
    } catch (const nlohmann::json::exception& e) {  // dump() throws on invalid UTF-8
      return absl::InvalidArgumentError(absl::StrCat(name, ": not valid UTF-8: ", e.what()));
    }
  }
  v1::JobSpec spec;
  if (absl::Status s = schedule::FromJson(json, &spec); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", s.message()));
  }
  return spec;
}

absl::StatusOr<v1::JobSpec> LoadJobSpec(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read job file \"", path, "\""));
  std::stringstream text;
  text << in.rdbuf();
  return ParseJobSpec(text.str(), path);
}

std::string JobSpecToYaml(const v1::JobSpec& spec) {
  auto json = schedule::ToJson(spec);
  std::ostringstream out;
  if (!json.ok()) return "";
  const nlohmann::json fields = nlohmann::json::parse(*json);
  if (fields.empty()) return "{}\n";  // an empty file would not read back as a spec
  ToYaml(fields, 0, out);
  return out.str();
}

}  // namespace pipetrain::client
