#include <cstdio>
#include <cstring>

#include "transport/net/socket/common.h"

namespace plexus::socketnet {

const char* helloProblem(const void* data, size_t size, const Handle& handle, char* why, size_t n) {
  Hello h;
  if (size < sizeof(h)) {
    snprintf(why, n, "a hello of %zu bytes, not %zu", size, sizeof(h));
    return why;
  }
  memcpy(&h, data, sizeof(h));
  if (h.magic != handle.magic) {
    snprintf(why, n, "it presented magic %#llx, not this listener's (a stale or foreign connection)",
             (unsigned long long)h.magic);
    return why;
  }
  if (h.version != kProtocolVersion || h.nSocks != handle.nSocks || h.index > h.nSocks) {
    snprintf(why, n, "malformed hello (protocol %u, socket %u of %u; expected protocol %u, %u sockets)", h.version,
             h.index, h.nSocks, kProtocolVersion, handle.nSocks);
    return why;
  }
  return nullptr;
}

}  // namespace plexus::socketnet
