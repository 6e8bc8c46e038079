// The bootstrap's wire formats, and the checks every byte read from the network passes before it is trusted.
// Pure functions of their arguments (no sockets, no logging), so that the fuzz targets in tests/fuzz/ run exactly
// the code the root and the ranks run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bootstrap/socket.h"
#include "nccl.h"

namespace plexus::wire {

// Connection types announced after the magic, as NCCL's ncclSocketType (Bootstrap = 1 talks to the root).
constexpr int32_t kTypeRoot = 1;
constexpr int32_t kTypeRing = 16;
constexpr int32_t kTypeP2p = 17;

constexpr uint64_t kMaxMessage = 1ull << 30;  // any length field above this means a corrupt stream

// NCCL's handshake: every connection first sends its magic and type.
struct __attribute__((packed)) Hello {
  uint64_t magic;
  int32_t type;
};
struct __attribute__((packed)) PeerHello {  // rank to rank: the hello plus who is calling
  uint64_t magic;
  int32_t type;
  int32_t rank;
};
struct RootInfo {  // rank -> root, right after the hello
  int32_t rank, nranks;
  // The ranks this root serves (ncclCommInitRankScalable spreads them over several roots in contiguous
  // blocks); [0, nranks) with one root.
  int32_t blockFirst, blockCount;
  // 1: `rank` is the first rank of the next block, registering only its address with this root so that
  // the last rank of this block learns its successor (the ring is stitched across blocks this way).
  int32_t neighbor;
  int32_t pad;
  SocketAddress listenAddr;
};
struct RootReply {  // root -> rank: the next rank's address, or why the communicator failed
  int32_t result;
  int32_t pad;
  SocketAddress next;
  char message[468];
};
struct MsgHeader {  // frames every P2P message
  int32_t tag;
  uint32_t pad;
  uint64_t size;
};

constexpr size_t kRegistrationSize = sizeof(Hello) + sizeof(RootInfo);  // what a rank sends its root

// The root, once the first sizeof(Hello) bytes of a registration are in: nullptr when they come from a rank of
// this communicator (magic) registering (type), else why the connection is dropped.
const char* rootHelloProblem(const void* data, size_t size, uint64_t magic);

// The root's bookkeeping of registrations (NCCL's bootstrapRoot state), apart from the sockets: `conn` is the
// caller's key for the connection a registration came on, `from` its peer's address for messages.
class Registry {
 public:
  enum class Verdict {
    Wait,      // registered; more ranks to come
    Complete,  // every rank of the block (and its successor) is in: replies() says what to send
    Reject,    // inconsistent: *why says so, and the communicator fails
  };
  // Every complete registration, before add() and even after a failure: sizes the failure's linger (maxNranks).
  void note(const void* data, size_t size);
  // One complete registration (kRegistrationSize bytes whose hello passed rootHelloProblem).
  Verdict add(const void* data, size_t size, int conn, const std::string& from, std::string* why);

  // After Complete: each registered connection with the address to send it (nullptr: the successor of the
  // block, which only registered its address).
  std::vector<std::pair<int, const SocketAddress*>> replies() const;
  // The connections registered so far, forgotten (the communicator failed: each is told why, then closed).
  std::vector<int> takeAll();
  // How many ranks this root waits for; 0 before the first registration.
  int expected() const { return nranks_ < 0 ? 0 : blockCount_ + (blockCount_ < nranks_ ? 1 : 0); }
  int registered() const { return (int)ranks_.size() + (neighbor_ ? 1 : 0); }
  // "3, 5-7": the ranks that have not registered yet.
  std::string missing() const;
  // The most ranks that may still come to be told of a failure, over every registration seen (valid or not).
  int maxNranks() const { return maxNranks_; }

 private:
  struct Registered {
    int conn;
    std::string from;
    SocketAddress listenAddr;
  };
  int successor() const { return (blockFirst_ + blockCount_) % nranks_; }
  static std::string blockName(int nranks, int first, int count);

  std::map<int, Registered> ranks_;
  std::optional<Registered> neighbor_;  // the first rank of the next block (several roots only)
  int nranks_ = -1, firstRank_ = -1, maxNranks_ = 0;
  int blockFirst_ = 0, blockCount_ = 0;
};

// A rank, on the root's reply (sizeof(RootReply) bytes). ncclSuccess with *next set when next is given; else
// the failure to report, and *why ends "the root at X ..." ("failed the communicator: ...").
ncclResult_t parseRootReply(const void* data, size_t size, SocketAddress* next, std::string* why);

// A rank's accept loop, on a connection's hello (sizeof(PeerHello) bytes): nullptr when it is the awaited
// connection (wantType from wantPeer) or a P2P connection to keep for later, else why it is dropped.
// hasRecv(r) says whether rank r already has a P2P connection in.
const char* peerHelloProblem(const void* data, size_t size, uint64_t magic, int nranks, int wantType, int wantPeer,
                             const std::function<bool(int)>& hasRecv);

// A P2P message header (sizeof(MsgHeader) bytes): false when its length cannot be real (the stream is corrupt).
bool parseMsgHeader(const void* data, size_t size, MsgHeader* out);

}  // namespace plexus::wire
