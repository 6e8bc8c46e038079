// libFuzzer target: what a bootstrap rank reads from other ranks: the hello of a ring or P2P connection (judged
// in Bootstrap::acceptPeer) and the frames of P2P messages (header: tag, length). The input's first bytes set
// the accepting rank's state (nranks, what it awaits, which ranks already have a P2P connection in), then
// come a hello and a stream of frames.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "bootstrap/wire.h"

using namespace plexus::wire;

namespace {

constexpr uint64_t kMagic = 0x0280028002800280ull;

#define EXPECT(cond)      \
  do {                    \
    if (!(cond)) abort(); \
  } while (0)

struct __attribute__((packed)) State {
  uint8_t nranks;  // 1..64 after the modulo
  uint8_t ring;    // odd: awaiting the ring's previous rank, else a P2P connection
  uint8_t peer;
  uint64_t connected;  // bit r: rank r already has a P2P connection in
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  State st;
  if (size < sizeof(st)) return 0;
  memcpy(&st, data, sizeof(st));
  data += sizeof(st);
  size -= sizeof(st);
  const int nranks = st.nranks % 64 + 1, peer = st.peer % nranks;
  const int wantType = st.ring & 1 ? kTypeRing : kTypeP2p;
  bool touchedOutside = false;
  auto hasRecv = [&](int r) {
    if (r < 0 || r >= nranks) touchedOutside = true;  // would index recvSocks_ out of bounds
    return r >= 0 && r < 64 && (st.connected >> r & 1);
  };
  const size_t helloSize = size < sizeof(PeerHello) ? size : sizeof(PeerHello);
  const char* bad = peerHelloProblem(data, helloSize, kMagic, nranks, wantType, peer, hasRecv);
  EXPECT(!touchedOutside);
  if (!bad) {
    PeerHello h;
    memcpy(&h, data, sizeof(h));
    EXPECT(h.magic == kMagic && h.rank >= 0 && h.rank < nranks);
    const bool awaited = h.type == wantType && h.rank == peer;
    // Anything else that is kept must be a P2P connection for a slot that is free.
    EXPECT(awaited || (h.type == kTypeP2p && !(st.connected >> h.rank & 1)));
  }
  data += helloSize;
  size -= helloSize;
  // Frames, as Bootstrap::recv reads them: a header, then exactly its length.
  while (size > 0) {
    MsgHeader hdr;
    const size_t n = size < sizeof(hdr) ? size : sizeof(hdr);
    if (!parseMsgHeader(data, n, &hdr)) return 0;  // the stream is corrupt: the connection is closed
    EXPECT(n == sizeof(hdr) && hdr.size <= kMaxMessage);
    data += n;
    size -= n;
    if (hdr.size > size) return 0;  // the rest of the payload never comes: recvAll times out
    data += hdr.size;
    size -= hdr.size;
  }
  return 0;
}
