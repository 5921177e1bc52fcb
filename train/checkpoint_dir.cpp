#include "train/checkpoint_dir.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <system_error>

#include "base/error.hpp"
#include "purine/durable_file.hpp"
#include "purine/serialize.hpp"

namespace purine {

namespace fs = std::filesystem;

namespace {
const std::regex& checkpoint_name() {
  static const std::regex pattern("ckpt-([0-9]{1,18})\\.purine");
  return pattern;
}

void warn(const std::string& message) {
  const std::string line = "warning: " + message + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
}
}  // namespace

std::string checkpoint_file(const std::string& dir, int64_t iteration) {
  char name[40];
  std::snprintf(name, sizeof name, "ckpt-%010lld.purine", static_cast<long long>(iteration));
  return (fs::path(dir) / name).string();
}

void prepare_checkpoint_dir(const std::string& dir) {
  require(!dir.empty(), "--checkpoint-dir: empty path");
  std::error_code ec;
  fs::create_directories(dir, ec);
  require(!ec || fs::is_directory(dir), "cannot create the checkpoint directory '", dir,
          "': ", ec.message());
  require(fs::is_directory(dir), "the checkpoint directory '", dir, "' is not a directory");
  check_writable(checkpoint_file(dir, 0) + ".probe", "a file in the checkpoint directory");
}

std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  require(!ec, "cannot list the checkpoint directory '", dir, "': ", ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    require(!ec, "cannot list the checkpoint directory '", dir, "': ", ec.message());
    const std::string name = it->path().filename().string();
    std::smatch m;
    if (!std::regex_match(name, m, checkpoint_name())) continue;
    found.emplace_back(std::stoll(m[1]), it->path().string());
  }
  std::sort(found.rbegin(), found.rend());
  return found;
}

std::string newest_checkpoint(const std::string& dir, int64_t max_bytes) {
  for (const auto& [iteration, path] : list_checkpoints(dir)) {
    try {
      read_checkpoint(path, max_bytes);
      return path;
    } catch (const Error& e) {
      warn(str("skipping a damaged checkpoint: ", e.what()));
    }
  }
  return "";
}

void prune_checkpoints(const std::string& dir, int keep) {
  const auto checkpoints = list_checkpoints(dir);
  for (size_t i = static_cast<size_t>(std::max(keep, 0)); i < checkpoints.size(); ++i) {
    std::error_code ec;
    if (!fs::remove(checkpoints[i].second, ec) && ec)
      warn(str("cannot remove the old checkpoint '", checkpoints[i].second, "': ", ec.message()));
  }
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("ckpt-", 0) == 0 && is_durable_temporary(name)) fs::remove(it->path(), ec);
  }
}

}  // namespace purine
