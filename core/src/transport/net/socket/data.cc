#include "transport/net/socket/data.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <system_error>

#include "misc/check.h"

namespace plexus::socketnet {

namespace {

// A blocked helper thread wakes at least this often even if nobody writes its eventfd (a safety net:
// the caller's turns write it for chunks the thread has not seen, and stop() writes it).
constexpr int kIdlePollMs = 1000;
// How long a helper thread leaves a socket to the caller before looking again: from kMinBackoff, doubling
// while the caller keeps it, so that the thread takes over within kMaxBackoff once the caller stops.
constexpr auto kMinBackoff = std::chrono::microseconds(100);
constexpr auto kMaxBackoff = std::chrono::microseconds(2000);
// What the caller's turn moves per socket at most when helper threads exist: a test() stays short.
constexpr size_t kCallerTurnBytes = 512 << 10;

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

void ErrorState::set(ncclResult_t result, const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(mutex_);
  if (result_.load(std::memory_order_relaxed) != ncclSuccess) return;  // the first failure is the cause
  message_ = msg;
  result_.store(result, std::memory_order_release);
}

ncclResult_t ErrorState::report() {
  std::string msg;
  ncclResult_t res;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    res = result_.load(std::memory_order_relaxed);
    if (reported_) return res;
    reported_ = true;
    msg = message_;
  }
  return setError(nullptr, res, "%s", msg.c_str());
}

struct DataThreads::Worker {
  DataThreads* owner;
  int id;
  std::vector<DataSocket*> sockets;
  UniqueFd event;
  std::atomic<bool> sleeping{false};
  std::atomic<bool> stop{false};
  std::thread thread;

