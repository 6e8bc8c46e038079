/*
 * NCCL net plugin ABI, every version Plexus loads (as NCCL's src/include/plugin/nccl_net.h): include
 * this to write a net plugin against the newest version, ncclNet_t = ncclNet_v12_t, exported as
 * NCCL_NET_PLUGIN_SYMBOL. A plugin may export several versions (plugins/net-ucx exports v8..v12 so
 * that NCCL 2.20+ loads it too); the runtime takes the newest it finds, v12 down to v6. C99.
 */
#ifndef PLEXUS_NET_H_
#define PLEXUS_NET_H_

#include "net_v6.h"
#include "net_v7.h"
#include "net_v8.h"
#include "net_v9.h"
#include "net_v10.h"
#include "net_v11.h"
#include "net_v12.h"

typedef ncclNet_v12_t ncclNet_t;
typedef ncclNetProperties_v12_t ncclNetProperties_t;
typedef ncclNetVDeviceProps_v12_t ncclNetVDeviceProps_t;
typedef ncclNetCommConfig_v12_t ncclNetCommConfig_t;
typedef ncclNetAttr_v12_t ncclNetAttr_t;
typedef ncclNetDeviceHandle_v12_t ncclNetDeviceHandle_t;

#define NCCL_NET_PLUGIN_SYMBOL "ncclNetPlugin_v12"
#define NCCL_NET_MAX_DEVS_PER_NIC NCCL_NET_MAX_DEVS_PER_NIC_V12

#endif /* PLEXUS_NET_H_ */
