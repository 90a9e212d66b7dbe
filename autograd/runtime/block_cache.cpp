// BlockCache: see block_cache.h.
#include "autograd/runtime/block_cache.h"

#include "autograd/fast.h"

#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

namespace sf::block_cache {

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kEnabled = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kEnabled = false;
#else
constexpr bool kEnabled = true;
#endif
#else
constexpr bool kEnabled = true;
#endif

struct Block {
  void* data;
  std::size_t capacity;
};

std::mutex g_mutex;             // tensors are freed on any thread
std::vector<Block> g_blocks;    // oldest first
std::size_t g_cached_bytes = 0;

void* new_block(std::size_t n) {
  const std::size_t rounded = (n + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  return p;
}

}  // namespace

void* allocate(std::size_t n, std::size_t* capacity) {
  if (kEnabled) {
    std::lock_guard<std::mutex> lock(g_mutex);
    // the smallest block that fits without wasting more than a quarter of it
    std::size_t best = g_blocks.size();
    for (std::size_t i = 0; i < g_blocks.size(); ++i) {
      const std::size_t c = g_blocks[i].capacity;
      if (c >= n && c <= n + n / 4 && (best == g_blocks.size() || c < g_blocks[best].capacity)) best = i;
    }
    if (best < g_blocks.size()) {
      const Block b = g_blocks[best];
      g_blocks.erase(g_blocks.begin() + static_cast<std::ptrdiff_t>(best));
      g_cached_bytes -= b.capacity;
      *capacity = b.capacity;
      return b.data;
    }
  }
  *capacity = (n + 63) / 64 * 64;
  return new_block(n);
}

void release(void* block, std::size_t capacity) {
  if (!kEnabled || capacity > kMaxCachedBytes) {
    std::free(block);
    return;
  }
  std::vector<void*> to_free;  // freed after the lock is dropped
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_blocks.push_back({block, capacity});
    g_cached_bytes += capacity;
    while (g_cached_bytes > kMaxCachedBytes) {  // over budget: drop the oldest blocks
      to_free.push_back(g_blocks.front().data);
      g_cached_bytes -= g_blocks.front().capacity;
      g_blocks.erase(g_blocks.begin());
    }
  }
  for (void* p : to_free) std::free(p);
}

std::size_t clear() {
  std::lock_guard<std::mutex> lock(g_mutex);
  const std::size_t freed = g_cached_bytes;
  for (const Block& b : g_blocks) std::free(b.data);
  g_blocks.clear();
  g_cached_bytes = 0;
  return freed;
}

std::size_t cached_bytes() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_cached_bytes;
}

bool enabled() { return kEnabled; }

}  // namespace sf::block_cache

// The seam's storage calls (autograd/fast.h).
namespace sf::fast {

void* allocate_block(std::size_t bytes, std::size_t* capacity) {
  if (bytes < block_cache::kMinBytes) return nullptr;
  return block_cache::allocate(bytes, capacity);
}

void release_block(void* block, std::size_t capacity) { block_cache::release(block, capacity); }

}  // namespace sf::fast
