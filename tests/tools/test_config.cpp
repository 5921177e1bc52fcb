// purine train --config / --print-config (tools/cli/config.*): every train flag is a field, a run
// printed and read back is the same run, and a config file's mistakes name the file, the line and
// the field.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "purine_cli.hpp"
#include "temp_dir.hpp"

namespace {

using Result = purine::testing::CommandResult;

using purine::testing::run_purine;

struct Flag {
  std::string name;  // as users spell it: max-iters
  std::string type;  // gflags': bool, int32, int64, uint64, double, string
  std::string default_value;
};

// The flags `purine train --help` lists: those the flag registry has for train.
std::vector<Flag> train_flags() {
  const Result help = run_purine("train --help");
  REQUIRE(help.status == 0);
  std::vector<Flag> flags;
  static const std::regex line(R"(^  --([a-z0-9-]+) \((\w+), default (.*)\)$)");
  std::istringstream in(help.output);
  for (std::string text; std::getline(in, text);) {
    std::smatch m;
    if (std::regex_match(text, m, line)) flags.push_back({m[1], m[2], m[3]});
  }
  return flags;
}

// A value of the flag's type other than its default.
std::string other_value(const Flag& f) {
  if (f.type == "bool") return f.default_value == "true" ? "false" : "true";
  if (f.type == "string") return "x_" + f.name;
  if (f.type == "double") {
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", std::strtod(f.default_value.c_str(), nullptr) + 0.25);
    return text;
  }
  return std::to_string(std::stoll(f.default_value) + 7);
}

// The fields of a printed TrainConfig: name -> value as written (strings without quotes).
std::map<std::string, std::string> fields_of(const std::string& text) {
  std::map<std::string, std::string> fields;
  static const std::regex field(R"(^([a-z0-9_]+): (.*)$)");
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::smatch m;
    INFO(line);
    REQUIRE(std::regex_match(line, m, field));
    std::string value = m[2];
    if (value.size() >= 2 && value.front() == '"') value = value.substr(1, value.size() - 2);
    fields[m[1]] = value;
  }
  return fields;
}

std::string underscored(std::string name) {
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
}

}  // namespace

using Catch::Contains;

TEST_CASE("every train flag round-trips through --print-config and --config", "[cli][config]") {
  const std::vector<Flag> flags = train_flags();
  REQUIRE(flags.size() > 40);
  // The two flags that are no fields, and the help says why.
  const std::vector<std::string> without_field = {"config", "print-config"};
  const Result help = run_purine("train --help");
  CHECK_THAT(help.output, Contains("Every flag but --config and --print-config is a field (a file "
                                   "names no other config file; printing is an action"));
  // Every other flag, each set to a value other than its default.
  std::string args;
  std::map<std::string, Flag> set;
  std::map<std::string, std::string> given;
  for (const Flag& f : flags) {
    if (std::find(without_field.begin(), without_field.end(), f.name) != without_field.end())
      continue;
    given[f.name] = other_value(f);
    set[f.name] = f;
    args += " --" + f.name + "=" + given[f.name];
  }
  const Result printed = run_purine("train" + args + " --print-config");
  INFO("purine train" << args << " --print-config\n" << printed.output);
  REQUIRE(printed.status == 0);
  CHECK_THAT(printed.output,
             Contains("#   --config: a config file names no other file\n#   --print-config: "
                      "printing is an action, not a setting of the run\n"));
  const auto fields = fields_of(printed.output);
  CHECK(fields.size() == set.size());
  for (const auto& [name, value] : given) {
    INFO("--" << name << "=" << value);
    const auto field = fields.find(underscored(name));
    REQUIRE(field != fields.end());  // a train flag without a TrainConfig field
    if (set[name].type == "double")
      CHECK(std::strtod(field->second.c_str(), nullptr) == std::strtod(value.c_str(), nullptr));
    else
      CHECK(field->second == value);
  }
  // Read back from a file, the same configuration, field for field.
  purine::testing::TempDir dir;
  std::ofstream(dir.file("run.pbtxt")) << printed.output;
  const Result replayed = run_purine("train --config=" + dir.file("run.pbtxt") + " --print-config");
  REQUIRE(replayed.status == 0);
  CHECK(replayed.output == printed.output);
  // And the defaults too.
  const Result defaults = run_purine("train --print-config");
  REQUIRE(defaults.status == 0);
  std::ofstream(dir.file("defaults.pbtxt")) << defaults.output;
  CHECK(run_purine("train --config=" + dir.file("defaults.pbtxt") + " --print-config").output ==
        defaults.output);
}

