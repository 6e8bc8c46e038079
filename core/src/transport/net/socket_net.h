// The built-in socket net: an NCCL net plugin (ncclNet_v12_t, named "Socket") over TCP, compiled into
// libplexus so that a machine with no vendor plugin still carries inter-node traffic. The core reaches it
// through the plugin list (plugin/net.h: netPluginSocket); test plugins reach it with
// dlsym(RTLD_DEFAULT, "plexusSocketNet_v12"), which is why the table has default visibility.
//
// How it works (details in socket/*.h):
//   - devices are the interfaces NCCL's socket net would use (NCCL_SOCKET_IFNAME, NCCL_SOCKET_FAMILY), up
//     to 16; process-wide state is reference counted by init/finalize;
//   - a connection is one control socket plus NCCL_NSOCKS_PERTHREAD x NCCL_SOCKET_NTHREADS data sockets;
//     every socket opens with a magic-checked hello, and connect/accept never block;
//   - the control socket carries one small header per message, and the payload of messages up to
//     NCCL_SOCKET_INLINE bytes; larger payloads are cut into at most one chunk per data socket, moved by
//     the connection's helper threads straight between the user's buffer and the kernel (no copies);
//   - messages match in posting order; a receive of n buffers (n <= 8) takes the next n messages, each
//     into the buffer whose tag it carries.
// A comm is driven by one thread at a time (NCCL's proxy model); different comms are independent.
#pragma once

#include <plexus/net_v12.h>

extern "C" {
__attribute__((visibility("default"))) extern const ncclNet_v12_t plexusSocketNet_v12;
}
