// The bi-graph: Graph owns Blob (tensor) and Op (operator) vertices; edges join blobs to ops
// and ops to blobs. Every vertex has a hierarchical name made of the scopes it was created in
// and its local name ("net::conv1::weight" for blob "weight" of composite "conv1" under
// Graph::Scope(g, "net"); the graph's own name is not part of it) and a Location;
// every op a thread name (one OS thread per (location, thread) when run). Composites are
// sub-graphs with bottom (input) and top (output) blobs, also owned by the graph; builder code
// holds plain pointers and references that stay valid as long as the Graph lives.
//
// Building is single-threaded. Mistakes that can be seen at once (duplicate names, unknown
// operator types) throw purine::Error when made; the rest are found by validate().
//
// Usage (purine/dsl.hpp and graphs/layers.hpp build the same with layers and >>):
//   Graph g("net");
//   Blob* x = g.add_blob("x", {8, 4});
//   Blob* y = g.apply("relu", "relu", {}, {x})[0];  // op "net::relu" and its output blob
//   {
//     Graph::Placement side(g, Location::cpu(), "side");  // what is made here runs on "side"
//     g.apply("scale", "scale", Attrs().set("alpha", 2.0), {y});
//   }
//   g.validate();  // throws purine::Error naming the first bad vertex
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/location.hpp"
#include "base/shape.hpp"
#include "base/tensor.hpp"
#include "operators/operator.hpp"

namespace purine {

class Graph;
class Op;

class Blob {
 public:
  const std::string& name() const { return name_; }
  const Shape& shape() const { return shape_; }
  Location location() const { return location_; }
  // An accumulating blob may have several writers, ordered by creation (deterministic).
  bool accumulating() const { return accumulating_; }
  void set_accumulating(bool value) { accumulating_ = value; }
  const std::vector<Op*>& writers() const { return writers_; }
  const std::vector<Op*>& readers() const { return readers_; }

  // The tensor, allocated on first use at the blob's location. It is a shared object, so that
  // two graphs (a training and an evaluation graph) can use one tensor: see share_tensor().
  // A parameter's data() pointer goes stale after a run() that swaps weights: read through
  // tensor() again after each run (or copy with tensor().values()), never keep the pointer.
  Tensor& tensor();
  bool has_tensor() const { return tensor_ != nullptr; }
  // The tensor, created without memory (Tensor::deferred) when the blob has none yet: compile()
  // makes this rank's tensors so, and its memory plan gives them memory before anything runs.
  Tensor& deferred_tensor();
  // Makes this blob use `other`'s tensor object (equal shapes required).
  void share_tensor(Blob& other);
  // The channel block its tensor is made with (Tensor::channel_block; 0: plain), set by the
  // channel-blocks rewrite (graphs/channel_blocks.hpp) before the blob has a tensor. Throws
  // purine::Error once the blob has one, or for a shape or location that cannot take it.
  int channel_block() const { return channel_block_; }
  void set_channel_block(int block);
  // Makes this blob's tensor `view` (a view into another blob's memory: zero-copy split,
  // concat and reshape; or memory allocated its own way, as pinned host memory). Only before
  // the blob has a tensor of its own.
  void alias(const Tensor& view);

