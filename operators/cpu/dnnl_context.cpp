#include "operators/cpu/dnnl_context.hpp"

namespace purine::dnnl_context {

const dnnl::engine& engine() {
  static const dnnl::engine cpu_engine(dnnl::engine::kind::cpu, 0);
  return cpu_engine;
}

dnnl::stream& stream() {
  thread_local dnnl::stream thread_stream(engine());
  return thread_stream;
}

}  // namespace purine::dnnl_context
