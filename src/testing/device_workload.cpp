// DeviceWorkload: every buffer of a HostWorkload copied to the GPU (possibly several times), and the
// same GemmArguments with each host pointer replaced by its device twin.
#include "src/testing/device_workload.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace bsgemm::testing {

namespace {

Status cuda_error(cudaError_t e, const std::string& what) {
  return Status::error(StatusCode::cuda_error, -1, "", what + ": " + cudaGetErrorString(e));
}

// Host buffer ranges and their device twins, to translate pointers that point anywhere inside.
struct PointerMap {
  std::vector<std::pair<const std::uint8_t*, std::size_t>> host;
  std::vector<std::uint8_t*> device;

  template <class T>
  T* translate(T* p) const {
    if (p == nullptr) return nullptr;
    const auto* h = reinterpret_cast<const std::uint8_t*>(p);
    for (std::size_t i = 0; i < host.size(); ++i)
      if (h >= host[i].first && h < host[i].first + host[i].second)
        return reinterpret_cast<T*>(device[i] + (h - host[i].first));
    return nullptr;
  }
};

template <class T>
Status upload(const std::vector<T>& values, std::vector<void*>* allocations, const T** out) {
  void* d = nullptr;
  const std::size_t bytes = std::max<std::size_t>(values.size() * sizeof(T), 1);
  if (cudaError_t e = cudaMalloc(&d, bytes); e != cudaSuccess) return cuda_error(e, "allocating descriptions");
  allocations->push_back(d);
  if (!values.empty())
    if (cudaError_t e = cudaMemcpy(d, values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice); e != cudaSuccess)
      return cuda_error(e, "copying descriptions");
  *out = static_cast<const T*>(d);
  return Status::success();
}

}  // namespace

DeviceWorkload::DeviceWorkload(DeviceWorkload&& other) noexcept { *this = std::move(other); }

DeviceWorkload& DeviceWorkload::operator=(DeviceWorkload&& other) noexcept {
  if (this != &other) {
    release();
    copies_ = std::move(other.copies_);
    description_allocations_ = std::move(other.description_allocations_);
    host_tables_ = std::move(other.host_tables_);
    outputs_ = std::move(other.outputs_);
    output_bytes_ = std::move(other.output_bytes_);
    workspace_ = other.workspace_;
    workspace_bytes_ = other.workspace_bytes_;
    other.copies_.clear();
    other.description_allocations_.clear();
    other.workspace_ = nullptr;
    other.workspace_bytes_ = 0;
  }
  return *this;
}

DeviceWorkload::~DeviceWorkload() { release(); }

void DeviceWorkload::release() {
  for (Copy& c : copies_)
    for (void* p : c.allocations) cudaFree(p);
  copies_.clear();
  for (void* p : description_allocations_) cudaFree(p);
  description_allocations_.clear();
  if (workspace_ != nullptr) cudaFree(workspace_);
  workspace_ = nullptr;
  workspace_bytes_ = 0;
}

Status DeviceWorkload::create(const HostWorkload& host, MemoryLocation descriptions, const RunOptions& options, int copies,
                              DeviceWorkload* out) {
  DeviceWorkload w;
  const GemmArguments& h = host.args();
  if (copies < 1) copies = 1;
  w.host_tables_.resize(static_cast<std::size_t>(copies));
  for (int c = 0; c < copies; ++c) {
    Copy copy;
    PointerMap map;
    for (const Buffer& b : host.buffers()) {
      void* d = nullptr;
      if (cudaError_t e = cudaMalloc(&d, std::max<std::size_t>(b.bytes, 1)); e != cudaSuccess) {
        for (void* p : copy.allocations) cudaFree(p);
        return cuda_error(e, "allocating " + b.name + " (" + std::to_string(b.bytes) + " bytes)");
      }
      copy.allocations.push_back(d);
      if (b.bytes > 0)
        if (cudaError_t e = cudaMemcpy(d, b.get(), b.bytes, cudaMemcpyHostToDevice); e != cudaSuccess) {
          for (void* p : copy.allocations) cudaFree(p);
          return cuda_error(e, "copying " + b.name);
        }
      map.host.emplace_back(b.get(), b.bytes);
      map.device.push_back(static_cast<std::uint8_t*>(d));
    }
    w.copies_.push_back(std::move(copy));
    GemmArguments& a = w.copies_.back().args;
    a = h;
    a.descriptions = descriptions;
    HostTables& tables = w.host_tables_[static_cast<std::size_t>(c)];
    if (h.layout == GroupLayout::pointer_array) {
      tables.groups.assign(h.groups, h.groups + h.num_groups);
      for (GroupProblem& g : tables.groups) {
        g.a = map.translate(g.a);
        g.b = map.translate(g.b);
        g.c = map.translate(g.c);
        g.d = map.translate(g.d);
        g.sfa = map.translate(g.sfa);
        g.sfb = map.translate(g.sfb);
      }
      a.groups = tables.groups.data();
      if (descriptions == MemoryLocation::device)
        if (Status s = upload(tables.groups, &w.description_allocations_, &a.groups); !s.ok()) return s;
    } else {
      MoeGroups& m = a.moe;
      m.a = map.translate(h.moe.a);
      m.b = map.translate(h.moe.b);
      m.c = map.translate(h.moe.c);
      m.d = map.translate(h.moe.d);
      m.sfa = map.translate(h.moe.sfa);
      m.sfb = map.translate(h.moe.sfb);
      const std::size_t groups = static_cast<std::size_t>(h.moe.num_groups);
      if (h.moe.alpha != nullptr) tables.alpha.assign(h.moe.alpha, h.moe.alpha + groups);
      if (h.moe.beta != nullptr) tables.beta.assign(h.moe.beta, h.moe.beta + groups);
      if (h.moe.masked_m != nullptr) tables.masked_m.assign(h.moe.masked_m, h.moe.masked_m + groups);
      if (h.moe.offsets != nullptr) {
        const std::size_t entries = groups + (h.moe.offsets_start_with_zero ? 1 : 0);
        const std::size_t bytes = entries * (h.moe.offsets_type == IndexType::i32 ? 4 : 8);
        const auto* begin = static_cast<const std::uint8_t*>(h.moe.offsets);
        tables.offsets.assign(begin, begin + bytes);
      }
      m.alpha = h.moe.alpha ? tables.alpha.data() : nullptr;
      m.beta = h.moe.beta ? tables.beta.data() : nullptr;
      m.masked_m = h.moe.masked_m ? tables.masked_m.data() : nullptr;
      m.offsets = h.moe.offsets ? tables.offsets.data() : nullptr;
      if (descriptions == MemoryLocation::device) {
        auto& allocs = w.description_allocations_;
        Status s;
        if (m.alpha && !(s = upload(tables.alpha, &allocs, &m.alpha)).ok()) return s;
        if (m.beta && !(s = upload(tables.beta, &allocs, &m.beta)).ok()) return s;
        if (m.masked_m && !(s = upload(tables.masked_m, &allocs, &m.masked_m)).ok()) return s;
        if (m.offsets) {
          const std::uint8_t* d = nullptr;
          if (!(s = upload(tables.offsets, &allocs, &d)).ok()) return s;
          m.offsets = d;
        }
      }
    }
  }
  for (std::size_t i = 0; i < host.buffers().size(); ++i)
    if (is_output_buffer(host.buffers()[i]) && host.buffers()[i].bytes > 0) {
      w.outputs_.push_back(i);
      w.output_bytes_.push_back(host.buffers()[i].bytes);
    }
  w.workspace_bytes_ = workspace_size(w.copies_.front().args, options);
  if (w.workspace_bytes_ > 0)
    if (cudaError_t e = cudaMalloc(&w.workspace_, w.workspace_bytes_); e != cudaSuccess)
      return cuda_error(e, "allocating the workspace");
  *out = std::move(w);
  return Status::success();
}

