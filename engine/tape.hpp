// The autograd tape: a flat vector of nodes in creation order addressed by integer ids, values
// in an Arena reused across steps, backward as one reverse loop over the nodes. Ops are free
// functions (engine/ops.hpp) that compute their value and register a backward closure.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/arena.hpp"
#include "engine/device_memory.hpp"
#include "engine/parameter.hpp"
#include "engine/tensor.hpp"

namespace lcm {

using NodeId = int32_t;

template <class T>
class Tape;

/// Backward of one node: reads tape.grad(self) and accumulates (+=) into its inputs' gradients
/// through tape.grad_acc(input) (which returns nullptr for inputs that need no gradient).
template <class T>
using BackwardFn = std::function<void(Tape<T>&, NodeId self)>;

template <class T>
struct Node {
  Tensor<T> value;
  T* grad = nullptr;               // allocated (zeroed) lazily during backward
  Parameter<T>* param = nullptr;   // set for parameter leaves: grad accumulates into param->grad
  const uint16_t* bf16 = nullptr;  // BF16 bits of value (a weight's Bf16Copy), or nullptr
  bool requires_grad = false;      // true iff a parameter is reachable through this node
  std::vector<NodeId> inputs;
  BackwardFn<T> backward;  // empty for leaves or when recording is off
  const char* op = "";     // op name, for error messages and debugging
};

/// Records ops for one forward/backward pass. T is float (training) or double (gradient checks).
/// Not thread-safe: one tape per thread of work.
template <class T>
class Tape {
 public:
  Tape() = default;
  Tape(const Tape&) = delete;
  Tape& operator=(const Tape&) = delete;

  /// Training mode: dropout active. Eval mode: dropout is the identity.
  void set_training(bool on) { training_ = on; }
  bool training() const { return training_; }
  /// When false (no_grad), ops compute values but record no backward closures.
  void set_grad_enabled(bool on) { grad_enabled_ = on; }
  bool grad_enabled() const { return grad_enabled_; }

  /// Host tapes: where parameter leaves accumulate their gradients instead of Parameter::grad,
  /// as a map from the parameter to a buffer of its numel() values (nullptr, the default: each
  /// parameter's own grad). Lets several tapes run the backward of parts of one batch at once,
  /// each into its own buffers (train/sub_batches.hpp), since Parameter::grad is shared. The map
  /// must outlive the tape's use of it; a parameter missing from it uses its own grad.
  void set_param_grads(const std::unordered_map<const Parameter<T>*, T*>* grads) {
    param_grads_ = grads;
  }

  /// Where the values this tape creates live (constant, full, new_node, gradients, scratch from
  /// device_scratch). Device::CPU (default) uses the host arena; Device::CUDA with `index` uses a
  /// DeviceArena on cuda:index, params view Parameter::device_value (parameters_to_device first)
  /// and every op then selects its CUDA implementation. Clears the tape. Throws std::runtime_error
  /// (no CUDA device / out of range / CUDA not built, naming the device).
  void set_device(Device kind, int index = 0) {
    clear();
    if (kind == Device::CUDA && (!device_arena_ || device_arena_->device() != index))
      device_arena_ = std::make_unique<DeviceArena>(index);
    device_ = kind;
  }
  Device device() const { return device_; }
  /// The CUDA device index (meaningful when device() == Device::CUDA).
  int device_index() const { return device_arena_ ? device_arena_->device() : 0; }

  /// A constant leaf holding a copy of `src` (numel values, laid out as `shape`).
  /// `src` is host memory (copied to the device on a CUDA tape).
  NodeId constant(const T* src, Shape shape) {
    NodeId id = new_node(shape, "constant");
    if (device_ == Device::CPU)
      std::copy(src, src + shape.numel(), nodes_[id].value.data);
    else
      device_upload(nodes_[id].value.data, src, shape.numel());
    return id;
  }
  /// A constant copy of `t` (host or device memory, copied to this tape's device).
  NodeId constant(const Tensor<T>& t) {
    if (t.device == Device::CPU) return constant(t.data, t.shape);
    std::vector<T> h = to_host(t);
    return constant(h.data(), t.shape);
  }
  /// A leaf of the given shape filled with `v`.
  NodeId full(Shape shape, T v) {
    NodeId id = new_node(shape, "full");
    if (device_ == Device::CPU)
      std::fill(nodes_[id].value.data, nodes_[id].value.data + shape.numel(), v);
    else
      device_fill(nodes_[id].value.data, shape.numel(), v);
    return id;
  }
  /// A leaf that views the parameter's value (no copy); gradients accumulate into p.grad when
  /// p.requires_grad and recording is on. On a CUDA tape the leaf views p.device_value; throws
  /// std::logic_error naming the parameter when it is not on this tape's device. On a CPU tape a
  /// leaf that needs no gradient carries p.bf16's bits (Node::bf16) when it has them.
  NodeId param(Parameter<T>& p) {
    Node<T> n;
    if (device_ == Device::CPU) {
      n.value = p.value_view();
    } else {
      if (!p.device_value || p.device_index != device_index())
        throw std::logic_error("Tape::param: parameter " + p.name +
                               " is not on cuda:" + std::to_string(device_index()) +
                               " (call parameters_to_device first)");
      n.value = Tensor<T>{p.device_value, p.shape, Device::CUDA};
    }
    n.param = &p;
    n.requires_grad = grad_enabled_ && p.requires_grad;
    if (device_ == Device::CPU && !n.requires_grad && !p.bf16.bits.empty())
      n.bf16 = p.bf16.bits.data();
    n.op = "param";
    nodes_.push_back(std::move(n));
    return NodeId(nodes_.size() - 1);
  }

