// The tracer: Chrome-trace JSON that parses, has the expected structure, and merges per rank.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "dispatcher/engine.hpp"
#include "dispatcher/tracer.hpp"

namespace pd = purine::dispatch;
namespace fs = std::filesystem;

namespace {

// A minimal strict JSON parser, enough to check that the tracer's files are valid JSON.
struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  double number = 0;
  std::string text;
  std::vector<Json> items;
  std::map<std::string, Json> fields;
  const Json& at(const std::string& key) const {
    auto it = fields.find(key);
    if (it == fields.end()) throw std::runtime_error("missing key " + key);
    return it->second;
  }
  bool has(const std::string& key) const { return fields.count(key) > 0; }
};

class JsonParser {
 public:
  explicit JsonParser(const std::string& s) : s_(s) {}
  Json parse_document() {
    Json v = value();
    space();
    if (i_ != s_.size()) fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& why) {
    throw std::runtime_error("invalid JSON at " + std::to_string(i_) + ": " + why);
  }
  void space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t'))
      ++i_;
  }
  void expect(char c) {
    space();
    if (i_ >= s_.size() || s_[i_] != c) fail(std::string("expected ") + c);
    ++i_;
  }
  Json value() {
    space();
    if (i_ >= s_.size()) fail("unexpected end");
    const char c = s_[i_];
    Json v;
    if (c == '{') {
      v.kind = Json::kObject;
      ++i_;
      space();
      if (s_[i_] == '}') {
        ++i_;
        return v;
      }
      for (;;) {
        space();
        std::string key = string();
        expect(':');
        v.fields[key] = value();
        space();
        if (s_[i_] == ',') {
          ++i_;
          continue;
        }
        expect('}');
        return v;
      }
    }
    if (c == '[') {
      v.kind = Json::kArray;
      ++i_;
      space();
      if (s_[i_] == ']') {
        ++i_;
        return v;
      }
      for (;;) {
        v.items.push_back(value());
        space();
        if (s_[i_] == ',') {
          ++i_;
          continue;
        }
        expect(']');
        return v;
      }
    }
    if (c == '"') {
      v.kind = Json::kString;
      v.text = string();
      return v;
    }
    for (const char* word : {"true", "false", "null"}) {
      if (s_.compare(i_, std::strlen(word), word) == 0) {
        i_ += std::strlen(word);
        v.kind = word[0] == 'n' ? Json::kNull : Json::kBool;
        return v;
      }
    }
    const size_t start = i_;
    if (s_[i_] == '-') ++i_;
    while (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) || s_[i_] == '.' ||
                              s_[i_] == 'e' || s_[i_] == 'E' || s_[i_] == '+' || s_[i_] == '-'))
      ++i_;
    if (start == i_) fail("unexpected character");
    v.kind = Json::kNumber;
    size_t used = 0;
    v.number = std::stod(s_.substr(start, i_ - start), &used);
    if (used != i_ - start) fail("bad number");
    return v;
  }
  std::string string() {
    if (s_[i_] != '"') fail("expected string");
    ++i_;
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c == '\\') {
        const char e = s_[i_++];
        switch (e) {
          case '"':
            out += '"';
            break;
          case '\\':
            out += '\\';
            break;
          case '/':
            out += '/';
            break;
          case 'n':
            out += '\n';
            break;
          case 't':
            out += '\t';
            break;
          case 'r':
            out += '\r';
            break;
          case 'b':
            out += '\b';
            break;
          case 'f':
            out += '\f';
            break;
          case 'u':
            out += static_cast<char>(std::stoi(s_.substr(i_, 4), nullptr, 16));
            i_ += 4;
            break;
          default:
            fail("bad escape");
        }
      } else {
        out += c;
      }
    }
    if (i_ >= s_.size()) fail("unterminated string");
    ++i_;
    return out;
  }
  const std::string& s_;
  size_t i_ = 0;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

Json parse_file(const std::string& path) {
  const std::string text = read_file(path);
  return JsonParser(text).parse_document();
}

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() /
          ("purine_test_tracer_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

// Runs a small two-executor plan `runs` times with the tracer attached.
void trace_runs(pd::Tracer* tracer, int runs, const std::string& prefix) {
  pd::Plan plan;
  plan.add_executor({"cpu/main"});
  plan.add_executor({"cpu/\"copy\""});
  for (int t = 0; t < 6; ++t) {
    pd::Task task;
    task.name = prefix + "op" + std::to_string(t) + (t == 5 ? "\\weird\"\n" : "");
    task.location = "rank0:" + std::string(t % 2 ? "gpu0" : "cpu");
    task.executor = t % 2;
    task.run = [] { std::this_thread::sleep_for(std::chrono::microseconds(50)); };
    const pd::TaskId id = plan.add_task(std::move(task));
    if (t > 0) plan.add_dependency(id - 1, id);
  }
  pd::Engine engine(std::move(plan));
  engine.add_observer(tracer);
  for (int r = 0; r < runs; ++r) engine.run();
}

}  // namespace

