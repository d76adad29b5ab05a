// Tensor: a cheap handle to a shared TensorImpl (shape, strides, dtype, device, storage + offset) plus the
// autograd fields. Views (view, slice, select, permute) and contiguous() are recorded by autograd like ops;
// clone(), to(), fill_() and copy_() are raw (not recorded). Compute ops are free functions in ops/
// (liftoff::reshape, liftoff::add, liftoff::conv2d, ...).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/device.h"
#include "runtime/dtype.h"
#include "runtime/error.h"
#include "runtime/storage.h"

namespace liftoff {

using Shape = std::vector<int64_t>;            // sizes, outermost first; {} is a 0-d tensor of one element
std::string shape_str(const Shape& shape);     // "[2, 3, 4]"
int64_t shape_numel(const Shape& shape);       // product of the sizes (1 for {})
Shape contiguous_strides(const Shape& shape);  // row-major strides, in elements

// The dense layouts of a tensor's memory. A 4-D tensor keeps its logical shape [N, C, H, W] in both; only the
// strides differ: contiguous (NCHW) is row-major, channels_last (NHWC, what cuDNN's f16/bf16 tensor-core
// convolutions want) has strides (H*W*C, 1, W*C, C), as PyTorch's memory_format=torch.channels_last.
enum class MemoryFormat { contiguous, channels_last };
const char* memory_format_name(MemoryFormat format);
// The channels-last strides of a 4-D shape (ShapeError for another rank); sizes of 0 count as 1.
Shape channels_last_strides(const Shape& shape);

class Node;
class Tensor;
using GradReadyHook = std::function<void(const Tensor& leaf)>;

struct TensorImpl {
  Storage storage;
  int64_t offset = 0;  // in elements
  Shape shape;
  Shape strides;  // in elements
  DType dtype = DType::f32;
  // Autograd.
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<Node> grad_fn;           // set on results of recorded ops
  int grad_fn_output = 0;                  // which of grad_fn's outputs this is (split's pieces)
  std::shared_ptr<Node> grad_accumulator;  // set lazily on leaves that require grad
  std::vector<GradReadyHook> grad_ready_hooks;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // Factories: fresh contiguous tensors that do not require grad. Values are given as double and converted to
  // dtype. empty() leaves the memory uninitialised.
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  // A fresh tensor in `format` (channels_last needs a 4-D shape).
  static Tensor empty(const Shape& shape, DType dtype, Device device, MemoryFormat format);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor ones(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32,
                     Device device = Device::cpu());
  // Copies `values` (row-major; values.size() must equal shape_numel(shape), else ShapeError) into a tensor
  // of T's dtype on `device`. T: float, double, int32_t, int64_t, uint8_t, bool (a b8 mask).
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device = Device::cpu());
  // A contiguous view of existing memory (no copy), starting `offset` elements in; the storage must hold
  // offset + numel elements (else ShapeError). The tensor lives on the storage's device.
  static Tensor from_blob(const Storage& storage, const Shape& shape, DType dtype, int64_t offset = 0);

