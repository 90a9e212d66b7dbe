// blas_core: making sure OpenBLAS runs the matrix kernels this CPU can run.
//
// Debian's OpenBLAS is built with DYNAMIC_ARCH: it carries kernels for many CPUs and picks one
// while it is loaded, before main(), from CPUID's family and model. A CPU newer than the library
// (a model it does not know) gets its generic fallback, "Prescott": SSE3, 4 floats per
// instruction, several times slower than the AVX-512 or AVX2 kernels the CPU could run, and
// every matrix product of training and decoding goes through it. OpenBLAS takes the kernel's
// name from the environment variable OPENBLAS_CORETYPE, read at that same moment, so the only
// fix from inside the program is to set the variable and start the program again (exec the
// same executable with the same arguments).
//
// The rule: when OpenBLAS chose a pre-AVX2 kernel, OPENBLAS_CORETYPE is not set, and the CPU has
// AVX-512 (F, BW, DQ, VL) or AVX2 with FMA, restart with "SkylakeX" or "Haswell". A kernel the
// user chose (OPENBLAS_CORETYPE set) is kept; so is any program under a debugger (the restart
// would start the session over), and any MPI rank (mpirun started it).
#pragma once

#include <string>

namespace sf {

// The kernel OpenBLAS chose while loading, e.g. "SkylakeX", "Haswell", "Zen", "Prescott".
std::string blas_core_name();

// The kernel to ask for on this CPU, or "" when OpenBLAS's own choice is not a generic
// fallback (or the CPU has nothing better than it): the rule above, without the restart.
std::string better_blas_core(const std::string& chosen);

// At the top of main(): if better_blas_core(blas_core_name()) names a kernel, OPENBLAS_CORETYPE
// is unset and no debugger is attached, set OPENBLAS_CORETYPE to it and exec /proc/self/exe with
// argv, silently (blas_core_report says it afterwards). Returns when no restart is needed, or if
// exec fails.
void restart_with_native_blas(char** argv);

// For the benchmarks' machine line: "OpenBLAS SkylakeX", and after a restart what it replaced:
// "OpenBLAS SkylakeX (restarted with OPENBLAS_CORETYPE: OpenBLAS chose its generic Prescott ...)".
std::string blas_core_report();

}  // namespace sf