  /// For op implementations: a node with uninitialised value storage of `shape`, whose
  /// requires_grad is the OR over `inputs` (and false when recording is off).
  NodeId new_node(Shape shape, const char* op, std::vector<NodeId> inputs = {}) {
    if (device_ == Device::CPU)
      return new_view(Tensor<T>{arena_.alloc<T>(shape.numel()), shape, Device::CPU}, op,
                      std::move(inputs));
    return new_view(Tensor<T>{device_arena_->alloc<T>(shape.numel()), shape, Device::CUDA}, op,
                    std::move(inputs));
  }
  /// For op implementations: a node whose value is a view of existing memory `value` (no arena
  /// allocation; e.g. reshape viewing its input). requires_grad as for new_node. The viewed memory
  /// must outlive the node (an arena value of an earlier node, or a parameter's value).
  NodeId new_view(const Tensor<T>& value, const char* op, std::vector<NodeId> inputs = {}) {
    Node<T> n;
    n.value = value;
    n.op = op;
    bool rg = false;
    for (NodeId i : inputs) rg = rg || node(i).requires_grad;
    n.requires_grad = grad_enabled_ && rg;
    n.inputs = std::move(inputs);
    nodes_.push_back(std::move(n));
    return NodeId(nodes_.size() - 1);
  }
  /// For op implementations: registers the backward closure (ignored when the node needs none).
  void set_backward(NodeId id, BackwardFn<T> fn) {
    if (nodes_[id].requires_grad) nodes_[id].backward = std::move(fn);
  }
  /// For op implementations: scratch memory that lives until clear() (saved masks, gates, ...).
  template <class U = T>
  U* scratch(int64_t n) {
    return arena_.alloc<U>(n);
  }
  /// For op implementations: scratch memory on this tape's device (host arena on a CPU tape).
  template <class U = T>
  U* device_scratch(int64_t n) {
    return device_ == Device::CPU ? arena_.alloc<U>(n) : device_arena_->alloc<U>(n);
  }

  const Tensor<T>& value(NodeId id) const { return node(id).value; }
  Tensor<T>& value(NodeId id) { return node(id).value; }
  const Shape& shape(NodeId id) const { return node(id).value.shape; }
  bool requires_grad(NodeId id) const { return node(id).requires_grad; }
  const Node<T>& node(NodeId id) const {
    if (id < 0 || size_t(id) >= nodes_.size())
      throw std::out_of_range("Tape: bad node id " + std::to_string(id));
    return nodes_[id];
  }
  Node<T>& node(NodeId id) {
    if (id < 0 || size_t(id) >= nodes_.size())
      throw std::out_of_range("Tape: bad node id " + std::to_string(id));
    return nodes_[id];
  }
  size_t size() const { return nodes_.size(); }