 private:
  friend class Graph;
  Blob(std::string name, Shape shape, Location location)
      : name_(std::move(name)), shape_(std::move(shape)), location_(location) {}
  std::string name_;
  Shape shape_;
  Location location_;
  bool accumulating_ = false;
  int channel_block_ = 0;
  std::vector<Op*> writers_;
  std::vector<Op*> readers_;
  std::shared_ptr<Tensor> tensor_;
};

// What an op is for (set by the code that builds it, Graph::RoleScope): pipeline schedules
// order forward and backward ops, graph pictures colour by it. kMonitor ops watch a run without
// feeding it (a trainer's divergence check, the copies of what the host reads after a run);
// collapsed pictures leave them out.
enum class OpRole { kForward, kBackward, kOptimizer, kCommunication, kMonitor };

class Op {
 public:
  const std::string& name() const { return name_; }
  std::string type() const { return kernel_->type(); }
  const Attrs& attrs() const { return kernel_->attrs(); }
  Location location() const { return location_; }
  const std::string& thread() const { return thread_; }
  const std::vector<Blob*>& inputs() const { return inputs_; }
  const std::vector<Blob*>& outputs() const { return outputs_; }
  Operator& kernel() const { return *kernel_; }
  // Creation index in the graph: the deterministic tie-breaker for ordering.
  int index() const { return index_; }
  Graph& graph() const { return *graph_; }
  OpRole role() const { return role_; }
  // The ops that must finish before this one starts besides its inputs' writers
  // (Graph::add_order).
  const std::vector<Op*>& ordered_after() const { return ordered_after_; }

 private:
  friend class Graph;
  Op(Graph* graph, std::string name, std::unique_ptr<Operator> kernel, Location location,
     std::string thread, int index)
      : graph_(graph),
        name_(std::move(name)),
        kernel_(std::move(kernel)),
        location_(location),
        thread_(std::move(thread)),
        index_(index) {}
  Graph* graph_;
  std::string name_;
  std::unique_ptr<Operator> kernel_;
  Location location_;
  std::string thread_;
  int index_;
  OpRole role_ = OpRole::kForward;
  std::vector<Blob*> inputs_;
  std::vector<Blob*> outputs_;
  std::vector<Op*> ordered_after_;
};

// A trainable tensor and how to initialize it.
struct Parameter {
  Blob* blob = nullptr;
  std::string filler = "fill_constant";  // an operator type with no inputs
  Attrs filler_attrs;
  double decay_mult = 1.0;  // scales the optimizer's weight decay (0 for biases)
  // A piece of a larger tensor (a layer split by Graph::split): the tensor's name and shape,
  // and where the blob's elements lie in it, flattened: the blob seen as [dims[0], rest] has
  // row r at `offset + r * row_stride` (row_stride 0: all of it contiguous from `offset`).
  // Checkpoints and initialization deal in the whole tensor. Empty `whole`: the blob is whole.
  std::string whole{};
  Shape whole_shape{};
  int64_t offset = 0;
  int64_t row_stride = 0;
};

// Parallelism within a layer (Graph::split): the layer's weight is cut along its output
// features or channels (each location computes a slice of the output; the slices are joined),
// or along its input features or channels (each location computes a partial result from a
// slice of the input; the partial results are summed at the layer's location); or the batch is
// cut (data parallelism of one layer: each location computes the output of its images with
// the weight sent from the layer's location, where the weight gradients are summed).
enum class SplitAxis { kOutputs, kInputs, kBatch };
struct LayerSplit {
  std::vector<Location> locations;
  SplitAxis axis = SplitAxis::kOutputs;
};
// A blob made of slices held at several locations (see Graph::join_later).
struct Slices {
  std::vector<Blob*> blobs;
  int64_t axis = 1;
  Location location;  // where the joined blob is
  std::string thread;
};

class Composite;

// Whether a placement or split rule for `rule` (Graph::place, Graph::split) names the composite
// `full_name`: it is that name, or ends it after "::".
bool rule_names(const std::string& rule, const std::string& full_name);
// Whether position `at` of the vertex name `name` starts a scope: the name's start, or just after
// a "::" ("replica0::micro1::...": 0, 10).
bool starts_scope(const std::string& name, size_t at);

class Graph {
 public:
  explicit Graph(std::string name = "graph");
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  const std::string& name() const { return name_; }

  // Vertices are created in the current scope, location and thread (see Scope and Placement).
  // `local_name` must be unique within the scope; the full name is "scope::local_name".
  Blob* add_blob(const std::string& local_name, Shape shape);
  Op* add_op(const std::string& local_name, const std::string& type, const Attrs& attrs = {});
  // Creates a composite of type C owning it; arguments after the name go to C's constructor.
  template <typename C, typename... Args>
  C& add(const std::string& local_name, Args&&... args);

