// The operator registry: type name -> factory and signature. Each operator registers itself
// with one line,
//   PURINE_REGISTER_OPERATOR(ReluOp);
// in its cpu/ source file, under the name the class declares as ReluOp::kType (see
// TypedOperator in operator.hpp), with the summary of its inputs, outputs and attributes it
// declares as ReluOp::kSignature (`purine ops` lists them). The class needs a constructor from
// Attrs. create() on an unknown name throws purine::Error listing the known names. Registration
// happens during static initialization; lookups are thread-safe after that.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "operators/operator.hpp"

namespace purine {

using OperatorFactory = std::function<std::unique_ptr<Operator>(const Attrs&)>;

class OperatorRegistry {
 public:
  static bool add(const std::string& type, OperatorFactory factory,
                  const std::string& signature = "");
  // "(inputs) -> (outputs); attrs: name (type, default), ..." for a registered type ("" when
  // its class declares none).
  static std::string signature(const std::string& type);
  static std::unique_ptr<Operator> create(const std::string& type, const Attrs& attrs = {});
  static bool has(const std::string& type);
  static std::vector<std::string> names();
};

// An operator class's kSignature, or "" when it declares none (an operator of another project).
template <typename Class, typename = void>
struct SignatureOf {
  static constexpr const char* value = "";
};
template <typename Class>
struct SignatureOf<Class, std::void_t<decltype(Class::kSignature)>> {
  static constexpr const char* value = Class::kSignature;
};

}  // namespace purine

#define PURINE_REGISTER_OPERATOR(Class)                                          \
  static const bool purine_registered_##Class = ::purine::OperatorRegistry::add( \
      Class::kType,                                                              \
      [](const ::purine::Attrs& attrs) -> std::unique_ptr<::purine::Operator> {  \
        return std::make_unique<Class>(attrs);                                   \
      },                                                                         \
      ::purine::SignatureOf<Class>::value)
