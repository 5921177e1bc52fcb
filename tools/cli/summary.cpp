#include "tools/cli/summary.hpp"

#include <fstream>
#include <iomanip>

#include "purine/base/error.hpp"

namespace purine::cli {

void write_summary(const std::string& path, const TrainOptions& options,
                   const TrainResult& result) {
  std::ofstream out(path, std::ios::trunc);
  require(out.good(), "cannot write the summary file '", path, "'");
  // Model names are identifiers (letters, digits, '_'), so no string escaping is needed.
  out << std::setprecision(8) << "{\n"
      << "  \"model\": \"" << options.model << "\",\n"
      << "  \"batch\": " << options.batch << ",\n"
      << "  \"threads\": " << options.threads << ",\n"
      << "  \"ranks\": " << options.ranks << ",\n"
      << "  \"locations\": " << options.locations << ",\n"
      << "  \"reduce\": \"" << options.reduce << "\",\n"
      << "  \"bucket_kb\": " << options.bucket_kb << ",\n"
      << "  \"iterations\": " << result.iterations << ",\n"
      << "  \"images_per_sec\": " << result.images_per_sec << ",\n"
      << "  \"final_loss\": " << result.final_loss << ",\n"
      << "  \"test_accuracy\": ";
  if (options.evaluate) {
    out << result.test_accuracy;
  } else {
    out << "null";  // not measured (--noevaluate)
  }
  out << ",\n"
      << "  \"wall_seconds\": " << result.wall_seconds << "\n"
      << "}\n";
  require(out.good(), "failed writing the summary file '", path, "'");
}

}  // namespace purine::cli
