#include "dispatcher/tracer.hpp"

#include <glog/logging.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "dispatcher/internal/mutex.hpp"

namespace purine::dispatch {
namespace {

int64_t to_ns(std::chrono::steady_clock::time_point time) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(time.time_since_epoch()).count();
}

// Microseconds with three decimals, exactly (Chrome-trace timestamps are in microseconds).
void write_us(std::ostream& out, int64_t ns) {
  if (ns < 0) {
    out << '-';
    ns = -ns;
  }
  char frac[8];
  std::snprintf(frac, sizeof(frac), "%03d", static_cast<int>(ns % 1000));
  out << ns / 1000 << '.' << frac;
}

void write_json_string(std::ostream& out, const std::string& text) {
  out << '"';
  for (const char c : text) {
    switch (c) {
      case '"':
        out << "\\\"";
        break;
      case '\\':
        out << "\\\\";
        break;
      case '\n':
        out << "\\n";
        break;
      case '\r':
        out << "\\r";
        break;
      case '\t':
        out << "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned>(c));
          out << escaped;
        } else {
          out << c;
        }
    }
  }
  out << '"';
}

constexpr char kHeader[] = "{\"traceEvents\":[\n";
constexpr char kFooter[] = "\n],\"displayTimeUnit\":\"ms\"}\n";

// Starts one event: its separator, unless it is the first.
std::ostream& next_event(std::ostream& out, int64_t& events_written) {
  if (events_written++ > 0) out << ",\n";
  return out;
}

std::ofstream open_trace_file(const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(str("cannot write trace file '", path, "': ", std::strerror(errno)));
  out << kHeader;
  return out;
}

void close_trace_file(std::ofstream& out, const std::string& path) {
  out << kFooter;
  out.close();
  if (!out) throw Error(str("cannot write trace file '", path, "': write failed"));
}

void check_written(const std::ofstream& out, const std::string& path) {
  if (!out) throw Error(str("cannot write trace file '", path, "': write failed"));
}

// Returns the top-level objects of the "traceEvents" array of a JSON document, as text. A small
// scanner, not a JSON parser: it tracks strings and nesting, which is all the format needs.
std::vector<std::string> parse_trace_events(const std::string& text, const std::string& path) {
  auto fail = [&](const std::string& why) -> Error {
    return Error(str("'", path, "' is not a Chrome trace written by purine: ", why));
  };
  size_t pos = text.find("\"traceEvents\"");
  if (pos == std::string::npos) throw fail("no \"traceEvents\" key");
  pos = text.find_first_not_of(" \t\r\n", pos + 13);
  if (pos == std::string::npos || text[pos] != ':') throw fail("no ':' after \"traceEvents\"");
  pos = text.find_first_not_of(" \t\r\n", pos + 1);
  if (pos == std::string::npos || text[pos] != '[') throw fail("\"traceEvents\" is not an array");
  ++pos;
  std::vector<std::string> events;
  int depth = 0;
  bool in_string = false;
  size_t object_start = 0;
  for (; pos < text.size(); ++pos) {
    const char c = text[pos];
    if (in_string) {
      if (c == '\\') {
        ++pos;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (depth == 0) {
        if (c != '{') throw fail("an element of \"traceEvents\" is not an object");
        object_start = pos;
      }
      ++depth;
    } else if (c == '}' || c == ']') {
      if (depth == 0) {
        if (c == ']') return events;
        throw fail("unbalanced '}'");
      }
      if (--depth == 0) events.push_back(text.substr(object_start, pos + 1 - object_start));
    }
  }
  throw fail("the \"traceEvents\" array is not closed (truncated file?)");
}

}  // namespace

class Tracer::State {
 public:
  State() {
    for (auto& slot : buffers_) slot.store(nullptr, std::memory_order_relaxed);
  }

  void record_start(const TaskEvent& event) {
    Buffer* b = buffer(event.executor);
    MutexLock lock(&b->mu);
    b->open_start_ns = to_ns(event.time);
  }

