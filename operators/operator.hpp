// Operator: one kernel family (convolution, ReLU, SGD update, ...) that reads input tensors and
// writes output tensors. Operators know tensors, never graphs. Following caffe's Layer, the base
// class checks and subclasses compute: compute() validates counts, shapes and locations, then
// calls compute_cpu() or compute_gpu() by the outputs' device.
//
// Every operator also declares, as data, how to build its gradient (gradient()): autodiff in
// purine/ turns that into gradient ops of the bi-graph, and the gradient checker runs it on
// tensors directly. What the core must know to compile a graph it learns from traits() (how
// outputs alias inputs, whether the op bridges locations or communicates) and, for operators
// whose work completes later (MPI transfers; GPU kernels), from their asynchronous form
// (bind_async()); it never recognises an operator by its type name. Instances are immutable
// after construction and may be shared by threads only if compute() is not called concurrently
// on the same instance (the dispatcher never does).
#pragma once

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "base/device_queue.hpp"
#include "base/rng.hpp"
#include "base/tensor.hpp"
#include "operators/attrs.hpp"

namespace purine {

class Communicator;  // operators/mpi/communicator.hpp

// For an operator that joins two ranks (a copy between ranks): which half this rank runs, with
// whom, under which MPI tag. Set by the compile step (purine/compile.hpp).
struct PeerLink {
  enum Side { kNone, kSend, kReceive };
  Side side = kNone;
  int peer = -1;
  int tag = 0;
};

class DataSource;  // operators/data_source.hpp

// What a running operator may use besides its tensors. `rng` is set for operators whose
// uses_rng() is true; the dispatcher serializes all users of one Rng in a fixed order. `comm`
// (the run's communicator) and `link` are set for operators that communicate.
struct OpContext {
  explicit OpContext(Rng* rng_in = nullptr) : rng(rng_in) {}
  Rng* rng = nullptr;
  const Communicator* comm = nullptr;
  PeerLink link;
  // For GPU kernels (operators/gpu_kernel.hpp): the stream of the op's GPU location and thread,
  // on which the kernel puts its work.
  DeviceQueue* queue = nullptr;
};

// How an operator's outputs may share memory with its inputs. The compile step makes them views
// where the layout allows (purine/views.hpp); the op then computes nothing, or in place.
struct Aliasing {
  enum Kind {
    kNone,
    kReshape,  // the one output is input 0's elements under another shape
    kSplit,    // the outputs are consecutive slices of input 0 along `axis`
    kConcat,   // the inputs are consecutive slices of output 0 along `axis`
    kInPlace,  // output 0 may be written over any one input (the kernel allows it)
  };
  Kind kind = kNone;
  int64_t axis = 0;  // kSplit, kConcat; negative counts from the end
};

// What the core needs to know of an operator, declared instead of recognised by type name.
struct OperatorTraits {
  Aliasing aliasing;
  // Its inputs may live at other locations than its outputs (copy, the one bridge).
  bool bridges_locations = false;
  // Its asynchronous form calls MPI: without MPI_THREAD_MULTIPLE it runs on the rank's one
  // MPI executor.
  bool communicates = false;
  // Every rank must start it in the same order (collectives).
  bool ordered_across_ranks = false;
  // Recorded in a device graph, its GPU kernel still draws new random numbers at every replay
  // (it reads its key from a launch word, base/device_queue.hpp). Another op that uses_rng() at
  // a GPU keeps its graph from being recorded, since a replay would repeat its numbers.
  bool replays_random_draws = false;
  // Its CPU kernel reads and writes strided views (concat, split, a copy between host
  // locations). Every other kernel, and every kernel at a GPU, gets contiguous tensors only:
  // compute() refuses a strided one, naming it, before the kernel runs.
  bool strided_on_cpu = false;
};

// The work of one run of an operator, for performance models (purine simulate, train/
// simulation.hpp): floating-point operations and bytes read and written in memory. Declared by
// the operator for given shapes (Operator::cost), never guessed from its type name.
struct OpCost {
  double flops = 0;
  double bytes = 0;
};

// Which of an op's [N, C, H, W] arguments its CPU kernel can take in channel blocks
// (Tensor::channel_block), for the rewrite that keeps activations blocked between convolutions
// (graphs/channel_blocks.hpp). kUniform: the listed arguments are all blocked or none (an
// element-wise kernel, batch norm); kEach: each listed argument may be blocked or not on its own
// (a convolution reorders what its primitive wants). Arguments not listed stay plain, but for
// `shape_only` inputs, whose values the kernel never reads (a convolution's data gradient reads
// x's shape only). `reorders`: which form of the listed arguments costs the kernel a reorder on
// every run (a copy of the argument into the other layout), so that the rewrite weighs them:
// kInPlain (oneDNN's convolutions compute in blocks), kInBlocks (the other convolution kernels
// compute plain), or kNever (the same work either way).
struct ChannelBlocking {
  enum Kind { kNone, kUniform, kEach };
  enum Reorders { kNever, kInPlain, kInBlocks };
  Kind kind = kNone;
  std::vector<int> inputs, outputs, shape_only;
  Reorders reorders = kNever;
  // Every input and output, all blocked or none.
  static ChannelBlocking uniform_all(int inputs, int outputs);
  static ChannelBlocking make(Kind kind, std::vector<int> inputs, std::vector<int> outputs,
                              std::vector<int> shape_only = {});
};

// The asynchronous form of an operator, bound to one op's tensors: start() begins a run's work
// and returns at once; done() reports completion and is polled by the executor that started
// it, between its other tasks. Made once per op when a graph is compiled and reused run after
// run; one executor thread drives it. Errors throw purine::Error from either call.
class AsyncWork {
 public:
  virtual ~AsyncWork() = default;
  virtual void start() = 0;
  virtual bool done() = 0;
};

// A reference to a tensor while building a gradient: the forward op's i-th input or output, the
// gradient of its i-th output (dL/dy_i), the gradient being built for its i-th input (dL/dx_i),
// the i-th temporary of the gradient computation, or the sum of the i-th temporary over the
// replicas of a data-parallel graph (Graph::replica_sum; the temporary itself outside one).
struct GradRef {
  enum Kind { kInput, kOutput, kOutputGrad, kInputGrad, kTemp, kReplicaSum };
  Kind kind;
  int index;
};
inline GradRef input(int i) { return {GradRef::kInput, i}; }
inline GradRef output(int i) { return {GradRef::kOutput, i}; }
inline GradRef output_grad(int i) { return {GradRef::kOutputGrad, i}; }
inline GradRef input_grad(int i) { return {GradRef::kInputGrad, i}; }
inline GradRef temp(int i) { return {GradRef::kTemp, i}; }
inline GradRef replica_sum_of_temp(int i) { return {GradRef::kReplicaSum, i}; }

// One op of a gradient computation. Its outputs are input_grad(i) or temp(k) references; its
// inputs may be any reference (a temp only after the op that writes it).
struct GradOp {
  std::string type;
  Attrs attrs;
  std::vector<GradRef> inputs;
  std::vector<GradRef> outputs;
};

// How to compute the input gradients of one operator. `aliases` say "dL/dx_i is dL/dy_j"
// without any op (bias: dx = dy), `temp_aliases` "dL/dx_i is temporary k" (sum_relu: every
// input's gradient is the one relu_grad's output). Inputs with no gradient (labels, indices)
// appear nowhere.
struct GradientSpec {
  std::vector<GradOp> ops;
  std::vector<std::pair<int, int>> aliases;       // (input index, output-grad index)
  std::vector<std::pair<int, int>> temp_aliases;  // (input index, temp index)
};

// Starts `work` and waits for it on this thread (for callers outside the dispatcher).
void run_to_completion(AsyncWork& work);

class Operator {
 public:
  static constexpr int kVariadic = -1;

