// The tensor memory counters (autograd/runtime/memory_stats.h): allocating a tensor of a known size
// raises the live and peak bytes by exactly its bytes; views add nothing; freeing it returns
// live to where it was and leaves the peak; reset_peak_memory starts the peak from live.
// And the big-block cache under Storage (autograd/runtime/block_cache.h): reuse, fit and budget.
#include <cstdint>
#include <vector>

#include "autograd/runtime/block_cache.h"
#include "autograd/runtime/memory_stats.h"
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

// ---- the big-block cache (autograd/runtime/block_cache.h) -----------------------------------------

TEST_CASE("a freed big tensor block is reused by the next tensor of about its size", "[memory]") {
  block_cache::clear();
  constexpr std::int64_t kBig = (std::int64_t{20} << 20) / 4;  // 20 MiB of floats: above kMinBytes
  void* first = nullptr;
  {
    const Tensor t = empty({kBig}, Dtype::Float32);
    first = t.impl()->storage->data;
    CHECK(block_cache::cached_bytes() == 0);  // in use, not cached
  }
  if (!block_cache::enabled()) {  // AddressSanitizer build: every block goes back to free()
    CHECK(block_cache::cached_bytes() == 0);
    return;
  }
  CHECK(block_cache::cached_bytes() == static_cast<std::size_t>(kBig) * 4);
  {
    // 10% smaller still fits the cached block (waste at most a quarter): the same memory
    const Tensor again = empty({kBig - kBig / 10}, Dtype::Float32);
    CHECK(again.impl()->storage->data == first);
    CHECK(block_cache::cached_bytes() == 0);
    // a second tensor gets a new block
    const Tensor other = empty({kBig}, Dtype::Float32);
    CHECK(other.impl()->storage->data != first);
  }
  {
    // half the size would waste half the block: a fresh one, and the cached ones stay
    const std::size_t cached = block_cache::cached_bytes();
    const Tensor half = empty({kBig / 2}, Dtype::Float32);
    CHECK(half.impl()->storage->data != first);
    CHECK(block_cache::cached_bytes() == cached);
  }
  block_cache::clear();
  CHECK(block_cache::cached_bytes() == 0);
}

TEST_CASE("the big-block cache never holds more than its budget", "[memory]") {
  if (!block_cache::enabled()) return;  // off under AddressSanitizer (see the test above)
  block_cache::clear();
  constexpr std::size_t kBlockBytes = std::size_t{40} << 20;  // 40 MiB; the budget holds 6 of them
  {
    std::vector<Tensor> many;
    for (int i = 0; i < 8; ++i) many.push_back(empty({static_cast<std::int64_t>(kBlockBytes / 4)}, Dtype::Float32));
  }  // all 8 freed: the oldest go back to the system
  CHECK(block_cache::cached_bytes() <= block_cache::kMaxCachedBytes);
  CHECK(block_cache::cached_bytes() == block_cache::kMaxCachedBytes / kBlockBytes * kBlockBytes);
  block_cache::clear();
}
