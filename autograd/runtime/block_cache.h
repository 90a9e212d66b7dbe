// BlockCache: freed big tensor blocks kept for the next tensor of about the same size.
//
// Why: glibc gives every allocation above 32 MiB its own mmap and unmaps it on free (its
// M_MMAP_THRESHOLD cannot go higher on 64-bit). A training step allocates and frees such blocks
// every step: the (B*T, V) logits and their gradient (1536 x 8000 floats = 49 MiB each in
// `scratchformer bench`). Each fresh mapping is handed out by the kernel one zeroed 4 KiB page at
// a time: 12k page faults per block, per step. Storage (tensor.h) asks this cache first, and on
// free gives big blocks back to it instead of to the kernel.
//
// Rules (all in block_cache.cpp, ~60 lines):
//   - only blocks of at least kMinBytes go through the cache; smaller ones are malloc's business;
//   - a request of n bytes takes the smallest cached block with n <= capacity <= n * 5/4 (so a
//     49 MiB request never pins a 490 MiB block), else allocates a new one;
//   - the cache holds at most kMaxCachedBytes; freeing beyond that returns the oldest block;
//   - built with AddressSanitizer it is off (blocks go straight to malloc/free), so ASan still
//     sees every use after free.
// Cached blocks are not tensor memory: memory_stats() does not count them (peak RSS does).
#pragma once

#include <cstddef>

namespace sf::block_cache {

constexpr std::size_t kMinBytes = std::size_t{16} << 20;       // 16 MiB: below this, plain malloc
constexpr std::size_t kMaxCachedBytes = std::size_t{256} << 20;  // at most 256 MiB kept

// A 64-byte aligned block of at least n bytes (n >= kMinBytes); *capacity gets its real size.
void* allocate(std::size_t n, std::size_t* capacity);

// Gives back a block from allocate(): kept for reuse, or freed when the cache is full.
void release(void* block, std::size_t capacity);

// Frees every cached block (tests; nothing else needs it). Returns the bytes freed.
std::size_t clear();

// Bytes held by the cache now, and whether it is on in this build (off under AddressSanitizer).
std::size_t cached_bytes();
bool enabled();

}  // namespace sf::block_cache
