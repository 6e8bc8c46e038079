// net-ib: the Wire of one connection over real RC queue pairs: its completion queue, nqps data queue pairs to the
// peer and, on the receiving side, one more queue pair connected to itself for the GPUDirect flush (RDMA READ).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <vector>

#include "device.h"
#include "wire.h"

namespace plexus::net_ib {

// What one side of a connection tells the other, once, over the TCP socket that introduces them.
struct QpInfo {
  uint32_t magic;
  uint32_t nqps;
  uint32_t qpn[16];
  uint16_t lid;
  uint8_t linkLayer;
  uint8_t mtu;
  uint8_t gid[16];
  uint64_t sharedAddr;  // the engine's shared area (engine.h) and its remote key
  uint32_t sharedRkey;
  uint32_t reserved;
};
static_assert(sizeof(QpInfo) == 112, "QpInfo travels between builds of this plugin");
constexpr uint32_t kQpInfoMagic = 0x50784942;  // "PxIB"

class VerbsWire : public Wire {
 public:
  ~VerbsWire() override;
  // Creates the completion queue and queue pairs in INIT; false with *error on failure.
  bool create(Device* d, int nqps, bool flushQp, std::string* error);
  void describe(QpInfo* info) const;  // this side's queue pairs, for the peer
  // Moves every queue pair to RTR and RTS against the peer (and the flush queue pair against itself).
  bool connect(const QpInfo& peer, std::string* error);

  int post(int qp, const WorkRequest& wr) override;
  int postRecv(int qp, uint64_t id) override;
  int poll(Completion* out, int max) override;
  std::string statusText(int status) const override;

 private:
  bool toRtr(ibv_qp* qp, uint32_t remoteQpn, uint16_t lid, const uint8_t* gid, ibv_mtu mtu, std::string* error);
  bool toRts(ibv_qp* qp, std::string* error);

  const Verbs* v_ = nullptr;
  Device* dev_ = nullptr;
  ibv_cq* cq_ = nullptr;
  std::vector<ibv_qp*> qps_;  // data queue pairs, then the flush queue pair if any
};

}  // namespace plexus::net_ib