  // Connections (the >> DSL calls these). An op's inputs and outputs are set once each. An
  // input at another location than the op is replaced by a copy of it at the op's location,
  // made by a "copy" op inserted once per (blob, location) and reused (unless auto copies are
  // off, when validate() reports the mismatch instead).
  void set_inputs(Op* op, const std::vector<Blob*>& inputs);
  void set_auto_copy(bool enabled) { auto_copy_ = enabled; }
  // The copy of `blob` at `location` ("<blob>@<location>"), created on first use. Between ranks
  // a GPU end adds hops through the host (MPI moves host memory): gpu0 of rank 0 to gpu1 of
  // rank 1 is three copies, via rank0:cpu and rank1:cpu.
  Blob* copy_to(Blob* blob, Location location, const std::string& thread);
  void set_outputs(Op* op, const std::vector<Blob*>& outputs);
  // Adds an op of `type` reading `inputs` and creates its outputs, named "<local_name>::out<i>"
  // or by `output_names`, with shapes inferred by the operator. Returns the outputs.
  std::vector<Blob*> apply(const std::string& local_name, const std::string& type,
                           const Attrs& attrs, const std::vector<Blob*>& inputs,
                           const std::vector<std::string>& output_names = {});

  Blob* find_blob(const std::string& full_name) const;
  Op* find_op(const std::string& full_name) const;
  // Throw purine::Error naming the missing vertex.
  Blob* blob(const std::string& full_name) const;
  Op* op(const std::string& full_name) const;
  const std::vector<std::unique_ptr<Blob>>& blobs() const { return blobs_; }
  const std::vector<std::unique_ptr<Op>>& ops() const { return ops_; }

  // An order between two ops of one rank that no data imposes: `after` starts only once
  // `before` has finished (a schedule of a thread's ops, e.g. a pipeline's 1F1B). Every rank
  // builds the whole graph, so validate() sees every order of every rank with the data edges
  // and copies between them, and refuses orders that would wait in a circle (a hang).
  void add_order(Op* before, Op* after);

  // Blobs no op writes (inputs to the graph) and blobs no op reads (its results).
  std::vector<Blob*> sources() const;
  std::vector<Blob*> sinks() const;
  // Removes every op and blob that does not contribute to `keep` (and that `keep` does not
  // contain). Returns the number of ops removed.
  int prune(const std::vector<Blob*>& keep);

  // Whether the graph refers to `blob` other than as an op's input or output: a parameter, a
  // state, a side of a swap, a deferred join or one of its slices, an inserted copy or its source,
  // or a replica sum's partial or sum. Rewrites (replace_ops) leave such blobs alone.
  bool held_outside_ops(const Blob* blob) const;
  // A rewrite (a fusion, graphs/fusion.hpp): the ops `chain` become one new op `full_name` of
  // `type` reading `inputs` and writing `outputs`, and the blobs `inner` (what only the chain
  // reads and writes) are removed. The new op takes chain[0]'s location, thread, role and place
  // in the ops' order (topological ties stay as they were; `full_name` may be chain[0]'s name,
  // any other must be new), and the chain's place among the readers of `inputs` and the writers
  // of `outputs`. The blobs `released` stay, without the chain's ops among their readers and
  // writers: a rewrite into several ops links them to its other ops itself. Throws
  // purine::Error, changing nothing, if an op outside the chain reads or writes a blob of
  // `inner`, a blob of `inner` is held_outside_ops or released, an op of the chain is in an
  // order (add_order), the chain's ops touch a blob outside `inner`, `inputs`, `outputs` and
  // `released`, or the new op's output shapes are not `outputs`'.
  Op* replace_ops(const std::vector<Op*>& chain, const std::vector<Blob*>& inner,
                  const std::string& full_name, const std::string& type, const Attrs& attrs,
                  const std::vector<Blob*>& inputs, const std::vector<Blob*>& outputs,
                  const std::vector<Blob*>& released = {});

