#include "autograd/runtime/threads.h"

#include <cblas.h>
#include <malloc.h>
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

namespace sf {

namespace {
int g_threads = 1;

// OpenMP's idle workers: after a parallel loop libgomp's workers spin for a while waiting for
// the next one. On a machine whose cores are busy with other work too, that spin takes the cores
// the step needs; OMP_WAIT_POLICY=passive makes idle workers sleep instead. libgomp
// reads the variable once while the program loads, before main(), so it cannot be set from here:
// export OMP_WAIT_POLICY=passive before starting scratchformer on a shared machine.

// ---- big tensors reuse freed memory instead of fresh pages ----------------------------------
// glibc serves each allocation above M_MMAP_THRESHOLD (128 KiB to start with) with its own
// mmap and returns it with munmap on free. A training step allocates and frees hundreds of
// tensors of 1-6 MiB, so every step the kernel hands out (and zeroes) fresh pages again.
// Raising the threshold to its
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
  // spin against each other for the same cores.
  openblas_set_num_threads(1);
  omp_set_num_threads(n);
  // A parallel loop inside a parallel loop runs on its one thread (translate_batches decodes a
  // batch per thread; the kernels' loops inside it must not start teams of their own).
  omp_set_max_active_levels(1);
}

int num_threads() { return g_threads; }

// ---- how many cores this process can use ----------------------------------------------------

int cores_of_cpu_quota(long long quota_us, long long period_us) {
  if (quota_us < 0 || period_us <= 0) return 0;  // no limit
  return static_cast<int>(std::max(1LL, (quota_us + period_us - 1) / period_us));
}

int cores_of_cpu_max(const std::string& cpu_max) {
  std::istringstream in(cpu_max);
  std::string quota;
  long long period = 0;
  if (!(in >> quota >> period) || quota == "max") return 0;
  try {
    std::size_t used = 0;
    const long long quota_us = std::stoll(quota, &used);
    return used == quota.size() ? cores_of_cpu_quota(quota_us, period) : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

namespace {

std::string read_small_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return in ? text.str() : std::string();
}

// This process's cgroup path for a controller, from the text of /proc/self/cgroup: the line
// "0::PATH" for cgroup v2 (controller ""), the line "N:LIST:PATH" whose comma-separated LIST holds
// the controller for v1. "" when there is none.
std::string cgroup_path(const std::string& proc_self_cgroup, const std::string& controller) {
  std::istringstream lines(proc_self_cgroup);
  for (std::string line; std::getline(lines, line);) {
    const auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string list = line.substr(first + 1, second - first - 1);
    bool match = list == controller;  // v2: both empty
    std::istringstream items(list);
    for (std::string item; !match && std::getline(items, item, ',');) match = item == controller;
    if (match) return line.substr(second + 1);
  }
  return "";
}

// The smallest quota in cores, 0 if none, of the cgroup at `path` under `mount` and of each of its
// ancestors (a parent's quota limits its children); `quota_at(dir)` reads one directory's.
template <class QuotaAt>
int smallest_quota_up_the_tree(const std::string& mount, std::string path, QuotaAt quota_at) {
  int smallest = 0;
  for (;;) {  // path "/a/b": mount/a/b, then mount/a, then mount itself
    const int cores = quota_at(mount + path);
    if (cores > 0) smallest = smallest == 0 ? cores : std::min(smallest, cores);
    const auto slash = path.find_last_of('/');
    if (slash == std::string::npos || path.size() <= 1) break;
    path.resize(slash);
  }
  return smallest;
}

// The CPU quota of this process's cgroup in whole cores, 0 when there is none (or no cgroup
// file to read). A container sees its own cgroup as the root of the tree, so the root counts too.
int cgroup_quota_cores() {
  const std::string cgroups = read_small_file("/proc/self/cgroup");
  const int v2 = smallest_quota_up_the_tree("/sys/fs/cgroup", cgroup_path(cgroups, ""), [](const std::string& dir) {
    return cores_of_cpu_max(read_small_file(dir + "/cpu.max"));
  });
  // v1 keeps quota and period in two files; joined, they read as v2's "QUOTA PERIOD" (-1: no quota)
  const int v1 =
      smallest_quota_up_the_tree("/sys/fs/cgroup/cpu", cgroup_path(cgroups, "cpu"), [](const std::string& dir) {
        return cores_of_cpu_max(read_small_file(dir + "/cpu.cfs_quota_us") + " " +
                                read_small_file(dir + "/cpu.cfs_period_us"));
      });
  if (v2 > 0 && v1 > 0) return std::min(v2, v1);
  return std::max(v2, v1);
}

}  // namespace

int count_usable_cores() {
  int cores = static_cast<int>(std::thread::hardware_concurrency());
  cpu_set_t allowed;  // the CPUs this process may run on (fails on machines above 1024 CPUs: then every CPU)
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) cores = CPU_COUNT(&allowed);
  if (const int quota = cgroup_quota_cores(); quota > 0) cores = std::min(cores, quota);
  return std::max(1, cores);
}

int usable_cores() {
  static const int cores = count_usable_cores();
  return cores;
}

void init_threads() {
  keep_freed_tensor_memory();
#ifdef SCRATCHFORMER_SINGLE_THREAD
  set_num_threads(1);
#else
  int n = usable_cores();
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
