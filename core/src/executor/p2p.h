// Point-to-point on the host backend: every send and receive of one launch progresses together, a
// slice at a time, so that a rank that sends to and receives from the same peers (AlltoAll, a ring
// of sendrecv) never waits on a message it has not yet started to take in.
#pragma once

#include <plexus/device_v1.h>

#include <cstdint>

struct ncclComm;

namespace plexus {

// Marks a work item as the core's point-to-point rather than an algorithm plugin's.
constexpr uint8_t kAlgoCoreP2p = 0xff;
// Messages of at least this many bytes may go zero-copy: the receiver first tells the sender where
// to write (one extra hop), and the data crosses once instead of twice (into a slot, out of it).
constexpr size_t kZeroCopyMinBytes = 64 * 1024;

// Runs the n point-to-point work items starting at works[0] (func ncclFuncSend or ncclFuncRecv, peer,
// count, datatype, buffers) over channel 0's connectors. Messages between a pair of ranks are matched
// in the order they were posted; a rank's sends to itself are copied into its receives from itself.
ncclResult_t runP2p(ncclComm* comm, const plexusDevWork_v1_t* const* works, int n);

}  // namespace plexus