  /// Gradient buffer of `id` to accumulate into during backward (zeroed on first use), or
  /// nullptr if `id` needs no gradient. For a parameter leaf this is the parameter's grad.
  T* grad_acc(NodeId id) {
    Node<T>& n = node(id);
    if (!n.requires_grad) return nullptr;
    if (!n.grad) {
      if (n.param)
        n.grad = device_ == Device::CPU ? host_param_grad(n.param) : n.param->device_grad;
      else
        n.grad = alloc_zero(n.value.numel());
    }
    return n.grad;
  }
  /// grad_acc for a writer that sets every element of the gradient: on its first use the buffer
  /// is not zeroed and `fresh` is set (the caller must then write all of it, not add); after
  /// that, and for parameter leaves (whose grad accumulates across steps), `fresh` is false and
  /// the caller adds as with grad_acc. nullptr if `id` needs no gradient. Saves the zero-fill of
  /// e.g. a linear's input gradient, which its dX GEMM overwrites. On a device the buffer comes
  /// from the gradient block zeroed at backward(), which already counts this node (no second
  /// allocation; the zeros are free there).
  T* grad_write(NodeId id, bool& fresh) {
    Node<T>& n = node(id);
    fresh = false;
    if (!n.requires_grad) return nullptr;
    if (!n.grad && !n.param) {
      n.grad =
          device_ == Device::CPU ? arena_.alloc<T>(n.value.numel()) : alloc_zero(n.value.numel());
      fresh = true;
      return n.grad;
    }
    return grad_acc(id);
  }
  /// The gradient buffer of `id` if one was allocated (something flowed into it), else nullptr.
  /// Allocates nothing.
  T* grad_if_any(NodeId id) { return node(id).grad; }
  /// The gradient of `id` after backward (a zero view if nothing flowed into it).
  Tensor<T> grad(NodeId id) {
    T* g = grad_acc(id);
    if (!g) g = alloc_zero(node(id).value.numel());
    return Tensor<T>{g, node(id).value.shape, device_};
  }

  /// Backpropagates from the scalar node `loss` (numel 1), seeding d loss = `seed`.
  /// Parameter gradients accumulate (+=) into Parameter::grad. Throws std::logic_error if
  /// `loss` is not a scalar or recording was off.
  void backward(NodeId loss, T seed = T(1)) {
    Node<T>& l = node(loss);
    if (l.value.numel() != 1)
      throw std::logic_error("Tape::backward: loss must have one element, has shape " +
                             l.value.shape.str());
    if (!l.requires_grad) return;  // nothing trainable reached
    if (device_ == Device::CPU) {
      grad_acc(loss)[0] += seed;
    } else {
      reserve_device_grads(loss);
      device_add_scalar(grad_acc(loss), seed);
    }
    for (NodeId i = loss; i >= 0; --i) {
      Node<T>& n = nodes_[i];
      if (n.backward && n.grad) n.backward(*this, i);
    }
  }

  /// Drops every node and makes the arena reusable (parameters are untouched).
  void clear() {
    nodes_.clear();
    arena_.reset();
    if (device_arena_) device_arena_->reset();
    zeroed_ = zeroed_end_ = nullptr;
  }
  /// Peak activation bytes seen by this tape's host arena.
  size_t peak_bytes() const { return arena_.peak_bytes(); }
  /// Peak activation bytes seen by this tape's device arena (0 for a CPU tape).
  size_t device_peak_bytes() const { return device_arena_ ? device_arena_->peak_bytes() : 0; }
  Arena& arena() { return arena_; }

 private:
  /// Values per device gradient slice: multiples of 64 (256 bytes for float), as the arena aligns.
  static int64_t padded(int64_t n) { return (n + 63) / 64 * 64; }
  /// The host buffer parameter p's leaf accumulates into (set_param_grads).
  T* host_param_grad(Parameter<T>* p) const {
    if (param_grads_) {
      auto it = param_grads_->find(p);
      if (it != param_grads_->end()) return it->second;
    }
    return p->grad.data();
  }
  T* alloc_zero(int64_t n) {
    if (device_ == Device::CPU) return arena_.alloc_zero<T>(n);
    if (zeroed_ && zeroed_end_ - zeroed_ >= padded(n)) {  // from the block zeroed at backward()
      T* p = zeroed_;
      zeroed_ += padded(n);
      return p;
    }
    return device_arena_->alloc_zero<T>(n);
  }
  /// On a device, one zero-filled block for the gradients of every node up to `loss` that may need
  /// one (requires_grad, not a parameter, none yet): one memset instead of one per gradient buffer
  /// (about 185 launches per cost-model training step), handed out by alloc_zero.
  void reserve_device_grads(NodeId loss) {
    int64_t total = 0;
    for (NodeId i = 0; i <= loss; ++i) {
      const Node<T>& n = nodes_[size_t(i)];
      if (n.requires_grad && !n.param && !n.grad) total += padded(n.value.numel());
    }
    zeroed_ = total > 0 ? device_arena_->alloc_zero<T>(total) : nullptr;
    zeroed_end_ = zeroed_ ? zeroed_ + total : nullptr;
  }
  std::vector<Node<T>> nodes_;
  Arena arena_;
  bool training_ = true;
  bool grad_enabled_ = true;
  Device device_ = Device::CPU;
  std::unique_ptr<DeviceArena> device_arena_;
  T* zeroed_ = nullptr;  // device: rest of the gradient block zeroed at backward()
  T* zeroed_end_ = nullptr;
  const std::unordered_map<const Parameter<T>*, T*>* param_grads_ = nullptr;
};

}  // namespace lcm
