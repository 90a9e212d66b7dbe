#include "train/distributed/distributed.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <stdexcept>


#ifdef SCRATCHFORMER_MPI
#include <mpi.h>
#endif

namespace sf::train {

namespace {

using Clock = std::chrono::steady_clock;

int g_rank = 0;
int g_world = 1;
bool g_mpi_started = false;  // init_distributed called MPI_Init_thread
double g_allreduce_seconds = 0;

// The number of processes an MPI launcher started, or 0 if none did.
int launcher_world_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* v = std::getenv(var)) return std::max(1, std::atoi(v));
  if (std::getenv("PMIX_RANK")) return 1;  // a PMIx launcher that does not export the size
  return 0;
}

#ifdef SCRATCHFORMER_MPI
template <class T> MPI_Datatype mpi_type();
template <> MPI_Datatype mpi_type<float>() { return MPI_FLOAT; }
template <> MPI_Datatype mpi_type<double>() { return MPI_DOUBLE; }
#endif

// Sums `values` over ranks in buckets of at most kMaxBucketElements (MPI counts are int).
template <class T>
void allreduce_in_buckets(std::vector<T>& values) {
#ifdef SCRATCHFORMER_MPI
  if (g_world == 1) return;
  const auto n = static_cast<std::int64_t>(values.size());
  for (std::int64_t start = 0; start < n; start += kMaxBucketElements) {
    const int count = static_cast<int>(std::min(kMaxBucketElements, n - start));
    MPI_Allreduce(MPI_IN_PLACE, values.data() + start, count, mpi_type<T>(), MPI_SUM, MPI_COMM_WORLD);
  }
#else
  (void)values;
#endif
}

// The same sum, computed in a fixed order: rank 0 gathers all N buffers, adds them as
// ((v0 + v1) + v2) + ... element by element, and sends the result back to everyone.
template <class T>
void reduce_in_rank_order(std::vector<T>& values) {
#ifdef SCRATCHFORMER_MPI
  if (g_world == 1) return;
  const auto n = static_cast<std::int64_t>(values.size());
  for (std::int64_t start = 0; start < n; start += kMaxBucketElements) {
    const std::int64_t count = std::min(kMaxBucketElements, n - start);
    std::vector<T> all(is_main() ? static_cast<std::size_t>(count * g_world) : 0);  // (N, count) on rank 0
    MPI_Gather(values.data() + start, static_cast<int>(count), mpi_type<T>(), all.data(), static_cast<int>(count),
               mpi_type<T>(), 0, MPI_COMM_WORLD);
    if (is_main()) {
      T* sum = values.data() + start;  // starts as rank 0's own values
      for (int r = 1; r < g_world; ++r) {
        const T* other = all.data() + static_cast<std::size_t>(r) * static_cast<std::size_t>(count);
        for (std::int64_t k = 0; k < count; ++k) sum[k] += other[k];
      }
    }
    MPI_Bcast(values.data() + start, static_cast<int>(count), mpi_type<T>(), 0, MPI_COMM_WORLD);
  }
#else
  (void)values;
#endif
}

template <class T> constexpr Dtype dtype_of();
template <> constexpr Dtype dtype_of<float>() { return Dtype::Float32; }
template <> constexpr Dtype dtype_of<double>() { return Dtype::Float64; }

template <class T>
void reduce_gradients_of(const NamedParameters& params, Reduction how) {
  bool any = false;
  for (const auto& [_, p] : params) any = any || p.dtype() == dtype_of<T>();
  if (!any) return;
  std::vector<T> flat = flatten_gradients<T>(params);
  const auto t0 = Clock::now();
  if (how == Reduction::RankOrder) reduce_in_rank_order(flat);
  else allreduce_in_buckets(flat);
  g_allreduce_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
  unflatten_gradients<T>(params, flat);
}

// FNV-1a over bytes: a cheap fingerprint of the parameters.
std::uint64_t fnv1a(const void* data, std::size_t n, std::uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace

// ---- the world ------------------------------------------------------------------------------

void init_distributed(int& argc, char**& argv) {
  const int launched = launcher_world_size();
  if (launched == 0 || g_mpi_started) return;
#ifdef SCRATCHFORMER_MPI
  int provided = 0;
  // FUNNELED: only the main thread calls MPI (the OpenMP kernel threads never do)
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  g_mpi_started = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_world);
  // the default, stated: a failed communication (a rank died) aborts the whole job
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
#else
  (void)argc, (void)argv;
  if (launched > 1)
    throw std::runtime_error("started by mpirun as one of " + std::to_string(launched) +
                             " processes, but this scratchformer was built without MPI (SCRATCHFORMER_MPI=OFF); "
                             "install OpenMPI (tools/install-deps.sh) and rebuild, or run without mpirun");
#endif
}

