// The bulk path of a socket-net connection: data sockets, each with a FIFO of chunks that the comm's
// caller thread posts and that are moved straight between the user's buffer and the kernel.
//
// Both ends cut a message into the same chunks and deal them to data sockets in the same turn (the
// header on the control socket says how), so each data socket's byte stream is the concatenation of its
// chunks in message order on both sides, and only the head of each FIFO is ever being moved.
//
// Who moves the bytes: the caller's thread first, the connection's helper threads for the rest. Every
// isend, irecv and test takes a turn on the sockets no helper thread holds (a try-lock per socket),
// moving what the kernel takes without blocking; what is left after a turn is the helper threads' (they
// are woken for it). So a message the kernel takes at once (most below a few hundred KiB) costs no thread
// hand-off, a caller that polls test() works instead of only spinning, and a helper thread guarantees
// progress when the caller is away. A helper thread whose socket is not ready blocks in poll() (woken by
// the kernel, as a blocking send/recv would be); one whose socket the caller holds sleeps for a short,
// growing while; one with nothing queued blocks at once (or spins for PLEXUS_SOCKET_SPIN_USEC first).
// The caller writes a thread's eventfd only for chunks the thread has not seen and only when it says it
// sleeps (a Dekker handshake over seq_cst fences): no wake-up syscall on the hot path. With no helper
// threads (NCCL_SOCKET_NTHREADS=0) the caller's turns alone move the data: requests progress only while
// test() is called on that comm (NCCL's own default).
#pragma once

#include <plexus/types.h>
#include <sys/types.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "transport/net/socket/common.h"

namespace plexus::socketnet {

// The first failure of a connection, seen by every later call on it. Helper threads set it; the
// comm's caller reports it (once, as a WARN and ncclGetLastError) from the next call.
class ErrorState {
 public:
  bool failed() const { return result_.load(std::memory_order_acquire) != ncclSuccess; }
  ncclResult_t result() const { return result_.load(std::memory_order_acquire); }
  void set(ncclResult_t result, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
  // The error as a call returns it: recorded and logged the first time, quietly after.
  ncclResult_t report();

 private:
  std::atomic<ncclResult_t> result_{ncclSuccess};
  std::mutex mutex_;
  std::string message_;
  bool reported_ = false;
};

// One chunk of a message on one data socket.
struct Task {
  char* data;
  size_t size;
  std::atomic<int>* pending;  // the request's count of unfinished chunks, decremented when this one is done
};

// A data socket and its chunk FIFO: a single-producer (the comm's caller) ring whose consumer is whoever
// holds `busy` (a helper thread, or the caller taking its turn).
struct DataSocket {
  UniqueFd fd;
  int index = 0;  // 0-based, for messages
  Task ring[kTaskRingSize];
  alignas(64) std::atomic<uint32_t> tail{0};  // producer
  alignas(64) std::atomic<uint32_t> head{0};  // consumer
  std::atomic<bool> busy{false};              // the consumer's lock
  std::atomic<uint32_t> helperSeen{0};        // the tail its helper thread last saw: later chunks need a wake
  size_t offset = 0;                          // consumer: bytes of ring[head] moved so far
};

class DataThreads {
 public:
  // `sockets` are the connection's data sockets, dealt to nThreads helper threads in turn; the threads
  // start with the first chunk. nThreads 0: no threads, the caller's progress() moves the data.
  // `peer` names the other end in messages.
  DataThreads(bool send, std::vector<UniqueFd> sockets, int nThreads, int spinUs, ErrorState* errors, std::string peer);
  ~DataThreads();
  // Stops and joins the threads; chunks not moved yet are dropped. Idempotent.
  void stop();
  DataThreads(const DataThreads&) = delete;
  DataThreads& operator=(const DataThreads&) = delete;

  int nSockets() const { return (int)sockets_.size(); }
  // The caller's turn: moves what the sockets no helper thread holds take without blocking (with helper
  // threads, at most kCallerTurnBytes per socket, so that a test() stays short), then wakes the helper
  // threads of sockets with chunks left that they have not seen. A failure is left in the ErrorState.
  void progress();
  // Deals the chunks of a message of `size` bytes at `data` to the next sockets in turn, one chunk each
  // (size <= chunkSize * nSockets()), adding their number to *pending first. The caller's next turn
  // (progress()) moves them or hands them to the helper threads. Fails only when a helper thread cannot
  // be started.
  ncclResult_t post(char* data, size_t size, size_t chunkSize, std::atomic<int>* pending);

 private:
  struct Worker;
  ncclResult_t start();
  bool step(DataSocket& s, size_t maxBytes, bool* progressed);
  void fail(DataSocket& s, ssize_t got, int err);

  bool send_;
  int spinUs_;
  ErrorState* errors_;
  std::string peer_;
  std::vector<std::unique_ptr<DataSocket>> sockets_;
  std::vector<std::unique_ptr<Worker>> workers_;
  int nThreads_;
  bool started_ = false;
  int next_ = 0;  // the socket that takes the next message's first chunk
};

}  // namespace plexus::socketnet
