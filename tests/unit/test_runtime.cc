// Layer 5 and the host backend's streams: workFifo flow control, host streams and events.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "fifo/work_fifo.h"
#include "stream/host_stream.h"

using namespace plexus;

TEST_CASE("workFifo: the producer waits while full and resumes when the consumer frees entries") {
  WorkFifo fifo(8);
  volatile uint32_t abortFlag = 0;
  uint32_t first;
  REQUIRE(fifo.reserve(6, &abortFlag, &first) == ncclSuccess);
  CHECK(first == 0);
  std::atomic<bool> got{false};
  std::thread producer([&] {
    uint32_t f;
    CHECK(fifo.reserve(4, &abortFlag, &f) == ncclSuccess);
    CHECK(f == 6);
    got = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_FALSE(got.load());  // 6 + 4 > 8
  fifo.consumeTo(6);
  producer.join();
  CHECK(got.load());
  CHECK(fifo.at(9).func == fifo.at(1).func);  // wraps
}

TEST_CASE("workFifo: an abort releases a producer blocked on a full ring") {
  WorkFifo fifo(4);
  volatile uint32_t abortFlag = 0;
  uint32_t first;
  REQUIRE(fifo.reserve(4, &abortFlag, &first) == ncclSuccess);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    __atomic_store_n(&abortFlag, 1u, __ATOMIC_RELEASE);
  });
  CHECK(fifo.reserve(1, &abortFlag, &first) == ncclRemoteError);
  aborter.join();
  CHECK(fifo.reserve(5, &abortFlag, &first) == ncclInternalError);  // larger than the ring
}

TEST_CASE("host stream: operations run in order; synchronize returns the first error") {
  cudaStream_t s;
  REQUIRE(plexusStreamCreate(&s) == ncclSuccess);
  HostStream* hs = hostStreamOf(s);
  REQUIRE(hs != nullptr);
  std::vector<int> order;
  for (int i = 0; i < 100; i++)
    hs->enqueue([&order, i] {
      order.push_back(i);
      return i == 50 ? ncclSystemError : ncclSuccess;
    });
  CHECK(plexusStreamSynchronize(s) == ncclSystemError);
  REQUIRE(order.size() == 100);
  for (int i = 0; i < 100; i++) CHECK(order[i] == i);
  CHECK(plexusStreamSynchronize(s) == ncclSuccess);  // reported once
  CHECK(plexusStreamQuery(s) == ncclSuccess);
  REQUIRE(plexusStreamDestroy(s) == ncclSuccess);
  CHECK(plexusStreamDestroy(s) == ncclInvalidArgument);  // no longer a stream
  CHECK(hostStreamOf(reinterpret_cast<cudaStream_t>(&order)) == nullptr);
}

TEST_CASE("host events: record, synchronize, elapsed time, cross-stream wait") {
  cudaStream_t a, b;
  REQUIRE(plexusStreamCreate(&a) == ncclSuccess);
  REQUIRE(plexusStreamCreate(&b) == ncclSuccess);
  plexusEvent_t start, stop;
  REQUIRE(plexusEventCreate(&start) == ncclSuccess);
  REQUIRE(plexusEventCreate(&stop) == ncclSuccess);
  std::atomic<int> step{0};
  REQUIRE(plexusEventRecord(start, a) == ncclSuccess);
  hostStreamOf(a)->enqueue([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    step = 1;
    return ncclSuccess;
  });
  REQUIRE(plexusEventRecord(stop, a) == ncclSuccess);
  // b waits for a's stop event before its own operation runs.
  REQUIRE(plexusStreamWaitEvent(b, stop) == ncclSuccess);
  int seen = -1;
  hostStreamOf(b)->enqueue([&] {
    seen = step.load();
    return ncclSuccess;
  });
  REQUIRE(plexusStreamSynchronize(b) == ncclSuccess);
  CHECK(seen == 1);
  REQUIRE(plexusEventSynchronize(stop) == ncclSuccess);
  float ms = 0;
  REQUIRE(plexusEventElapsedTime(&ms, start, stop) == ncclSuccess);
  CHECK(ms >= 15.0f);
  CHECK(plexusEventQuery(stop) == ncclSuccess);
  plexusEventDestroy(start);
  plexusEventDestroy(stop);
  plexusStreamDestroy(a);
  plexusStreamDestroy(b);
}
