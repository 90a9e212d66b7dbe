#include "autograd/threads.h"

#include <cblas.h>
#include <omp.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

namespace sf {

namespace {
int g_threads = 1;
}

void set_num_threads(int n) {
  if (n < 1) throw std::invalid_argument("set_num_threads: expected n >= 1, got " + std::to_string(n));
  g_threads = n;
  openblas_set_num_threads(n);
  omp_set_num_threads(n);
}

int num_threads() { return g_threads; }

void init_threads() {
#ifdef SCRATCHFORMER_SINGLE_THREAD
  set_num_threads(1);
#else
  int n = static_cast<int>(std::thread::hardware_concurrency());
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