  // Parameters (trained by the optimizer), in registration order. A composite registers its
  // parameters when it is set up, so the non-const form first sets up every pending composite
  // whose bottoms are connected (none is missed because its top was not used yet); the const
  // form throws purine::Error naming such a composite instead.
  void add_parameter(Parameter parameter);
  const std::vector<Parameter>& parameters();
  const std::vector<Parameter>& parameters() const;
  // State: initialized and checkpointed like parameters, but not trained (batch norm's running
  // statistics). The same rules for pending composites. A state under a scope whose parameters
  // are shared (share_parameters) is an error: make it with Composite::make_state, which shares
  // it among the copies.
  void add_state(Parameter state);
  const std::vector<Parameter>& states();
  const std::vector<Parameter>& states() const;
  // After each successful run, the memory of `a` and `b` is exchanged (new weights become the
  // weights of the next run).
  void add_swap(Blob* a, Blob* b);
  const std::vector<std::pair<Blob*, Blob*>>& swaps() const { return swaps_; }
  // The blob whose memory `a` takes after each run (add_swap); nullptr when there is none.
  Blob* swapped_with(const Blob* a) const;
  // Makes `b` the blob `a`'s swap takes, in place of the one add_swap gave: a state that several
  // copies of a model update in turn (batch norm's running statistics under micro-batches) is
  // swapped with the value the last copy wrote.
  void replace_swap(Blob* a, Blob* b);

  // Weight sharing, for several copies of one model (the micro-batches of a pipeline): the
  // parameters that composites under the scope `scope` (a full prefix) create are named under
  // `with` instead ("<scope>::fc1::weight" becomes "<with>::fc1::weight"), and one that exists
  // already is reused, so every copy reads the same weights and autodiff sums their gradients.
  // States that composites make under `scope` (Composite::make_state: running statistics) are
  // shared the same way; the composites that update one chain their updates, each reading the
  // value the copy set up before it wrote (swapped_with, replace_swap), in setup order.
  void share_parameters(const std::string& scope, const std::string& with);

  // Layer placement, to lay out a model written for one location without changing its code: a
  // composite whose full name is `name`, or ends with "::" + `name`, is built at `location` (its
  // parameters, ops and tops; inputs from elsewhere arrive by inserted copies) instead of the
  // location current when it is created. The longest matching name wins. Composites created
  // inside a placed one follow it.
  void place(const std::string& name, Location location);
  // The location placed for a composite's full name; nullptr when no rule matches.
  const Location* placement_of(const std::string& full_name) const;
  // Model-parallel rule, matched like place() when a composite is created: a layer that can be
  // split (an inner product, a convolution) named `name` is built split over
  // `split.locations` (graphs/layers.hpp). A later rule for the same name replaces it for
  // composites created after it (data-parallel replicas, each split over its own locations).
  void split(const std::string& name, LayerSplit split);
  // The rule for a composite's full name; nullptr when none matches.
  const LayerSplit* split_of(const std::string& full_name) const;
  // A deferred join: `joined` is the concatenation of `slices.blobs` along `slices.axis`, made by
  // a concat op at `slices.location` the first time an op reads `joined`. A reader able to use
  // the slices where they are (slices_of) leaves them unmoved: a split layer's output feeding
  // an element-wise layer and then a layer split by inputs crosses no location (the Megatron
  // pattern). A join no op reads is never made, and `joined` then holds no values.
  void join_later(Blob* joined, Slices slices);
  const Slices* slices_of(const Blob* joined) const;
  // The layers: the full names of the composites created outside any composite's setup (the
  // blocks a model chains), in creation order.
  std::vector<std::string> layer_names() const;
  // The parts of the composite `layer` (a full name): the full names of the composites its
  // setup() created directly (an inception module's convolutions, ReLUs, pooling and concat),
  // in creation order; empty for a layer built of ops alone.
  std::vector<std::string> part_names(const std::string& layer) const;

