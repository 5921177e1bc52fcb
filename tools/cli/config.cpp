#include "tools/cli/config.hpp"

#include <gflags/gflags.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include "base/error.hpp"
#include "purine.pb.h"

namespace purine::cli {

namespace {

using google::protobuf::FieldDescriptor;

// Collects the parser's first error with its position (lines and columns counted from 1).
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (message_.empty()) message_ = str(line + 1, ":", column + 1, ": ", message);
  }
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

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

}  // namespace

void apply_config_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  require(in.good(), "--config=", path, ": cannot open it");
  constexpr std::streamsize kMaxBytes = 1 << 20;
  std::string text(kMaxBytes + 1, '\0');
  in.read(text.data(), kMaxBytes + 1);
  require(in.gcount() <= kMaxBytes, "--config=", path, ": larger than 1 MiB");
  text.resize(static_cast<size_t>(in.gcount()));
  proto::TrainConfig config;
  google::protobuf::TextFormat::Parser parser;
  FirstError error;
  parser.RecordErrorsTo(&error);
  require(parser.ParseFromString(text, &config), "--config=", path, ":", error.message());
  const auto* d = config.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor& field = *d->field(i);
    flag_of(field);
    if (!config.GetReflection()->HasField(config, &field)) continue;
    const std::string value = value_text(config, field);
    // Becomes the default: a flag given on the command line keeps its value.
    require(!gflags::SetCommandLineOptionWithMode(field.name().c_str(), value.c_str(),
                                                  gflags::SET_FLAGS_DEFAULT)
                 .empty(),
            "--config=", path, ": field '", field.name(), "' has a value its flag refuses: '",
            value, "'");
  }
}

std::string effective_config() {
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
  std::string text;
  google::protobuf::TextFormat::PrintToString(config, &text);
  return text;
}

}  // namespace purine::cli