  void record_end(const TaskEvent& event) {
    Buffer* b = buffer(event.executor);
    const int64_t end = to_ns(event.time);
    MutexLock lock(&b->mu);
    if (b->executor_name.empty()) b->executor_name = *event.executor_name;
    b->records.push_back(
        {b->intern(event.task_name), b->intern(event.location), b->open_start_ns, end});
  }

  size_t event_count() const {
    size_t total = 0;
    for (int e = 0; e < kMaxExecutors; ++e) {
      if (const Buffer* b = find(e)) {
        MutexLock lock(&b->mu);
        total += b->records.size();
      }
    }
    return total;
  }

  void clear() {
    for (int e = 0; e < kMaxExecutors; ++e) {
      if (Buffer* b = buffers_[e].load(std::memory_order_acquire)) {
        MutexLock lock(&b->mu);
        b->records.clear();
      }
    }
  }

  // Appends every recorded event to `out` as JSON objects, each preceded by ",\n" unless it is
  // the file's first (`events_written` counts them); with `forget`, the records are dropped.
  void write_events(std::ostream& out, int rank, int64_t& events_written, bool forget) {
    for (int e = 0; e < kMaxExecutors; ++e) {
      Buffer* b = buffers_[e].load(std::memory_order_acquire);
      if (b == nullptr) continue;
      MutexLock lock(&b->mu);
      for (const Record& r : b->records) {
        next_event(out, events_written) << "{\"ph\":\"X\",\"cat\":\"task\",\"pid\":" << rank
                                        << ",\"tid\":" << e << ",\"name\":";
        write_json_string(out, b->strings[r.name]);
        out << ",\"ts\":";
        write_us(out, r.start_ns);
        out << ",\"dur\":";
        write_us(out, r.end_ns - r.start_ns);
        out << ",\"args\":{\"location\":";
        write_json_string(out, b->strings[r.location]);
        out << "}}";
      }
      if (forget) b->records.clear();
    }
  }

