#include "verbs.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace plexus::net_ib {

const Verbs* verbs(std::string* why) {
  static Verbs table;
  static const Verbs* loaded = nullptr;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    // PLEXUS_IB_VERBS_LIBRARY: another build of libibverbs (an rdma-core of its own prefix, or the tests' stand-in).
    const char* named = getenv("PLEXUS_IB_VERBS_LIBRARY");
    const char* file = named && *named ? named : "libibverbs.so.1";
    void* lib = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      failure = std::string("libibverbs is not installed (") + (e ? e : "dlopen failed") +
                "); install rdma-core's libibverbs1 and the provider of the NIC (ibverbs-providers)";
      return;
    }
    bool ok = true;
    auto sym = [&](const char* name, bool required = true) -> void* {
      // The IBVERBS_1.1 versions are the ones <infiniband/verbs.h> declares.
      void* p = dlvsym(lib, name, "IBVERBS_1.1");
      if (!p) p = dlsym(lib, name);
      if (!p && required) {
        ok = false;
        failure += (failure.empty() ? "libibverbs lacks " : ", ") + std::string(name);
      }
      return p;
    };
#define IB_SYM(member, name) table.member = reinterpret_cast<decltype(table.member)>(sym(name))
    IB_SYM(getDeviceList, "ibv_get_device_list");
    IB_SYM(freeDeviceList, "ibv_free_device_list");
    IB_SYM(getDeviceName, "ibv_get_device_name");
    IB_SYM(openDevice, "ibv_open_device");
    IB_SYM(closeDevice, "ibv_close_device");
    IB_SYM(queryDevice, "ibv_query_device");
    IB_SYM(queryPort, "ibv_query_port");
    IB_SYM(queryGid, "ibv_query_gid");
    IB_SYM(allocPd, "ibv_alloc_pd");
    IB_SYM(deallocPd, "ibv_dealloc_pd");
    IB_SYM(regMr, "ibv_reg_mr");
    IB_SYM(deregMr, "ibv_dereg_mr");
    IB_SYM(createCq, "ibv_create_cq");
    IB_SYM(destroyCq, "ibv_destroy_cq");
    IB_SYM(createQp, "ibv_create_qp");
    IB_SYM(modifyQp, "ibv_modify_qp");
    IB_SYM(destroyQp, "ibv_destroy_qp");
    IB_SYM(getAsyncEvent, "ibv_get_async_event");
    IB_SYM(ackAsyncEvent, "ibv_ack_async_event");
    IB_SYM(eventTypeStr, "ibv_event_type_str");
    IB_SYM(wcStatusStr, "ibv_wc_status_str");
#undef IB_SYM
    table.regDmabufMr = reinterpret_cast<decltype(table.regDmabufMr)>(dlsym(lib, "ibv_reg_dmabuf_mr"));
    if (!ok) {
      failure += " (rdma-core too old?)";
      dlclose(lib);
      return;
    }
    loaded = &table;  // the library stays open for the life of the process, as the plugin's calls may come late
  });
  if (!loaded && why) *why = failure;
  return loaded;
}

}  // namespace plexus::net_ib
