// The purine tool's words about its flags (tools/cli/help.*): each command's --help in its own
// words with readable defaults, and a mistyped or misplaced flag refused with the likely one.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "purine_cli.hpp"

namespace {

using Result = purine::testing::CommandResult;

using purine::testing::run_purine;

// `purine <command> --help`: each flag's text by its name.
std::map<std::string, std::string> help_texts(const std::string& command) {
  const Result help = run_purine(command + " --help");
  REQUIRE(help.status == 0);
  std::map<std::string, std::string> texts;
  static const std::regex flag(R"(^  --([a-z0-9-]+) \(.*\)$)");
  std::istringstream in(help.output);
  std::string line, name;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, flag))
      name = m[1];
    else if (!name.empty() && line.rfind("      ", 0) == 0)
      texts[name] = line.substr(6);
  }
  return texts;
}

}  // namespace

using Catch::Contains;

TEST_CASE("purine train --help prints defaults in the shortest form that reads back the same",
          "[cli]") {
  const Result r = run_purine("train --help");
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Contains("  --momentum (double, default 0.9)\n") &&
                           Contains("  --eps (double, default 1e-8)\n") &&
                           Contains("  --input-mean (double, default 0.286)\n") &&
                           Contains("  --weight-decay (double, default 0.0005)\n") &&
                           Contains("  --lr (double, default 0.01)\n"));
  CHECK_THAT(r.output, !Contains("0000000"));
  CHECK_THAT(run_purine("predict --help").output,
             Contains("  --input-std (double, default 0.353)\n"));
}

TEST_CASE("predict and export describe their flags in their own words", "[cli]") {
  const auto train = help_texts("train");
  for (const char* command : {"predict", "export"}) {
    const auto texts = help_texts(command);
    REQUIRE(texts.count("checkpoint") == 1);
    for (const auto& [name, text] : texts) {
      INFO("purine " << command << " --" << name << ": " << text);
      if (train.count(name)) CHECK(text != train.at(name));  // not train's wording
      CHECK_THAT(text, !Contains("training ends") && !Contains("model to train"));
    }
  }
  CHECK(help_texts("predict").at("checkpoint").rfind("the trained weights to predict with", 0) ==
        0);
  CHECK(help_texts("export").at("output") == "with --weights-only: the file to write");
  CHECK(help_texts("graph").at("output") ==
        "the file to write (default: MODEL.FORMAT, e.g. mlp.svg)");
}

TEST_CASE("a mistyped flag is refused with the flag it is likely a typo of", "[cli]") {
  struct Case {
    const char* args;
    const char* line;
  };
  for (const Case& c : {
           Case{"train --max-iter=3",
                "error: unknown flag --max-iter for purine train; did you mean --max-iters? "
                "(purine train --help lists its flags)\n"},
           Case{"train --max_iter 3",
                "error: unknown flag --max-iter for purine train; did you mean --max-iters? "
                "(purine train --help lists its flags)\n"},
           Case{"train --lr 0.1 --epcohs=2",
                "error: unknown flag --epcohs for purine train; did you mean --epochs? (purine "
                "train --help lists its flags)\n"},
           Case{"train --no-evaluate",
                "error: unknown flag --no-evaluate for purine train; did you mean --noevaluate? "
                "(purine train --help lists its flags)\n"},
           Case{"predict --chekpoint=mlp.ckpt",
                "error: unknown flag --chekpoint for purine predict; did you mean --checkpoint? "
                "(purine predict --help lists its flags)\n"},
           Case{"graph --fromat=png",
                "error: unknown flag --fromat for purine graph; did you mean --format? (purine "
                "graph --help lists its flags)\n"},
           Case{"train --frobnicate=1",
                "error: unknown flag --frobnicate for purine train (purine train --help lists "
                "its flags)\n"},
           // Another command's flag would be ignored without a word.
           Case{"predict --epochs=3",
                "error: --epochs is no flag of purine predict (only of train); purine "
                "predict --help lists its flags\n"},
           Case{"train --image=x.pgm",
                "error: --image is no flag of purine train (only of predict); purine train "
                "--help lists its flags\n"},
       }) {
    INFO(c.args);
    const Result r = run_purine(c.args);
    CHECK(r.status == 1);
    CHECK(r.output == c.line);
  }
}
