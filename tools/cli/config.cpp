#include "tools/cli/config.hpp"

#include <gflags/gflags.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <regex>

#include "base/error.hpp"
#include "purine.pb.h"
#include "purine/text_format_error.hpp"
#include "tools/cli/help.hpp"

namespace purine::cli {

namespace {

using google::protobuf::FieldDescriptor;

// Why a train flag has no TrainConfig field, for the two that have none; else nullptr.
const char* why_no_field(const std::string& flag) {
  if (flag == "config") return "a config file names no other file";
  if (flag == "print_config") return "printing is an action, not a setting of the run";
  return nullptr;
}

std::vector<std::string> field_names() {
  std::vector<std::string> names;
  const auto* d = proto::TrainConfig::descriptor();
  for (int i = 0; i < d->field_count(); ++i) names.push_back(d->field(i)->name());
  return names;
}

// The flag of a field, which every field must have.
gflags::CommandLineFlagInfo flag_of(const FieldDescriptor& field) {
  gflags::CommandLineFlagInfo info;
  require(gflags::GetCommandLineFlagInfo(field.name().c_str(), &info), "TrainConfig field '",
          field.name(), "' has no purine train flag");
  return info;
}

// A field's value as gflags writes it.
std::string value_text(const google::protobuf::Message& m, const FieldDescriptor& field) {
  const auto* r = m.GetReflection();
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING:
      return r->GetString(m, &field);
    case FieldDescriptor::CPPTYPE_BOOL:
      return r->GetBool(m, &field) ? "true" : "false";
    case FieldDescriptor::CPPTYPE_INT32:
      return std::to_string(r->GetInt32(m, &field));
    case FieldDescriptor::CPPTYPE_INT64:
      return std::to_string(r->GetInt64(m, &field));
    case FieldDescriptor::CPPTYPE_UINT64:
      return std::to_string(r->GetUInt64(m, &field));
    case FieldDescriptor::CPPTYPE_DOUBLE: {
      char text[32];
      std::snprintf(text, sizeof text, "%.17g", r->GetDouble(m, &field));
      return text;
    }
    default:
      throw Error(str("TrainConfig field '", field.name(), "' has an unsupported type"));
  }
}

// The parser's error in the words of the file: an unknown field with the one it is likely a
// typo of; any other error with the field written before it on its line.
std::string explain(const FirstTextFormatError& error, const std::string& text) {
  static const std::regex unknown(R"(has no field named \"([^\"]+)\")");
  std::smatch m;
  if (std::regex_search(error.message(), m, unknown)) {
    const std::string name = m[1].str();
    if (const char* why = why_no_field(name)) return str("'", name, "' is no field (", why, ")");
    const std::string near = closest_name(name, field_names());
    return str("TrainConfig has no field '", name, "'",
               near.empty() ? std::string() : "; did you mean '" + near + "'?",
               " (fields are the purine train flags, written max_iters for --max-iters)");
  }
  // The line of the error, up to its column: the last "name:" on it is the field.
  size_t begin = 0;
  for (int line = 1; line < error.line() && begin != std::string::npos; ++line) {
    begin = text.find('\n', begin);
    if (begin != std::string::npos) ++begin;
  }
  if (begin == std::string::npos) return error.message();
  const std::string before = text.substr(begin, static_cast<size_t>(error.column()));
  static const std::regex named(R"(([A-Za-z_][A-Za-z0-9_]*)\s*:)");
  std::string field;
  for (auto it = std::sregex_iterator(before.begin(), before.end(), named);
       it != std::sregex_iterator(); ++it)
    field = (*it)[1].str();
  const auto names = field_names();
  if (std::find(names.begin(), names.end(), field) == names.end()) return error.message();
  return str("field '", field, "': ", error.message());
}

}  // namespace

