#include "purine/internal/dot_names.hpp"

#include <cctype>

#include "base/error.hpp"

namespace purine::dot {

namespace {

bool ends_with(const std::string& s, const std::string& end) {
  return s.size() >= end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0;
}

// The number after `marker` at the end of `name` (-1 when the name does not end so), and the part
// of the name before the marker in `*before`.
int trailing_index(const std::string& name, const std::string& marker, std::string* before) {
  const size_t at = name.rfind(marker);
  if (at == std::string::npos || at + marker.size() == name.size()) return -1;
  for (size_t k = at + marker.size(); k < name.size(); ++k)
    if (!std::isdigit(static_cast<unsigned char>(name[k]))) return -1;
  *before = name.substr(0, at);
  return std::stoi(name.substr(at + marker.size()));
}

}  // namespace

const Blob* gradient_of(const Graph& graph, const Blob* b) {
  for (int hops = 0; hops < 8 && b; ++hops) {
    // A copy's output is the gradient of what its input is the gradient of.
    const std::vector<Op*>& writers = b->writers();
    if (writers.size() == 1 && writers[0]->kernel().traits().bridges_locations &&
        writers[0]->inputs().size() == 1) {
      b = writers[0]->inputs()[0];
      continue;
    }
    const std::string& name = b->name();
    std::string before;
    const int input = trailing_index(name, "::grad::in", &before);
    if (input >= 0) {
      const Op* op = graph.find_op(before);
      return op && input < static_cast<int>(op->inputs().size()) ? op->inputs()[input] : nullptr;
    }
    if (trailing_index(name, "::partial", &before) >= 0) return graph.find_blob(before);
    for (const char* suffix : {"::grad", "::zero_grad::value"})
      if (ends_with(name, suffix))
        return graph.find_blob(name.substr(0, name.size() - std::string(suffix).size()));
    return nullptr;
  }
  return nullptr;
}

std::string short_label(const std::string& name) {
  std::string s = name.substr(0, name.find('@'));
  size_t cut = s.rfind("::");
  if (cut != std::string::npos && cut >= 2) {
    const size_t before = s.rfind("::", cut - 1);
    if (before != std::string::npos) s = s.substr(before + 2);
  }
  for (size_t at = s.find("::"); at != std::string::npos; at = s.find("::", at))
    s.replace(at, 2, ".");
  return s;
}

std::string tensor_name(const std::string& name, const std::vector<std::string>& layers) {
  std::string plain = name.substr(0, name.find('@'));
  // Graph::apply's outputs ("<op>::out<k>") are named after their op: "bn1::sums::out0" reads
  // "bn1.sums", its k-th output "bn1.sums<k>".
  std::string op;
  if (const int k = trailing_index(plain, "::out", &op); k >= 0)
    plain = op + (k > 0 ? std::to_string(k) : "");
  const std::string layer = layer_of(plain, layers);
  if (!layer.empty() && plain.size() > layer.size())
    return last_scope(layer) + "." + last_scope(plain);
  const size_t cut = plain.rfind("::");
  if (cut != std::string::npos)
    for (const std::string& l : layers)
      if (l.compare(0, cut + 2, plain.substr(0, cut) + "::") == 0) return last_scope(plain);
  return short_label(plain);
}

std::string last_scope(const std::string& name) {
  const size_t cut = name.rfind("::");
  return cut == std::string::npos ? name : name.substr(cut + 2);
}

std::string layer_of(const std::string& name, const std::vector<std::string>& layers) {
  std::string best;
  for (const std::string& layer : layers)
    if (layer.size() > best.size() && name.compare(0, layer.size(), layer) == 0 &&
        (name.size() == layer.size() || name.compare(layer.size(), 2, "::") == 0 ||
         name[layer.size()] == '@'))
      best = layer;
  return best;
}

std::string name_list(const std::vector<std::string>& names, size_t most) {
  if (names.size() > most && names.size() > 2)
    return str(names.front(), " ... ", names.back(), " (", names.size(), ")");
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace purine::dot
