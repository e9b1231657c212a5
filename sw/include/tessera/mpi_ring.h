// The MPI mode of the multi-chip simulation (docs/multichip.md): `mpirun -np P tessera train
// --chips P ...` runs one chip per rank; the ranks advance their chips in the same lock-step
// windows as the threaded mode and exchange every window's link traffic and chip states with
// one MPI_Allgather, so weights, losses and every cycle count are bit-identical to the
// threaded mode. Open MPI (Debian's libopenmpi-dev / openmpi-bin); as root mpirun needs
// --allow-run-as-root.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::mpi {

// True when this process was started by mpirun (or another launcher) with more than one rank.
bool launched();
// MPI_Init once (no-op when not launched); finalize() at the end. Both are safe to call twice.
void init();
void finalize();
int rank();  // 0 when not launched
int size();  // 1 when not launched
// Ends every rank of the job now with `code`, after printing `why` (a failure on one rank must
// never leave the others waiting).
[[noreturn]] void abort(int code, const std::string& why);
// Every rank's `mine` (each the same size), in rank order; in one process: {mine}.
std::vector<std::vector<uint8_t>> allgather(const std::vector<uint8_t>& mine);
// The same into a caller's buffer: `all` holds size() x bytes.
void allgather(const void* mine, void* all, size_t bytes);

}  // namespace tessera::mpi
