// Thread control for OpenBLAS and the OpenMP loops in the kernels.
//
// The debug and asan presets build with SCRATCHFORMER_SINGLE_THREAD: everything runs on one
// thread, so stepping in a debugger is deterministic and results are bit-reproducible.
// Otherwise the count comes from SCRATCHFORMER_NUM_THREADS, or else all usable cores.
#pragma once

#include <string>

namespace sf {

void set_num_threads(int n);  // OpenMP threads, n >= 1 (OpenBLAS runs one call per thread: gemm.h)
int num_threads();
// Runs the enclosing scope on n threads, then puts the count back. For work too small to share:
// a tiny model's OpenMP loops gain nothing from a second thread, and beside other work (ctest
// -j2) every loop waits for a thread that is not running.
class ThreadCountScope {
 public:
  explicit ThreadCountScope(int n) : saved_(num_threads()) { set_num_threads(n); }
  ~ThreadCountScope() { set_num_threads(saved_); }
  ThreadCountScope(const ThreadCountScope&) = delete;
  ThreadCountScope& operator=(const ThreadCountScope&) = delete;

 private:
  int saved_;
};
// The cores this process can use: the CPUs it may run on (its affinity mask, which taskset and a
// container's cpuset narrow), fewer if its cgroup's CPU quota allows fewer (`docker --cpus 1.5`:
// 2), at least 1. Read once, at the first call. The default thread count, and how many blocks gemm
// cuts a large product into whatever the thread count (gemm.h). std::thread::hardware_concurrency
// counts every CPU of the machine instead: 2 on a 2-core machine under `taskset -c 0` too, and
// OpenMP threads beyond the usable cores wait for each other at every loop.
int usable_cores();
// The same, read again now (usable_cores keeps its first answer, so gemm's blocks never change
// within a run).
int count_usable_cores();
// The whole cores a cgroup CPU quota allows, rounded up: `quota_us` microseconds of CPU time per
// `period_us` (cgroup v1's cpu.cfs_quota_us and cpu.cfs_period_us). 0 means no limit: a negative
// quota (v1 writes -1) or a period that is not positive.
int cores_of_cpu_quota(long long quota_us, long long period_us);
// The same from cgroup v2's cpu.max, "QUOTA PERIOD": "150000 100000" -> 2, "max 100000" -> 0 (no
// limit); 0 too for text that is not two numbers.
int cores_of_cpu_max(const std::string& cpu_max);
// Applies the build's and environment's choice; call once at program start. Also keeps freed
// tensor memory for reuse (glibc mallopt, see threads.cpp).
void init_threads();

}  // namespace sf