  // The process and executor name events.
  void write_metadata(std::ostream& out, int rank, int64_t& events_written) const {
    next_event(out, events_written)
        << "{\"ph\":\"M\",\"pid\":" << rank
        << ",\"name\":\"process_name\",\"args\":{\"name\":\"rank " << rank << "\"}}";
    for (int e = 0; e < kMaxExecutors; ++e) {
      const Buffer* b = find(e);
      if (b == nullptr) continue;
      MutexLock lock(&b->mu);
      next_event(out, events_written) << "{\"ph\":\"M\",\"pid\":" << rank << ",\"tid\":" << e
                                      << ",\"name\":\"thread_name\",\"args\":{\"name\":";
      write_json_string(out, b->executor_name.empty() ? str("executor ", e) : b->executor_name);
      out << "}}";
      next_event(out, events_written)
          << "{\"ph\":\"M\",\"pid\":" << rank << ",\"tid\":" << e
          << ",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":" << e << "}}";
    }
  }

  void begin_file(const std::string& path, int rank) {
    MutexLock lock(&file_mu_);
    CHECK(file_ == nullptr) << "a trace file is open already: " << file_->path;
    file_ = std::make_unique<OpenFile>(OpenFile{path, rank, open_trace_file(path)});
  }

  void flush_to_file() {
    MutexLock lock(&file_mu_);
    CHECK(file_ != nullptr) << "no trace file is open";
    write_events(file_->out, file_->rank, file_->events_written, /*forget=*/true);
    file_->out.flush();
    check_written(file_->out, file_->path);
  }

  void end_file() {
    MutexLock lock(&file_mu_);
    CHECK(file_ != nullptr) << "no trace file is open";
    std::unique_ptr<OpenFile> file = std::move(file_);
    write_events(file->out, file->rank, file->events_written, /*forget=*/true);
    write_metadata(file->out, file->rank, file->events_written);
    close_trace_file(file->out, file->path);
  }

  bool file_open() const {
    MutexLock lock(&file_mu_);
    return file_ != nullptr;
  }

 private:
  struct Record {
    int name;      // index into Buffer::strings
    int location;  // index into Buffer::strings
    int64_t start_ns;
    int64_t end_ns;
  };
  struct Buffer {
    mutable Mutex mu;
    std::string executor_name GUARDED_BY(mu);
    int64_t open_start_ns GUARDED_BY(mu) = 0;
    std::vector<Record> records GUARDED_BY(mu);
    // Interned names, looked up by the address the event carries, checked by content.
    std::vector<std::string> strings GUARDED_BY(mu);
    std::unordered_map<const std::string*, int> ids GUARDED_BY(mu);

    int intern(const std::string* text) REQUIRES(mu) {
      auto it = ids.find(text);
      if (it != ids.end() && strings[it->second] == *text) return it->second;
      strings.push_back(*text);
      const int id = static_cast<int>(strings.size()) - 1;
      ids[text] = id;
      return id;
    }
  };
  struct OpenFile {
    std::string path;
    int rank;
    std::ofstream out;
    int64_t events_written = 0;
  };

  // The executor's buffer, created on its first event.
  Buffer* buffer(int executor) {
    CHECK_GE(executor, 0);
    CHECK_LT(executor, kMaxExecutors)
        << "Tracer supports at most " << kMaxExecutors << " executors";
    Buffer* b = buffers_[executor].load(std::memory_order_acquire);
    if (b != nullptr) return b;
    MutexLock lock(&create_mu_);
    b = buffers_[executor].load(std::memory_order_acquire);
    if (b == nullptr) {
      owned_.push_back(std::make_unique<Buffer>());
      b = owned_.back().get();
      buffers_[executor].store(b, std::memory_order_release);
    }
    return b;
  }

  const Buffer* find(int executor) const {
    return buffers_[executor].load(std::memory_order_acquire);
  }

  std::array<std::atomic<Buffer*>, kMaxExecutors> buffers_;
  Mutex create_mu_;
  std::vector<std::unique_ptr<Buffer>> owned_ GUARDED_BY(create_mu_);
  mutable Mutex file_mu_;
  std::unique_ptr<OpenFile> file_ GUARDED_BY(file_mu_);
};

Tracer::Tracer() : state_(std::make_unique<State>()) {}

Tracer::~Tracer() = default;

void Tracer::on_task_start(const TaskEvent& event) { state_->record_start(event); }

void Tracer::on_task_end(const TaskEvent& event) { state_->record_end(event); }

size_t Tracer::event_count() const { return state_->event_count(); }

void Tracer::clear() { state_->clear(); }

void Tracer::write_chrome_trace(const std::string& path, int rank) {
  std::ofstream out = open_trace_file(path);
  int64_t events_written = 0;
  state_->write_metadata(out, rank, events_written);
  state_->write_events(out, rank, events_written, /*forget=*/false);
  close_trace_file(out, path);
}

void Tracer::begin_file(const std::string& path, int rank) { state_->begin_file(path, rank); }

void Tracer::flush_to_file() { state_->flush_to_file(); }

void Tracer::end_file() { state_->end_file(); }

bool Tracer::file_open() const { return state_->file_open(); }

void Tracer::merge_chrome_traces(std::vector<std::string> inputs, std::string output) {
  std::vector<std::string> events;
  for (const std::string& path : inputs) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(str("cannot read trace file '", path, "': ", std::strerror(errno)));
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) throw Error(str("cannot read trace file '", path, "': read failed"));
    std::vector<std::string> parsed = parse_trace_events(text.str(), path);
    for (std::string& event : parsed) events.push_back(std::move(event));
  }
  std::ofstream out = open_trace_file(output);
  int64_t events_written = 0;
  for (const std::string& event : events) next_event(out, events_written) << event;
  close_trace_file(out, output);
}

}  // namespace purine::dispatch
