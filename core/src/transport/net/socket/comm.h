// A socket-net connection's two ends: SendComm (isend) and RecvComm (irecv, iflush), with their requests.
//
// The control socket carries, per message and in posting order, a WireHeader and, for payloads up to the
// sender's NCCL_SOCKET_INLINE, the payload itself (one sendmsg gathers every header waiting). Larger
// payloads go to the data sockets (data.h) as soon as isend() posts them, while the header tells the
// receiver the size, the tag and the chunk size, so that it deals the same chunks to the same sockets.
// The caller's thread drives the control socket from isend/irecv/test; nothing in it blocks.
//
// Requests live in fixed pools inside the comm (no allocation per message): a comm is full at
// kMaxSendRequests / kMaxRecvRequests requests not yet reported done, and isend/irecv then succeed with
// a NULL request.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "transport/net/socket/common.h"
#include "transport/net/socket/data.h"

namespace plexus::socketnet {

class Comm;

struct Request {
  enum class Kind : uint8_t { Free, Send, Recv, Flush };
  Kind kind = Kind::Free;
  Comm* comm = nullptr;
};

struct SendRequest : Request {
  char* data;
  size_t size;
  WireHeader header;
  bool headerSent;
  std::atomic<int> pending{0};  // chunks the helper threads have not finished
};

struct RecvRequest : Request {
  int n;
  int matched;  // messages whose header (and inline payload) is in
  char* data[kMaxRecvs];
  size_t capacity[kMaxRecvs];
  int tags[kMaxRecvs];
  size_t received[kMaxRecvs];
  bool filled[kMaxRecvs];
  std::atomic<int> pending{0};
};

// What both ends share: the sockets, the helper threads, the failure state.
class Comm {
 public:
  Comm(bool send, UniqueFd ctrl, std::vector<UniqueFd> data, const Knobs& knobs, uint64_t magic,
       const SocketAddress& peer);
  virtual ~Comm() = default;
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  const std::string& peer() const { return peer_; }
  virtual ncclResult_t test(Request* request, int* done, int* sizes) = 0;

 protected:
  // Records the connection's failure and reports it.
  ncclResult_t fail(ncclResult_t result, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
  // A failed send/recv on the control socket: the peer closed it (k == 0 on receive), reset it, or worse.
  ncclResult_t failCtrl(ssize_t k, int err, const char* doing);
  uint32_t expectedCheck(uint32_t seq) const { return seq ^ (uint32_t)magic_; }

  std::string peer_;
  Knobs knobs_;
  uint64_t magic_;
  UniqueFd ctrl_;
  ErrorState errors_;
  DataThreads data_;  // the subclasses' destructors stop its threads before their requests go
};

class SendComm : public Comm {
 public:
  SendComm(UniqueFd ctrl, std::vector<UniqueFd> data, const Knobs& knobs, uint64_t magic, const SocketAddress& peer);
  ~SendComm() override { data_.stop(); }
  ncclResult_t isend(void* data, size_t size, int tag, void** request);
  ncclResult_t test(Request* request, int* done, int* sizes) override;

 private:
  ncclResult_t progress();

  SendRequest pool_[kMaxSendRequests];
  int free_[kMaxSendRequests];
  int nFree_ = 0;
  // Requests whose header is not fully sent, in posting order; offset_ bytes of the first are.
  SendRequest* queue_[kMaxSendRequests];
  uint32_t queueHead_ = 0, queueTail_ = 0;
  size_t offset_ = 0;
  uint32_t seq_ = 0;
};

class RecvComm : public Comm {
 public:
  RecvComm(UniqueFd ctrl, std::vector<UniqueFd> data, const Knobs& knobs, uint64_t magic, const SocketAddress& peer);
  ~RecvComm() override { data_.stop(); }
  ncclResult_t irecv(int n, void** data, size_t* sizes, int* tags, void** request);
  ncclResult_t iflush(void** request);
  ncclResult_t test(Request* request, int* done, int* sizes) override;

 private:
  ncclResult_t progress();
  ncclResult_t takeHeader(RecvRequest* r, const WireHeader& h);
  void finishMessage();

  RecvRequest pool_[kMaxRecvRequests];
  int free_[kMaxRecvRequests];
  int nFree_ = 0;
  // Receives still taking messages, in posting order.
  RecvRequest* queue_[kMaxRecvRequests];
  uint32_t queueHead_ = 0, queueTail_ = 0;
  // The control stream is read through a staging buffer, so that many small messages cost one recv.
  static constexpr size_t kStagingSize = 64 << 10;
  std::unique_ptr<char[]> staging_;
  size_t stagingBegin_ = 0, stagingEnd_ = 0;
  // The inline payload being read: payloadLeft_ bytes still to go to payloadDst_.
  bool inPayload_ = false;
  char* payloadDst_ = nullptr;
  size_t payloadLeft_ = 0;
  uint32_t seq_ = 0;
  Request flushRequest_;  // iflush on host memory has nothing to wait for: one request, always done
};

}  // namespace plexus::socketnet
