// The operator registry: type name -> factory. Each operator registers itself with one line,
//   PURINE_REGISTER_OPERATOR(ReluOp);
// in its cpu/ source file, under the name the class declares as ReluOp::kType (see
// TypedOperator in operator.hpp). The class needs a constructor from Attrs. create() on an unknown
// name throws purine::Error listing the known names. Registration happens during static
// initialization; lookups are thread-safe after that.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "operators/operator.hpp"

namespace purine {

using OperatorFactory = std::function<std::unique_ptr<Operator>(const Attrs&)>;

class OperatorRegistry {
 public:
  static bool add(const std::string& type, OperatorFactory factory);
  static std::unique_ptr<Operator> create(const std::string& type, const Attrs& attrs = {});
  static bool has(const std::string& type);
  static std::vector<std::string> names();
};

}  // namespace purine

#define PURINE_REGISTER_OPERATOR(Class)                                                       \
  static const bool purine_registered_##Class = ::purine::OperatorRegistry::add(              \
      Class::kType, [](const ::purine::Attrs& attrs) -> std::unique_ptr<::purine::Operator> { \
        return std::make_unique<Class>(attrs);                                                \
      })
