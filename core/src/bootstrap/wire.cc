#include "bootstrap/wire.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

namespace plexus::wire {

const char* rootHelloProblem(const void* data, size_t size, uint64_t magic) {
  Hello h;
  if (size < sizeof(h)) return "a short hello";
  memcpy(&h, data, sizeof(h));
  if (h.magic != magic) return "wrong magic (not a rank of this communicator)";
  if (h.type != kTypeRoot) return "wrong connection type";
  return nullptr;
}

namespace {

// Both the hello and the registration must be in; anything shorter is the caller's bug, treated as garbage.
bool readInfo(const void* data, size_t size, RootInfo* info) {
  if (size < kRegistrationSize) return false;
  memcpy(info, (const char*)data + sizeof(Hello), sizeof(*info));
  return true;
}

// addressPort's twin: this file links alone into the fuzz targets.
uint16_t portOf(const SocketAddress& a) {
  return ntohs(a.sa.sa_family == AF_INET6 ? a.sin6.sin6_port : a.sin.sin_port);
}

}  // namespace

void Registry::note(const void* data, size_t size) {
  RootInfo info;
  if (!readInfo(data, size, &info)) return;
  if (info.nranks >= 1 && info.blockCount >= 1 && info.blockCount <= info.nranks)
    maxNranks_ = std::max(maxNranks_, info.blockCount + (info.blockCount < info.nranks ? 1 : 0));
}

std::string Registry::blockName(int nranks, int first, int count) {
  return count == nranks ? "0-" + std::to_string(nranks - 1) + " (all)"
                         : std::to_string(first) + "-" + std::to_string(first + count - 1);
}

Registry::Verdict Registry::add(const void* data, size_t size, int conn, const std::string& from, std::string* why) {
  RootInfo info;
  if (!readInfo(data, size, &info)) {
    *why = "a registration of " + std::to_string(size) + " bytes (from " + from + ")";
    return Verdict::Reject;
  }
  auto reject = [&](std::string msg) {
    *why = std::move(msg);
    return Verdict::Reject;
  };
  if (info.nranks < 1 || info.rank < 0 || info.rank >= info.nranks)
    return reject("rank " + std::to_string(info.rank) + " (from " + from +
                  ") registered with nranks=" + std::to_string(info.nranks) + ": the rank must be in [0, nranks)");
  // Written so that no sum can overflow: every field is the sender's.
  if (info.blockFirst < 0 || info.blockCount < 1 || info.blockFirst > info.nranks - info.blockCount)
    return reject("rank " + std::to_string(info.rank) + " (from " + from + ") registered for ranks [" +
                  std::to_string(info.blockFirst) + ", +" + std::to_string(info.blockCount) + ") of " +
                  std::to_string(info.nranks) + ", which is not a block of the communicator");
  if (nranks_ < 0) {
    nranks_ = info.nranks;
    blockFirst_ = info.blockFirst;
    blockCount_ = info.blockCount;
    firstRank_ = info.rank;
  }
  const std::string theirs = blockName(info.nranks, info.blockFirst, info.blockCount);
  if (info.nranks != nranks_)
    return reject("rank " + std::to_string(info.rank) + " says nranks=" + std::to_string(info.nranks) + " but rank " +
                  std::to_string(firstRank_) + " says nranks=" + std::to_string(nranks_) +
                  ". Every rank must pass the same nranks");
  if (info.blockFirst != blockFirst_ || info.blockCount != blockCount_)
    return reject("rank " + std::to_string(info.rank) + " expects this root to serve ranks " + theirs + " but rank " +
                  std::to_string(firstRank_) + " expects ranks " + blockName(nranks_, blockFirst_, blockCount_) +
                  ". Every rank must pass the same nranks and the same unique ids, in the same order");
  if (info.neighbor) {
    if (blockCount_ == nranks_ || info.rank != successor())
      return reject("rank " + std::to_string(info.rank) + " (from " + from + ") registered as the successor of ranks " +
                    theirs + ", which is rank " + std::to_string(successor()) +
                    ". Every rank must pass the same unique ids, in the same order");
    if (neighbor_)
      return reject("rank " + std::to_string(info.rank) + " registered twice as a successor (from " + neighbor_->from +
                    " and " + from + ")");
    neighbor_ = Registered{conn, from, info.listenAddr};
  } else {
    if (info.rank < blockFirst_ || info.rank - blockFirst_ >= blockCount_)
      return reject("rank " + std::to_string(info.rank) + " (from " + from + ") registered with the root of ranks " +
                    theirs + ". Every rank must pass the same unique ids, in the same order");
    if (auto it = ranks_.find(info.rank); it != ranks_.end())
      return reject("rank " + std::to_string(info.rank) + " registered twice (from " + it->second.from + " and " +
                    from + "). Every rank must pass a distinct rank");
    ranks_[info.rank] = Registered{conn, from, info.listenAddr};
  }
  if ((int)ranks_.size() < blockCount_ || (blockCount_ < nranks_ && !neighbor_)) return Verdict::Wait;
  return Verdict::Complete;
}

std::vector<std::pair<int, const SocketAddress*>> Registry::replies() const {
  std::vector<std::pair<int, const SocketAddress*>> out;
  if ((int)ranks_.size() < blockCount_ || (blockCount_ < nranks_ && !neighbor_)) return out;  // not complete
  // ranks_ holds every rank of the block, once each: its successor is the next entry, or past the block's last
  // rank the first one (one root) or the next block's first rank.
  for (auto it = ranks_.begin(); it != ranks_.end(); ++it) {
    auto nx = std::next(it);
    const SocketAddress* next = nx != ranks_.end()       ? &nx->second.listenAddr
                                : blockCount_ == nranks_ ? &ranks_.begin()->second.listenAddr
                                                         : &neighbor_->listenAddr;
    out.push_back({it->second.conn, next});
  }
  if (neighbor_) out.push_back({neighbor_->conn, nullptr});
  return out;
}

std::vector<int> Registry::takeAll() {
  std::vector<int> out;
  for (auto& [r, reg] : ranks_) out.push_back(reg.conn);
  if (neighbor_) out.push_back(neighbor_->conn);
  ranks_.clear();
  neighbor_.reset();
  return out;
}

std::string Registry::missing() const {
  if (nranks_ < 0) return "";
  // Ranges of missing ranks, in order; walking the registered ranks keeps this small whatever nranks says.
  std::vector<std::pair<int, int>> gaps;
  auto addGap = [&](int a, int b) {
    if (!gaps.empty() && gaps.back().second + 1 == a)
      gaps.back().second = b;
    else
      gaps.push_back({a, b});
  };
  const int succ = blockCount_ < nranks_ && !neighbor_ ? successor() : -1;
  if (succ == 0) addGap(0, 0);  // the block ends at the last rank: its successor wraps to rank 0
  int r = blockFirst_;
  for (auto& [k, reg] : ranks_) {
    if (k > r) addGap(r, k - 1);
    r = k + 1;
  }
  const int last = blockFirst_ + blockCount_ - 1;
  if (r <= last) addGap(r, last);
  if (succ > 0) addGap(succ, succ);
  std::string out;
  for (auto& [a, b] : gaps) {
    if (out.size() > 200) return out + ", ...";
    if (!out.empty()) out += ", ";
    out += std::to_string(a);
    if (b > a) {
      out += '-';
      out += std::to_string(b);
    }
  }
  return out;
}

ncclResult_t parseRootReply(const void* data, size_t size, SocketAddress* next, std::string* why) {
  RootReply reply;
  if (size < sizeof(reply)) {
    *why = "sent a reply of " + std::to_string(size) + " bytes, not " + std::to_string(sizeof(reply));
    return ncclInternalError;
  }
  memcpy(&reply, data, sizeof(reply));
  if (reply.result != ncclSuccess) {
    reply.message[sizeof(reply.message) - 1] = '\0';
    // Only a failure may come back: a code that is none (ncclInProgress, garbage) must not read as success.
    ncclResult_t res = reply.result > 0 && reply.result < ncclNumResults && reply.result != ncclInProgress
                           ? (ncclResult_t)reply.result
                           : ncclInternalError;
    *why = std::string("failed the communicator: ") + reply.message;
    return res;
  }
  if (next) {
    const int family = reply.next.sa.sa_family;
    if ((family != AF_INET && family != AF_INET6) || portOf(reply.next) == 0) {
      *why = "sent a corrupt reply (the next rank's address has family " + std::to_string(family) + ", port " +
             std::to_string(portOf(reply.next)) + ")";
      return ncclInternalError;
    }
    *next = reply.next;
  }
  return ncclSuccess;
}

const char* peerHelloProblem(const void* data, size_t size, uint64_t magic, int nranks, int wantType, int wantPeer,
                             const std::function<bool(int)>& hasRecv) {
  PeerHello h;
  if (size < sizeof(h)) return "a short hello";
  memcpy(&h, data, sizeof(h));
  return h.magic != magic                                                       ? "wrong magic"
         : h.type != kTypeRing && h.type != kTypeP2p                            ? "wrong connection type"
         : h.rank < 0 || h.rank >= nranks                                       ? "rank out of range"
         : h.type == kTypeRing && (wantType != kTypeRing || h.rank != wantPeer) ? "unexpected ring connection"
         : h.type == kTypeP2p && !(wantType == kTypeP2p && h.rank == wantPeer) && hasRecv(h.rank)
             ? "second connection from one rank"
             : nullptr;
}

bool parseMsgHeader(const void* data, size_t size, MsgHeader* out) {
  if (size < sizeof(*out)) return false;
  memcpy(out, data, sizeof(*out));
  return out->size <= kMaxMessage;
}

}  // namespace plexus::wire
