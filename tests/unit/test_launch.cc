// Layer 2 → 5 above the device calls: the storage kind of a plan's works, the kernel parameter they make, how a
// kernel finds its works and channels in each storage, captured works' release, and the choice of backend.
#include <doctest/doctest.h>
#include <plexus/device/kernel.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "device/runtime.h"
#include "fifo/work_fifo.h"
#include "misc/check.h"
#include "misc/env.h"
#include "planner/launch.h"

using namespace plexus;

TEST_CASE("launch: works travel inline up to the parameter's capacity, then in the FIFO, or with a graph") {
  CHECK(chooseWorkStorage(1, false, StoragePolicy::Auto) == WorkStorage::Args);
  CHECK(chooseWorkStorage(PLEXUS_KERNEL_ARGS_MAX_WORKS, false, StoragePolicy::Auto) == WorkStorage::Args);
  CHECK(chooseWorkStorage(PLEXUS_KERNEL_ARGS_MAX_WORKS + 1, false, StoragePolicy::Auto) == WorkStorage::Fifo);
  CHECK(chooseWorkStorage(1, false, StoragePolicy::Fifo) == WorkStorage::Fifo);
  // A plan too large for the parameter stays one plan in the FIFO even when args are asked for.
  CHECK(chooseWorkStorage(100, false, StoragePolicy::Args) == WorkStorage::Fifo);
  // Captured: never the FIFO (the graph replays after the ring moved on).
  CHECK(chooseWorkStorage(1, true, StoragePolicy::Fifo) == WorkStorage::Args);
  CHECK(chooseWorkStorage(PLEXUS_KERNEL_ARGS_MAX_WORKS + 1, true, StoragePolicy::Auto) == WorkStorage::Persistent);
}

TEST_CASE("launch: the kernel parameter is cut after its last inline work and never exceeds 4 KiB") {
  plexusDevKernelArgs_v1_t args{};
  args.storage = PLEXUS_WORK_STORAGE_ARGS;
  args.nWorks = 1;
  CHECK(kernelArgsBytes(args) == 64 + 64);
  args.nWorks = PLEXUS_KERNEL_ARGS_MAX_WORKS;
  CHECK(kernelArgsBytes(args) == PLEXUS_KERNEL_ARGS_BYTES);
  CHECK(kernelArgsBytes(args) == sizeof(plexusDevKernelArgs_v1_t));
  args.storage = PLEXUS_WORK_STORAGE_FIFO;
  CHECK(kernelArgsBytes(args) == 64);
}

TEST_CASE("launch: a kernel finds work i in each storage, FIFO indices wrapping around the ring") {
  plexusDevWork_v1_t ring[8] = {};
  for (int i = 0; i < 8; i++) ring[i].opSeq = 100 + i;
  plexusDevKernelArgs_v1_t args{};
  args.storage = PLEXUS_WORK_STORAGE_FIFO;
  args.works = ring;
  args.mask = 7;
  args.first = 6;  // works 6, 7, then 0, 1 of the ring
  args.nWorks = 4;
  CHECK(dev::kernelWork(&args, 0)->opSeq == 106);
  CHECK(dev::kernelWork(&args, 1)->opSeq == 107);
  CHECK(dev::kernelWork(&args, 2)->opSeq == 100);
  CHECK(dev::kernelWork(&args, 3)->opSeq == 101);
  args.storage = PLEXUS_WORK_STORAGE_PERSISTENT;
  args.works = ring + 2;
  CHECK(dev::kernelWork(&args, 1)->opSeq == 103);
  args.storage = PLEXUS_WORK_STORAGE_ARGS;
  args.inlineWorks[2].opSeq = 7;
  CHECK(dev::kernelWork(&args, 2)->opSeq == 7);
}

TEST_CASE("launch: block b runs the b-th channel of the mask, works say which channels they run on") {
  plexusDevKernelArgs_v1_t args{};
  plexusDevWork_v1_t w{};
  w.channelLo = 2;
  w.nChannels = 3;
  CHECK(dev::workChannelMask(&w) == 0x1cull);
  args.channelMask = dev::workChannelMask(&w) | 0x1;
  CHECK(dev::kernelChannel(&args, 0) == 0);
  CHECK(dev::kernelChannel(&args, 1) == 2);
  CHECK(dev::kernelChannel(&args, 3) == 4);
  CHECK(dev::kernelChannel(&args, 4) == -1);
  CHECK(dev::workOnChannel(&w, 2));
  CHECK_FALSE(dev::workOnChannel(&w, 5));
  w.nChannels = 0;  // a no-op work
  CHECK(dev::workChannelMask(&w) == 0);
  CHECK_FALSE(dev::workOnChannel(&w, 2));
}

