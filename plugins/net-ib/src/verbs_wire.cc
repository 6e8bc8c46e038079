#include "verbs_wire.h"

#include <endian.h>
#include <errno.h>

#include <cstring>

#include "engine.h"

namespace plexus::net_ib {

namespace {
constexpr int kSendDepth = 2 * kSlots * kMaxRecvs + 2 * kSlots;  // size records, chunks, CTS writes, flushes
constexpr int kRecvDepth = kSlots * kMaxRecvs;
}  // namespace

VerbsWire::~VerbsWire() {
  if (!v_) return;
  for (ibv_qp* qp : qps_) v_->destroyQp(qp);
  if (cq_) v_->destroyCq(cq_);
}

bool VerbsWire::create(Device* d, int nqps, bool flushQp, std::string* error) {
  v_ = verbs(error);
  if (!v_) return false;
  dev_ = d;
  const int total = nqps + (flushQp ? 1 : 0);
  cq_ = v_->createCq(d->context, total * (kSendDepth + kRecvDepth), nullptr, nullptr, 0);
  if (!cq_) {
    *error = "ibv_create_cq failed: " + std::string(strerror(errno));
    return false;
  }
  for (int i = 0; i < total; i++) {
    ibv_qp_init_attr init{};
    init.send_cq = cq_;
    init.recv_cq = cq_;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = kSendDepth;
    init.cap.max_recv_wr = kRecvDepth;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    ibv_qp* qp = v_->createQp(d->pd, &init);
    if (!qp) {
      *error = "ibv_create_qp failed: " + std::string(strerror(errno));
      return false;
    }
    qps_.push_back(qp);
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = (uint8_t)d->port;
    attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    if (int err = v_->modifyQp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
      *error = "moving a queue pair to INIT failed: " + std::string(strerror(err));
      return false;
    }
  }
  return true;
}

void VerbsWire::describe(QpInfo* info) const {
  info->magic = kQpInfoMagic;
  info->nqps = 0;
  for (size_t i = 0; i < qps_.size() && i < 16; i++) info->qpn[info->nqps++] = qps_[i]->qp_num;
  info->lid = dev_->lid;
  info->linkLayer = (uint8_t)dev_->linkLayer;
  info->mtu = (uint8_t)dev_->mtu;
  memcpy(info->gid, dev_->gid.raw, 16);
}

bool VerbsWire::toRtr(ibv_qp* qp, uint32_t remoteQpn, uint16_t lid, const uint8_t* gid, ibv_mtu mtu,
                      std::string* error) {
  const Knobs& k = knobs();
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = mtu;
  attr.dest_qp_num = remoteQpn;
  attr.rq_psn = 0;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = 12;
  attr.ah_attr.port_num = (uint8_t)dev_->port;
  attr.ah_attr.sl = (uint8_t)k.serviceLevel;
  if (dev_->linkLayer == IBV_LINK_LAYER_ETHERNET) {
    attr.ah_attr.is_global = 1;
    memcpy(attr.ah_attr.grh.dgid.raw, gid, 16);
    attr.ah_attr.grh.sgid_index = (uint8_t)dev_->gidIndex;
    attr.ah_attr.grh.hop_limit = 255;
    attr.ah_attr.grh.traffic_class = (uint8_t)k.trafficClass;
  } else {
    attr.ah_attr.dlid = lid;
  }
  if (int err = v_->modifyQp(qp, &attr,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
    *error = "moving a queue pair to RTR failed: " + std::string(strerror(err)) +
             (dev_->linkLayer == IBV_LINK_LAYER_ETHERNET ? " (RoCE: check NCCL_IB_GID_INDEX and the peer's address)"
                                                         : " (InfiniBand: is the subnet manager running?)");
    return false;
  }
  return true;
}

bool VerbsWire::toRts(ibv_qp* qp, std::string* error) {
  const Knobs& k = knobs();
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.timeout = (uint8_t)k.timeout;
  attr.retry_cnt = (uint8_t)k.retryCount;
  attr.rnr_retry = 7;
  attr.sq_psn = 0;
  attr.max_rd_atomic = 1;
  if (int err = v_->modifyQp(qp, &attr,
                             IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                 IBV_QP_MAX_QP_RD_ATOMIC)) {
    *error = "moving a queue pair to RTS failed: " + std::string(strerror(err));
    return false;
  }
  return true;
}

bool VerbsWire::connect(const QpInfo& peer, std::string* error) {
  const ibv_mtu mtu = (ibv_mtu)std::min<int>(dev_->mtu, peer.mtu);
  for (size_t i = 0; i < qps_.size(); i++) {
    const bool flush = i >= peer.nqps;  // the flush queue pair reads from this side's own memory
    const uint32_t qpn = flush ? qps_[i]->qp_num : peer.qpn[i];
    const uint8_t* gid = flush ? dev_->gid.raw : peer.gid;
    const uint16_t lid = flush ? dev_->lid : peer.lid;
    if (!toRtr(qps_[i], qpn, lid, gid, mtu, error) || !toRts(qps_[i], error)) return false;
  }
  return true;
}

int VerbsWire::post(int qp, const WorkRequest& w) {
  if (qp < 0 || qp >= (int)qps_.size()) return EINVAL;
  ibv_sge sge{w.local, w.length, w.lkey};
  ibv_send_wr wr{};
  wr.wr_id = w.id;
  wr.sg_list = &sge;
  wr.num_sge = w.length ? 1 : 0;
  wr.opcode = w.op == WrOp::Write      ? IBV_WR_RDMA_WRITE
              : w.op == WrOp::WriteImm ? IBV_WR_RDMA_WRITE_WITH_IMM
                                       : IBV_WR_RDMA_READ;
  wr.send_flags = w.signaled ? IBV_SEND_SIGNALED : 0;
  wr.imm_data = htobe32(w.imm);
  wr.wr.rdma.remote_addr = w.remote;
  wr.wr.rdma.rkey = w.rkey;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qps_[qp], &wr, &bad);
}

int VerbsWire::postRecv(int qp, uint64_t id) {
  if (qp < 0 || qp >= (int)qps_.size()) return EINVAL;
  ibv_recv_wr wr{};
  wr.wr_id = id;
  wr.num_sge = 0;  // a WRITE with immediate brings no payload to a receive buffer
  ibv_recv_wr* bad = nullptr;
  return ibv_post_recv(qps_[qp], &wr, &bad);
}

int VerbsWire::poll(Completion* out, int max) {
  ibv_wc wc[16];
  const int n = ibv_poll_cq(cq_, max < 16 ? max : 16, wc);
  if (n < 0) return -EIO;
  for (int i = 0; i < n; i++) {
    Completion& c = out[i];
    c = Completion{};
    c.id = wc[i].wr_id;
    c.status = wc[i].status;
    c.recv = wc[i].status == IBV_WC_SUCCESS && wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM;
    c.imm = be32toh(wc[i].imm_data);
    for (size_t q = 0; q < qps_.size(); q++)
      if (qps_[q]->qp_num == wc[i].qp_num) c.qp = (int)q;
  }
  return n;
}

std::string VerbsWire::statusText(int status) const {
  return std::string(v_->wcStatusStr((ibv_wc_status)status)) + " (status " + std::to_string(status) + ") on " +
         dev_->name;
}

}  // namespace plexus::net_ib