TEST_CASE("purine train --print-config keeps the device and stall timeout and resume flags",
          "[cli][config]") {
  const Result r =
      run_purine("train --device=1 --stall-timeout=5 --resume --checkpoint-dir=d --print-config");
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Contains("\ndevice: 1\n") && Contains("\nstall_timeout: 5\n") &&
                           Contains("\nresume: true\n") && Contains("\nresume_from: \"\"\n"));
}

TEST_CASE("a config value error names the file and line and field", "[cli][config]") {
  purine::testing::TempDir dir;
  auto config = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir.file(name)) << text;
    return dir.file(name);
  };
  struct Case {
    std::string file, flags, line;
  };
  const std::string polly = config("polly.pbtxt", "model: \"mlp\"\nlr_policy: \"polly\"\n");
  const std::string momentum = config("momentum.pbtxt", "lr: 0.1 momentum: 2\n");
  const std::string model = config("model.pbtxt", "# the model\nmodel: \"mlp2\"\n");
  const std::string batch = config("batch.pbtxt", "epochs: 2\nbatch: \"many\"\n");
  const std::string typo = config("typo.pbtxt", "max_iter: 3\n");
  const std::string other = config("other.pbtxt", "config: \"other.pbtxt\"\n");
  const std::string far = config("far.pbtxt", "frobnicate: 3\n");
  for (const Case& c : {
           Case{polly, "",
                "error: --config=" + polly +
                    ":2:1: field 'lr_policy': unknown learning-rate policy 'polly' for "
                    "--lr-policy; choose fixed, step, multistep, poly or cosine\n"},
           // The command line overrides the file: its value is to blame, not the file's.
           Case{polly, "--lr-policy=exp",
                "error: unknown learning-rate policy 'exp' for --lr-policy; choose fixed, step, "
                "multistep, poly or cosine\n"},
           Case{momentum, "",
                "error: --config=" + momentum +
                    ":1:9: field 'momentum': --momentum must be in [0, 1), got 2\n"},
           Case{model, "",
                "error: --config=" + model +
                    ":2:1: field 'model': unknown model 'mlp2'; known models: alexnet, convnet, "
                    "convnet_bn, googlenet, googlenet_small, lenet, mlp, nin, resnet18, resnet20, "
                    "resnet50\n"},
           Case{batch, "",
                "error: --config=" + batch +
                    ":2:8: field 'batch': Expected integer, got: \"many\"\n"},
           Case{typo, "",
                "error: --config=" + typo +
                    ":1:9: TrainConfig has no field 'max_iter'; did you mean 'max_iters'? "
                    "(fields are the purine train flags, written max_iters for --max-iters)\n"},
           Case{far, "",
                "error: --config=" + far +
                    ":1:11: TrainConfig has no field 'frobnicate' (fields are the purine train "
                    "flags, written max_iters for --max-iters)\n"},
           Case{other, "",
                "error: --config=" + other +
                    ":1:7: 'config' is no field (a config file names no other file)\n"},
       }) {
    INFO(c.file << " " << c.flags);
    const Result r = run_purine("train --config=" + c.file + " " + c.flags);
    CHECK(r.status == 1);
    CHECK(r.output == c.line);
  }
}
