#include "runtime/tensor.h"

#include <algorithm>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "runtime/autograd.h"
#include "runtime/dispatch.h"
#include "runtime/error.h"
#include "runtime/tensor_kernels.h"

namespace liftoff {

std::string shape_str(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

const char* memory_format_name(MemoryFormat format) {
  return format == MemoryFormat::channels_last ? "channels_last" : "contiguous";
}

Shape channels_last_strides(const Shape& shape) {
  LIFTOFF_CHECK(shape.size() == 4, ShapeError, "channels-last layout needs a 4-D shape [N, C, H, W], got ",
                shape_str(shape));
  const int64_t c = std::max<int64_t>(shape[1], 1);
  const int64_t h = std::max<int64_t>(shape[2], 1);
  const int64_t w = std::max<int64_t>(shape[3], 1);
  return {h * w * c, 1, w * c, c};
}

// ---- factories -------------------------------------------------------------------------------------------

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t s : shape) {
    LIFTOFF_CHECK(s >= 0, ShapeError, "Tensor::empty: negative size in shape ", shape_str(shape));
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = Storage::allocate(static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype), device);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device, MemoryFormat format) {
  Tensor t = empty(shape, dtype, device);
  if (format == MemoryFormat::channels_last) t.impl().strides = channels_last_strides(shape);
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  return full(shape, 0.0, dtype, device);
}
Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) {
  return full(shape, 1.0, dtype, device);
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill_(value);
  return t;
}

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape, Device device) {
  LIFTOFF_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape), ShapeError,
                "Tensor::from_vector: ", values.size(), " values do not fill shape ", shape_str(shape));
  Tensor host = empty(shape, DTypeOf<T>::value, Device::cpu());
  if (!values.empty()) std::memcpy(host.raw_data(), values.data(), values.size() * sizeof(T));
  return device.is_cpu() ? host : host.to(device);
}
template Tensor Tensor::from_vector(const std::vector<float>&, const Shape&, Device);
template Tensor Tensor::from_vector(const std::vector<double>&, const Shape&, Device);
template Tensor Tensor::from_vector(const std::vector<int32_t>&, const Shape&, Device);
template Tensor Tensor::from_vector(const std::vector<int64_t>&, const Shape&, Device);
template Tensor Tensor::from_vector(const std::vector<uint8_t>&, const Shape&, Device);
// std::vector<bool> is packed bits (no data()): copy element by element.
template <>
Tensor Tensor::from_vector(const std::vector<bool>& values, const Shape& shape, Device device) {
  LIFTOFF_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape), ShapeError,
                "Tensor::from_vector: ", values.size(), " values do not fill shape ", shape_str(shape));
  Tensor host = empty(shape, DType::b8, Device::cpu());
  bool* p = host.data<bool>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return device.is_cpu() ? host : host.to(device);
}

Tensor Tensor::from_blob(const Storage& storage, const Shape& shape, DType dtype, int64_t offset) {
  const size_t needed = static_cast<size_t>(offset + shape_numel(shape)) * dtype_size(dtype);
  LIFTOFF_CHECK(needed <= storage.nbytes(), ShapeError, "Tensor::from_blob: shape ", shape_str(shape),
                " at offset ", offset, " needs ", needed, " bytes but the storage has ", storage.nbytes());
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = storage;
  impl->offset = offset;
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

// ---- accessors -------------------------------------------------------------------------------------------

TensorImpl& Tensor::impl() const {
  if (!impl_) throw ValueError("use of an undefined (empty) Tensor handle");
  return *impl_;
}
const Shape& Tensor::shape() const {
  return impl().shape;
}
const Shape& Tensor::strides() const {
  return impl().strides;
}
DType Tensor::dtype() const {
  return impl().dtype;
}
Device Tensor::device() const {
  return impl().storage.device();
}

int64_t Tensor::size(int64_t d) const {
  const int64_t n = dim();
  const int64_t wrapped = d < 0 ? d + n : d;
  LIFTOFF_CHECK(wrapped >= 0 && wrapped < n, ShapeError, "Tensor::size: dimension ", d,
                " out of range for shape ", shape_str(shape()));
  return shape()[static_cast<size_t>(wrapped)];
}

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;
  const auto& s = shape();
  const auto& st = strides();
  int64_t expected = 1;
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] == 1) continue;
    if (st[i] != expected) return false;
    expected *= s[i];
  }
  return true;
}

bool Tensor::is_channels_last() const {
  return dim() == 4 && strides() == channels_last_strides(shape());
}

