// The first error of a protobuf text-format parse, with its position, for messages that name
// the file, line and column (config files, cluster files):
//   google::protobuf::TextFormat::Parser parser;
//   FirstTextFormatError error;
//   parser.RecordErrorsTo(&error);
//   if (!parser.ParseFromString(text, &message)) ... error.line(), error.column(), error.message()
#pragma once

#include <google/protobuf/io/tokenizer.h>

#include <string>

namespace purine {

class FirstTextFormatError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (!message_.empty()) return;
    line_ = line + 1;
    column_ = column + 1;
    message_ = message;
  }
  int line() const { return line_; }      // counted from 1
  int column() const { return column_; }  // counted from 1
  const std::string& message() const { return message_; }

 private:
  int line_ = 0, column_ = 0;
  std::string message_;
};

}  // namespace purine