TEST_CASE("Tracer writes Chrome-trace JSON with one complete event per task run", "[tracer]") {
  pd::Tracer tracer;
  trace_runs(&tracer, 3, "");
  CHECK(tracer.event_count() == 18);
  const std::string path = temp_path("single.json");
  tracer.write_chrome_trace(path, 2);  // the engine is gone: the tracer kept its own copies

  const Json doc = parse_file(path);
  REQUIRE(doc.kind == Json::kObject);
  const Json& events = doc.at("traceEvents");
  REQUIRE(events.kind == Json::kArray);
  int complete = 0;
  std::map<int, std::string> thread_names;
  std::map<std::string, int> runs_per_task;
  for (const Json& e : events.items) {
    REQUIRE(e.kind == Json::kObject);
    CHECK(e.at("pid").number == 2);
    const std::string ph = e.at("ph").text;
    if (ph == "M" && e.at("name").text == "thread_name") {
      thread_names[static_cast<int>(e.at("tid").number)] = e.at("args").at("name").text;
    } else if (ph == "X") {
      ++complete;
      const int tid = static_cast<int>(e.at("tid").number);
      const std::string name = e.at("name").text;
      ++runs_per_task[name];
      CHECK(e.at("ts").kind == Json::kNumber);
      CHECK(e.at("dur").number >= 40);  // each task sleeps 50 us
      const int t = name[2] - '0';
      CHECK(tid == t % 2);
      CHECK(e.at("args").at("location").text == (t % 2 ? "rank0:gpu0" : "rank0:cpu"));
    }
  }
  CHECK(complete == 18);
  CHECK(thread_names == std::map<int, std::string>{{0, "cpu/main"}, {1, "cpu/\"copy\""}});
  CHECK(runs_per_task.size() == 6);
  CHECK(runs_per_task["op5\\weird\"\n"] == 3);

  tracer.clear();
  CHECK(tracer.event_count() == 0);
  fs::remove(path);
}

TEST_CASE("Tracer merges per-rank files into one", "[tracer]") {
  pd::Tracer rank0, rank1;
  trace_runs(&rank0, 1, "r0_");
  trace_runs(&rank1, 2, "r1_");
  const std::string p0 = temp_path("rank0.json"), p1 = temp_path("rank1.json");
  const std::string merged = temp_path("merged.json");
  rank0.write_chrome_trace(p0, 0);
  rank1.write_chrome_trace(p1, 1);
  pd::Tracer::merge_chrome_traces({p0, p1}, merged);

  const Json doc = parse_file(merged);
  std::map<int, int> complete_per_pid;
  std::map<int, int> names_per_pid;
  for (const Json& e : doc.at("traceEvents").items) {
    const int pid = static_cast<int>(e.at("pid").number);
    if (e.at("ph").text == "X") {
      ++complete_per_pid[pid];
      CHECK(e.at("name").text.substr(0, 3) == (pid == 0 ? "r0_" : "r1_"));
    } else if (e.at("name").text == "process_name") {
      ++names_per_pid[pid];
    }
  }
  CHECK(complete_per_pid == std::map<int, int>{{0, 6}, {1, 12}});
  CHECK(names_per_pid == std::map<int, int>{{0, 1}, {1, 1}});

  // A merged file is a trace too: merging it again keeps every event.
  const std::string again = temp_path("again.json");
  pd::Tracer::merge_chrome_traces({merged}, again);
  CHECK(parse_file(again).at("traceEvents").items.size() == doc.at("traceEvents").items.size());
  for (const auto& p : {p0, p1, merged, again}) fs::remove(p);
}

TEST_CASE("Tracer errors name the file", "[tracer]") {
  pd::Tracer tracer;
  CHECK_THROWS_WITH(tracer.write_chrome_trace("/nonexistent_dir/trace.json", 0),
                    Catch::Contains("/nonexistent_dir/trace.json"));
  const std::string missing = temp_path("missing.json");
  CHECK_THROWS_WITH(pd::Tracer::merge_chrome_traces({missing}, temp_path("out.json")),
                    Catch::Contains(missing));
  const std::string bad = temp_path("bad.json");
  std::ofstream(bad) << "{\"traceEvents\":[{\"ph\":\"X\"";
  CHECK_THROWS_AS(pd::Tracer::merge_chrome_traces({bad}, temp_path("out.json")), purine::Error);
  CHECK_THROWS_WITH(pd::Tracer::merge_chrome_traces({bad}, temp_path("out.json")),
                    Catch::Contains(bad));
  fs::remove(bad);
}

TEST_CASE("An empty tracer writes a valid trace", "[tracer]") {
  pd::Tracer tracer;
  const std::string path = temp_path("empty.json");
  tracer.write_chrome_trace(path, 0);
  CHECK(parse_file(path).at("traceEvents").items.size() == 1);  // the process name
  fs::remove(path);
}

TEST_CASE("A streamed trace holds every run while memory keeps only the unflushed ones",
          "[tracer]") {
  pd::Tracer tracer;
  const std::string path = temp_path("streamed.json");
  tracer.begin_file(path, 1);
  CHECK(tracer.file_open());
  for (int run = 0; run < 3; ++run) {
    trace_runs(&tracer, 1, "");
    CHECK(tracer.event_count() == 6);
    tracer.flush_to_file();
    CHECK(tracer.event_count() == 0);  // written out and forgotten
  }
  trace_runs(&tracer, 1, "");  // not flushed: end_file() writes it
  tracer.end_file();
  CHECK_FALSE(tracer.file_open());

  int complete = 0, thread_names = 0;
  const Json doc = parse_file(path);
  for (const Json& e : doc.at("traceEvents").items) {
    CHECK(e.at("pid").number == 1);
    complete += e.at("ph").text == "X";
    thread_names += e.at("ph").text == "M" && e.at("name").text == "thread_name";
  }
  CHECK(complete == 24);
  CHECK(thread_names == 2);
  fs::remove(path);
}

TEST_CASE("A streamed trace reports a full disk, naming the file", "[tracer]") {
  pd::Tracer tracer;
  tracer.begin_file("/dev/full", 0);
  trace_runs(&tracer, 1, "");
  CHECK_THROWS_WITH(tracer.flush_to_file(), Catch::Contains("cannot write trace file '/dev/full'"));
}