  // False for a default-constructed handle (e.g. an absent bias or gradient). The accessors below need a
  // defined tensor.
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  const Shape& strides() const;
  int64_t dim() const { return static_cast<int64_t>(shape().size()); }
  // size(-1) is the last dimension, as in PyTorch.
  int64_t size(int64_t d) const;
  int64_t numel() const { return shape_numel(shape()); }
  DType dtype() const;
  Device device() const;
  int64_t offset() const { return impl().offset; }
  const Storage& storage() const { return impl().storage; }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype()); }
  bool is_contiguous() const;
  // 4-D with exactly channels_last_strides(shape()). Where C == 1 or H * W == 1 a tensor may be both this and
  // is_contiguous(): then both layouts address the same bytes, so either kernel reads it correctly.
  bool is_channels_last() const;
  bool is_contiguous(MemoryFormat format) const;
  // channels_last when is_channels_last(), else contiguous: the layout an op's output should keep.
  MemoryFormat memory_format() const;
  bool is_cuda() const { return device().is_cuda(); }

  // Typed pointer to the first element; throws DTypeError if T does not match dtype().
  template <class T>
  T* data() const;
  void* raw_data() const;

  // Copies (never views): the result owns fresh contiguous memory. contiguous() is differentiable; clone()
  // and to() are not (for a differentiable dtype conversion see cast() in ops/cast/cast.h).
  Tensor clone() const;
  Tensor contiguous() const;  // returns *this when already contiguous
  // A dense copy in `format` (differentiable: the gradient passes through in whatever layout it arrives), or
  // *this when is_contiguous(format) already holds.
  Tensor contiguous(MemoryFormat format) const;
  Tensor to(Device device) const;
  Tensor to(DType dtype) const;
  Tensor to(Device device, DType dtype) const;
  // Views sharing storage (differentiable). view() needs a contiguous tensor; -1 infers one dimension.
  // slice/select/permute: a negative dim counts from the end; out-of-range dims or indices throw ShapeError.
  Tensor view(const Shape& shape) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end) const;  // [start, end) along dim
  Tensor select(int64_t dim, int64_t index) const;              // removes dim
  Tensor permute(const std::vector<int64_t>& order) const;      // order: a permutation of 0..dim()-1

  // In-place raw writes (not recorded).
  // Handles have reference semantics: these write through a const handle, like PyTorch's in-place ops.
  const Tensor& fill_(double value) const;
  const Tensor& zero_() const { return fill_(0.0); }
  const Tensor& copy_(const Tensor& src) const;  // same shape; any dtype/device

  // Host reads: these synchronize with the device. item() needs a one-element tensor. to_vector<T> converts
  // to T's dtype first: to_vector<bool>() of a b8 mask reads it as is, to_vector<uint8_t>() gives 0/1 bytes,
  // and to_vector<bool>() of a numeric tensor gives x != 0.
  double item() const;
  template <class T>
  std::vector<T> to_vector() const;

  // Autograd. set_requires_grad(true) makes a leaf whose .grad backward() fills; results of recorded ops
  // require grad when an input does and carry a grad_fn (they are not leaves). grad() is undefined until a
  // backward reaches the tensor (and after Module::zero_grad / Optimizer::zero_grad).
  bool requires_grad() const;
  const Tensor& set_requires_grad(bool requires_grad) const;
  bool is_leaf() const;
  Tensor grad() const;
  void set_grad(const Tensor& grad) const;  // an undefined tensor clears it
  const std::shared_ptr<Node>& grad_fn() const;
  // `output`: which of the node's outputs this tensor is (0 for a node of one output).
  void set_grad_fn(std::shared_ptr<Node> node, int output = 0) const;
  // Gradient-ready hooks run on a leaf when its gradient for the current backward() is complete.
  void add_grad_ready_hook(GradReadyHook hook) const;
  // Runs reverse-mode autograd from this tensor. With no argument the tensor must hold one element.
  void backward(const Tensor& grad_output = Tensor()) const;
  // A tensor sharing storage but cut off from the graph.
  Tensor detach() const;

  // "Tensor(shape=[2, 3], dtype=f32, device=cpu, ...)" with up to max_values values (reads the device).
  std::string str(int64_t max_values = 8) const;
  TensorImpl& impl() const;  // the shared state; throws ValueError for an undefined tensor
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& other) const { return impl_ == other.impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// std::vector<bool> holds packed bits, so its from_vector is a specialization (defined in tensor.cpp).
template <>
Tensor Tensor::from_vector(const std::vector<bool>& values, const Shape& shape, Device device);

// Raw tensor-core kernels shared by autograd and the tensor methods (no autograd recorded).
// dst += src (same shape, dtype and device; dst dense: contiguous or channels-last). src may have any layout;
// one of another layout than dst is first copied into dst's.
void accumulate_into(const Tensor& dst, const Tensor& src);

// A fresh, uninitialised tensor of t's shape, dtype and device in t's memory format (PyTorch's empty_like,
// which preserves a dense layout): optimizer states and averages laid out as the parameter they follow.
Tensor empty_like(const Tensor& t);
// a and b have one shape, are both dense (contiguous or channels-last) and hold their elements in the same
// order in memory (strides equal wherever a dimension is longer than 1): a kernel may pair their storage
// element by element, as the optimizers and the weight average do.
bool same_dense_order(const Tensor& a, const Tensor& b);
// Re-points t at `source` (same shape): its storage, offset, strides and dtype, so every handle sharing t
// sees the new data. For moving, converting and re-laying out parameters in place (Module::to).
void adopt_in_place(const Tensor& t, const Tensor& source);
// Re-points t's storage at a dense copy in `format`, so every handle sharing t sees the new layout (values
// unchanged); its .grad follows. Nothing happens where t is dense in `format` already; channels_last needs a
// 4-D t. Not recorded: for parameters, buffers and optimizer states between steps (Module::to(MemoryFormat)).
void set_memory_format_in_place(const Tensor& t, MemoryFormat format);

}  // namespace liftoff
