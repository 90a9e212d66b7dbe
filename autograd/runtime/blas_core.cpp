#include "autograd/runtime/blas_core.h"

#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>

namespace sf {

namespace {

// Set by the restart to the kernel OpenBLAS had chosen, so reports can say what happened.
constexpr const char* kReplacedCoreVariable = "SCRATCHFORMER_BLAS_REPLACED_CORE";

// OpenBLAS's kernels for CPUs without AVX2 (its names, as openblas_get_corename returns them).
constexpr std::array<const char*, 12> kPreAvx2Cores = {"Prescott", "Core2",     "Penryn",    "Dunnington",
                                                       "Nehalem",  "Atom",      "Sandybridge", "Barcelona",
                                                       "Bobcat",   "Bulldozer", "Piledriver", "Unknown"};

bool has_avx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}
bool has_avx2_fma() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

// A debugger (gdb, an IDE) is attached: /proc/self/status says TracerPid other than 0.
bool being_debugged() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "TracerPid:") {
      long pid = 0;
      status >> pid;
      return pid != 0;
    }
    status.ignore(4096, '\n');
  }
  return false;
}

}  // namespace

std::string blas_core_name() {
  const char* name = openblas_get_corename();
  return name ? std::string(name) : std::string("unknown");
}

std::string better_blas_core(const std::string& chosen) {
  const bool generic = std::any_of(kPreAvx2Cores.begin(), kPreAvx2Cores.end(),
                                   [&](const char* core) { return chosen == core; });
  if (!generic) return "";
  if (has_avx512()) return "SkylakeX";
  if (has_avx2_fma()) return "Haswell";
  return "";
}

void restart_with_native_blas(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;  // the user's choice stands
  const std::string chosen = blas_core_name();
  const std::string better = better_blas_core(chosen);
  if (better.empty() || being_debugged() || std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr) return;
  setenv("OPENBLAS_CORETYPE", better.c_str(), 1);
  setenv(kReplacedCoreVariable, chosen.c_str(), 1);  // for blas_core_report
  execv("/proc/self/exe", argv);
  unsetenv("OPENBLAS_CORETYPE");  // exec failed: go on with the kernels we have
  unsetenv(kReplacedCoreVariable);
}

std::string blas_core_report() {
  const char* replaced = std::getenv(kReplacedCoreVariable);
  const std::string name = "OpenBLAS " + blas_core_name();
  if (replaced == nullptr) return name;
  return name + " (restarted with OPENBLAS_CORETYPE: OpenBLAS chose its generic " + replaced + " for this CPU)";
}

}  // namespace sf
