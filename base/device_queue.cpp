#include "base/device_queue.hpp"

#include <glog/logging.h>

#include "base/error.hpp"

namespace purine {

namespace {
thread_local LaunchWords* recording_on_this_thread = nullptr;
}  // namespace

LaunchWords::LaunchWords() {
  CHECK(recording_on_this_thread == nullptr) << "two recordings at once on one thread";
  recording_on_this_thread = this;
}

LaunchWords::~LaunchWords() {
  if (recording_on_this_thread == this) recording_on_this_thread = nullptr;
}

LaunchWords* LaunchWords::recording() { return recording_on_this_thread; }

std::vector<LaunchWord> LaunchWords::take() {
  if (recording_on_this_thread == this) recording_on_this_thread = nullptr;
  return std::move(words_);
}

void DeviceQueue::enqueue_host(std::function<void()>) {
  throw Error(str("device queue ", name(), " runs device work only, not host work"));
}

void DeviceQueue::begin_capture() {
  throw Error(str("device queue ", name(), " cannot record its work as a graph"));
}

std::unique_ptr<QueueGraph> DeviceQueue::end_capture() {
  throw Error(str("device queue ", name(), " is not recording"));
}

void DeviceQueue::write_word(void*, uint64_t) {
  throw Error(str("device queue ", name(), " cannot record its work as a graph"));
}

}  // namespace purine