void finalize_distributed() {
#ifdef SCRATCHFORMER_MPI
  if (!g_mpi_started) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
  g_mpi_started = false;
#endif
}

int rank() { return g_rank; }
int world_size() { return g_world; }
bool is_main() { return g_rank == 0; }
bool mpi_built() {
#ifdef SCRATCHFORMER_MPI
  return true;
#else
  return false;
#endif
}

void abort_job(int exit_code, const std::string& message) {
  std::cerr << message << std::endl;
#ifdef SCRATCHFORMER_MPI
  if (g_mpi_started && g_world > 1) MPI_Abort(MPI_COMM_WORLD, exit_code);
#endif
  std::exit(exit_code);
}

// ---- collectives ------------------------------------------------------------------------------

void barrier() {
#ifdef SCRATCHFORMER_MPI
  if (g_world > 1) MPI_Barrier(MPI_COMM_WORLD);
#endif
}

void allreduce_sum(std::vector<float>& values) { allreduce_in_buckets(values); }
void allreduce_sum(std::vector<double>& values) { allreduce_in_buckets(values); }

int allreduce_max(int value) {
#ifdef SCRATCHFORMER_MPI
  if (g_world > 1) MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
#endif
  return value;
}

void broadcast(std::vector<double>& values, int root) {
#ifdef SCRATCHFORMER_MPI
  if (g_world > 1) MPI_Bcast(values.data(), static_cast<int>(values.size()), MPI_DOUBLE, root, MPI_COMM_WORLD);
#else
  (void)values, (void)root;
#endif
}

// ---- gradients ------------------------------------------------------------------------------

template <class T>
std::vector<T> flatten_gradients(const NamedParameters& params) {
  std::int64_t total = 0, count = 0;
  for (const auto& [_, p] : params)
    if (p.dtype() == dtype_of<T>()) total += p.numel(), ++count;
  std::vector<T> flat(static_cast<std::size_t>(total + count), T(0));  // values, then presence flags
  std::int64_t offset = 0, flag = total;
  for (const auto& [_, p] : params) {
    if (p.dtype() != dtype_of<T>()) continue;
    const Tensor g = p.grad();
    if (g.defined()) {
      const Tensor gc = g.contiguous();
      std::memcpy(flat.data() + offset, gc.data<T>(), static_cast<std::size_t>(gc.numel()) * sizeof(T));
      flat[static_cast<std::size_t>(flag)] = T(1);
    }
    offset += p.numel();
    ++flag;
  }
  return flat;
}

template <class T>
void unflatten_gradients(const NamedParameters& params, const std::vector<T>& flat) {
  std::int64_t total = 0;
  for (const auto& [_, p] : params)
    if (p.dtype() == dtype_of<T>()) total += p.numel();
  std::int64_t offset = 0, flag = total;
  for (const auto& [_, p] : params) {
    if (p.dtype() != dtype_of<T>()) continue;
    if (flat.at(static_cast<std::size_t>(flag)) != T(0)) {
      Tensor g = empty(p.shape(), p.dtype());  // a fresh tensor: the old .grad may share memory
      std::memcpy(g.data<T>(), flat.data() + offset, static_cast<std::size_t>(p.numel()) * sizeof(T));
      p.impl()->grad = g.impl_ptr();
    } else {
      p.impl()->grad.reset();
    }
    offset += p.numel();
    ++flag;
  }
}

template std::vector<float> flatten_gradients<float>(const NamedParameters&);
template std::vector<double> flatten_gradients<double>(const NamedParameters&);
template void unflatten_gradients<float>(const NamedParameters&, const std::vector<float>&);
template void unflatten_gradients<double>(const NamedParameters&, const std::vector<double>&);

void allreduce_gradients(const NamedParameters& params, Reduction how) {
  if (g_world == 1) return;
  reduce_gradients_of<float>(params, how);
  reduce_gradients_of<double>(params, how);
}

double allreduce_seconds() { return g_allreduce_seconds; }
void reset_allreduce_seconds() { g_allreduce_seconds = 0; }

// ---- consistency ------------------------------------------------------------------------------

void check_parameters_in_sync(const NamedParameters& params) {
  if (g_world == 1) return;
  std::uint64_t h = 14695981039346656037ull;
  for (const auto& [_, p] : params) {
    const Tensor c = p.contiguous();
    h = fnv1a(c.raw_data(), static_cast<std::size_t>(c.numel()) * dtype_size(c.dtype()), h);
  }
#ifdef SCRATCHFORMER_MPI
  std::uint64_t lo = h, hi = h;
  MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  if (lo != hi)
    throw std::runtime_error("data-parallel training: the parameters differ between ranks (rank " +
                             std::to_string(g_rank) +
                             "); the gradient reduction did not give every rank the same sum");
#endif
}

}  // namespace sf::train
