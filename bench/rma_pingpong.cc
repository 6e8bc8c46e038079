// One-sided put-with-signal ping-pong, Plexus beside Open MPI in one run (scripts/bench-rma.sh): rank 0 puts n
// bytes into rank 1's window and signals it; rank 1 waits for the signal and puts n bytes back the same way. One
// way is half a round trip. Plexus: ncclPutSignal + ncclWaitSignal on windows of ncclMemAlloc memory. MPI: MPI_Put
// into a window of MPI_Win_allocate memory under MPI_Win_lock_all, MPI_Win_flush, then a zero-byte MPI_Send as the
// signal (MPI-3's put with notification).
#define OMPI_SKIP_MPICXX 1  // the C API alone: no MPI C++ bindings to link
#include <mpi.h>
#include <nccl.h>
#include <plexus.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

#define NCCL_OK(call)                                                                                  \
  do {                                                                                                 \
    ncclResult_t r_ = (call);                                                                          \
    if (r_ != ncclSuccess) {                                                                           \
      fprintf(stderr, "%s failed: %s (%s)\n", #call, ncclGetErrorString(r_), ncclGetLastError(nullptr)); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                                    \
    }                                                                                                  \
  } while (0)

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Seconds per one way of round(i), a round trip: after 10 warm-up rounds, both ranks starting together.
template <class Round>
double timeOneWay(size_t bytes, Round round) {
  static const int scale = getenv("RMA_ITERS_SCALE") ? atoi(getenv("RMA_ITERS_SCALE")) : 1;  // for profiling
  const int iters = (bytes <= 65536 ? 2000 : bytes <= (1 << 20) ? 200 : 30) * std::max(scale, 1);
  for (int i = 0; i < 10; i++) round(i);
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = now();
  for (int i = 0; i < iters; i++) round(i);
  return (now() - t0) / iters / 2;
}

// Seconds per one-way put+signal.
double plexusOneWay(ncclComm_t comm, cudaStream_t stream, ncclWindow_t win, char* src, char* winBuf, size_t bytes,
                    int rank) {
  const int peer = 1 - rank;
  ncclWaitSignalDesc_t wait{1, peer, 0, 0};
  auto round = [&](int it) {
    if (rank == 0) {
      src[0] = (char)it;
      NCCL_OK(ncclPutSignal(src, bytes, ncclUint8, peer, win, 0, 0, 0, 0, comm, stream));
      NCCL_OK(ncclWaitSignal(1, &wait, comm, stream));
      NCCL_OK(plexusStreamSynchronize(stream));
    } else {
      NCCL_OK(ncclWaitSignal(1, &wait, comm, stream));
      NCCL_OK(plexusStreamSynchronize(stream));
      if (winBuf[0] != (char)it) {
        fprintf(stderr, "plexus: iteration %d: the window holds %d\n", it, winBuf[0]);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      NCCL_OK(ncclPutSignal(src, bytes, ncclUint8, peer, win, 0, 0, 0, 0, comm, stream));
      NCCL_OK(plexusStreamSynchronize(stream));
    }
  };
  return timeOneWay(bytes, round);
}

double mpiOneWay(MPI_Win win, char* src, char* winBuf, size_t bytes, int rank) {
  const int peer = 1 - rank;
  auto round = [&](int it) {
    if (rank == 0) {
      src[0] = (char)it;
      MPI_Put(src, (int)bytes, MPI_BYTE, peer, 0, (int)bytes, MPI_BYTE, win);
      MPI_Win_flush(peer, win);
      MPI_Send(nullptr, 0, MPI_BYTE, peer, 7, MPI_COMM_WORLD);
      MPI_Recv(nullptr, 0, MPI_BYTE, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(nullptr, 0, MPI_BYTE, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Win_sync(win);
      if (winBuf[0] != (char)it) {
        fprintf(stderr, "mpi: iteration %d: the window holds %d\n", it, winBuf[0]);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      MPI_Put(src, (int)bytes, MPI_BYTE, peer, 0, (int)bytes, MPI_BYTE, win);
      MPI_Win_flush(peer, win);
      MPI_Send(nullptr, 0, MPI_BYTE, peer, 7, MPI_COMM_WORLD);
    }
  };
  return timeOneWay(bytes, round);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, nranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  if (nranks != 2) {
    if (rank == 0) fprintf(stderr, "rma_pingpong: run 2 ranks\n");
    MPI_Finalize();
    return 1;
  }
  const size_t maxBytes = argc > 1 ? strtoull(argv[1], nullptr, 0) : 64 << 20;

  ncclUniqueId id;
  if (rank == 0) NCCL_OK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  NCCL_OK(plexusSetDevice(rank));
  ncclComm_t comm;
  NCCL_OK(ncclCommInitRank(&comm, 2, id, rank));
  cudaStream_t stream;
  NCCL_OK(plexusStreamCreate(&stream));
  void* plexusWin = nullptr;
  NCCL_OK(ncclMemAlloc(&plexusWin, maxBytes));
  ncclWindow_t win;
  NCCL_OK(ncclCommWindowRegister(comm, plexusWin, maxBytes, &win, NCCL_WIN_COLL_SYMMETRIC));

  char* mpiWinBuf = nullptr;
  MPI_Win mpiWin;
  MPI_Win_allocate((MPI_Aint)maxBytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mpiWinBuf, &mpiWin);
  MPI_Win_lock_all(0, mpiWin);
  std::vector<char> src(maxBytes, 1);
  MPI_Barrier(MPI_COMM_WORLD);

  if (rank == 0)
    printf("# put+signal ping-pong, one way: Plexus (ncclPutSignal/ncclWaitSignal) beside Open MPI (MPI_Put + "
           "MPI_Win_flush + MPI_Send)\n#%11s %12s %12s %10s %10s %8s\n", "bytes", "plexus us", "mpi us",
           "plexus GB/s", "mpi GB/s", "ratio");
  for (size_t bytes = 8; bytes <= maxBytes; bytes *= 8) {
    const double p = plexusOneWay(comm, stream, win, src.data(), (char*)plexusWin, bytes, rank);
    const double m = mpiOneWay(mpiWin, src.data(), mpiWinBuf, bytes, rank);
    if (rank == 0)
      printf("%12zu %12.2f %12.2f %10.2f %10.2f %7.2fx\n", bytes, p * 1e6, m * 1e6, bytes / p / 1e9, bytes / m / 1e9,
             m / p);
  }
  uint64_t direct = 0, socket = 0, transport = 0;
  NCCL_OK(plexusCommGetRmaStats(comm, &direct, &socket, &transport));
  if (rank == 0)
    printf("# plexus rank 0: %llu bytes put directly, %llu on the one-sided socket, %llu through a transport\n",
           (unsigned long long)direct, (unsigned long long)socket, (unsigned long long)transport);
  MPI_Win_unlock_all(mpiWin);
  MPI_Win_free(&mpiWin);
  NCCL_OK(ncclCommWindowDeregister(comm, win));
  NCCL_OK(ncclCommDestroy(comm));
  NCCL_OK(ncclMemFree(plexusWin));
  NCCL_OK(plexusStreamDestroy(stream));
  MPI_Finalize();
  return 0;
}