std::string ConfigFile::place(const std::string& message) const {
  const Field* blamed = nullptr;
  // The flags the message names, first to last ("--lr-policy=multistep needs ...").
  for (size_t at = message.find("--"); at != std::string::npos && !blamed;
       at = message.find("--", at + 2)) {
    size_t end = at + 2;
    while (end < message.size() &&
           (std::isalnum(static_cast<unsigned char>(message[end])) || message[end] == '-'))
      ++end;
    std::string flag = message.substr(at + 2, end - at - 2);
    std::replace(flag.begin(), flag.end(), '-', '_');
    for (const Field& f : fields_)
      if (f.name == flag) blamed = &f;
  }
  // Else a text value it calls unknown ("unknown model 'mlp2'; known models: ...").
  for (const Field& f : fields_)
    if (!blamed && f.is_string && message.rfind("unknown ", 0) == 0 &&
        message.find("'" + f.value + "'") != std::string::npos)
      blamed = &f;
  if (!blamed) return message;
  return str("--config=", path_, ":", blamed->line, ":", blamed->column, ": field '", blamed->name,
             "': ", message);
}

ConfigFile apply_config_file(const std::string& path) {
  ConfigFile applied;
  if (path.empty()) return applied;
  applied.path_ = path;
  std::ifstream in(path, std::ios::binary);
  require(in.good(), "--config=", path, ": cannot open it");
  constexpr std::streamsize kMaxBytes = 1 << 20;
  std::string text(kMaxBytes + 1, '\0');
  in.read(text.data(), kMaxBytes + 1);
  require(in.gcount() <= kMaxBytes, "--config=", path, ": larger than 1 MiB");
  text.resize(static_cast<size_t>(in.gcount()));
  proto::TrainConfig config;
  google::protobuf::TextFormat::Parser parser;
  FirstTextFormatError error;
  parser.RecordErrorsTo(&error);
  google::protobuf::TextFormat::ParseInfoTree where;
  parser.WriteLocationsTo(&where);
  const bool parsed = parser.ParseFromString(text, &config);
  require(parsed, "--config=", path, ":", error.line(), ":", error.column(), ": ",
          explain(error, text));
  const auto* d = config.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor& field = *d->field(i);
    const gflags::CommandLineFlagInfo flag = flag_of(field);
    if (!config.GetReflection()->HasField(config, &field)) continue;
    const std::string value = value_text(config, field);
    const auto location = where.GetLocation(&field, -1);
    ConfigFile::Field applied_field{field.name(), value,
                                    field.cpp_type() == FieldDescriptor::CPPTYPE_STRING,
                                    location.line + 1, location.column + 1};
    // Becomes the default: a flag given on the command line keeps its value.
    require(!gflags::SetCommandLineOptionWithMode(field.name().c_str(), value.c_str(),
                                                  gflags::SET_FLAGS_DEFAULT)
                 .empty(),
            "--config=", path, ":", applied_field.line, ":", applied_field.column, ": field '",
            field.name(), "': its flag refuses the value '", value, "'");
    if (flag.is_default) applied.fields_.push_back(applied_field);
  }
  return applied;
}

std::string effective_config() {
  // Every train flag has a field but those that cannot have one.
  const auto names = field_names();
  std::string without;
  for (const FlagHelp& flag : command_flags("train")) {
    const char* why = why_no_field(flag.name);
    require(why || std::find(names.begin(), names.end(), flag.name) != names.end(),
            "the train flag --", flag.name, " has no TrainConfig field (proto/purine.proto)");
    std::string dashed = flag.name;
    std::replace(dashed.begin(), dashed.end(), '_', '-');
    if (why) without += str("#   --", dashed, ": ", why, "\n");
  }
  proto::TrainConfig config;
  const auto* d = config.GetDescriptor();
  const auto* r = config.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor& field = *d->field(i);
    const std::string value = flag_of(field).current_value;
    switch (field.cpp_type()) {
      case FieldDescriptor::CPPTYPE_STRING:
        r->SetString(&config, &field, value);
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        r->SetBool(&config, &field, value == "true");
        break;
      case FieldDescriptor::CPPTYPE_INT32:
        r->SetInt32(&config, &field, std::stoi(value));
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        r->SetInt64(&config, &field, std::stoll(value));
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        r->SetUInt64(&config, &field, std::stoull(value));
        break;
      case FieldDescriptor::CPPTYPE_DOUBLE:
        r->SetDouble(&config, &field, std::stod(value));
        break;
      default:
        throw Error(str("TrainConfig field '", field.name(), "' has an unsupported type"));
    }
  }
  std::string fields;
  google::protobuf::TextFormat::PrintToString(config, &fields);
  return "# The effective configuration of purine train (TrainConfig, proto/purine.proto): every\n"
         "# flag as a field, but for these two, which have none:\n" +
         without + fields;
}

}  // namespace purine::cli
