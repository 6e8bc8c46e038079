// The control blocks at the start of each side's connection memory, on every backend: the receiver's (tail, connFifo)
// before its buffers, the sender's (head, the zero-copy record) alone, or before the Simple buffer in P2P read mode.
#pragma once

#include <plexus/device_v1.h>

#include <cstddef>
#include <cstdint>

namespace p2p {

constexpr size_t kCtrlBytes = 4096;  // control block before the buffers keeps them page aligned

struct alignas(128) RecvCtrl {
  volatile uint64_t tail;
  char pad[120];
  plexusConnFifo_v1_t connFifo[PLEXUS_STEPS];
};
struct alignas(128) SendCtrl {
  volatile uint64_t head;
  char pad[120];
  plexusPtrExchange_v1_t exchange;  // written by the receiver: where a zero-copy message goes
  // Set by the sender when process_vm_writev into the receiver failed: the receiver stops offering it.
  volatile uint32_t cmaRefused;
};
static_assert(sizeof(RecvCtrl) <= kCtrlBytes, "control block");
static_assert(sizeof(SendCtrl) <= kCtrlBytes, "control block");

inline size_t roundPage(size_t n) { return (n + 4095) & ~(size_t)4095; }

}  // namespace p2p