  // Throws purine::Error on the first problem found: a cycle, an op with the wrong number or
  // shape of inputs/outputs, an op reading a blob at another location, a blob with two writers
  // that is not accumulating. Sets up composites not yet set up.
  void validate();
  // Ops in a deterministic topological order (ties by creation index; orders count as edges).
  // Throws on a cycle, naming its ops with their locations and threads.
  std::vector<Op*> topological_order() const;

  // GraphViz text of the bi-graph drawn as in the Purine paper (purine/graph_dot.cpp): tensors
  // as boxes, operators as circles coloured by role (forward, backward, optimizer,
  // communication: the copies), one cluster per location, an op's thread in its label when it
  // is not "main", and each swap as a dashed edge from the new tensor to the one it replaces.
  // `collapse`: the ops of one layer (a composite outside any other) with one role at one
  // location are one circle, and tensors inside such a circle are not drawn. `forward_only`:
  // the forward ops and their tensors alone.
  struct DotOptions {
    bool collapse = false;
    bool forward_only = false;
  };
  std::string to_dot(const DotOptions& options) const;
  std::string to_dot() const { return to_dot(DotOptions{}); }

  // Sums over the replicas of a data-parallel graph, for statistics that span every replica's
  // batch (synchronized batch norm). While a ReplicaSums lives, replica_sum(partial) makes a blob
  // "<partial>::replica_sum" of partial's shape at its location, with no writer yet, and records
  // the request with the replica being built (set_replica); the owner (graphs/data_parallel.cpp)
  // later writes each such blob with the sum of the partials of the requests made in the same
  // place of every replica's sequence. With none, the sum over the one replica is `partial`
  // itself. Builders ask sums_over_replicas() to choose their composition.
  class ReplicaSums {
   public:
    struct Request {
      Blob* partial = nullptr;
      Blob* sum = nullptr;
      int replica = 0;
    };
    explicit ReplicaSums(Graph& graph);
    ~ReplicaSums();
    ReplicaSums(const ReplicaSums&) = delete;
    ReplicaSums& operator=(const ReplicaSums&) = delete;
    // The replica whose requests follow (0 until set).
    void set_replica(int replica) { replica_ = replica; }
    // In creation order.
    const std::vector<Request>& requests() const { return requests_; }

   private:
    friend class Graph;
    Graph& graph_;
    ReplicaSums* saved_;
    int replica_ = 0;
    std::vector<Request> requests_;
  };
  Blob* replica_sum(Blob* partial);
  bool sums_over_replicas() const { return replica_sums_ != nullptr; }

  // Ops created while it lives get `role` (the default is kForward).
  class RoleScope {
   public:
    RoleScope(Graph& graph, OpRole role);
    ~RoleScope();
    RoleScope(const RoleScope&) = delete;
    RoleScope& operator=(const RoleScope&) = delete;

   private:
    Graph& graph_;
    OpRole saved_;
  };

  // Naming scope: vertices created while it lives get "name::" prefixed.
  class Scope {
   public:
    // `absolute`: `name` replaces the current prefix instead of extending it.
    Scope(Graph& graph, const std::string& name, bool absolute = false);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Graph& graph_;
    std::string saved_;
  };
  // Thread names used by the library (any other name is a thread of the user's choosing; each
  // (location, thread) is one executor thread when run).
  // The default thread of every location: the forward and backward ops, the SGD updates (which
  // follow their gradient's writer) and the loss seed run there unless placed elsewhere.
  static constexpr const char* kMainThread = "main";
  // The communication thread of a location: the gradient reductions of graphs/ (allreduce,
  // parameter server, the replicas' mean of a scalar) and their copies run there, so that they
  // overlap the backward pass on kMainThread.
  static constexpr const char* kCommThread = "comm";
  // The thread name of an op that may run on any of its rank's threads: the dispatcher runs it
  // where its inputs were finished (no hand-over), or on an idle thread when that one is busy.
  static constexpr const char* kAnyThread = "*";
  // Placement: vertices created while it lives get this location and thread.
  class Placement {
   public:
    Placement(Graph& graph, Location location, const std::string& thread = kMainThread);
    ~Placement();
    Placement(const Placement&) = delete;
    Placement& operator=(const Placement&) = delete;