  explicit Operator(Attrs attrs) : attrs_(std::move(attrs)) {}
  virtual ~Operator() = default;
  Operator(const Operator&) = delete;
  Operator& operator=(const Operator&) = delete;

  // The name the registry knows the operator by ("relu"). TypedOperator (below) implements it.
  virtual std::string type() const = 0;
  // Expected numbers of inputs and outputs, or kVariadic (at least one).
  virtual int num_inputs() const = 0;
  virtual int num_outputs() const = 0;
  // Output shapes for the given input shapes. Throws purine::Error saying what is wrong, with
  // expected and actual values; the caller prefixes the op's name.
  virtual std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const = 0;
  virtual bool uses_rng() const { return false; }
  // How to build the input gradients. The default says the operator is not differentiable.
  virtual GradientSpec gradient() const;
  // The same for inputs of these shapes; variadic operators (sum, concat) override this form.
  // Autodiff and the gradient checker call it. The default returns gradient().
  virtual GradientSpec gradient_for(const std::vector<Shape>& input_shapes) const {
    return gradient();
  }
  virtual bool differentiable() const { return false; }
  virtual OperatorTraits traits() const { return {}; }
  // The work of one run on inputs and outputs of these shapes (operators/op_costs.cpp). The
  // default is an element-wise operator's: a flop per output element, every input and output
  // read or written once (4-byte elements). GEMM-like operators override it.
  virtual OpCost cost(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) const;
  // Which arguments its CPU kernel takes in channel blocks of `block` for these input shapes
  // (above); the default: none.
  virtual ChannelBlocking channel_blocking(const std::vector<Shape>& inputs, int block) const {
    return {};
  }
  // The asynchronous form for these tensors (an input or output of another rank is null), or
  // nullptr when the operator runs synchronously through compute() (the default).
  virtual std::unique_ptr<AsyncWork> bind_async(const std::vector<const Tensor*>& inputs,
                                                const std::vector<Tensor*>& outputs,
                                                const OpContext& context) const {
    return nullptr;
  }
  // One-time set-up for these tensors before the first run, called by the compile step for each
  // op of its rank on the compiling thread, in the graph's order on every rank (so collective
  // set-up, such as an NCCL communicator, matches across ranks). The default runs the set-up its
  // GPU kernel registered, for outputs on a GPU (operators/gpu_kernel.hpp), and nothing else.
  virtual void prepare(const std::vector<const Tensor*>& inputs,
                       const std::vector<Tensor*>& outputs, const OpContext& context) const;
  // The data set a source operator serves (its metadata and cursor); null for other operators.
  virtual DataSource* data_source() { return nullptr; }

