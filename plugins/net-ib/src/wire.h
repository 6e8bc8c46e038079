// net-ib: what the data path asks of a connection's queue pairs and completion queue. The verbs implementation
// (verbs_wire.h) maps it onto ibv_post_send/ibv_post_recv/ibv_poll_cq of RC queue pairs; the unit tests run the
// same protocol (engine.h) over an in-memory loopback with the same queue and completion rules: RDMA writes land
// in order per queue pair but in no order across them, a WRITE with immediate consumes one posted receive at the
// target and completes there with the immediate, a key that does not cover the range fails the work request.
#pragma once

#include <cstdint>
#include <string>

namespace plexus::net_ib {

enum class WrOp : uint8_t { Write, WriteImm, Read };

struct WorkRequest {
  uint64_t id = 0;  // handed back in the completion; signaled requests only
  WrOp op = WrOp::Write;
  uint64_t local = 0;  // for Read: where the bytes land
  uint32_t lkey = 0;
  uint32_t length = 0;
  uint64_t remote = 0;
  uint32_t rkey = 0;
  uint32_t imm = 0;  // WriteImm only
  bool signaled = true;
};

struct Completion {
  uint64_t id = 0;
  bool recv = false;  // a posted receive consumed by a WRITE with immediate
  int qp = 0;         // the queue pair's index in its connection
  uint32_t imm = 0;
  int status = 0;  // 0: success; else the provider's status (statusText names it)
};

class Wire {
 public:
  virtual ~Wire() = default;
  virtual int post(int qp, const WorkRequest& wr) = 0;  // 0, or an errno
  virtual int postRecv(int qp, uint64_t id) = 0;        // 0, or an errno
  virtual int poll(Completion* out, int max) = 0;       // completions written, or -errno
  virtual std::string statusText(int status) const = 0;
};

}  // namespace plexus::net_ib
