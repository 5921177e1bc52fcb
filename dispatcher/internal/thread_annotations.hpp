// Clang thread-safety annotations (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html), written
// the way google/leveldb's port/thread_annotations.h does it: they document which mutex guards
// which member and which functions expect it held; clang -Wthread-safety checks them, other
// compilers see nothing. Use them with the annotated Mutex in dispatcher/internal/mutex.hpp.
#pragma once

#if defined(__clang__)
#define PURINE_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define PURINE_THREAD_ANNOTATION(x)
#endif

#ifndef GUARDED_BY
#define GUARDED_BY(x) PURINE_THREAD_ANNOTATION(guarded_by(x))
#endif

#ifndef PT_GUARDED_BY
#define PT_GUARDED_BY(x) PURINE_THREAD_ANNOTATION(pt_guarded_by(x))
#endif

#ifndef REQUIRES
#define REQUIRES(...) PURINE_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#endif

#ifndef EXCLUDES
#define EXCLUDES(...) PURINE_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#endif

#ifndef ACQUIRE
#define ACQUIRE(...) PURINE_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#endif

#ifndef RELEASE
#define RELEASE(...) PURINE_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#endif

#ifndef CAPABILITY
#define CAPABILITY(x) PURINE_THREAD_ANNOTATION(capability(x))
#endif

#ifndef SCOPED_CAPABILITY
#define SCOPED_CAPABILITY PURINE_THREAD_ANNOTATION(scoped_lockable)
#endif

#ifndef ASSERT_CAPABILITY
#define ASSERT_CAPABILITY(x) PURINE_THREAD_ANNOTATION(assert_capability(x))
#endif

#ifndef NO_THREAD_SAFETY_ANALYSIS
#define NO_THREAD_SAFETY_ANALYSIS PURINE_THREAD_ANNOTATION(no_thread_safety_analysis)
#endif
