// Thread control for OpenBLAS and the OpenMP loops in the kernels.
//
// The debug and asan presets build with SCRATCHFORMER_SINGLE_THREAD: everything runs on one
// thread, so stepping in a debugger is deterministic and results are bit-reproducible.
// Otherwise the count comes from SCRATCHFORMER_NUM_THREADS, or else all cores.
#pragma once

namespace sf {

void set_num_threads(int n);  // OpenMP threads, n >= 1 (OpenBLAS runs one call per thread: gemm.h)
int num_threads();
// The machine's cores (std::thread::hardware_concurrency(), at least 1): the default thread
// count, and how many blocks gemm cuts a large product into whatever the thread count (gemm.h).
int machine_cores();
// Applies the build's and environment's choice; call once at program start. Also keeps freed
// tensor memory for reuse (glibc mallopt, see threads.cpp).
void init_threads();

}  // namespace sf