   private:
    Graph& graph_;
    Location saved_location_;
    std::string saved_thread_;
  };
  const std::string& scope_prefix() const { return prefix_; }
  Location current_location() const { return location_; }
  const std::string& current_thread() const { return thread_; }
  std::string full_name(const std::string& local_name) const;

 private:
  friend class Composite;
  void check_new_name(const std::string& full, const char* kind) const;
  void own(std::unique_ptr<Composite> composite);
  void set_up_connected_composites();
  void require_no_pending_composite(const char* what) const;
  void make_join(Blob* joined);
  // The parameter blob named `full_name` (or its name under share_parameters()): an existing
  // parameter reused, or nullptr with `*name` set to the name to create it under.
  Blob* shared_parameter(const std::string& full_name, const Shape& shape, std::string* name);
  // `full_name` under share_parameters() (itself outside every shared scope).
  std::string shared_name(const std::string& full_name) const;
  // The same for a state (Composite::make_state).
  Blob* shared_state(const std::string& full_name, const Shape& shape, std::string* name);
  // Both: the existing blob of `full_name`'s shared name, which must be one of `among` (a
  // `kind`: "parameter" or "state") of the same shape.
  Blob* shared_among(const std::vector<Parameter>& among, const char* kind,
                     const std::string& full_name, const Shape& shape, std::string* name);

  std::string name_;
  std::vector<std::unique_ptr<Blob>> blobs_;
  std::vector<std::unique_ptr<Op>> ops_;
  std::vector<std::unique_ptr<Composite>> composites_;
  std::map<std::string, Blob*> blob_by_name_;
  std::map<std::string, Op*> op_by_name_;
  std::vector<Parameter> parameters_;
  std::vector<Parameter> states_;
  std::vector<std::pair<Blob*, Blob*>> swaps_;
  std::string prefix_;
  Location location_ = Location::cpu();
  std::string thread_ = kMainThread;
  int next_op_index_ = 0;
  OpRole role_ = OpRole::kForward;
  bool auto_copy_ = true;
  std::map<std::pair<const Blob*, Location>, Blob*> copies_;
  std::map<std::string, Location> placements_;  // place()
  std::map<std::string, LayerSplit> splits_;    // split()
  std::map<std::string, std::string> shared_;   // share_parameters(): scope -> with
  std::map<const Blob*, Slices> slices_;        // join_later()
  std::set<const Blob*> joins_pending_;
  int setups_running_ = 0;  // composites in setup() now (nesting)
  ReplicaSums* replica_sums_ = nullptr;
};

// A sub-graph with bottom and top blobs: a layer, an inception module, an optimizer. Subclasses
// implement setup(), which runs once, when the top is first needed (or at validation), in the
// scope, location and thread the composite was created in. setup() creates ops and parameters
// and, unless tops were given with set_top(), its own top blobs.
class Composite {
 public:
  virtual ~Composite() = default;
  Composite(const Composite&) = delete;
  Composite& operator=(const Composite&) = delete;

