// How many bytes of tensor storage are alive now, and the most that were alive at once.
//
// Every Storage (autograd/tensor.h: the bytes behind a tensor and all its views) adds its size
// to the live count when it is allocated and takes it off when it is freed; the peak is the
// largest live count seen since the last reset_peak_memory(). Views share their storage, so
// they add nothing. Only tensor storage counts: not the graph's nodes, not std::vector scratch
// inside kernels (e.g. tiled_attention's tiles), not BLAS's own buffers, not the program.
//
// What it is for: a training step's peak minus the live bytes before it is the memory the step
// itself needed (activations saved for backward, gradients, temporaries), which is what plain
// attention's (B,H,T,T) score and weight tensors blow up and tiled attention avoids. The
// process's peak resident memory (ru_maxrss) never goes down, so it cannot measure one step
// after another in the same process; these counters can.
//
//   sf::reset_peak_memory();               // peak = live now
//   run_one_step();
//   const sf::MemoryStats m = sf::memory_stats();
//   // m.peak_bytes - live_before: what the step needed
//
// The counters are atomic: tensors may be allocated and freed on any thread.
#pragma once

#include <cstdint>

namespace sf {

struct MemoryStats {
  std::int64_t live_bytes = 0;  // tensor storage allocated and not yet freed, in bytes (as requested)
  std::int64_t peak_bytes = 0;  // the largest live_bytes since the last reset_peak_memory()
};

// The counters now (defined in autograd/tensor.cpp, beside Storage).
MemoryStats memory_stats();

// Starts a new peak: peak_bytes = live_bytes now.
void reset_peak_memory();

}  // namespace sf
