// libFuzzer target: what the bootstrap root reads from the network (each rank's hello and registration, judged
// by wire::Registry) and what a rank reads back (the root's reply). The input is a stream of registrations,
// as if each came on a connection of its own, then a reply.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "bootstrap/wire.h"

using namespace plexus;
using namespace plexus::wire;

namespace {

constexpr uint64_t kMagic = 0x0280028002800280ull;

#define EXPECT(cond)      \
  do {                    \
    if (!(cond)) abort(); \
  } while (0)

void fuzzRegistrations(const uint8_t* data, size_t size) {
  Registry reg;
  bool failed = false;
  int conn = 0;
  while (size > 0) {
    const size_t n = size < kRegistrationSize ? size : kRegistrationSize;
    const uint8_t* msg = data;
    data += n;
    size -= n;
    if (rootHelloProblem(msg, n, kMagic) || n < kRegistrationSize) continue;  // dropped, as the root does
    reg.note(msg, n);
    if (failed) continue;  // a failed root only tells late ranks why
    std::string why;
    switch (reg.add(msg, n, conn++, "127.0.0.1:1", &why)) {
      case Registry::Verdict::Reject:
        EXPECT(!why.empty());
        reg.takeAll();
        failed = true;
        break;
      case Registry::Verdict::Wait:
        EXPECT(reg.registered() < reg.expected());
        break;
      case Registry::Verdict::Complete: {
        EXPECT(reg.registered() == reg.expected());
        auto replies = reg.replies();
        EXPECT((int)replies.size() == reg.expected());
        for (auto& [c, next] : replies) EXPECT(c >= 0 && c < conn);
        return;  // the root is done
      }
    }
    EXPECT(reg.missing().size() < 260);  // messages stay short whatever nranks says
    EXPECT(reg.maxNranks() >= 0);
  }
}

void fuzzReply(const uint8_t* data, size_t size) {
  SocketAddress next{};
  std::string why;
  ncclResult_t res = parseRootReply(data, size, &next, &why);
  EXPECT(res != ncclInProgress);  // would read as success to NCCLCHECK
  if (res == ncclSuccess) {
    EXPECT(next.sa.sa_family == AF_INET || next.sa.sa_family == AF_INET6);
  } else {
    EXPECT(!why.empty() && why.size() < 600);
  }
  res = parseRootReply(data, size, nullptr, &why);  // the successor's registration: no address expected
  EXPECT(res != ncclInProgress);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The first byte picks the reader, so that one corpus serves both.
  if (size < 1) return 0;
  if (data[0] & 1)
    fuzzReply(data + 1, size - 1);
  else
    fuzzRegistrations(data + 1, size - 1);
  return 0;
}
