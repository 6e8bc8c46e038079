// libFuzzer target: what the socket net's listener reads from a connecting peer: the hello on each socket
// (magic, connection id, socket index, count, protocol version), judged by helloProblem, then filed by index
// into its connection's socket slots as Listener::file does.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "transport/net/socket/common.h"

using namespace plexus::socketnet;

#define EXPECT(cond)      \
  do {                    \
    if (!(cond)) abort(); \
  } while (0)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  Handle handle{};
  handle.signature = kHandleSignature;
  handle.version = kProtocolVersion;
  handle.nSocks = (uint16_t)(data[0] % kMaxSocks + 1);  // what the listener's knobs may say
  handle.magic = 0x0280028002800280ull;
  data++;
  size--;
  std::map<uint64_t, std::vector<bool>> groups;  // connection id -> socket slots filled
  while (size > 0) {
    const size_t n = size < sizeof(Hello) ? size : sizeof(Hello);
    char why[160];
    const char* bad = helloProblem(data, n, handle, why, sizeof(why));
    if (bad) {
      EXPECT(bad == why && strlen(why) < sizeof(why));
    } else {
      Hello h;
      EXPECT(n == sizeof(h));
      memcpy(&h, data, sizeof(h));
      auto& slots = groups.try_emplace(h.connId, handle.nSocks + 1, false).first->second;
      EXPECT(h.index < slots.size());  // Listener::file indexes its sockets with it
      slots.at(h.index) = true;
    }
    data += n;
    size -= n;
  }
  return 0;
}
