#include "tools/cli/summary.hpp"

#include <cmath>
#include <iomanip>
#include <sstream>

#include "purine/durable_file.hpp"

namespace purine::cli {

std::string json_number(double value, int digits) {
  if (!std::isfinite(value)) return "null";
  std::ostringstream out;
  out << std::setprecision(digits) << value;
  return out.str();
}

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
      << "  \"stages\": " << options.stages << ",\n"
      << "  \"reduce\": \"" << name_of(options.reduce) << "\",\n"
      << "  \"bucket_kb\": " << options.bucket_kb << ",\n"
      << "  \"ring_steps\": \"" << name_of(options.ring_steps) << "\",\n"
      << "  \"sync_bn\": " << (options.sync_bn ? "true" : "false") << ",\n"
      << "  \"math\": \"" << name_of(options.math) << "\",\n"
      << "  \"deterministic\": " << (options.deterministic ? "true" : "false") << ",\n"
      << "  \"cuda_graph\": " << (options.cuda_graph ? "true" : "false") << ",\n"
      << "  \"run_ahead\": " << (options.run_ahead ? "true" : "false") << ",\n"
      << "  \"fuse\": " << (options.fuse ? "true" : "false") << ",\n"
      << "  \"fuse_siblings\": " << (options.fuse_siblings ? "true" : "false") << ",\n"
      << "  \"block_channels\": " << (options.block_channels ? "true" : "false") << ",\n"
      << "  \"replayed_iterations\": " << result.replayed_iterations << ",\n"
      << "  \"iterations\": " << result.iterations << ",\n"
      << "  \"images_per_sec\": " << json_number(result.images_per_sec, 8)
      << ",\n"
      // A float's value: 9 significant digits tell any two apart (resumed runs compare bits).
      << "  \"final_loss\": " << json_number(result.final_loss, 9) << ",\n"
      << "  \"test_accuracy\": ";
  if (options.evaluate) {
    out << json_number(result.test_accuracy, 8);
  } else {
    out << "null";  // not measured (--noevaluate)
  }
  out << ",\n";
  if (!result.evaluations.empty()) {  // during training: [iteration, test accuracy] pairs
    out << "  \"evaluations\": [";
    for (size_t i = 0; i < result.evaluations.size(); ++i)
      out << (i ? ", " : "") << "[" << result.evaluations[i].first << ", "
          << json_number(result.evaluations[i].second, 8) << "]";
    out << "],\n";
  }
  if (result.pipeline)  // the measured bubble of a pipeline's stages (train/pipeline_meter.hpp)
    out << "  \"micro_batches\": " << options.micro_batches << ",\n"
        << "  \"schedule\": \"" << name_of(options.schedule) << "\",\n"
        << "  \"pipeline_bubble\": " << json_number(result.pipeline->bubble(), 6) << ",\n";
  out << "  \"wall_seconds\": " << json_number(result.wall_seconds, 8) << "\n"
      << "}\n";
  write_file_durably(path, out.str());
}

}  // namespace purine::cli