  const std::string& name() const { return full_name_; }
  Graph& graph() const { return graph_; }
  const std::vector<Blob*>& bottom() const { return bottom_; }
  // Sets the composite up if needed and returns its tops.
  const std::vector<Blob*>& top();
  Blob* top(int i) { return top().at(i); }
  void set_bottom(const std::vector<Blob*>& bottom);
  // Gives the top blobs to write instead of letting setup() create them.
  void set_top(const std::vector<Blob*>& top);
  bool is_setup() const { return setup_done_; }
  // Whether it was created inside another composite's setup() (a part, not a layer).
  bool nested() const { return nested_; }
  // The Graph::split rule that named it when it was created; nullptr when none did.
  const LayerSplit* split_rule() const { return split_ ? &*split_ : nullptr; }
  void ensure_setup();

 protected:
  Composite(Graph& graph, const std::string& local_name);
  virtual void setup() = 0;

  // Helpers for setup(), all relative to the composite's own scope.
  Blob* make_blob(const std::string& local_name, Shape shape);
  // A parameter blob initialized by `filler` with `filler_attrs` (its "shape" is filled in).
  Blob* make_parameter(const std::string& local_name, Shape shape, const std::string& filler,
                       Attrs filler_attrs = {}, double decay_mult = 1.0);
  // Piece `part` of the parameter `local_name` of shape `whole_shape` (Parameter::whole), named
  // "part<part>::<local_name>", at `offset` / `row_stride` in it, created at the current location.
  Blob* make_parameter_piece(const std::string& local_name, const Shape& whole_shape, int part,
                             Shape shape, int64_t offset, int64_t row_stride,
                             const std::string& filler, Attrs filler_attrs = {},
                             double decay_mult = 1.0);
  // A state blob (not trained) initialized to `value`. Under a scope whose parameters are shared
  // (Graph::share_parameters) it is named and shared as a parameter would be: the first copy
  // makes it, the others get the same blob.
  Blob* make_state(const std::string& local_name, Shape shape, double value);
  // An op reading `inputs` and writing `outputs` (created from inferred shapes when empty).
  std::vector<Blob*> make_op(const std::string& local_name, const std::string& type,
                             const Attrs& attrs, const std::vector<Blob*>& inputs,
                             const std::vector<Blob*>& outputs = {});
  // The shapes an op of `type` would output for `inputs` (throws purine::Error naming this
  // composite on bad input).
  std::vector<Shape> infer_shapes(const std::string& type, const Attrs& attrs,
                                  const std::vector<Blob*>& inputs) const;
  // The i-th given top if set_top() was called, else a new blob "local_name" of `shape`.
  Blob* top_or_new(size_t i, const std::string& local_name, const Shape& shape);
  // An op whose outputs are the composite's tops (given ones, or new blobs "top", "top1", ...).
  std::vector<Blob*> make_top_op(const std::string& local_name, const std::string& type,
                                 const Attrs& attrs, const std::vector<Blob*>& inputs);
  // For an op that treats every index of axes 0 and 1 alike (element-wise, pooling): when the
  // one bottom is joined from slices along one of those axes (Graph::join_later), applies the op
  // to each slice at the slice's location and joins the results as the top, and returns true;
  // returns false, building nothing, when the bottom has no slices.
  bool make_top_op_on_slices(const std::string& type, const Attrs& attrs);
  // Checks the number of bottoms, naming the composite.
  void require_bottoms(size_t count) const;

  std::vector<Blob*> bottom_;
  std::vector<Blob*> top_;

 private:
  Graph& graph_;
  std::string local_name_;
  std::string full_name_;
  std::string prefix_;  // the scope it was created in
  Location location_;
  std::string thread_;
  bool nested_;  // created inside another composite's setup()
  std::optional<LayerSplit> split_;
  bool setup_done_ = false;
  bool in_setup_ = false;
};

template <typename C, typename... Args>
C& Graph::add(const std::string& local_name, Args&&... args) {
  auto composite = std::unique_ptr<C>(new C(*this, local_name, std::forward<Args>(args)...));
  C& ref = *composite;
  own(std::move(composite));
  return ref;
}

}  // namespace purine