  // Validates, then runs the kernel for the outputs' device. Throws purine::Error on a count,
  // shape or location mismatch (inputs may be elsewhere only if traits().bridges_locations) and
  // on a strided view its kernel cannot take (traits().strided_on_cpu): kernels need not check.
  void compute(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
               OpContext& context);
  // Throws purine::Error unless the counts match num_inputs()/num_outputs().
  void check_counts(size_t inputs, size_t outputs) const;
  // Checks the number of inputs, then returns output_shapes(inputs).
  std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const;

  const Attrs& attrs() const { return attrs_; }

 protected:
  virtual void compute_cpu(const std::vector<const Tensor*>& inputs,
                           const std::vector<Tensor*>& outputs, OpContext& context) = 0;
  // Default: the kernel registered for type() (operators/gpu_kernel.hpp), or a purine::Error
  // saying this operator has no GPU kernel in this build.
  virtual void compute_gpu(const std::vector<const Tensor*>& inputs,
                           const std::vector<Tensor*>& outputs, OpContext& context);

  const Attrs attrs_;

 private:
  // Throws purine::Error naming the first strided input or output.
  void require_contiguous(const std::vector<const Tensor*>& inputs,
                          const std::vector<Tensor*>& outputs, bool on_gpu) const;
};

// The usual base of an operator: it declares its type name once, as `kType`, and
// TypedOperator<Derived> returns it from type(); PURINE_REGISTER_OPERATOR(Derived)
// (registry.hpp) registers the class under the same name. `Base` is Operator or a base derived
// from it (SameShapeOp below, or an operator family's shared part), whose constructors it
// inherits:
//   class MulOp : public TypedOperator<MulOp, SameShapeOp> {
//    public:
//     static constexpr char kType[] = "mul";
static constexpr char kSignature[] = "(a, b) -> y = a * b";
//     using TypedOperator::TypedOperator;
//     int num_inputs() const override { return 2; }
//     ...
//   };
template <typename Derived, typename Base = Operator>
class TypedOperator : public Base {
  static_assert(std::is_base_of<Operator, Base>::value, "Base must be Operator or derive from it");

 public:
  using Base::Base;
  std::string type() const override { return Derived::kType; }
};

// A helper base for operators whose inputs and outputs all have one shape, input 0's: the
// element-wise kernels and their gradients. output_shapes() checks the input count and that
// every input has input 0's shape (no broadcasting), and gives every output that shape. One
// output unless the subclass declares more (a fixed number); num_inputs() is the subclass's.
class SameShapeOp : public Operator {
 public:
  using Operator::Operator;
  int num_outputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;

 protected:
  // The inputs' roles, one per input ({"y", "dy"}), for shape errors such as
  // "relu_grad: input 1 (dy) has shape [3,2], expected input 0's (y) shape [2,3]"; empty (the
  // default) numbers the inputs only.
  virtual std::vector<std::string> input_names() const { return {}; }
};

}  // namespace purine
