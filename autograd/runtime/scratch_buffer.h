// ScratchBuffer: a thread's working buffer for a kernel, reused from call to call.
//
// Why not std::vector? resize() zero-fills every element it adds, even within the capacity it
// already has. A kernel whose sizes alternate (gemm_bf16 rounds the 1536 x 8000 logits' gradient,
// then a 256 x 256 weight, then the gradient again) pays a memset of the whole buffer at each
// grow, though it overwrites every value anyway. ScratchBuffer only grows, and growing leaves the
// values unset.
//
//   thread_local ScratchBuffer<float> buffer;
//   float* p = buffer.get(n);   // n values, uninitialised, valid until the next get on this thread
#pragma once

#include <cstddef>
#include <memory>

namespace sf {

template <class T>
class ScratchBuffer {
 public:
  // At least n values (contents unspecified: the caller writes them before reading).
  T* get(std::size_t n) {
    if (n > capacity_) {
      data_ = std::make_unique_for_overwrite<T[]>(n);
      capacity_ = n;
    }
    return data_.get();
  }

 private:
  std::unique_ptr<T[]> data_;
  std::size_t capacity_ = 0;
};

}  // namespace sf
