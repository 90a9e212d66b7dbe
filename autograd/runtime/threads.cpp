#include "autograd/runtime/threads.h"

#include <cblas.h>
#include <malloc.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

namespace sf {

namespace {
int g_threads = 1;

// OpenMP's idle workers: after a parallel loop libgomp's workers spin for a while waiting for
// the next one. On a machine whose cores are busy with other work too, that spin takes the cores
// the step needs (measured on 2 loaded cores: libgomp's spin was 20-40% of all samples; with
// OMP_WAIT_POLICY=passive in the environment it vanished and the step ran ~2x faster). libgomp
// reads the variable once while the program loads, before main(), so it cannot be set from here:
// export OMP_WAIT_POLICY=passive before starting scratchformer on a shared machine.

// ---- big tensors reuse freed memory instead of fresh pages ----------------------------------
// glibc serves each allocation above M_MMAP_THRESHOLD (128 KiB to start with) with its own
// mmap and returns it with munmap on free. A training step allocates and frees hundreds of
// tensors of 1-6 MiB, so every step the kernel hands out (and zeroes) fresh pages again.
// Measured on the bench (1 thread): page faults per step fell from ~29k to ~12k with the
// settings below, peak RSS about the same. Raising the threshold to its
// maximum keeps those blocks in the heap for the next step, and a high M_TRIM_THRESHOLD stops
// glibc from giving the heap's free top back to the kernel after each step. (Tensors above
// 32 MiB, like the (B*T, V) logits, are still mmapped.)
constexpr int kMmapThresholdBytes = 32 << 20;  // glibc's largest allowed value on 64-bit
constexpr int kTrimThresholdBytes = 256 << 20;

void keep_freed_tensor_memory() {
  mallopt(M_MMAP_THRESHOLD, kMmapThresholdBytes);
  mallopt(M_TRIM_THRESHOLD, kTrimThresholdBytes);
}
}  // namespace

void set_num_threads(int n) {
  if (n < 1) throw std::invalid_argument("set_num_threads: expected n >= 1, got " + std::to_string(n));
  g_threads = n;
  // One thread team, OpenMP's: OpenBLAS stays on the calling thread, and sf::gemm (gemm.h) splits
  // a large product over the OpenMP threads. Two teams (OpenBLAS's own threads beside OpenMP's)
  // spin against each other for the same cores; measured, 2 threads then ran slower than 1.
  openblas_set_num_threads(1);
  omp_set_num_threads(n);
  // A parallel loop inside a parallel loop runs on its one thread (translate_batches decodes a
  // batch per thread; the kernels' loops inside it must not start teams of their own).
  omp_set_max_active_levels(1);
}

int num_threads() { return g_threads; }

int machine_cores() {
  static const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return cores;
}

void init_threads() {
  keep_freed_tensor_memory();
#ifdef SCRATCHFORMER_SINGLE_THREAD
  set_num_threads(1);
#else
  int n = machine_cores();
  if (const char* env = std::getenv("SCRATCHFORMER_NUM_THREADS")) {
    try {
      n = std::stoi(env);
    } catch (const std::exception&) {
      throw std::invalid_argument(std::string("SCRATCHFORMER_NUM_THREADS: expected a whole number >= 1, got '") + env + "'");
    }
  }
  set_num_threads(n < 1 ? 1 : n);
#endif
}

}  // namespace sf
