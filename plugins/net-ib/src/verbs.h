// net-ib: libibverbs, opened at run time (dlopen "libibverbs.so.1") so that the plugin loads, and says why it has
// no device, on a machine without rdma-core. Only the calls below are used; ibv_post_send, ibv_post_recv and
// ibv_poll_cq are inline in <infiniband/verbs.h> (they go through the context's ops) and need no symbol.
#pragma once

#include <infiniband/verbs.h>

#include <string>

namespace plexus::net_ib {

struct Verbs {
  ibv_device** (*getDeviceList)(int*);
  void (*freeDeviceList)(ibv_device**);
  const char* (*getDeviceName)(ibv_device*);
  ibv_context* (*openDevice)(ibv_device*);
  int (*closeDevice)(ibv_context*);
  int (*queryDevice)(ibv_context*, ibv_device_attr*);
  int (*queryPort)(ibv_context*, uint8_t, ibv_port_attr*);
  int (*queryGid)(ibv_context*, uint8_t, int, ibv_gid*);
  ibv_pd* (*allocPd)(ibv_context*);
  int (*deallocPd)(ibv_pd*);
  ibv_mr* (*regMr)(ibv_pd*, void*, size_t, int);
  ibv_mr* (*regDmabufMr)(ibv_pd*, uint64_t, size_t, uint64_t, int, int);  // NULL before rdma-core 34
  int (*deregMr)(ibv_mr*);
  ibv_cq* (*createCq)(ibv_context*, int, void*, ibv_comp_channel*, int);
  int (*destroyCq)(ibv_cq*);
  ibv_qp* (*createQp)(ibv_pd*, ibv_qp_init_attr*);
  int (*modifyQp)(ibv_qp*, ibv_qp_attr*, int);
  int (*destroyQp)(ibv_qp*);
  int (*getAsyncEvent)(ibv_context*, ibv_async_event*);
  void (*ackAsyncEvent)(ibv_async_event*);
  const char* (*eventTypeStr)(ibv_event_type);
  const char* (*wcStatusStr)(ibv_wc_status);
};

// The table, or nullptr with *why saying what was missing ("libibverbs.so.1: cannot open shared object file").
const Verbs* verbs(std::string* why);

}  // namespace plexus::net_ib