TEST_CASE("launch: completion marks advance the FIFO's consumed count, only forward") {
  WorkFifo fifo(8);
  REQUIRE(fifo.ok());
  volatile uint32_t abortFlag = 0;
  uint32_t first;
  REQUIRE(fifo.reserve(6, &abortFlag, &first) == ncclSuccess);
  fifo.consumeTo(4);
  CHECK(fifo.consumed() == 4);
  fifo.consumeTo(2);  // an older mark seen late
  CHECK(fifo.consumed() == 4);
  // The ring memory is the device's view too on the host backend.
  CHECK(fifo.deviceRing() == &fifo.at(0));
}

TEST_CASE("launch: a captured launch's works are freed once their graph releases them, on the next launch") {
  PersistentWorks persistent(hostRuntime());
  plexusDevWork_v1_t works[3] = {};
  works[2].opSeq = 42;
  void* block;
  const plexusDevWork_v1_t* dev;
  REQUIRE(persistent.allocate(works, 3, &block, &dev) == ncclSuccess);
  CHECK(dev[2].opSeq == 42);  // copied to "device" memory
  CHECK(persistent.live() == 1);
  CHECK(persistent.reclaim() == 0);  // the graph still holds it
  // The driver calls the release on a thread of its own when the graph goes.
  std::thread driver([block] { PersistentWorks::release(block); });
  driver.join();
  CHECK(persistent.live() == 1);  // queued, not freed: a user object's destructor must not call the driver
  CHECK(persistent.reclaim() == 1);
  CHECK(persistent.live() == 0);
  // The host backend never captures, so it never hands works to a graph.
  CHECK(persistent.create(nullptr, works, 3, &dev) != ncclSuccess);
  CHECK(persistent.live() == 0);
}

TEST_CASE("device: backend choice: host for plexusSetDevice threads, PLEXUS_BACKEND forces, bad values fail") {
  std::thread t([] {
    // Other threads of the process read the environment under this lock.
    std::lock_guard<std::recursive_mutex> env(envMutex());
    plexusBackend_t backend;
    int device;
    unsetenv("PLEXUS_BACKEND");
    // This machine has no CUDA driver: auto is the host backend on the thread's host device.
    REQUIRE(setDevice(5) == ncclSuccess);
    REQUIRE(chooseBackend(&backend, &device) == ncclSuccess);
    CHECK(backend == plexusBackendHost);
    CHECK(device == 5);
    setenv("PLEXUS_BACKEND", "gpu", 1);
    CHECK(chooseBackend(&backend, &device) == ncclInvalidArgument);
    CHECK(std::string(lastError(nullptr)).find("PLEXUS_BACKEND=gpu is not a backend") != std::string::npos);
    setenv("PLEXUS_BACKEND", "host", 1);
    CHECK(chooseBackend(&backend, &device) == ncclSuccess);
    CHECK(backend == plexusBackendHost);
    DeviceRuntime* cuda = nullptr;
    if (deviceRuntime(plexusBackendCuda, &cuda) != ncclSuccess) {
      setenv("PLEXUS_BACKEND", "cuda", 1);
      CHECK(chooseBackend(&backend, &device) == ncclSystemError);
      const std::string err = lastError(nullptr);
      CHECK_MESSAGE(err.find("the CUDA backend cannot run here") != std::string::npos, err);
    } else {
      MESSAGE("a CUDA driver is present: the forced-cuda failure is not checked here");
    }
    unsetenv("PLEXUS_BACKEND");
  });
  t.join();
}

TEST_CASE("device: the host runtime's memory, streams and events") {
  DeviceRuntime* rt = hostRuntime();
  DeviceMem mem;
  REQUIRE(rt->alloc(MemKind::HostMapped, 4096, &mem) == ncclSuccess);
  CHECK(mem.ptr == mem.host);
  CHECK(((const char*)mem.host)[4095] == 0);
  PointerInfo info;
  REQUIRE(rt->pointerInfo(mem.ptr, &info) == ncclSuccess);
  CHECK(info.kind == PointerKind::Host);
  rt->free(&mem);
  CHECK(mem.ptr == nullptr);
  bool capturing = true;
  void* graph = &capturing;
  CHECK(rt->captureStatus(nullptr, &capturing, &graph) == ncclSuccess);
  CHECK_FALSE(capturing);
  CHECK(graph == nullptr);
}
