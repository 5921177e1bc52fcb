#include "tools/cli/summary.hpp"

#include <iomanip>
#include <sstream>

#include "purine/durable_file.hpp"

namespace purine::cli {

void write_summary(const std::string& path, const TrainOptions& options,
                   const TrainResult& result) {
  std::ostringstream out;
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
      << "  \"images_per_sec\": " << result.images_per_sec
      << ",\n"
      // A float's value: 9 significant digits tell any two apart (resumed runs compare bits).
      << "  \"final_loss\": " << std::setprecision(9) << result.final_loss << std::setprecision(8)
      << ",\n"
      << "  \"test_accuracy\": ";
  if (options.evaluate) {
    out << result.test_accuracy;
  } else {
    out << "null";  // not measured (--noevaluate)
  }
  out << ",\n"
      << "  \"wall_seconds\": " << result.wall_seconds << "\n"
      << "}\n";
  write_file_durably(path, out.str());
}

}  // namespace purine::cli
