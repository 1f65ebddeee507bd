#include "client/job_file.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/status_macros.h"
#include "google/protobuf/util/json_util.h"
#include "model/job_model.h"
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

// The common prefix of an enum's value names ("OFFLOAD_POLICY_"), which job files may leave out.
std::string EnumPrefix(const google::protobuf::EnumDescriptor& e) {
  std::string prefix = e.value(0)->name();
  for (int i = 1; i < e.value_count(); ++i) {
    const std::string& name = e.value(i)->name();
    size_t n = 0;
    while (n < prefix.size() && n < name.size() && prefix[n] == name[n]) ++n;
    prefix.resize(n);
  }
  return prefix.substr(0, prefix.rfind('_') + 1);
}

// Enum values may be written short and in any case (`offload: selective` for
// OFFLOAD_POLICY_SELECTIVE, `device: cuda`): rewritten to the full names protobuf's JSON parser
// takes. An unknown name is an error naming the field and the allowed short names.
absl::Status ExpandEnumNames(nlohmann::json& j, const google::protobuf::Descriptor& message,
                             const std::string& path) {
  if (!j.is_object()) return absl::OkStatus();
  for (auto it = j.begin(); it != j.end(); ++it) {
    const google::protobuf::FieldDescriptor* field = message.FindFieldByName(it.key());
    if (field == nullptr) field = message.FindFieldByCamelcaseName(it.key());
    if (field == nullptr) continue;  // the JSON parser names unknown fields
    const std::string where = path.empty() ? it.key() : absl::StrCat(path, ".", it.key());
    if (field->type() == google::protobuf::FieldDescriptor::TYPE_MESSAGE) {
      if (field->is_repeated() && it->is_array()) {
        for (nlohmann::json& item : *it) {
          PT_RETURN_IF_ERROR(ExpandEnumNames(item, *field->message_type(), where));
        }
      } else {
        PT_RETURN_IF_ERROR(ExpandEnumNames(*it, *field->message_type(), where));
      }
      continue;
    }
    if (field->type() != google::protobuf::FieldDescriptor::TYPE_ENUM || !it->is_string()) continue;
    const google::protobuf::EnumDescriptor& e = *field->enum_type();
    const std::string value = it->get<std::string>();
    if (e.FindValueByName(value) != nullptr) continue;
    const std::string prefix = EnumPrefix(e);
    std::string full = prefix + absl::AsciiStrToUpper(value);
    absl::StrReplaceAll({{"-", "_"}}, &full);
    if (e.FindValueByName(full) != nullptr) {
      *it = full;
      continue;
    }
    std::vector<std::string> allowed;
    for (int i = 0; i < e.value_count(); ++i) {
      const std::string& name = e.value(i)->name();
      if (e.value(i)->number() != 0) {
        allowed.push_back(absl::AsciiStrToLower(name.substr(prefix.size())));
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": \"", value, "\" is not one of: ", absl::StrJoin(allowed, ", "),
                     " (or the full names, e.g. ", e.value(e.value_count() - 1)->name(), ")"));
  }
  return absl::OkStatus();
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

// -0.0 means what 0 means, but proto3 keeps it as a set field that no rendering can spell back
// (JSON's -0 reads as the integer 0): every negative zero becomes zero, recursively.
void ClearNegativeZeros(google::protobuf::Message& message) {
  using Cpp = google::protobuf::FieldDescriptor::CppType;
  const google::protobuf::Reflection& r = *message.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  r.ListFields(message, &fields);
  for (const google::protobuf::FieldDescriptor* f : fields) {
    const bool many = f->is_repeated();
    for (int i = 0; i < (many ? r.FieldSize(message, f) : 1); ++i) {
      switch (f->cpp_type()) {
        case Cpp::CPPTYPE_MESSAGE:
          ClearNegativeZeros(many ? *r.MutableRepeatedMessage(&message, f, i)
                                  : *r.MutableMessage(&message, f));
          break;
        case Cpp::CPPTYPE_DOUBLE: {
          const double v = many ? r.GetRepeatedDouble(message, f, i) : r.GetDouble(message, f);
          if (v != 0 || !std::signbit(v)) break;
          many ? r.SetRepeatedDouble(&message, f, i, 0.0) : r.SetDouble(&message, f, 0.0);
          break;
        }
        case Cpp::CPPTYPE_FLOAT: {
          const float v = many ? r.GetRepeatedFloat(message, f, i) : r.GetFloat(message, f);
          if (v != 0 || !std::signbit(v)) break;
          many ? r.SetRepeatedFloat(&message, f, i, 0.0f) : r.SetFloat(&message, f, 0.0f);
          break;
        }
        default:
          break;
      }
    }
  }
}

}  // namespace

absl::StatusOr<v1::JobSpec> ParseJobSpec(const std::string& text, const std::string& name) {
  std::string json;
  try {
    nlohmann::json fields;
    if (absl::EndsWith(name, ".json")) {
      fields = nlohmann::json::parse(text);
    } else {
      const YAML::Node root = YAML::Load(text);
      if (!root.IsMap()) {
        return absl::InvalidArgumentError(absl::StrCat(
            name, ": expected a mapping of JobSpec fields (name, model, training, ...)"));
      }
      fields = ToJson(root);
    }
    if (absl::Status s = ExpandEnumNames(fields, *v1::JobSpec::descriptor(), ""); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": ", s.message()));
    }
    json = fields.dump();
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": not valid YAML: ", e.what()));
  } catch (const nlohmann::json::parse_error& e) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": not valid JSON: ", e.what()));
  } catch (const nlohmann::json::exception& e) {  // dump() throws on invalid UTF-8
    return absl::InvalidArgumentError(absl::StrCat(name, ": not valid UTF-8: ", e.what()));
  }
  v1::JobSpec spec;
  if (absl::Status s = schedule::FromJson(json, &spec); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", s.message()));
  }
  ClearNegativeZeros(spec);
  return spec;
}

absl::StatusOr<v1::JobSpec> LoadJobSpec(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read job file \"", path, "\""));
  std::stringstream text;
  text << in.rdbuf();
  return ParseJobSpec(text.str(), path);
}

namespace {

// Sets every singular message field of `message`, recursively (so that each is printed).
void SetEveryMessage(google::protobuf::Message& message) {
  const google::protobuf::Descriptor& d = *message.GetDescriptor();
  const google::protobuf::Reflection& r = *message.GetReflection();
  for (int i = 0; i < d.field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = d.field(i);
    if (f->type() == google::protobuf::FieldDescriptor::TYPE_MESSAGE && !f->is_repeated()) {
      SetEveryMessage(*r.MutableMessage(&message, f));
    }
  }
}

std::string YamlOfJson(const std::string& json) {
  std::ostringstream out;
  const nlohmann::json fields = nlohmann::json::parse(json);
  if (fields.empty()) return "{}\n";  // an empty file would not read back as a spec
  ToYaml(fields, 0, out);
  return out.str();
}

}  // namespace

std::string JobSpecToYamlWithEveryField(const v1::JobSpec& spec) {
  v1::JobSpec filled = model::WithDefaults(spec);
  SetEveryMessage(filled);
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(filled, &json, options).ok()) return "";
  return YamlOfJson(json);
}

std::string JobSpecToYaml(const v1::JobSpec& spec) {
  auto json = schedule::ToJson(spec);
  if (!json.ok()) return "";
  return YamlOfJson(*json);
}

}  // namespace pipetrain::client
