// The MPI mode (tessera/mpi_ring.h).
#include "tessera/mpi_ring.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace tessera::mpi {

bool launched() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    if (const char* s = std::getenv(v)) return std::atoi(s) > 1;
  }
  return false;
}

void init() {
  if (!launched()) return;
  int done = 0;
  MPI_Initialized(&done);
  if (done) return;
  MPI_Init(nullptr, nullptr);
  // Errors abort the job with a message instead of returning codes nobody checks.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

void finalize() {
  int init_done = 0, fin_done = 0;
  MPI_Initialized(&init_done);
  MPI_Finalized(&fin_done);
  if (init_done && !fin_done) MPI_Finalize();
}

int rank() {
  int done = 0;
  MPI_Initialized(&done);
  if (!done) return 0;
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int size() {
  int done = 0;
  MPI_Initialized(&done);
  if (!done) return 1;
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

void abort(int code, const std::string& why) {
  std::fprintf(stderr, "tessera (rank %d of %d): %s\n", rank(), size(), why.c_str());
  std::fflush(stderr);
  int done = 0;
  MPI_Initialized(&done);
  if (done) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

std::vector<std::vector<uint8_t>> allgather(const std::vector<uint8_t>& mine) {
  int done = 0;
  MPI_Initialized(&done);
  if (!done) return {mine};
  const int n = size();
  std::vector<uint8_t> all(mine.size() * static_cast<size_t>(n));
  MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, all.data(),
                static_cast<int>(mine.size()), MPI_BYTE, MPI_COMM_WORLD);
  std::vector<std::vector<uint8_t>> out;
  for (int r = 0; r < n; ++r)
    out.emplace_back(all.begin() + static_cast<long>(mine.size() * r),
                     all.begin() + static_cast<long>(mine.size() * (r + 1)));
  return out;
}

void allgather(const void* mine, void* all, size_t bytes) {
  MPI_Allgather(mine, static_cast<int>(bytes), MPI_BYTE, all, static_cast<int>(bytes), MPI_BYTE,
                MPI_COMM_WORLD);
}

}  // namespace tessera::mpi