bool Tensor::is_contiguous(MemoryFormat format) const {
  return format == MemoryFormat::channels_last ? is_channels_last() : is_contiguous();
}

MemoryFormat Tensor::memory_format() const {
  return is_channels_last() ? MemoryFormat::channels_last : MemoryFormat::contiguous;
}

void* Tensor::raw_data() const {
  return static_cast<char*>(impl().storage.data()) +
         impl().offset * static_cast<int64_t>(dtype_size(dtype()));
}

template <class T>
T* Tensor::data() const {
  LIFTOFF_CHECK(DTypeOf<T>::value == dtype(), DTypeError, "Tensor::data: requested ",
                dtype_name(DTypeOf<T>::value), " but the tensor is ", dtype_name(dtype()));
  return static_cast<T*>(raw_data());
}
template float* Tensor::data<float>() const;
template double* Tensor::data<double>() const;
template int32_t* Tensor::data<int32_t>() const;
template int64_t* Tensor::data<int64_t>() const;
template uint8_t* Tensor::data<uint8_t>() const;

// ---- copies ----------------------------------------------------------------------------------------------

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), dtype(), device());
  out.copy_(*this);
  return out;
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  Tensor out = detach().clone();
  // A copy is the identity for gradients; recording it keeps ops that pack strided inputs differentiable.
  if (should_record({*this})) {
    record(out, "contiguous", {*this},
           [](const Tensor& gy, const NeedsGrad&) { return std::vector<Tensor>{gy}; });
  }
  return out;
}

Tensor Tensor::contiguous(MemoryFormat format) const {
  if (format == MemoryFormat::contiguous) return contiguous();
  if (is_channels_last()) return *this;
  Tensor out = empty(shape(), dtype(), device(), format);
  out.copy_(*this);
  if (should_record({*this})) {
    record(out, "contiguous", {*this},
           [](const Tensor& gy, const NeedsGrad&) { return std::vector<Tensor>{gy}; });
  }
  return out;
}

Tensor Tensor::to(Device target) const {
  return to(target, dtype());
}
Tensor Tensor::to(DType target) const {
  return to(device(), target);
}
Tensor Tensor::to(Device target_device, DType target_dtype) const {
  if (target_device == device() && target_dtype == dtype()) return *this;
  Tensor out = empty(shape(), target_dtype, target_device);
  out.copy_(*this);
  return out;
}

const Tensor& Tensor::copy_(const Tensor& src) const {
  LIFTOFF_CHECK(src.shape() == shape(), ShapeError, "Tensor::copy_: source shape ", shape_str(src.shape()),
                " differs from destination shape ", shape_str(shape()));
  kernels::copy(src, *this);
  return *this;
}

const Tensor& Tensor::fill_(double value) const {
  kernels::fill(*this, value);
  return *this;
}

void accumulate_into(const Tensor& dst, const Tensor& src) {
  LIFTOFF_CHECK(dst.shape() == src.shape() && dst.dtype() == src.dtype() && dst.device() == src.device(),
                ShapeError, "gradient accumulation: destination ", shape_str(dst.shape()), " ",
                dtype_name(dst.dtype()), " on ", dst.device().str(), " vs source ", shape_str(src.shape()),
                " ", dtype_name(src.dtype()), " on ", src.device().str());
  const MemoryFormat format = dst.memory_format();
  LIFTOFF_CHECK(dst.is_contiguous(format), ValueError,
                "gradient accumulation needs a dense (contiguous or channels-last) destination, got strides ",
                shape_str(dst.strides()), " for shape ", shape_str(dst.shape()));
  // Both dense in one layout: the kernel adds the storage linearly.
  kernels::accumulate(dst, src.contiguous(format));
}

Tensor empty_like(const Tensor& t) {
  return Tensor::empty(t.shape(), t.dtype(), t.device(), t.memory_format());
}

bool same_dense_order(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  const auto dense = [](const Tensor& t) { return t.is_contiguous() || t.is_channels_last(); };
  if (!dense(a) || !dense(b)) return false;
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (a.size(d) > 1 && a.strides()[static_cast<size_t>(d)] != b.strides()[static_cast<size_t>(d)])
      return false;
  }
  return true;
}

void adopt_in_place(const Tensor& t, const Tensor& source) {
  LIFTOFF_CHECK(source.shape() == t.shape(), ShapeError, "adopt_in_place: source shape ",
                shape_str(source.shape()), " differs from ", shape_str(t.shape()));
  TensorImpl& impl = t.impl();
  impl.storage = source.storage();
  impl.offset = source.offset();
  impl.strides = source.strides();
  impl.dtype = source.dtype();
}

