// The tensor memory counters (autograd/memory_stats.h): allocating a tensor of a known size
// raises the live and peak bytes by exactly its bytes; views add nothing; freeing it returns
// live to where it was and leaves the peak; reset_peak_memory starts the peak from live.
#include <cstdint>

#include "autograd/memory_stats.h"
#include "test_util.h"

using namespace sf;

TEST_CASE("memory_stats counts a tensor's bytes while it lives and keeps the peak", "[memory]") {
  constexpr std::int64_t kRows = 100, kCols = 37;  // 3700 floats: not a multiple of the 64-byte alignment
  constexpr std::int64_t kBytes = kRows * kCols * 4;
  const MemoryStats before = memory_stats();
  reset_peak_memory();
  CHECK(memory_stats().peak_bytes == before.live_bytes);
  {
    const Tensor t = zeros({kRows, kCols}, Dtype::Float32);
    const Tensor view = transpose(t, 0, 1);  // a view: the same storage, no new bytes
    const MemoryStats during = memory_stats();
    CHECK(during.live_bytes == before.live_bytes + kBytes);
    CHECK(during.peak_bytes == before.live_bytes + kBytes);
    CHECK(view.numel() == kRows * kCols);
  }
  const MemoryStats after = memory_stats();
  CHECK(after.live_bytes == before.live_bytes);              // freed
  CHECK(after.peak_bytes == before.live_bytes + kBytes);     // the peak remembers it
  {
    const Tensor d = ones({kRows}, Dtype::Float64);  // a smaller tensor does not move the peak
    CHECK(memory_stats().live_bytes == before.live_bytes + kRows * 8);
    CHECK(memory_stats().peak_bytes == before.live_bytes + kBytes);
  }
  reset_peak_memory();
  CHECK(memory_stats().peak_bytes == before.live_bytes);
}
