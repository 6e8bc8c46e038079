#include "device.h"

#include <endian.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <thread>

#include "log.h"

namespace plexus::net_ib {
namespace {

std::string readLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

bool exists(const char* path) { return access(path, F_OK) == 0; }

// The HCA's asynchronous events, read for the life of the process (the call blocks until one comes).
void watchEvents(const Verbs* v, ibv_context* context, std::vector<Device*> ports) {
  for (;;) {
    ibv_async_event ev;
    if (v->getAsyncEvent(context, &ev) != 0) return;
    const ibv_event_type type = ev.event_type;
    const int port = (type == IBV_EVENT_PORT_ERR || type == IBV_EVENT_PORT_ACTIVE) ? (int)ev.element.port_num : 0;
    v->ackAsyncEvent(&ev);
    const bool fatal = type == IBV_EVENT_PORT_ERR || type == IBV_EVENT_DEVICE_FATAL || type == IBV_EVENT_QP_FATAL ||
                       type == IBV_EVENT_QP_ACCESS_ERR || type == IBV_EVENT_CQ_ERR || type == IBV_EVENT_QP_REQ_ERR;
    for (Device* d : ports) {
      if (port && port != d->port) continue;
      const std::string what = std::string(v->eventTypeStr(type)) + " (" + std::to_string((int)type) + ")";
      if (!fatal) {
        IB_INFO(NCCL_NET, "%s: asynchronous event %s", d->name.c_str(), what.c_str());
        continue;
      }
      std::lock_guard<std::mutex> lock(d->asyncMutex);
      if (d->asyncError.empty())
        d->asyncError = (type == IBV_EVENT_PORT_ERR ? "port " + std::to_string(d->port) + " went down: "
                                                    : std::string("the HCA reported ")) +
                        what;
      d->failed = true;
      IB_WARN("device %s (HCA %s port %d): %s", d->name.c_str(), d->hca.c_str(), d->port, d->asyncError.c_str());
    }
  }
}

ibv_mtu mtuOf(int knob, ibv_mtu active) { return knob ? (ibv_mtu)knob : active; }

// A port's GID table, with the type of each entry from sysfs.
std::vector<GidEntry> gidTable(const Verbs* v, ibv_context* ctx, const std::string& hca, int port, int length,
                               bool infiniband) {
  std::vector<GidEntry> table;
  for (int i = 0; i < length && i < 256; i++) {
    ibv_gid g;
    if (v->queryGid(ctx, (uint8_t)port, i, &g) != 0) continue;
    GidEntry e;
    e.index = i;
    memcpy(e.raw, g.raw, 16);
    e.type = gidTypeFromSysfs(readLine("/sys/class/infiniband/" + hca + "/ports/" + std::to_string(port) +
                                       "/gid_attrs/types/" + std::to_string(i)),
                              infiniband);
    table.push_back(e);
  }
  return table;
}

}  // namespace

std::string deviceError(Device* d) {
  if (!d->failed) return "";
  std::lock_guard<std::mutex> lock(d->asyncMutex);
  return "device " + d->name + " (HCA " + d->hca + ", port " + std::to_string(d->port) + "): " + d->asyncError;
}

const std::vector<Device*>& devices(std::string* why) {
  static std::vector<Device*> list;
  static std::string none;
  static std::once_flag once;
  std::call_once(once, [] {
    const Verbs* v = verbs(&none);
    if (!v) return;
    int n = 0;
    ibv_device** devs = v->getDeviceList(&n);
    if (!devs || n == 0) {
      none = "libibverbs lists no RDMA device (no HCA, or its kernel driver and rdma-core provider are not loaded)";
      if (devs) v->freeDeviceList(devs);
      return;
    }
    const Knobs& k = knobs();
    std::string seen;
    for (int i = 0; i < n; i++) {
      const std::string hca = v->getDeviceName(devs[i]);
      ibv_context* ctx = v->openDevice(devs[i]);
      if (!ctx) {
        seen += " " + hca + " (cannot open: " + strerror(errno) + ")";
        continue;
      }
      ibv_device_attr attr{};
      if (v->queryDevice(ctx, &attr) != 0) {
        seen += " " + hca + " (ibv_query_device failed)";
        v->closeDevice(ctx);
        continue;
      }
      std::vector<Device*> ports;
      for (int port = 1; port <= attr.phys_port_cnt; port++) {
        ibv_port_attr pa{};
        if (v->queryPort(ctx, (uint8_t)port, &pa) != 0) continue;
        const std::string name = hca + ":" + std::to_string(port);
        if (pa.state != IBV_PORT_ACTIVE) {
          seen += " " + name + " (not active)";
          continue;
        }
        if (pa.link_layer != IBV_LINK_LAYER_INFINIBAND && pa.link_layer != IBV_LINK_LAYER_ETHERNET) {
          seen += " " + name + " (link layer neither InfiniBand nor Ethernet)";
          continue;
        }
        if (!k.hca.keeps(hca, port)) {
          seen += " " + name + " (NCCL_IB_HCA=" + k.hca.describe() + ")";
          continue;
        }
        const bool ib = pa.link_layer == IBV_LINK_LAYER_INFINIBAND;
        std::string gidWhy;
        const int gidIndex = chooseGid(gidTable(v, ctx, hca, port, pa.gid_tbl_len, ib), ib, k.gid, &gidWhy);
        if (gidIndex < 0) {
          seen += " " + name + " (" + gidWhy + ")";
          continue;
        }
        Device* d = new Device;
        d->name = name;
        d->hca = hca;
        d->port = port;
        d->context = ctx;
        d->linkLayer = pa.link_layer;
        d->lid = pa.lid;
        d->mtu = mtuOf(k.mtu, pa.active_mtu);
        d->speedMbps = portSpeedMbps(pa.active_speed, pa.active_width);
        d->guid = be64toh(attr.node_guid);
        d->gidIndex = gidIndex;
        v->queryGid(ctx, (uint8_t)port, gidIndex, &d->gid);
        d->maxQpWr = attr.max_qp_wr;
        char real[PATH_MAX];
        if (realpath(("/sys/class/infiniband/" + hca + "/device").c_str(), real)) d->pciPath = real;
        d->gdr = exists("/sys/kernel/mm/memory_peers/nv_mem/version") || exists("/sys/module/nvidia_peermem/version") ||
                 exists("/sys/module/nv_peer_mem/version");
        ports.push_back(d);
      }
      if (ports.empty()) {
        v->closeDevice(ctx);
        continue;
      }
      ibv_pd* pd = v->allocPd(ctx);
      if (!pd) {
        seen += " " + hca + " (ibv_alloc_pd failed: " + strerror(errno) + ")";
        for (Device* d : ports) delete d;
        v->closeDevice(ctx);
        continue;
      }
      // ibv_reg_dmabuf_mr with no file: EBADF means the call is there, anything else that it is not.
      bool dmabuf = false;
      if (v->regDmabufMr) {
        errno = 0;
        ibv_mr* probe = v->regDmabufMr(pd, 0, 0, 0, -1, 0);
        dmabuf = !probe && (errno == EBADF);
        if (probe) v->deregMr(probe);
      }
      for (Device* d : ports) {
        d->pd = pd;
        d->dmabuf = dmabuf;
        d->cache.reset(new RegCache((size_t)sysconf(_SC_PAGESIZE),
                                    [v, pd](uintptr_t begin, size_t length, std::string* error) -> void* {
                                      ibv_mr* mr = v->regMr(
                                          pd, (void*)begin, length,
                                          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
                                      if (!mr) *error = std::string("ibv_reg_mr failed: ") + strerror(errno);
                                      return mr;
                                    },
                                    [v](void* mr) { v->deregMr(static_cast<ibv_mr*>(mr)); }));
        list.push_back(d);
        IB_INFO(NCCL_INIT | NCCL_NET, "device %d: %s, %s, %d Mb/s, MTU %d, GID index %d, %s%s%s", (int)list.size() - 1,
                d->name.c_str(), d->linkLayer == IBV_LINK_LAYER_INFINIBAND ? "InfiniBand" : "RoCE", d->speedMbps,
                128 << d->mtu, d->gidIndex, d->pciPath.empty() ? "no PCI path" : d->pciPath.c_str(),
                d->gdr ? ", GPUDirect" : "", d->dmabuf ? ", dmabuf" : "");
      }
      std::thread(watchEvents, v, ctx, ports).detach();
    }
    v->freeDeviceList(devs);
    if (list.empty()) none = "no usable RDMA port:" + seen;
  });
  if (list.empty() && why) *why = none;
  return list;
}

}  // namespace plexus::net_ib