  void run();
  void wake() {
    uint64_t one = 1;
    ssize_t r = ::write(event.get(), &one, sizeof(one));
    (void)r;  // only EAGAIN (counter saturated) can fail, and then the thread is being woken anyway
  }
};

void DataThreads::Worker::run() {
  char name[16];
  snprintf(name, sizeof(name), "plexus-sock%d", id);
  pthread_setname_np(pthread_self(), name);
  const bool send = owner->send_;
  const auto spin = std::chrono::microseconds(owner->spinUs_);
  const size_t n = sockets.size();
  std::vector<uint32_t> seen(n, 0);    // each socket's tail when last looked at
  std::vector<uint8_t> waiting(n, 0);  // chunks left that the socket was not ready for
  std::vector<uint8_t> held(n, 0);     // chunks left, but the caller holds the socket
  std::vector<pollfd> pfds(n + 1);
  auto backoff = kMinBackoff;
  Clock::time_point lastProgress = Clock::now();
  while (!stop.load(std::memory_order_acquire)) {
    bool progressed = false, anyWaiting = false, anyHeld = false;
    for (size_t i = 0; i < n; i++) {
      DataSocket& s = *sockets[i];
      seen[i] = s.tail.load(std::memory_order_acquire);
      s.helperSeen.store(seen[i], std::memory_order_relaxed);
      waiting[i] = held[i] = 0;
      if (s.head.load(std::memory_order_relaxed) == seen[i]) continue;  // nothing queued
      if (s.busy.exchange(true, std::memory_order_acquire)) {
        held[i] = 1;  // the caller's turn
        anyHeld = true;
        continue;
      }
      bool ok = owner->step(s, SIZE_MAX, &progressed);
      anyWaiting |= waiting[i] = s.head.load(std::memory_order_relaxed) != seen[i];
      s.busy.store(false, std::memory_order_release);
      if (!ok) return;  // the connection failed; wait to be stopped
    }
    if (progressed) {
      lastProgress = Clock::now();
      backoff = kMinBackoff;
      continue;
    }
    if (!anyWaiting && !anyHeld && Clock::now() - lastProgress < spin) {
      cpuRelax();  // nothing to move: a chunk may be posted any moment
      continue;
    }
    // Block: say so, then look once more for chunks posted meanwhile (the caller's turn checks `sleeping`
    // after the chunk is published, so one of the two sees the other).
    sleeping.store(true, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    bool fresh = stop.load(std::memory_order_relaxed);
    for (size_t i = 0; i < n && !fresh; i++) fresh = sockets[i]->tail.load(std::memory_order_relaxed) != seen[i];
    if (!fresh) {
      int k = 0;
      pfds[k++] = {event.get(), POLLIN, 0};
      for (size_t i = 0; i < n; i++)
        if (waiting[i]) pfds[k++] = {sockets[i]->fd.get(), (short)(send ? POLLOUT : POLLIN), 0};
      // A socket the caller holds gives no sign when it is free again: look after a while.
      auto wait = anyHeld ? backoff : std::chrono::microseconds(kIdlePollMs * 1000);
      timespec ts{(time_t)(wait.count() / 1000000), (long)(wait.count() % 1000000) * 1000};
      if (ppoll(pfds.data(), k, &ts, nullptr) > 0 && (pfds[0].revents & POLLIN)) {
        uint64_t count;
        ssize_t r = ::read(event.get(), &count, sizeof(count));
        (void)r;
      }
    }
    sleeping.store(false, std::memory_order_relaxed);
    if (anyHeld) backoff = std::min(backoff * 2, kMaxBackoff);
    lastProgress = Clock::now();
  }
}

// Moves bytes of the chunks at the head of s's FIFO, up to maxBytes, until the socket would block; false
// when it failed. The caller holds s.busy.
bool DataThreads::step(DataSocket& s, size_t maxBytes, bool* progressed) {
  const bool send = send_;
  uint32_t head = s.head.load(std::memory_order_relaxed);
  uint32_t tail = s.tail.load(std::memory_order_acquire);
  size_t moved = 0;
  while (head != tail && moved < maxBytes) {
    Task& t = s.ring[head & (kTaskRingSize - 1)];
    size_t len = std::min(t.size - s.offset, maxBytes - moved);
    ssize_t k = send ? ::send(s.fd.get(), t.data + s.offset, len, MSG_DONTWAIT | MSG_NOSIGNAL)
                     : ::recv(s.fd.get(), t.data + s.offset, len, MSG_DONTWAIT);
    if (k > 0) {
      *progressed = true;
      s.offset += (size_t)k;
      moved += (size_t)k;
      if (s.offset < t.size) {
        if ((size_t)k < len) return true;  // the kernel buffer is full (or drained)
        continue;                          // (the loop ends if maxBytes is reached)
      }
      s.offset = 0;
      t.pending->fetch_sub(1, std::memory_order_release);  // publishes the received bytes to the caller
      s.head.store(++head, std::memory_order_release);
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && wouldBlock(errno)) return true;
    fail(s, k, k < 0 ? errno : 0);
    return false;
  }
  return true;
}

void DataThreads::fail(DataSocket& s, ssize_t got, int err) {
  const bool send = send_;
  const char* peer = peer_.c_str();
  const Task& t = s.ring[s.head.load(std::memory_order_relaxed) & (kTaskRingSize - 1)];
  size_t left = t.size - s.offset;
  if (!send && got == 0) {
    errors_->set(ncclRemoteError,
                 "NET/Socket: %s closed the connection (data socket %d) with %zu bytes of a message still "
                 "to come. The peer probably exited or failed; check its log",
                 peer, s.index, left);
  } else if (err == ECONNRESET || err == EPIPE) {
    errors_->set(ncclRemoteError,
                 "NET/Socket: the connection to %s was reset (data socket %d) with %zu bytes of a message "
                 "still to %s. The peer probably exited, failed or closed its comm; check its log",
                 peer, s.index, left, send ? "send" : "receive");
  } else {
    errors_->set(ncclSystemError, "NET/Socket: %s on data socket %d of the connection to %s failed: %s",
                 send ? "send" : "recv", s.index, peer, describeSocketError(err).c_str());
  }
}

DataThreads::DataThreads(bool send, std::vector<UniqueFd> sockets, int nThreads, int spinUs, ErrorState* errors,
                         std::string peer)
    : send_(send), spinUs_(spinUs), errors_(errors), peer_(std::move(peer)) {
  for (size_t i = 0; i < sockets.size(); i++) {
    auto s = std::make_unique<DataSocket>();
    s->fd = std::move(sockets[i]);
    s->index = (int)i;
    sockets_.push_back(std::move(s));
  }
  nThreads_ = std::clamp(nThreads, 0, (int)sockets_.size());
}

DataThreads::~DataThreads() { stop(); }

void DataThreads::stop() {
  for (auto& w : workers_) {
    w->stop.store(true, std::memory_order_release);
    if (w->thread.joinable()) {
      w->wake();
      w->thread.join();
    }
  }
}

// Failures here leave the connection failed: its chunks could never move.
ncclResult_t DataThreads::start() {
  for (int t = 0; t < nThreads_; t++) {
    auto w = std::make_unique<Worker>();
    w->owner = this;
    w->id = t;
    for (size_t s = t; s < sockets_.size(); s += nThreads_) w->sockets.push_back(sockets_[s].get());
    w->event.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!w->event.valid()) {
      errors_->set(ncclSystemError,
                   "NET/Socket: cannot create an eventfd for a helper thread of the connection to %s: %s",
                   peer_.c_str(), strerror(errno));
      return errors_->report();
    }
    workers_.push_back(std::move(w));
  }
  for (auto& w : workers_) {
    try {
      w->thread = std::thread([worker = w.get()] { worker->run(); });
    } catch (const std::system_error& e) {
      errors_->set(ncclSystemError,
                   "NET/Socket: cannot start a helper thread for the connection to %s: %s. The process may have "
                   "hit its thread limit (ulimit -u); lower NCCL_SOCKET_NTHREADS",
                   peer_.c_str(), e.what());
      return errors_->report();
    }
  }
  started_ = true;
  return ncclSuccess;
}

void DataThreads::progress() {
  if (errors_->failed()) return;
  const size_t cap = nThreads_ > 0 ? kCallerTurnBytes : SIZE_MAX;
  bool progressed = false;
  uint32_t wake = 0;
  for (size_t i = 0; i < sockets_.size(); i++) {
    DataSocket& s = *sockets_[i];
    uint32_t tail = s.tail.load(std::memory_order_relaxed);
    if (s.head.load(std::memory_order_relaxed) == tail) continue;
    if (!s.busy.exchange(true, std::memory_order_acquire)) {  // else a helper thread is at it
      bool ok = step(s, cap, &progressed);
      s.busy.store(false, std::memory_order_release);
      if (!ok) return;
      if (s.head.load(std::memory_order_relaxed) == tail) continue;  // all moved
    }
    if (nThreads_ > 0 && s.helperSeen.load(std::memory_order_relaxed) != tail) wake |= 1u << (i % nThreads_);
  }
  if (!wake) return;
  if (!started_ && start() != ncclSuccess) return;  // the failure is in the ErrorState
  // Pairs with the helper's fence between `sleeping` and its last look at the tails.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (int t = 0; t < nThreads_; t++)
    if ((wake & (1u << t)) && workers_[t]->sleeping.load(std::memory_order_relaxed)) workers_[t]->wake();
}

ncclResult_t DataThreads::post(char* data, size_t size, size_t chunkSize, std::atomic<int>* pending) {
  const int nSocks = (int)sockets_.size();
  const int nChunks = (int)((size + chunkSize - 1) / chunkSize);
  pending->fetch_add(nChunks, std::memory_order_relaxed);  // published by the tail stores below
  for (int c = 0; c < nChunks; c++) {
    DataSocket& s = *sockets_[next_];
    uint32_t tail = s.tail.load(std::memory_order_relaxed);
    if (tail - s.head.load(std::memory_order_acquire) >= kTaskRingSize) {
      // Cannot happen: requests in flight are capped so that every message fits (see kTaskRingSize).
      errors_->set(ncclInternalError, "NET/Socket: data socket %d of the connection to %s has %u chunks queued",
                   s.index, peer_.c_str(), kTaskRingSize);
      return errors_->report();
    }
    size_t offset = (size_t)c * chunkSize;
    s.ring[tail & (kTaskRingSize - 1)] = {data + offset, std::min(chunkSize, size - offset), pending};
    s.tail.store(tail + 1, std::memory_order_release);
    next_ = next_ + 1 == nSocks ? 0 : next_ + 1;
  }
  return ncclSuccess;
}

}  // namespace plexus::socketnet