Status DeviceWorkload::poison_output(cudaStream_t stream) {
  for (const Copy& c : copies_)
    for (std::size_t i = 0; i < outputs_.size(); ++i)
      if (cudaError_t e = cudaMemsetAsync(c.allocations[outputs_[i]], 0xFF, output_bytes_[i], stream); e != cudaSuccess)
        return cuda_error(e, "poisoning D");
  return Status::success();
}

Status DeviceWorkload::download_output(HostWorkload& host, int copy) const {
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) return cuda_error(e, "waiting for the GPU");
  const std::vector<void*>& allocations = copies_[static_cast<std::size_t>(copy)].allocations;
  std::vector<Buffer>& buffers = host.buffers();
  for (std::size_t i = 0; i < outputs_.size(); ++i) {
    Buffer& b = buffers[outputs_[i]];
    if (b.bytes != output_bytes_[i]) return Status::error(StatusCode::internal_error, -1, "", "host workload does not match");
    if (cudaError_t e = cudaMemcpy(b.get(), allocations[outputs_[i]], b.bytes, cudaMemcpyDeviceToHost); e != cudaSuccess)
      return cuda_error(e, "copying D back");
  }
  return Status::success();
}

Status DeviceWorkload::run(const RunOptions& options, int copy, cudaStream_t stream) const {
  return bsgemm::run(copies_[static_cast<std::size_t>(copy)].args, options, workspace_, workspace_bytes_, stream);
}

Status DeviceWorkload::time_runs(const RunOptions& options, int warmup, int iterations, bool rotate, Timing* out) const {
  const int n = static_cast<int>(copies_.size());
  int next = 0;
  const auto copy_for = [&] {
    const int c = rotate ? next % n : 0;
    ++next;
    return c;
  };
  for (int i = 0; i < warmup; ++i)
    if (Status s = run(options, copy_for()); !s.ok()) return s;
  if (iterations < 1) iterations = 1;
  std::vector<cudaEvent_t> events;
  Status status;
  for (int i = 0; i < 2 * iterations && status.ok(); ++i) {
    cudaEvent_t e;
    if (cudaError_t err = cudaEventCreate(&e); err != cudaSuccess)
      status = cuda_error(err, "creating events");
    else
      events.push_back(e);
  }
  for (int i = 0; i < iterations && status.ok(); ++i) {
    const int c = copy_for();
    if (cudaError_t e = cudaEventRecord(events[2 * i]); e != cudaSuccess) status = cuda_error(e, "recording an event");
    if (status.ok()) status = run(options, c);
    if (status.ok())
      if (cudaError_t e = cudaEventRecord(events[2 * i + 1]); e != cudaSuccess) status = cuda_error(e, "recording an event");
  }
  std::vector<double> us;
  if (status.ok()) {
    if (cudaError_t e = cudaEventSynchronize(events.back()); e != cudaSuccess) status = cuda_error(e, "timing runs");
    for (int i = 0; i < iterations && status.ok(); ++i) {
      float ms = 0;
      if (cudaError_t e = cudaEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]); e != cudaSuccess)
        status = cuda_error(e, "reading events");
      us.push_back(1000.0 * ms);
    }
  }
  for (cudaEvent_t& e : events) cudaEventDestroy(e);
  if (!status.ok()) return status;
  std::sort(us.begin(), us.end());
  out->iterations = iterations;
  out->min_us = us.front();
  out->max_us = us.back();
  out->median_us = us.size() % 2 ? us[us.size() / 2] : 0.5 * (us[us.size() / 2 - 1] + us[us.size() / 2]);
  return Status::success();
}

}  // namespace bsgemm::testing