void set_memory_format_in_place(const Tensor& t, MemoryFormat format) {
  LIFTOFF_CHECK(format == MemoryFormat::contiguous || t.dim() == 4, ShapeError,
                "set_memory_format_in_place: channels_last needs a 4-D tensor, got shape ",
                shape_str(t.shape()));
  if (t.is_contiguous(format)) return;
  const Tensor moved = Tensor::empty(t.shape(), t.dtype(), t.device(), format);
  moved.copy_(t);
  adopt_in_place(t, moved);
  if (t.impl().grad) set_memory_format_in_place(Tensor(t.impl().grad), format);
}

double Tensor::item() const {
  LIFTOFF_CHECK(numel() == 1, ShapeError, "Tensor::item: needs exactly one element, got shape ",
                shape_str(shape()));
  return to(Device::cpu(), DType::f64).data<double>()[0];
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  Tensor host = to(Device::cpu(), DTypeOf<T>::value).contiguous();
  const T* p = host.data<T>();
  return std::vector<T>(p, p + host.numel());
}
template std::vector<float> Tensor::to_vector() const;
template std::vector<double> Tensor::to_vector() const;
template std::vector<int32_t> Tensor::to_vector() const;
template std::vector<int64_t> Tensor::to_vector() const;
template std::vector<uint8_t> Tensor::to_vector() const;
template std::vector<bool> Tensor::to_vector() const;

// ---- views -----------------------------------------------------------------------------------------------

namespace {
Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->offset = offset;
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

int64_t wrap_dim(int64_t d, int64_t n, const char* op, const Shape& shape) {
  const int64_t w = d < 0 ? d + n : d;
  LIFTOFF_CHECK(w >= 0 && w < n, ShapeError, op, ": dimension ", d, " out of range for shape ",
                shape_str(shape));
  return w;
}
}  // namespace

Tensor Tensor::view(const Shape& requested) const {
  LIFTOFF_CHECK(is_contiguous(), ValueError, "Tensor::view: tensor of shape ", shape_str(shape()),
                " is not contiguous; call contiguous() first");
  Shape target = requested;
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == -1) {
      LIFTOFF_CHECK(infer < 0, ShapeError, "Tensor::view: more than one -1 in ", shape_str(requested));
      infer = static_cast<int>(i);
    } else {
      LIFTOFF_CHECK(target[i] >= 0, ShapeError, "Tensor::view: negative size in ", shape_str(requested));
      known *= target[i];
    }
  }
  if (infer >= 0) {
    LIFTOFF_CHECK(known > 0 && numel() % known == 0, ShapeError, "Tensor::view: cannot view shape ",
                  shape_str(shape()), " as ", shape_str(requested));
    target[static_cast<size_t>(infer)] = numel() / known;
  }
  LIFTOFF_CHECK(shape_numel(target) == numel(), ShapeError, "Tensor::view: cannot view shape ",
                shape_str(shape()), " (", numel(), " elements) as ", shape_str(requested));
  Tensor out = make_view(*this, target, contiguous_strides(target), offset());
  if (should_record({*this})) {
    record(out, "view", {*this}, [original = shape()](const Tensor& gy, const NeedsGrad&) {
      return std::vector<Tensor>{gy.contiguous().view(original)};
    });
  }
  return out;
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end) const {
  const int64_t w = wrap_dim(d, dim(), "Tensor::slice", shape());
  const int64_t n = shape()[static_cast<size_t>(w)];
  LIFTOFF_CHECK(0 <= start && start <= end && end <= n, ShapeError, "Tensor::slice: range [", start, ", ",
                end, ") out of bounds for dimension ", d, " of shape ", shape_str(shape()));
  Shape s = shape();
  s[static_cast<size_t>(w)] = end - start;
  Tensor out = make_view(*this, s, strides(), offset() + start * strides()[static_cast<size_t>(w)]);
  if (should_record({*this})) {
    record(out, "slice", {*this}, [original = shape(), w, start, end](const Tensor& gy, const NeedsGrad&) {
      const Tensor g = Tensor::zeros(original, gy.dtype(), gy.device());
      g.slice(w, start, end).copy_(gy);
      return std::vector<Tensor>{g};
    });
  }
  return out;
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  const int64_t w = wrap_dim(d, dim(), "Tensor::select", shape());
  const int64_t n = shape()[static_cast<size_t>(w)];
  LIFTOFF_CHECK(0 <= index && index < n, ShapeError, "Tensor::select: index ", index,
                " out of bounds for dimension ", d, " of shape ", shape_str(shape()));
  Shape s = shape();
  Shape st = strides();
  const int64_t off = offset() + index * st[static_cast<size_t>(w)];
  s.erase(s.begin() + w);
  st.erase(st.begin() + w);
  Tensor out = make_view(*this, s, st, off);
  if (should_record({*this})) {
    record(out, "select", {*this}, [original = shape(), w, index](const Tensor& gy, const NeedsGrad&) {
      const Tensor g = Tensor::zeros(original, gy.dtype(), gy.device());
      g.select(w, index).copy_(gy);
      return std::vector<Tensor>{g};
    });
  }
  return out;
}

