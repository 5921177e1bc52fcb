#include "purine/serialize.hpp"

#include <google/protobuf/text_format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "purine/base/error.hpp"

namespace purine {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void set_location(proto::LocationProto* out, Location l) {
  out->set_rank(l.rank);
  out->set_device(l.device);
  out->set_cpu_index(l.cpu_index);
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  require(out.good(), "cannot write '", path, "'");
  out << bytes;
  require(out.good(), "failed writing '", path, "'");
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  require(in.good(), "cannot read '", path, "': no such file or not readable");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Parameters and states on `rank`, the tensors a checkpoint holds.
std::vector<const Parameter*> persistent(const Graph& graph, int rank) {
  std::vector<const Parameter*> out;
  for (const auto* list : {&graph.parameters(), &graph.states()})
    for (const Parameter& p : *list)
      if (p.blob->location().rank == rank) out.push_back(&p);
  return out;
}

}  // namespace

proto::GraphProto graph_to_proto(const Graph& graph) {
  proto::GraphProto g;
  g.set_name(graph.name());
  for (const auto& b : graph.blobs()) {
    proto::BlobProto* out = g.add_blobs();
    out->set_name(b->name());
    for (int64_t d : b->shape().dims()) out->add_shape(d);
    set_location(out->mutable_location(), b->location());
    out->set_accumulating(b->accumulating());
  }
  for (const auto& op : graph.ops()) {
    proto::OpProto* out = g.add_ops();
    out->set_name(op->name());
    out->set_type(op->type());
    set_location(out->mutable_location(), op->location());
    out->set_thread(op->thread());
    for (const Blob* b : op->inputs()) out->add_inputs(b->name());
    for (const Blob* b : op->outputs()) out->add_outputs(b->name());
    for (const auto& [key, value] : op->attrs().values()) {
      proto::AttrProto* attr = out->add_attrs();
      attr->set_name(key);
      if (auto i = std::get_if<int64_t>(&value)) attr->set_i(*i);
      if (auto f = std::get_if<double>(&value)) attr->set_f(*f);
      if (auto s = std::get_if<std::string>(&value)) attr->set_s(*s);
      if (auto l = std::get_if<std::vector<int64_t>>(&value))
        for (int64_t v : *l) attr->add_ints(v);
    }
  }
  return g;
}

void export_graph(const Graph& graph, const std::string& path) {
  if (ends_with(path, ".dot")) return write_bytes(path, graph.to_dot());
  proto::GraphProto g = graph_to_proto(graph);
  std::string bytes;
  if (ends_with(path, ".pbtxt")) {
    google::protobuf::TextFormat::PrintToString(g, &bytes);
  } else {
    g.SerializeToString(&bytes);
  }
  write_bytes(path, bytes);
}

void save_checkpoint(const Graph& graph, const std::string& path, const CheckpointInfo& info) {
  proto::Checkpoint c;
  c.set_model(info.model);
  c.set_iteration(info.iteration);
  c.set_rank(info.rank);
  c.set_ranks(info.ranks);
  c.set_layout(info.layout);
  c.mutable_rng_states()->insert(info.rng_states.begin(), info.rng_states.end());
  for (const Parameter* p : persistent(graph, info.rank)) {
    proto::NamedTensor* t = c.add_tensors();
    t->set_name(p->blob->name());
    Tensor& tensor = p->blob->tensor();
    for (int64_t d : tensor.shape().dims()) t->mutable_tensor()->add_shape(d);
    const float* data = tensor.data();
    t->mutable_tensor()->mutable_data()->Add(data, data + tensor.count());
  }
  std::string bytes;
  c.SerializeToString(&bytes);
  write_bytes(path, bytes);
}

CheckpointInfo load_checkpoint(Graph& graph, const std::string& path,
                               const CheckpointInfo& expected) {
  proto::Checkpoint c;
  require(c.ParseFromString(read_bytes(path)), "checkpoint '", path,
          "' is corrupt or not a Purine checkpoint");
  const int rank = expected.rank, ranks = expected.ranks;
  const int saved_ranks = std::max(1, c.ranks());
  require(saved_ranks == ranks && c.rank() == rank, "checkpoint '", path, "' holds rank ", c.rank(),
          " of a run on ", saved_ranks, " process", saved_ranks == 1 ? "" : "es", "; this is rank ",
          rank, " of ", ranks, " (resume with as many ranks as saved)");
  require(c.layout().empty() || expected.layout.empty() || c.layout() == expected.layout,
          "checkpoint '", path, "' was saved with ", c.layout(), "; this run has ", expected.layout,
          " (resume with the settings it was saved with)");
  std::map<std::string, const proto::TensorProto*> by_name;
  for (const auto& t : c.tensors()) by_name[t.name()] = &t.tensor();
  // Check everything first, so that a bad file changes nothing.
  const std::vector<const Parameter*> mine = persistent(graph, rank);
  for (const Parameter* p : mine) {
    auto it = by_name.find(p->blob->name());
    require(it != by_name.end(), "checkpoint '", path, "' (model '", c.model(),
            "') has no tensor '", p->blob->name(), "'");
    Shape stored(std::vector<int64_t>(it->second->shape().begin(), it->second->shape().end()));
    require(stored == p->blob->shape(), "checkpoint '", path, "': tensor '", p->blob->name(),
            "' has shape ", stored, ", the graph expects ", p->blob->shape());
    require(it->second->data_size() == stored.count(), "checkpoint '", path, "': tensor '",
            p->blob->name(), "' holds ", it->second->data_size(), " values for shape ", stored);
  }
  for (const Parameter* p : mine) {
    const proto::TensorProto* t = by_name[p->blob->name()];
    std::copy(t->data().begin(), t->data().end(), p->blob->tensor().mutable_data());
  }
  CheckpointInfo info;
  info.model = c.model();
  info.iteration = c.iteration();
  info.rank = c.rank();
  info.ranks = saved_ranks;
  info.layout = c.layout();
  info.rng_states = {c.rng_states().begin(), c.rng_states().end()};
  return info;
}

}  // namespace purine
