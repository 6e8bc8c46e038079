/*
 * Export a net plugin written against the newest ABI (ncclNet_v12_t) under older symbols too, so that
 * every NCCL release since 2.13 (and Plexus) loads it. In the plugin's one translation unit that
 * holds its table:
 *
 *     __attribute__((visibility("default"))) const ncclNet_v12_t ncclNetPlugin_v12 = { "MyNet", myInit, ... };
 *     #define PLEXUS_NET_EXPORT_IMPL ncclNetPlugin_v12
 *     #include <plexus/net_export.h>
 *     PLEXUS_NET_EXPORT_V11  PLEXUS_NET_EXPORT_V10  PLEXUS_NET_EXPORT_V9  PLEXUS_NET_EXPORT_V8
 *
 * (in C++ declare it first: extern "C" { __attribute__((visibility("default"))) extern const ncclNet_v12_t
 * ncclNetPlugin_v12; }). Each PLEXUS_NET_EXPORT_Vn defines the data symbol
 * ncclNetPlugin_vn (default visibility), for n = 6..11. How the older calls map onto the v12 ones:
 *   - v6..v10 have one global init: it creates one v12 context (commId 0, no traffic class) that
 *     every later call of that version uses; there is no finalize before v11;
 *   - properties are converted field by field (v9/v10 keep the first 4 devices of a virtual NIC);
 *   - int sizes (v6..v8) become size_t, and multi-receives of more than
 *     PLEXUS_NET_EXPORT_MAX_RECVS buffers are refused with ncclInvalidArgument;
 *   - v6 connect/accept get no device handle (a host plugin needs none), v10's per-connect config is
 *     dropped (the context has its own);
 *   - an optional member NULL in the v12 table (regMrDmaBuf, getDeviceMr, irecvConsumed, makeVDevice,
 *     setNetAttr) is NULL in every exported table too, so the runtime sees that it is absent.
 * C99 and C++.
 */
#ifndef PLEXUS_NET_EXPORT_H_
#define PLEXUS_NET_EXPORT_H_

#include <string.h>

#include "net.h"

#ifndef PLEXUS_NET_EXPORT_IMPL
#error "define PLEXUS_NET_EXPORT_IMPL as the plugin's ncclNet_v12_t before including plexus/net_export.h"
#endif

#ifndef PLEXUS_NET_EXPORT_MAX_RECVS
#define PLEXUS_NET_EXPORT_MAX_RECVS 8
#endif

#ifdef __cplusplus
#define PLEXUS_NET_EXPORT_SYM(type, name) extern "C" { __attribute__((visibility("default"))) extern type name; } type name
#else
#define PLEXUS_NET_EXPORT_SYM(type, name) __attribute__((visibility("default"))) type name
#endif
#define PLEXUS_NET_EXPORT_FN static __attribute__((unused))

/* The context every pre-v11 call uses, made by the first global init. */
static void* plexusNetExportCtx = NULL;

PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportInit(ncclDebugLogger_t logger, ncclProfilerCallback_t prof) {
  if (plexusNetExportCtx) return ncclSuccess;
  ncclNetCommConfig_v12_t config;
  config.trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF;
  return PLEXUS_NET_EXPORT_IMPL.init(&plexusNetExportCtx, 0, &config, logger, prof);
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportInitV6(ncclDebugLogger_t logger) {
  return plexusNetExportInit(logger, NULL);
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportInitV11(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config,
                                                         ncclDebugLogger_t logger, ncclProfilerCallback_t prof) {
  ncclNetCommConfig_v12_t c;
  c.trafficClass = config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF;
  return PLEXUS_NET_EXPORT_IMPL.init(ctx, commId, &c, logger, prof);
}

/* Properties: the v12 answer, copied into each older layout. */
#define PLEXUS_NET_EXPORT_PROPS_V6(out, p)                                                             \
  (out)->name = (p).name, (out)->pciPath = (p).pciPath, (out)->guid = (p).guid,                        \
  (out)->ptrSupport = (p).ptrSupport, (out)->speed = (p).speed, (out)->port = (p).port,                \
  (out)->latency = (p).latency, (out)->maxComms = (p).maxComms, (out)->maxRecvs = (p).maxRecvs
#define PLEXUS_NET_EXPORT_PROPS_V8(out, p)                                                             \
  PLEXUS_NET_EXPORT_PROPS_V6(out, p), (out)->regIsGlobal = (p).regIsGlobal,                            \
  (out)->netDeviceType = (p).netDeviceType, (out)->netDeviceVersion = (p).netDeviceVersion
#define PLEXUS_NET_EXPORT_PROPS_V9(out, p)                                                             \
  PLEXUS_NET_EXPORT_PROPS_V8(out, p), (out)->forceFlush = (p).forceFlush,                              \
  (out)->maxP2pBytes = (p).maxP2pBytes, (out)->maxCollBytes = (p).maxCollBytes,                        \
  plexusNetExportVProps((out)->vProps.devs, &(out)->vProps.ndevs, NCCL_NET_MAX_DEVS_PER_NIC_V9, &(p).vProps)

PLEXUS_NET_EXPORT_FN void plexusNetExportVProps(int* devs, int* ndevs, int max, const ncclNetVDeviceProps_v12_t* v) {
  int i;
  *ndevs = v->ndevs < max ? v->ndevs : max;
  for (i = 0; i < max; i++) devs[i] = i < *ndevs ? v->devs[i] : 0;
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportProps(int dev, ncclNetProperties_v12_t* p) {
  memset(p, 0, sizeof(*p));
  return PLEXUS_NET_EXPORT_IMPL.getProperties(dev, p);
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportPropsV6(int dev, ncclNetProperties_v6_t* out) {
  ncclNetProperties_v12_t p;
  ncclResult_t r = plexusNetExportProps(dev, &p);
  if (r == ncclSuccess) PLEXUS_NET_EXPORT_PROPS_V6(out, p);
  return r;
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportPropsV7(int dev, ncclNetProperties_v7_t* out) {
  ncclNetProperties_v12_t p;
  ncclResult_t r = plexusNetExportProps(dev, &p);
  if (r == ncclSuccess) {
    PLEXUS_NET_EXPORT_PROPS_V6(out, p);
    out->netDeviceType = p.netDeviceType;
    out->netDeviceVersion = p.netDeviceVersion;
  }
  return r;
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportPropsV8(int dev, ncclNetProperties_v8_t* out) {
  ncclNetProperties_v12_t p;
  ncclResult_t r = plexusNetExportProps(dev, &p);
  if (r == ncclSuccess) PLEXUS_NET_EXPORT_PROPS_V8(out, p);
  return r;
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportPropsV9(int dev, ncclNetProperties_v9_t* out) {
  ncclNetProperties_v12_t p;
  ncclResult_t r = plexusNetExportProps(dev, &p);
  if (r == ncclSuccess) PLEXUS_NET_EXPORT_PROPS_V9(out, p);
  return r;
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportPropsV10(int dev, ncclNetProperties_v10_t* out) {
  ncclNetProperties_v12_t p;
  ncclResult_t r = plexusNetExportProps(dev, &p);
  if (r == ncclSuccess) PLEXUS_NET_EXPORT_PROPS_V9(out, p);
  return r;
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportPropsV11(int dev, ncclNetProperties_v11_t* out) {
  ncclNetProperties_v12_t p;
  ncclResult_t r = plexusNetExportProps(dev, &p);
  if (r == ncclSuccess) {
    PLEXUS_NET_EXPORT_PROPS_V9(out, p);
    out->maxMultiRequestSize = p.maxMultiRequestSize;
  }
  return r;
}

PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportListen(int dev, void* handle, void** listenComm) {
  return PLEXUS_NET_EXPORT_IMPL.listen(plexusNetExportCtx, dev, handle, listenComm);
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportConnectV6(int dev, void* handle, void** sendComm) {
  ncclNetDeviceHandle_v12_t* none = NULL;
  return PLEXUS_NET_EXPORT_IMPL.connect(plexusNetExportCtx, dev, handle, sendComm, &none);
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportAcceptV6(void* listenComm, void** recvComm) {
  ncclNetDeviceHandle_v12_t* none = NULL;
  return PLEXUS_NET_EXPORT_IMPL.accept(listenComm, recvComm, &none);
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportConnectV7(int dev, void* handle, void** sendComm,
                                                           ncclNetDeviceHandle_v7_t** devComm) {
  return PLEXUS_NET_EXPORT_IMPL.connect(plexusNetExportCtx, dev, handle, sendComm, devComm);
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportConnectV10(int dev, ncclNetCommConfig_v10_t* config, void* handle,
                                                            void** sendComm, ncclNetDeviceHandle_v10_t** devComm) {
  (void)config;
  return PLEXUS_NET_EXPORT_IMPL.connect(plexusNetExportCtx, dev, handle, sendComm, devComm);
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportRegMrV6(void* comm, void* data, int size, int type, void** mhandle) {
  return PLEXUS_NET_EXPORT_IMPL.regMr(comm, data, (size_t)size, type, mhandle);
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportIsendV6(void* comm, void* data, int size, int tag, void* mhandle,
                                                         void** request) {
  return PLEXUS_NET_EXPORT_IMPL.isend(comm, data, (size_t)size, tag, mhandle, NULL, request);
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportIsendV9(void* comm, void* data, size_t size, int tag, void* mhandle,
                                                         void** request) {
  return PLEXUS_NET_EXPORT_IMPL.isend(comm, data, size, tag, mhandle, NULL, request);
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportIrecvV6(void* comm, int n, void** data, int* sizes, int* tags,
                                                         void** mhandles, void** request) {
  size_t s[PLEXUS_NET_EXPORT_MAX_RECVS];
  int i;
  if (n < 0 || n > PLEXUS_NET_EXPORT_MAX_RECVS) return ncclInvalidArgument;
  for (i = 0; i < n; i++) s[i] = (size_t)sizes[i];
  return PLEXUS_NET_EXPORT_IMPL.irecv(comm, n, data, s, tags, mhandles, NULL, request);
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportIrecvV9(void* comm, int n, void** data, size_t* sizes, int* tags,
                                                         void** mhandles, void** request) {
  return PLEXUS_NET_EXPORT_IMPL.irecv(comm, n, data, sizes, tags, mhandles, NULL, request);
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportMakeVDevice(int* d, const int* devs, int ndevs) {
  ncclNetVDeviceProps_v12_t v;
  int i;
  memset(&v, 0, sizeof(v));
  if (ndevs < 0 || ndevs > NCCL_NET_MAX_DEVS_PER_NIC_V12) return ncclInvalidArgument;
  v.ndevs = ndevs;
  for (i = 0; i < ndevs; i++) v.devs[i] = devs[i];
  return PLEXUS_NET_EXPORT_IMPL.makeVDevice(d, &v);
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportMakeVDeviceV9(int* d, ncclNetVDeviceProps_v9_t* p) {
  return plexusNetExportMakeVDevice(d, p->devs, p->ndevs);
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportMakeVDeviceV10(int* d, ncclNetVDeviceProps_v10_t* p) {
  return plexusNetExportMakeVDevice(d, p->devs, p->ndevs);
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportMakeVDeviceV11(int* d, ncclNetVDeviceProps_v11_t* p) {
  return plexusNetExportMakeVDevice(d, p->devs, p->ndevs);
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportSetNetAttrV11(void* ctx, ncclNetAttr_v11_t* attr) {
  return PLEXUS_NET_EXPORT_IMPL.setNetAttr(ctx, (ncclNetAttr_v12_t*)attr); /* same layout */
}

/* Members whose signature no version changed: forwarders, so that every table below is a constant
 * initializer (C allows no other object's members there). */
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportDevices(int* ndev) { return PLEXUS_NET_EXPORT_IMPL.devices(ndev); }
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportAccept(void* listenComm, void** recvComm,
                                                        ncclNetDeviceHandle_v7_t** devComm) {
  return PLEXUS_NET_EXPORT_IMPL.accept(listenComm, recvComm, devComm);
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return PLEXUS_NET_EXPORT_IMPL.regMr(comm, data, size, type, mhandle);
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportRegMrDmaBuf(void* comm, void* data, size_t size, int type,
                                                             uint64_t offset, int fd, void** mhandle) {
  return PLEXUS_NET_EXPORT_IMPL.regMrDmaBuf(comm, data, size, type, offset, fd, mhandle);
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportDeregMr(void* comm, void* mhandle) {
  return PLEXUS_NET_EXPORT_IMPL.deregMr(comm, mhandle);
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportIflush(void* comm, int n, void** data, int* sizes, void** mhandles,
                                                        void** request) {
  return PLEXUS_NET_EXPORT_IMPL.iflush(comm, n, data, sizes, mhandles, request);
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportTest(void* request, int* done, int* sizes) {
  return PLEXUS_NET_EXPORT_IMPL.test(request, done, sizes);
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportCloseSend(void* c) { return PLEXUS_NET_EXPORT_IMPL.closeSend(c); }
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportCloseRecv(void* c) { return PLEXUS_NET_EXPORT_IMPL.closeRecv(c); }
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportCloseListen(void* c) { return PLEXUS_NET_EXPORT_IMPL.closeListen(c); }
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportGetDeviceMr(void* comm, void* mhandle, void** dptr) {
  return PLEXUS_NET_EXPORT_IMPL.getDeviceMr(comm, mhandle, dptr);
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportIrecvConsumed(void* comm, int n, void* request) {
  return PLEXUS_NET_EXPORT_IMPL.irecvConsumed(comm, n, request);
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportListenV11(void* ctx, int dev, void* handle, void** listenComm) {
  return PLEXUS_NET_EXPORT_IMPL.listen(ctx, dev, handle, listenComm);
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportConnectV11(void* ctx, int dev, void* handle, void** sendComm,
                                                            ncclNetDeviceHandle_v11_t** devComm) {
  return PLEXUS_NET_EXPORT_IMPL.connect(ctx, dev, handle, sendComm, devComm);
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportIsendV10(void* comm, void* data, size_t size, int tag, void* mhandle,
                                                          void* phandle, void** request) {
  return PLEXUS_NET_EXPORT_IMPL.isend(comm, data, size, tag, mhandle, phandle, request);
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportIrecvV10(void* comm, int n, void** data, size_t* sizes, int* tags,
                                                          void** mhandles, void** phandles, void** request) {
  return PLEXUS_NET_EXPORT_IMPL.irecv(comm, n, data, sizes, tags, mhandles, phandles, request);
}
PLEXUS_NET_EXPORT_FN ncclResult_t plexusNetExportFinalizeV11(void* ctx) { return PLEXUS_NET_EXPORT_IMPL.finalize(ctx); }

/* Each table's name, and NULL where the v12 table has NULL, are set when the plugin is loaded. */
#define PLEXUS_NET_EXPORT_OPTIONAL(table, member) \
  if (!PLEXUS_NET_EXPORT_IMPL.member) (table).member = NULL
#define PLEXUS_NET_EXPORT_OPTIONALS_V6(table)                 \
  (table).name = PLEXUS_NET_EXPORT_IMPL.name;                 \
  PLEXUS_NET_EXPORT_OPTIONAL(table, regMrDmaBuf)
#define PLEXUS_NET_EXPORT_OPTIONALS_V7(table)    \
  PLEXUS_NET_EXPORT_OPTIONALS_V6(table);         \
  PLEXUS_NET_EXPORT_OPTIONAL(table, getDeviceMr); \
  PLEXUS_NET_EXPORT_OPTIONAL(table, irecvConsumed)
#define PLEXUS_NET_EXPORT_OPTIONALS_V9(table) \
  PLEXUS_NET_EXPORT_OPTIONALS_V7(table);      \
  PLEXUS_NET_EXPORT_OPTIONAL(table, makeVDevice)
#define PLEXUS_NET_EXPORT_CTOR(v, body) \
  __attribute__((constructor)) static void plexusNetExportLoad_v##v(void) { body; }


#define PLEXUS_NET_EXPORT_V11                                                                                 \
  PLEXUS_NET_EXPORT_SYM(ncclNet_v11_t, ncclNetPlugin_v11) = {                                                   \
      NULL, plexusNetExportInitV11, plexusNetExportDevices, plexusNetExportPropsV11, plexusNetExportListenV11, \
      plexusNetExportConnectV11, plexusNetExportAccept, plexusNetExportRegMr, plexusNetExportRegMrDmaBuf,      \
      plexusNetExportDeregMr, plexusNetExportIsendV10, plexusNetExportIrecvV10, plexusNetExportIflush,         \
      plexusNetExportTest, plexusNetExportCloseSend, plexusNetExportCloseRecv, plexusNetExportCloseListen,     \
      plexusNetExportGetDeviceMr, plexusNetExportIrecvConsumed, plexusNetExportMakeVDeviceV11,                 \
      plexusNetExportFinalizeV11, plexusNetExportSetNetAttrV11};                                               \
  PLEXUS_NET_EXPORT_CTOR(11, PLEXUS_NET_EXPORT_OPTIONALS_V9(ncclNetPlugin_v11);                               \
                         PLEXUS_NET_EXPORT_OPTIONAL(ncclNetPlugin_v11, setNetAttr))

#define PLEXUS_NET_EXPORT_V10                                                                                 \
  PLEXUS_NET_EXPORT_SYM(ncclNet_v10_t, ncclNetPlugin_v10) = {                                                   \
      NULL, plexusNetExportInit, plexusNetExportDevices, plexusNetExportPropsV10, plexusNetExportListen,       \
      plexusNetExportConnectV10, plexusNetExportAccept, plexusNetExportRegMr, plexusNetExportRegMrDmaBuf,      \
      plexusNetExportDeregMr, plexusNetExportIsendV10, plexusNetExportIrecvV10, plexusNetExportIflush,         \
      plexusNetExportTest, plexusNetExportCloseSend, plexusNetExportCloseRecv, plexusNetExportCloseListen,     \
      plexusNetExportGetDeviceMr, plexusNetExportIrecvConsumed, plexusNetExportMakeVDeviceV10};                \
  PLEXUS_NET_EXPORT_CTOR(10, PLEXUS_NET_EXPORT_OPTIONALS_V9(ncclNetPlugin_v10))

#define PLEXUS_NET_EXPORT_V9                                                                                  \
  PLEXUS_NET_EXPORT_SYM(ncclNet_v9_t, ncclNetPlugin_v9) = {                                                     \
      NULL, plexusNetExportInitV6, plexusNetExportDevices, plexusNetExportPropsV9, plexusNetExportListen,      \
      plexusNetExportConnectV7, plexusNetExportAccept, plexusNetExportRegMr, plexusNetExportRegMrDmaBuf,       \
      plexusNetExportDeregMr, plexusNetExportIsendV9, plexusNetExportIrecvV9, plexusNetExportIflush,           \
      plexusNetExportTest, plexusNetExportCloseSend, plexusNetExportCloseRecv, plexusNetExportCloseListen,     \
      plexusNetExportGetDeviceMr, plexusNetExportIrecvConsumed, plexusNetExportMakeVDeviceV9};                 \
  PLEXUS_NET_EXPORT_CTOR(9, PLEXUS_NET_EXPORT_OPTIONALS_V9(ncclNetPlugin_v9))

#define PLEXUS_NET_EXPORT_V8                                                                                  \
  PLEXUS_NET_EXPORT_SYM(ncclNet_v8_t, ncclNetPlugin_v8) = {                                                     \
      NULL, plexusNetExportInitV6, plexusNetExportDevices, plexusNetExportPropsV8, plexusNetExportListen,      \
      plexusNetExportConnectV7, plexusNetExportAccept, plexusNetExportRegMr, plexusNetExportRegMrDmaBuf,       \
      plexusNetExportDeregMr, plexusNetExportIsendV6, plexusNetExportIrecvV6, plexusNetExportIflush,           \
      plexusNetExportTest, plexusNetExportCloseSend, plexusNetExportCloseRecv, plexusNetExportCloseListen,     \
      plexusNetExportGetDeviceMr, plexusNetExportIrecvConsumed};                                               \
  PLEXUS_NET_EXPORT_CTOR(8, PLEXUS_NET_EXPORT_OPTIONALS_V7(ncclNetPlugin_v8))

#define PLEXUS_NET_EXPORT_V7                                                                                  \
  PLEXUS_NET_EXPORT_SYM(ncclNet_v7_t, ncclNetPlugin_v7) = {                                                     \
      NULL, plexusNetExportInitV6, plexusNetExportDevices, plexusNetExportPropsV7, plexusNetExportListen,      \
      plexusNetExportConnectV7, plexusNetExportAccept, plexusNetExportRegMrV6, plexusNetExportRegMrDmaBuf,     \
      plexusNetExportDeregMr, plexusNetExportIsendV6, plexusNetExportIrecvV6, plexusNetExportIflush,           \
      plexusNetExportTest, plexusNetExportCloseSend, plexusNetExportCloseRecv, plexusNetExportCloseListen,     \
      plexusNetExportGetDeviceMr, plexusNetExportIrecvConsumed};                                               \
  PLEXUS_NET_EXPORT_CTOR(7, PLEXUS_NET_EXPORT_OPTIONALS_V7(ncclNetPlugin_v7))

#define PLEXUS_NET_EXPORT_V6                                                                                  \
  PLEXUS_NET_EXPORT_SYM(ncclNet_v6_t, ncclNetPlugin_v6) = {                                                     \
      NULL, plexusNetExportInitV6, plexusNetExportDevices, plexusNetExportPropsV6, plexusNetExportListen,      \
      plexusNetExportConnectV6, plexusNetExportAcceptV6, plexusNetExportRegMrV6, plexusNetExportRegMrDmaBuf,   \
      plexusNetExportDeregMr, plexusNetExportIsendV6, plexusNetExportIrecvV6, plexusNetExportIflush,           \
      plexusNetExportTest, plexusNetExportCloseSend, plexusNetExportCloseRecv, plexusNetExportCloseListen};    \
  PLEXUS_NET_EXPORT_CTOR(6, PLEXUS_NET_EXPORT_OPTIONALS_V6(ncclNetPlugin_v6))

#endif /* PLEXUS_NET_EXPORT_H_ */
