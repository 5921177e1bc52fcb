// The oneDNN engine and streams shared by the CPU kernels: one CPU engine per process, created
// on first use, and one stream per calling thread (each executor thread gets its own, so ops on
// different threads never share a stream). Both functions are thread-safe. oneDNN (OpenMP
// runtime) runs each primitive with the calling thread's omp_get_max_threads() threads.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

namespace purine::dnnl_context {

// The process-wide CPU engine.
const dnnl::engine& engine();
// The calling thread's stream on that engine.
dnnl::stream& stream();

}  // namespace purine::dnnl_context