Tensor Tensor::permute(const std::vector<int64_t>& order) const {
  LIFTOFF_CHECK(static_cast<int64_t>(order.size()) == dim(), ShapeError, "Tensor::permute: order of length ",
                order.size(), " for shape ", shape_str(shape()));
  Shape s(order.size()), st(order.size());
  std::vector<bool> seen(order.size(), false);
  for (size_t i = 0; i < order.size(); ++i) {
    const int64_t w = wrap_dim(order[i], dim(), "Tensor::permute", shape());
    LIFTOFF_CHECK(!seen[static_cast<size_t>(w)], ShapeError, "Tensor::permute: repeated dimension ",
                  order[i]);
    seen[static_cast<size_t>(w)] = true;
    s[i] = shape()[static_cast<size_t>(w)];
    st[i] = strides()[static_cast<size_t>(w)];
  }
  Tensor out = make_view(*this, s, st, offset());
  if (should_record({*this})) {
    std::vector<int64_t> inverse(order.size());
    for (size_t i = 0; i < order.size(); ++i) {
      const int64_t d = order[i] < 0 ? order[i] + dim() : order[i];
      inverse[static_cast<size_t>(d)] = static_cast<int64_t>(i);
    }
    record(out, "permute", {*this}, [inverse](const Tensor& gy, const NeedsGrad&) {
      return std::vector<Tensor>{gy.permute(inverse)};
    });
  }
  return out;
}

// ---- autograd fields -------------------------------------------------------------------------------------

bool Tensor::requires_grad() const {
  return impl().requires_grad;
}

const Tensor& Tensor::set_requires_grad(bool requires_grad) const {
  LIFTOFF_CHECK(!requires_grad || is_floating(dtype()), DTypeError,
                "set_requires_grad: only floating-point tensors can require gradients, got ",
                dtype_name(dtype()));
  LIFTOFF_CHECK(is_leaf(), ValueError, "set_requires_grad: only leaf tensors can change requires_grad");
  impl().requires_grad = requires_grad;
  return *this;
}

bool Tensor::is_leaf() const {
  return impl().grad_fn == nullptr;
}
Tensor Tensor::grad() const {
  return Tensor(impl().grad);
}
void Tensor::set_grad(const Tensor& grad) const {
  impl().grad = grad.impl_ptr();
}
const std::shared_ptr<Node>& Tensor::grad_fn() const {
  return impl().grad_fn;
}
void Tensor::set_grad_fn(std::shared_ptr<Node> node, int output) const {
  impl().grad_fn = std::move(node);
  impl().grad_fn_output = output;
  impl().requires_grad = impl().grad_fn != nullptr;
}
void Tensor::add_grad_ready_hook(GradReadyHook hook) const {
  LIFTOFF_CHECK(is_leaf() && requires_grad(), ValueError,
                "add_grad_ready_hook: only leaves that require grad have gradient-ready hooks");
  impl().grad_ready_hooks.push_back(std::move(hook));
}

void Tensor::backward(const Tensor& grad_output) const {
  run_backward(*this, grad_output);
}

Tensor Tensor::detach() const {
  return make_view(*this, shape(), strides(), offset());
}

// ---- printing --------------------------------------------------------------------------------------------

std::string Tensor::str(int64_t max_values) const {
  if (!defined()) return "Tensor(undefined)";
  std::ostringstream out;
  out << "Tensor(shape=" << shape_str(shape()) << ", dtype=" << dtype_name(dtype())
      << ", device=" << device().str();
  if (requires_grad()) out << ", requires_grad";
  out << ", values=[";
  const Tensor flat = to(Device::cpu(), DType::f64).contiguous();
  const double* v = flat.data<double>();
  const int64_t n = std::min(numel(), max_values);
  out << std::setprecision(6);
  for (int64_t i = 0; i < n; ++i) out << (i ? ", " : "") << v[i];
  if (numel() > n) out << ", ...";
  out << "])";
  return out.str();
}

}  // namespace liftoff
