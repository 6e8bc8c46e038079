#include "transport/net/socket/comm.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "misc/check.h"

namespace plexus::socketnet {

namespace {

constexpr int kMaxIov = 64;  // iovecs per sendmsg on the control socket: 32 messages' headers and payloads

// test() reports sizes as int (every ABI version does); larger messages report INT_MAX.
int clampSize(size_t size) { return size > (size_t)INT_MAX ? INT_MAX : (int)size; }

}  // namespace

Comm::Comm(bool send, UniqueFd ctrl, std::vector<UniqueFd> data, const Knobs& knobs, uint64_t magic,
           const SocketAddress& peer)
    : peer_(toString(peer)),
      knobs_(knobs),
      magic_(magic),
      ctrl_(std::move(ctrl)),
      data_(send, std::move(data), knobs.nThreads, knobs.spinUs, &errors_, peer_) {}

ncclResult_t Comm::fail(ncclResult_t result, const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  errors_.set(result, "%s", msg);
  return errors_.report();
}

ncclResult_t Comm::failCtrl(ssize_t k, int err, const char* doing) {
  if (k == 0)
    return fail(ncclRemoteError,
                "NET/Socket: %s closed the connection while this rank was %s. The peer probably exited, failed or "
                "closed its comm; check its log",
                peer_.c_str(), doing);
  if (err == ECONNRESET || err == EPIPE)
    return fail(ncclRemoteError,
                "NET/Socket: the connection to %s was reset while this rank was %s. The peer probably exited, "
                "failed or closed its comm; check its log",
                peer_.c_str(), doing);
  return fail(ncclSystemError,
              "NET/Socket: the control socket of the connection to %s failed while this rank was "
              "%s: %s",
              peer_.c_str(), doing, describeSocketError(err).c_str());
}

// --- send side -----------------------------------------------------------------------------------------

SendComm::SendComm(UniqueFd ctrl, std::vector<UniqueFd> data, const Knobs& knobs, uint64_t magic,
                   const SocketAddress& peer)
    : Comm(true, std::move(ctrl), std::move(data), knobs, magic, peer) {
  for (int i = 0; i < kMaxSendRequests; i++) {
    pool_[i].comm = this;
    free_[nFree_++] = kMaxSendRequests - 1 - i;
  }
}

ncclResult_t SendComm::isend(void* data, size_t size, int tag, void** request) {
  *request = nullptr;
  if (size > 0 && !data)
    return setError(nullptr, ncclInvalidArgument, "NET/Socket: isend of %zu bytes to %s from a NULL buffer", size,
                    peer_.c_str());
  if (errors_.failed()) return errors_.report();
  if (nFree_ == 0) return ncclSuccess;  // full: the caller tries again after testing some requests
  SendRequest* r = &pool_[free_[--nFree_]];
  r->kind = Request::Kind::Send;
  r->data = (char*)data;
  r->size = size;
  r->headerSent = false;
  r->pending.store(0, std::memory_order_relaxed);
  size_t chunk = 0;  // inline
  if (size > knobs_.inlineMax) {
    size_t nSocks = (size_t)data_.nSockets();
    chunk = std::max(knobs_.minChunk, (size + nSocks - 1) / nSocks);
  }
  r->header = {expectedCheck(seq_++), tag, (uint64_t)size, (uint64_t)chunk};
  if (chunk) NCCLCHECK(data_.post(r->data, size, chunk, &r->pending));
  queue_[queueTail_++ % kMaxSendRequests] = r;
  *request = static_cast<Request*>(r);
  // The payload's first turn, then the header: the bytes are on their way before the receiver, told of
  // the message, looks for them (on loopback they are there already). The request is posted either way;
  // a failure found here fails the connection, and test() reports it.
  data_.progress();
  (void)progress();
  return ncclSuccess;
}

// Sends the headers (and inline payloads) waiting, gathered into as few sendmsg calls as the socket takes.
ncclResult_t SendComm::progress() {
  while (queueHead_ != queueTail_) {
    iovec iov[kMaxIov];
    int n = 0;
    size_t skip = offset_;
    for (uint32_t q = queueHead_; q != queueTail_ && n + 2 <= kMaxIov; q++) {
      SendRequest* r = queue_[q % kMaxSendRequests];
      size_t payload = r->header.chunkSize == 0 ? r->size : 0;
      if (skip < sizeof(WireHeader)) iov[n++] = {(char*)&r->header + skip, sizeof(WireHeader) - skip};
      size_t payloadSkip = skip > sizeof(WireHeader) ? skip - sizeof(WireHeader) : 0;
      if (payload > payloadSkip) iov[n++] = {r->data + payloadSkip, payload - payloadSkip};
      skip = 0;
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n;
    ssize_t k = sendmsg(ctrl_.get(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (k < 0) {
      if (errno == EINTR) continue;
      if (wouldBlock(errno)) return ncclSuccess;
      return failCtrl(k, errno, "sending a message");
    }
    size_t sent = (size_t)k;
    while (sent > 0) {  // retire what went out
      SendRequest* r = queue_[queueHead_ % kMaxSendRequests];
      size_t total = sizeof(WireHeader) + (r->header.chunkSize == 0 ? r->size : 0);
      size_t left = total - offset_;
      if (sent < left) {
        offset_ += sent;
        return ncclSuccess;  // the socket took what it could
      }
      sent -= left;
      offset_ = 0;
      r->headerSent = true;
      queueHead_++;
    }
  }
  return ncclSuccess;
}

ncclResult_t SendComm::test(Request* request, int* done, int* sizes) {
  SendRequest* r = static_cast<SendRequest*>(request);
  // A request that is complete is reported so even if the connection failed since (the failure is
  // recorded, and the next call on an unfinished request returns it).
  ncclResult_t res = progress();
  data_.progress();
  if (r->headerSent && r->pending.load(std::memory_order_acquire) == 0) {
    *done = 1;
    if (sizes) sizes[0] = clampSize(r->size);
    r->kind = Request::Kind::Free;
    free_[nFree_++] = (int)(r - pool_);
    return ncclSuccess;
  }
  NCCLCHECK(res);
  if (errors_.failed()) return errors_.report();
  return ncclSuccess;
}

// --- receive side --------------------------------------------------------------------------------------

RecvComm::RecvComm(UniqueFd ctrl, std::vector<UniqueFd> data, const Knobs& knobs, uint64_t magic,
                   const SocketAddress& peer)
    : Comm(false, std::move(ctrl), std::move(data), knobs, magic, peer), staging_(new char[kStagingSize]) {
  for (int i = 0; i < kMaxRecvRequests; i++) {
    pool_[i].comm = this;
    free_[nFree_++] = kMaxRecvRequests - 1 - i;
  }
  flushRequest_.kind = Request::Kind::Flush;
  flushRequest_.comm = this;
}

ncclResult_t RecvComm::irecv(int n, void** data, size_t* sizes, int* tags, void** request) {
  *request = nullptr;
  if (n < 1 || n > kMaxRecvs)
    return setError(nullptr, ncclInvalidArgument,
                    "NET/Socket: irecv of %d buffers from %s: the Socket net takes 1 to %d (its maxRecvs)", n,
                    peer_.c_str(), kMaxRecvs);
  if (!data || !sizes || !tags)
    return setError(nullptr, ncclInvalidArgument, "NET/Socket: irecv from %s with a NULL %s array", peer_.c_str(),
                    !data    ? "data"
                    : !sizes ? "sizes"
                             : "tags");
  for (int i = 0; i < n; i++)
    if (sizes[i] > 0 && !data[i])
      return setError(nullptr, ncclInvalidArgument, "NET/Socket: irecv from %s: buffer %d of %zu bytes is NULL",
                      peer_.c_str(), i, sizes[i]);
  if (errors_.failed()) return errors_.report();
  if (nFree_ == 0) return ncclSuccess;  // full: the caller tries again after testing some requests
  RecvRequest* r = &pool_[free_[--nFree_]];
  r->kind = Request::Kind::Recv;
  r->n = n;
  r->matched = 0;
  for (int i = 0; i < n; i++) {
    r->data[i] = (char*)data[i];
    r->capacity[i] = sizes[i];
    r->tags[i] = tags[i];
    r->received[i] = 0;
    r->filled[i] = false;
  }
  r->pending.store(0, std::memory_order_relaxed);
  queue_[queueTail_++ % kMaxRecvRequests] = r;
  *request = static_cast<Request*>(r);
  (void)progress();  // as isend: a failure found here is test()'s to report
  data_.progress();
  return ncclSuccess;
}

ncclResult_t RecvComm::iflush(void** request) {
  if (errors_.failed()) return errors_.report();
  *request = &flushRequest_;
  return ncclSuccess;
}

void RecvComm::finishMessage() {
  RecvRequest* r = queue_[queueHead_ % kMaxRecvRequests];
  if (++r->matched == r->n) queueHead_++;
}

// Reads headers and inline payloads for the receives posted, as far as the control socket has them.
ncclResult_t RecvComm::progress() {
  while (queueHead_ != queueTail_) {
    if (inPayload_) {
      size_t take = std::min(payloadLeft_, stagingEnd_ - stagingBegin_);
      memcpy(payloadDst_, staging_.get() + stagingBegin_, take);
      stagingBegin_ += take;
      payloadDst_ += take;
      payloadLeft_ -= take;
      while (payloadLeft_ > 0) {  // the rest straight into the user's buffer
        ssize_t k = recv(ctrl_.get(), payloadDst_, payloadLeft_, MSG_DONTWAIT);
        if (k > 0) {
          payloadDst_ += k;
          payloadLeft_ -= (size_t)k;
          continue;
        }
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && wouldBlock(errno)) return ncclSuccess;
        return failCtrl(k, errno, "receiving a message");
      }
      inPayload_ = false;
      finishMessage();
      continue;
    }
    size_t have = stagingEnd_ - stagingBegin_;
    if (have < sizeof(WireHeader)) {
      if (stagingBegin_ > 0) {  // fewer than a header's bytes move
        memmove(staging_.get(), staging_.get() + stagingBegin_, have);
        stagingBegin_ = 0;
        stagingEnd_ = have;
      }
      ssize_t k = recv(ctrl_.get(), staging_.get() + stagingEnd_, kStagingSize - stagingEnd_, MSG_DONTWAIT);
      if (k > 0) {
        stagingEnd_ += (size_t)k;
        continue;
      }
      if (k < 0 && errno == EINTR) continue;
      if (k < 0 && wouldBlock(errno)) return ncclSuccess;
      return failCtrl(k, errno, "waiting for a message");
    }
    WireHeader h;
    memcpy(&h, staging_.get() + stagingBegin_, sizeof(h));
    stagingBegin_ += sizeof(h);
    NCCLCHECK(takeHeader(queue_[queueHead_ % kMaxRecvRequests], h));
  }
  return ncclSuccess;
}

// Matches one message to a buffer of receive r (by tag) and starts moving its payload.
ncclResult_t RecvComm::takeHeader(RecvRequest* r, const WireHeader& h) {
  if (h.check != expectedCheck(seq_))
    return fail(ncclRemoteError,
                "NET/Socket: %s sent a corrupt message header (check %#x, expected %#x for message %u): the stream "
                "is out of step, or the peer is not a Plexus socket net of this version. The connection cannot be "
                "used further",
                peer_.c_str(), h.check, expectedCheck(seq_), seq_);
  seq_++;
  int i = 0;
  while (i < r->n && (r->filled[i] || r->tags[i] != h.tag)) i++;
  if (i == r->n) {
    char tags[128] = "";
    for (int j = 0; j < r->n; j++)
      snprintf(tags + strlen(tags), sizeof(tags) - strlen(tags), "%s%d%s", j ? "," : "", r->tags[j],
               r->filled[j] ? "(filled)" : "");
    return fail(ncclInvalidUsage,
                "NET/Socket: %s sent a message with tag %d, but the receive it matches has no unfilled buffer with "
                "that tag (tags %s). Sends and receives match in posting order; a send's tag must be one of the "
                "tags of the receive it meets",
                peer_.c_str(), h.tag, tags);
  }
  if (h.size > r->capacity[i])
    return fail(ncclInvalidUsage,
                "NET/Socket: %s sent %llu bytes (tag %d) to a receive buffer of %zu bytes: a message may not be "
                "larger than the receive it matches. Post a larger receive, or send less",
                peer_.c_str(), (unsigned long long)h.size, h.tag, r->capacity[i]);
  r->filled[i] = true;
  r->received[i] = h.size;
  if (h.chunkSize == 0) {
    inPayload_ = true;
    payloadDst_ = r->data[i];
    payloadLeft_ = h.size;
    return ncclSuccess;
  }
  uint64_t nChunks = (h.size + h.chunkSize - 1) / h.chunkSize;
  if (h.size == 0 || nChunks > (uint64_t)data_.nSockets())
    return fail(ncclRemoteError,
                "NET/Socket: %s sent a corrupt message header (%llu bytes in chunks of %llu over %d data sockets). "
                "The connection cannot be used further",
                peer_.c_str(), (unsigned long long)h.size, (unsigned long long)h.chunkSize, data_.nSockets());
  NCCLCHECK(data_.post(r->data[i], h.size, h.chunkSize, &r->pending));
  finishMessage();
  return ncclSuccess;
}

ncclResult_t RecvComm::test(Request* request, int* done, int* sizes) {
  if (request->kind == Request::Kind::Flush) {
    *done = 1;
    return ncclSuccess;
  }
  RecvRequest* r = static_cast<RecvRequest*>(request);
  ncclResult_t res = progress();  // as SendComm::test: a complete request is reported done regardless
  data_.progress();
  if (r->matched == r->n && r->pending.load(std::memory_order_acquire) == 0) {
    *done = 1;
    if (sizes)
      for (int i = 0; i < r->n; i++) sizes[i] = clampSize(r->received[i]);
    r->kind = Request::Kind::Free;
    free_[nFree_++] = (int)(r - pool_);
    return ncclSuccess;
  }
  NCCLCHECK(res);
  if (errors_.failed()) return errors_.report();
  return ncclSuccess;
}

}  // namespace plexus::socketnet
