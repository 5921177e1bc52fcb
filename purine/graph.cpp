#include "purine/graph.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <queue>
#include <set>
#include <sstream>

#include "base/error.hpp"
#include "operators/registry.hpp"

namespace purine {

Tensor& Blob::tensor() {
  if (!tensor_) {
    tensor_ = std::make_shared<Tensor>(shape_, location_);
    tensor_->set_channel_block(channel_block_);
  }
  return *tensor_;
}

Tensor& Blob::deferred_tensor() {
  if (!tensor_) {
    tensor_ = std::make_shared<Tensor>(Tensor::deferred(shape_, location_));
    tensor_->set_channel_block(channel_block_);
  }
  return *tensor_;
}

void Blob::set_channel_block(int block) {
  require(!tensor_, "blob '", name_, "' already has a tensor: its channel block is fixed");
  // The same checks as the tensor's, made now rather than when it is made.
  Tensor::deferred(shape_, location_).set_channel_block(block);
  channel_block_ = block;
}

void Blob::share_tensor(Blob& other) {
  require(shape_ == other.shape_, "blob '", name_, "' cannot share the tensor of '", other.name_,
          "': shapes ", shape_, " and ", other.shape_, " differ");
  require(location_ == other.location_, "blob '", name_, "' at ", location_,
          " cannot share the tensor of '", other.name_, "' at ", other.location_);
  require(channel_block_ == other.channel_block_, "blob '", name_, "' cannot share the tensor of '",
          other.name_, "': channel blocks ", channel_block_, " and ", other.channel_block_,
          " differ");
  other.tensor();
  tensor_ = other.tensor_;
}

void Blob::alias(const Tensor& view) {
  CHECK(!tensor_) << "blob '" << name_ << "' already has a tensor";
  CHECK(view.shape() == shape_ && view.location() == location_) << name_;
  CHECK_EQ(view.channel_block(), channel_block_) << name_;
  tensor_ = std::make_shared<Tensor>(view);
}

Graph::Graph(std::string name) : name_(std::move(name)) {}
Graph::~Graph() = default;

std::string Graph::full_name(const std::string& local_name) const {
  return prefix_.empty() ? local_name : prefix_ + "::" + local_name;
}

void Graph::check_new_name(const std::string& full, const char* kind) const {
  require(!full.empty(), "graph '", name_, "': a ", kind, " needs a name");
  require(blob_by_name_.count(full) == 0 && op_by_name_.count(full) == 0, "graph '", name_,
          "': duplicate name '", full, "' (a ", kind,
          " cannot reuse the name of an existing vertex; pick another name or scope)");
}

Blob* Graph::add_blob(const std::string& local_name, Shape shape) {
  std::string full = full_name(local_name);
  check_new_name(full, "blob");
  for (int64_t d : shape.dims()) {
    require(d >= 0, "blob '", full, "': negative dimension in shape ", shape);
  }
  blobs_.emplace_back(new Blob(full, std::move(shape), location_));
  Blob* b = blobs_.back().get();
  blob_by_name_[full] = b;
  return b;
}

Op* Graph::add_op(const std::string& local_name, const std::string& type, const Attrs& attrs) {
  std::string full = full_name(local_name);
  check_new_name(full, "op");
  std::unique_ptr<Operator> kernel;
  try {
    kernel = OperatorRegistry::create(type, attrs);
  } catch (const Error& e) {
    throw Error(str("op '", full, "': ", e.what()));
  }
  ops_.emplace_back(new Op(this, full, std::move(kernel), location_, thread_, next_op_index_++));
  Op* op = ops_.back().get();
  op->role_ = role_;
  op_by_name_[full] = op;
  return op;
}

void Graph::set_inputs(Op* op, const std::vector<Blob*>& inputs) {
  require(op->inputs_.empty(), "op '", op->name(), "': inputs are already connected");
  std::vector<Blob*> connected;
  for (Blob* b : inputs) {
    require(b != nullptr, "op '", op->name(), "': null input blob");
    if (joins_pending_.count(b)) make_join(b);
    if (auto_copy_ && b->location() != op->location() && !op->kernel().traits().bridges_locations)
      b = copy_to(b, op->location(), op->thread());
    b->readers_.push_back(op);
    connected.push_back(b);
  }
  op->inputs_ = connected;
}

Blob* Graph::copy_to(Blob* blob, Location location, const std::string& thread) {
  if (blob->location() == location) return blob;
  if (Blob* done = copies_[{blob, location}]) return done;
  // MPI moves host memory: a GPU tensor crosses ranks through the CPU of its rank and of the
  // other (each hop an ordinary copy, shared with other readers like any inserted copy).
  const Location from = blob->location();
  if (from.rank != location.rank && (!from.is_cpu() || !location.is_cpu())) {
    Blob* hop = copy_to(blob, Location::cpu(from.rank), thread);
    hop = copy_to(hop, Location::cpu(location.rank), thread);
    return copies_[{blob, location}] = copy_to(hop, location, thread);
  }
  Blob*& copy = copies_[{blob, location}];
  const std::string name = blob->name() + "@" + location.to_string();
  Scope root(*this, "", true);
  Placement placement(*this, location, thread);
  copy = add_blob(name, blob->shape());
  Op* op = add_op(name + "::copy", "copy");
  op->inputs_ = {blob};
  blob->readers_.push_back(op);
  set_outputs(op, {copy});
  return copy;
}

void Graph::set_outputs(Op* op, const std::vector<Blob*>& outputs) {
  require(op->outputs_.empty(), "op '", op->name(), "': outputs are already connected");
  for (Blob* b : outputs) {
    require(b != nullptr, "op '", op->name(), "': null output blob");
    b->writers_.push_back(op);
  }
  op->outputs_ = outputs;
}

std::vector<Blob*> Graph::apply(const std::string& local_name, const std::string& type,
                                const Attrs& attrs, const std::vector<Blob*>& inputs,
                                const std::vector<std::string>& output_names) {
  Op* op = add_op(local_name, type, attrs);
  set_inputs(op, inputs);
  std::vector<Shape> in_shapes;
  for (Blob* b : inputs) in_shapes.push_back(b->shape());
  std::vector<Shape> out_shapes;
  try {
    out_shapes = op->kernel().infer_shapes(in_shapes);
    require(output_names.empty() || output_names.size() == out_shapes.size(), "got ",
            output_names.size(), " output names for ", out_shapes.size(), " outputs");
  } catch (const Error& e) {
    throw Error(str("op '", op->name(), "': ", e.what()));
  }
  std::vector<Blob*> outputs;
  for (size_t i = 0; i < out_shapes.size(); ++i) {
    std::string name =
        i < output_names.size() ? output_names[i] : local_name + "::out" + std::to_string(i);
    outputs.push_back(add_blob(name, out_shapes[i]));
  }
  set_outputs(op, outputs);
  return outputs;
}

Blob* Graph::find_blob(const std::string& full_name) const {
  auto it = blob_by_name_.find(full_name);
  return it == blob_by_name_.end() ? nullptr : it->second;
}

Op* Graph::find_op(const std::string& full_name) const {
  auto it = op_by_name_.find(full_name);
  return it == op_by_name_.end() ? nullptr : it->second;
}

Blob* Graph::blob(const std::string& full_name) const {
  Blob* b = find_blob(full_name);
  require(b != nullptr, "graph '", name_, "' has no blob named '", full_name, "'");
  return b;
}

Op* Graph::op(const std::string& full_name) const {
  Op* o = find_op(full_name);
  require(o != nullptr, "graph '", name_, "' has no op named '", full_name, "'");
  return o;
}

std::vector<Blob*> Graph::sources() const {
  std::vector<Blob*> out;
  for (const auto& b : blobs_)
    if (b->writers().empty()) out.push_back(b.get());
  return out;
}

std::vector<Blob*> Graph::sinks() const {
  std::vector<Blob*> out;
  for (const auto& b : blobs_)
    if (b->readers().empty()) out.push_back(b.get());
  return out;
}

bool Graph::held_outside_ops(const Blob* blob) const {
  auto is = [blob](const Parameter& p) { return p.blob == blob; };
  if (std::any_of(parameters_.begin(), parameters_.end(), is) ||
      std::any_of(states_.begin(), states_.end(), is))
    return true;
  for (const auto& [a, b] : swaps_)
    if (a == blob || b == blob) return true;
  if (joins_pending_.count(blob)) return true;
  for (const auto& [joined, slices] : slices_)
    if (joined == blob ||
        std::find(slices.blobs.begin(), slices.blobs.end(), blob) != slices.blobs.end())
      return true;
  for (const auto& [key, copy] : copies_)
    if (key.first == blob || copy == blob) return true;
  for (const ReplicaSums* sums = replica_sums_; sums; sums = sums->saved_)
    for (const ReplicaSums::Request& r : sums->requests_)
      if (r.partial == blob || r.sum == blob) return true;
  return false;
}

Op* Graph::replace_ops(const std::vector<Op*>& chain, const std::vector<Blob*>& inner,
                       const std::string& full_name, const std::string& type, const Attrs& attrs,
                       const std::vector<Blob*>& inputs, const std::vector<Blob*>& outputs,
                       const std::vector<Blob*>& released) {
  require(!chain.empty(), "replace_ops: no ops to replace with '", full_name, "'");
  const std::set<const Op*> old(chain.begin(), chain.end());
  const std::set<const Blob*> removed(inner.begin(), inner.end());
  const std::string what = str("replacing '", chain[0]->name(), "' and ", chain.size() - 1,
                               " more ops by '", full_name, "': ");
  for (const Blob* b : inner) {
    require(!held_outside_ops(b), what, "blob '", b->name(),
            "' is held by the graph (a parameter, state, swap, join, copy or replica sum)");
    for (const std::vector<Op*>* ops : {&b->readers(), &b->writers()})
      for (const Op* op : *ops)
        require(old.count(op), what, "blob '", b->name(), "' is used by op '", op->name(),
                "', which is not replaced");
  }
  for (const Blob* b : released)
    require(!removed.count(b), what, "blob '", b->name(), "' is both removed and released");
  auto listed = [](const std::vector<Blob*>& list, const Blob* b) {
    return std::find(list.begin(), list.end(), b) != list.end();
  };
  for (const Op* op : chain) {
    for (const std::vector<Blob*>* blobs : {&op->inputs(), &op->outputs()})
      for (const Blob* b : *blobs)
        require(removed.count(b) || listed(inputs, b) || listed(outputs, b) || listed(released, b),
                what, "op '", op->name(), "' uses blob '", b->name(),
                "', which the new op neither reads nor writes");
  }
  for (const auto& op : ops_)
    for (const Op* before : op->ordered_after_)
      require(!old.count(before) && !old.count(op.get()), what, "op '",
              old.count(before) ? before->name() : op->name(), "' is in an order (add_order)");
  if (full_name != chain[0]->name()) check_new_name(full_name, "op");
  std::unique_ptr<Operator> kernel;
  std::vector<Shape> in_shapes;
  for (const Blob* b : inputs) in_shapes.push_back(b->shape());
  try {
    kernel = OperatorRegistry::create(type, attrs);
    const std::vector<Shape> shapes = kernel->infer_shapes(in_shapes);
    require(shapes.size() == outputs.size(), "it has ", shapes.size(), " outputs, ", outputs.size(),
            " given");
    for (size_t i = 0; i < shapes.size(); ++i)
      require(shapes[i] == outputs[i]->shape(), "output ", i, " has shape ", shapes[i], ", blob '",
              outputs[i]->name(), "' ", outputs[i]->shape());
  } catch (const Error& e) {
    throw Error(str(what, e.what()));
  }

  // Nothing fails from here on.
  const Op* first = chain[0];
  std::unique_ptr<Op> made(
      new Op(this, full_name, std::move(kernel), first->location_, first->thread_, first->index_));
  Op* op = made.get();
  op->role_ = first->role_;
  op->inputs_ = inputs;
  op->outputs_ = outputs;
  // In each list of readers or writers: the replaced ops out, the new op (once per time it reads
  // or writes the blob) where the first of them was.
  auto relink = [&](std::vector<Op*>& list, size_t times) {
    auto at = std::find_if(list.begin(), list.end(), [&](Op* o) { return old.count(o) > 0; });
    const size_t position = static_cast<size_t>(at - list.begin());
    list.erase(std::remove_if(list.begin(), list.end(), [&](Op* o) { return old.count(o) > 0; }),
               list.end());
    list.insert(list.begin() + static_cast<std::ptrdiff_t>(std::min(position, list.size())), times,
                op);
  };
  std::set<Blob*> linked;
  for (const std::vector<Blob*>* blobs : {&inputs, &outputs})
    for (Blob* b : *blobs) {
      if (!linked.insert(b).second) continue;
      relink(b->readers_, static_cast<size_t>(std::count(inputs.begin(), inputs.end(), b)));
      relink(b->writers_, static_cast<size_t>(std::count(outputs.begin(), outputs.end(), b)));
    }
  for (Blob* b : released) {
    if (!linked.insert(b).second) continue;
    relink(b->readers_, 0);
    relink(b->writers_, 0);
  }
  for (auto it = ops_.begin(); it != ops_.end();) {
    if (it->get() == first) {
      op_by_name_.erase(first->name());
      op_by_name_[full_name] = op;  // before `first` goes: full_name may be its name
      *it = std::move(made);
      ++it;
    } else if (old.count(it->get())) {
      op_by_name_.erase((*it)->name());
      it = ops_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = blobs_.begin(); it != blobs_.end();) {
    if (removed.count(it->get())) {
      blob_by_name_.erase((*it)->name());
      it = blobs_.erase(it);
    } else {
      ++it;
    }
  }
  return op;
}

int Graph::prune(const std::vector<Blob*>& keep) {
  // Walk backwards from `keep` through writers and their inputs.
  std::set<const Blob*> live_blobs(keep.begin(), keep.end());
  std::set<const Op*> live_ops;
  std::vector<const Blob*> stack(keep.begin(), keep.end());
  while (!stack.empty()) {
    const Blob* b = stack.back();
    stack.pop_back();
    for (const Op* w : b->writers()) {
      if (!live_ops.insert(w).second) continue;
      for (const Blob* in : w->inputs())
        if (live_blobs.insert(in).second) stack.push_back(in);
      // All outputs of a live op stay: it writes them anyway.
      for (const Blob* out : w->outputs()) live_blobs.insert(out);
    }
  }
  // Swapped pairs stay together: if either side lives, both do.
  for (auto& [a, b] : swaps_) {
    if (live_blobs.count(a) || live_blobs.count(b)) {
      live_blobs.insert(a);
      live_blobs.insert(b);
    }
  }
  int removed = 0;
  for (auto it = ops_.begin(); it != ops_.end();) {
    if (live_ops.count(it->get())) {
      ++it;
      continue;
    }
    op_by_name_.erase((*it)->name());
    it = ops_.erase(it);
    ++removed;
  }
  auto dead_op = [&](Op* op) { return live_ops.count(op) == 0; };
  for (const auto& op : ops_)
    op->ordered_after_.erase(
        std::remove_if(op->ordered_after_.begin(), op->ordered_after_.end(), dead_op),
        op->ordered_after_.end());
  for (auto it = blobs_.begin(); it != blobs_.end();) {
    Blob* b = it->get();
    if (!live_blobs.count(b)) {
      blob_by_name_.erase(b->name());
      it = blobs_.erase(it);
      continue;
    }
    b->readers_.erase(std::remove_if(b->readers_.begin(), b->readers_.end(), dead_op),
                      b->readers_.end());
    b->writers_.erase(std::remove_if(b->writers_.begin(), b->writers_.end(), dead_op),
                      b->writers_.end());
    ++it;
  }
  parameters_.erase(std::remove_if(parameters_.begin(), parameters_.end(),
                                   [&](const Parameter& p) { return !live_blobs.count(p.blob); }),
                    parameters_.end());
  states_.erase(std::remove_if(states_.begin(), states_.end(),
                               [&](const Parameter& p) { return !live_blobs.count(p.blob); }),
                states_.end());
  for (auto it = slices_.begin(); it != slices_.end();) {
    const auto& slices = it->second.blobs;
    const bool dead = !live_blobs.count(it->first) ||
                      std::any_of(slices.begin(), slices.end(),
                                  [&](const Blob* b) { return !live_blobs.count(b); });
    if (!dead) {
      ++it;
      continue;
    }
    joins_pending_.erase(it->first);
    it = slices_.erase(it);
  }
  return removed;
}

void Graph::add_parameter(Parameter parameter) {
  CHECK(parameter.blob != nullptr);
  parameters_.push_back(std::move(parameter));
}

void Graph::add_state(Parameter state) {
  for (const auto& [scope, with] : shared_)
    require(state.blob->name().compare(0, scope.size() + 2, scope + "::") != 0, "state '",
            state.blob->name(), "' is under scope '", scope,
            "', whose parameters are shared: make it with Composite::make_state, which shares "
            "it among the copies of the model");
  CHECK(state.blob != nullptr);
  states_.push_back(std::move(state));
}

void Graph::add_swap(Blob* a, Blob* b) {
  require(a->shape() == b->shape() && a->location() == b->location(), "swap of '", a->name(), "' ",
          a->shape(), " at ", a->location(), " with '", b->name(), "' ", b->shape(), " at ",
          b->location(), ": shapes and locations must match");
  swaps_.emplace_back(a, b);
}

Blob* Graph::swapped_with(const Blob* a) const {
  for (const auto& [from, to] : swaps_)
    if (from == a) return to;
  return nullptr;
}

void Graph::replace_swap(Blob* a, Blob* b) {
  auto it = std::find_if(swaps_.begin(), swaps_.end(),
                         [&](const std::pair<Blob*, Blob*>& swap) { return swap.first == a; });
  require(it != swaps_.end(), "replace_swap: '", a->name(), "' has no swap to replace");
  require(a->shape() == b->shape() && a->location() == b->location(), "swap of '", a->name(), "' ",
          a->shape(), " at ", a->location(), " with '", b->name(), "' ", b->shape(), " at ",
          b->location(), ": shapes and locations must match");
  it->second = b;
}

void Graph::add_order(Op* before, Op* after) {
  require(before && after && before != after, "Graph::add_order: two different ops are needed");
  require(before->location().rank == after->location().rank, "Graph::add_order: op '",
          before->name(), "' (", before->location(), ") and op '", after->name(), "' (",
          after->location(), ") are on different ranks; an order holds within one rank");
  after->ordered_after_.push_back(before);
}

namespace {

// An op and where it runs, for messages.
std::string describe(const Op* op) {
  return str("'", op->name(), "' (", op->location(), ", thread ", op->thread(), ")");
}

}  // namespace

std::vector<Op*> Graph::topological_order() const {
  // Kahn's algorithm on op -> op edges (writer of an input -> reader, and orders), smallest
  // index first. Ops are numbered by their place in ops_, in vectors: compile() sorts the whole
  // graph of a layout several times on every rank (std::maps of sets took half of simulating 48
  // ranks).
  const int n = static_cast<int>(ops_.size());
  std::vector<int> place(next_op_index_, -1);
  for (int i = 0; i < n; ++i) place[ops_[i]->index()] = i;
  std::vector<std::vector<int>> preds(n), succs(n);
  for (int i = 0; i < n; ++i) {
    std::vector<int>& mine = preds[i];
    for (const Blob* in : ops_[i]->inputs())
      for (const Op* w : in->writers()) mine.push_back(place[w->index()]);
    for (const Op* before : ops_[i]->ordered_after()) mine.push_back(place[before->index()]);
    std::sort(mine.begin(), mine.end());
    mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
    for (int p : mine) succs[p].push_back(i);
  }
  std::vector<int> pending(n);
  auto later = [this](int a, int b) { return ops_[a]->index() > ops_[b]->index(); };
  std::priority_queue<int, std::vector<int>, decltype(later)> ready(later);
  for (int i = 0; i < n; ++i) {
    pending[i] = static_cast<int>(preds[i].size());
    if (pending[i] == 0) ready.push(i);
  }
  std::vector<Op*> order;
  order.reserve(n);
  while (!ready.empty()) {
    const int i = ready.top();
    ready.pop();
    order.push_back(ops_[i].get());
    for (int s : succs[i])
      if (--pending[s] == 0) ready.push(s);
  }
  if (order.size() == ops_.size()) return order;
  // Walk back through ops still waiting until one repeats: that is a cycle.
  int at = -1;
  for (int i = 0; i < n; ++i)
    if (pending[i] > 0) at = i;
  std::vector<int> walk;
  std::vector<long> seen(n, -1);  // an op's place in the walk
  while (seen[at] < 0) {
    seen[at] = static_cast<long>(walk.size());
    walk.push_back(at);
    for (int p : preds[at])
      if (pending[p] > 0) {
        at = p;
        break;
      }
  }
  // The walk went from each op to one it waits for, and `at` waits for the walk's last op.
  std::string cycle = describe(ops_[at].get());
  for (size_t i = walk.size(); i-- > static_cast<size_t>(seen[at]);)
    cycle += " -> " + describe(ops_[walk[i]].get());
  throw Error(str("graph '", name_, "' has a cycle: ", cycle,
                  "; each waits for the one before (an output feeding back into its inputs "
                  "within one run, or an order of ops that waits in a circle, which would hang "
                  "the ranks); use a swap between runs, or order the ops otherwise"));
}

void Graph::validate() {
  for (size_t i = 0; i < composites_.size(); ++i) composites_[i]->ensure_setup();
  for (const auto& op : ops_) {
    try {
      op->kernel().check_counts(op->inputs().size(), op->outputs().size());
    } catch (const Error& e) {
      throw Error(
          str("op '", op->name(), "': ", e.what(),
              op->inputs().size() < static_cast<size_t>(std::max(0, op->kernel().num_inputs()))
                  ? " (a required input is not connected)"
                  : ""));
    }
    std::vector<Shape> in_shapes;
    for (const Blob* b : op->inputs()) in_shapes.push_back(b->shape());
    std::vector<Shape> expected;
    try {
      expected = op->kernel().output_shapes(in_shapes);
    } catch (const Error& e) {
      throw Error(str("op '", op->name(), "': ", e.what()));
    }
    for (size_t i = 0; i < op->outputs().size(); ++i) {
      const Blob* out = op->outputs()[i];
      require(out->shape() == expected[i], "op '", op->name(), "': output ", i, " (blob '",
              out->name(), "') has shape ", out->shape(), ", expected ", expected[i]);
    }
    if (op->kernel().traits().bridges_locations) continue;  // copies join locations
    for (const Blob* b : op->inputs()) {
      require(b->location() == op->location(), "op '", op->name(), "' at ", op->location(),
              " reads blob '", b->name(), "' at ", b->location(), "; insert a Copy to bring it to ",
              op->location());
    }
    for (const Blob* b : op->outputs()) {
      require(b->location() == op->location(), "op '", op->name(), "' at ", op->location(),
              " writes blob '", b->name(), "' at ", b->location(),
              "; write a blob at the op's location and Copy it");
    }
  }
  for (const auto& b : blobs_) {
    if (b->writers().size() > 1 && !b->accumulating()) {
      throw Error(str("blob '", b->name(), "' is written by ", b->writers().size(), " ops ('",
                      b->writers()[0]->name(), "' and '", b->writers()[1]->name(),
                      "'); declare it accumulating or sum the values explicitly"));
    }
  }
  topological_order();
}

void Graph::set_up_connected_composites() {
  // Setting one up may add more (a composite's own sub-composites): index, not iterators.
  for (size_t i = 0; i < composites_.size(); ++i)
    if (!composites_[i]->bottom().empty()) composites_[i]->ensure_setup();
}

void Graph::require_no_pending_composite(const char* what) const {
  for (const auto& c : composites_)
    require(c->is_setup() || c->bottom().empty(), "composite '", c->name(),
            "' is not set up yet, so its ", what, " are missing: use its top() or call ", what,
            "() on a non-const Graph, which sets pending composites up");
}

const std::vector<Parameter>& Graph::parameters() {
  set_up_connected_composites();
  return parameters_;
}
const std::vector<Parameter>& Graph::parameters() const {
  require_no_pending_composite("parameters");
  return parameters_;
}
const std::vector<Parameter>& Graph::states() {
  set_up_connected_composites();
  return states_;
}
const std::vector<Parameter>& Graph::states() const {
  require_no_pending_composite("states");
  return states_;
}

bool rule_names(const std::string& rule, const std::string& full_name) {
  return full_name == rule ||
         (full_name.size() > rule.size() + 2 &&
          full_name.compare(full_name.size() - rule.size(), rule.size(), rule) == 0 &&
          full_name.compare(full_name.size() - rule.size() - 2, 2, "::") == 0);
}

bool starts_scope(const std::string& name, size_t at) {
  return at == 0 || (at >= 2 && at <= name.size() && name.compare(at - 2, 2, "::") == 0);
}

namespace {

// The rule of the longest name that names `full_name`.
template <typename Rule>
const Rule* longest_match(const std::map<std::string, Rule>& rules, const std::string& full_name) {
  const Rule* found = nullptr;
  size_t longest = 0;
  for (const auto& [name, rule] : rules) {
    if (rule_names(name, full_name) && name.size() > longest) {
      longest = name.size();
      found = &rule;
    }
  }
  return found;
}

}  // namespace

void Graph::share_parameters(const std::string& scope, const std::string& with) {
  require(!scope.empty(), "Graph::share_parameters: empty scope");
  shared_[scope] = with;
}

std::string Graph::shared_name(const std::string& full_name) const {
  for (const auto& [scope, with] : shared_)
    if (full_name.compare(0, scope.size() + 2, scope + "::") == 0)
      return (with.empty() ? "" : with + "::") + full_name.substr(scope.size() + 2);
  return full_name;
}

Blob* Graph::shared_among(const std::vector<Parameter>& among, const char* kind,
                          const std::string& full_name, const Shape& shape, std::string* name) {
  *name = shared_name(full_name);
  if (*name == full_name) return nullptr;
  Blob* existing = find_blob(*name);
  if (!existing) return nullptr;
  const bool listed = std::any_of(among.begin(), among.end(),
                                  [&](const Parameter& p) { return p.blob == existing; });
  require(listed, kind, " '", full_name, "' would share '", *name, "', which is not a ", kind);
  require(existing->shape() == shape, kind, " '", full_name, "' of shape ", shape, " would share '",
          *name, "' of shape ", existing->shape());
  return existing;
}

Blob* Graph::shared_parameter(const std::string& full_name, const Shape& shape, std::string* name) {
  return shared_among(parameters_, "parameter", full_name, shape, name);
}

Blob* Graph::shared_state(const std::string& full_name, const Shape& shape, std::string* name) {
  return shared_among(states_, "state", full_name, shape, name);
}

void Graph::place(const std::string& name, Location location) {
  require(!name.empty(), "Graph::place: empty composite name");
  placements_[name] = location;
}

const Location* Graph::placement_of(const std::string& full_name) const {
  return longest_match(placements_, full_name);
}

void Graph::split(const std::string& name, LayerSplit split) {
  require(!name.empty(), "Graph::split: empty layer name");
  require(!split.locations.empty(), "Graph::split: layer '", name, "' split over no locations");
  require(std::set<Location>(split.locations.begin(), split.locations.end()).size() ==
              split.locations.size(),
          "Graph::split: layer '", name, "': a location is listed twice");
  splits_[name] = std::move(split);
}

const LayerSplit* Graph::split_of(const std::string& full_name) const {
  return longest_match(splits_, full_name);
}

void Graph::join_later(Blob* joined, Slices slices) {
  require(joined->writers().empty() && joined->readers().empty(), "Graph::join_later: blob '",
          joined->name(), "' is already connected");
  require(!slices.blobs.empty(), "Graph::join_later: blob '", joined->name(), "' has no slices");
  slices_[joined] = std::move(slices);
  joins_pending_.insert(joined);
}

const Slices* Graph::slices_of(const Blob* joined) const {
  auto it = slices_.find(joined);
  return it == slices_.end() ? nullptr : &it->second;
}

void Graph::make_join(Blob* joined) {
  joins_pending_.erase(joined);
  const Slices& slices = slices_.at(joined);
  Scope scope(*this, joined->name(), true);
  Placement placement(*this, slices.location, slices.thread);
  Op* op = add_op("join", "concat", Attrs().set("axis", slices.axis));
  set_inputs(op, slices.blobs);
  set_outputs(op, {joined});
}

std::vector<std::string> Graph::layer_names() const {
  std::vector<std::string> names;
  for (const auto& c : composites_)
    if (!c->nested()) names.push_back(c->name());
  return names;
}

std::vector<std::string> Graph::part_names(const std::string& layer) const {
  const std::string prefix = layer + "::";
  std::vector<std::string> names;
  for (const auto& c : composites_)
    if (c->nested() && c->name().rfind(prefix, 0) == 0 &&
        c->name().find("::", prefix.size()) == std::string::npos)
      names.push_back(c->name());
  return names;
}

void Graph::own(std::unique_ptr<Composite> composite) {
  for (const auto& c : composites_)
    require(c->name() != composite->name(), "composite '", composite->name(),
            "' is added twice; give each composite a name of its own in its scope");
  composites_.push_back(std::move(composite));
}

Graph::ReplicaSums::ReplicaSums(Graph& graph) : graph_(graph), saved_(graph.replica_sums_) {
  graph_.replica_sums_ = this;
}
Graph::ReplicaSums::~ReplicaSums() { graph_.replica_sums_ = saved_; }

Blob* Graph::replica_sum(Blob* partial) {
  require(partial != nullptr, "replica_sum: null blob");
  if (!replica_sums_) return partial;
  Scope root(*this, "", true);
  Placement placement(*this, partial->location(), thread_);
  Blob* sum = add_blob(partial->name() + "::replica_sum", partial->shape());
  replica_sums_->requests_.push_back({partial, sum, replica_sums_->replica_});
  return sum;
}

Graph::RoleScope::RoleScope(Graph& graph, OpRole role) : graph_(graph), saved_(graph.role_) {
  graph_.role_ = role;
}
Graph::RoleScope::~RoleScope() { graph_.role_ = saved_; }

Graph::Scope::Scope(Graph& graph, const std::string& name, bool absolute)
    : graph_(graph), saved_(graph.prefix_) {
  graph_.prefix_ = absolute ? name : graph_.full_name(name);
}
Graph::Scope::~Scope() { graph_.prefix_ = saved_; }

Graph::Placement::Placement(Graph& graph, Location location, const std::string& thread)
    : graph_(graph), saved_location_(graph.location_), saved_thread_(graph.thread_) {
  graph_.location_ = location;
  graph_.thread_ = thread;
}
Graph::Placement::~Placement() {
  graph_.location_ = saved_location_;
  graph_.thread_ = saved_thread_;
}

}  // namespace purine
