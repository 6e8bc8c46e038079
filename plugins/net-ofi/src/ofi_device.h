// net-ofi: the devices (one per fabric domain of the chosen libfabric provider) and the opened
// domains they share.
#pragma once

#include <rdma/fi_domain.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ofi_util.h"

namespace plexus::ofi {

// Bits of the 64-bit tag a device's provider matches on (mem_tag_format); data tags need this many.
constexpr int kMinTagBits = 52;

struct Device {
  int index = 0;
  fi_info* info = nullptr;  // this domain's fi_info, kept for the life of the process
  std::string name;         // the domain's name: the interface for tcp and sockets ("eth0"), "shm" for shm
  std::string provider;     // "tcp;ofi_rxm"
  std::string fabric;       // "192.0.2.0/24"
  std::string pciPath;      // /sys/devices/... of the NIC; empty for a virtual one
  uint64_t guid = 0;
  int speedMbps = 0;
  bool speedKnown = false;
  int tagBits = 64;
  bool mrLocal = false;      // the provider wants every buffer registered (FI_MR_LOCAL)
  bool registerAll = false;  // register (regMr, control messages): mrLocal or PLEXUS_OFI_MR_REGISTER=1
  bool mrEndpoint = false;   // registrations are bound to an endpoint (FI_MR_ENDPOINT)
  bool mrProvKey = false;    // the provider picks MR keys (FI_MR_PROV_KEY)
  size_t maxMsgSize = 0;
  uint64_t wireId = 0;  // provider + address format: handles from another provider are refused
};

// Finds the devices once (later calls return the first answer). ncclSystemError, with a log line
// saying why, when the provider (FI_PROVIDER or libfabric's first choice) offers none.
ncclResult_t discoverDevices();
const std::vector<Device>& devices();
// ncclInvalidArgument, with a log line naming the caller, when dev is not a device.
ncclResult_t checkDevice(int dev, const char* caller);

// One opened fabric and domain, shared by every endpoint on the device in this process. Its mutex
// serialises every call into the domain, so that any provider threading level is safe
// (FI_THREAD_DOMAIN) and the plugin's own bookkeeping needs no other lock.
class Domain {
 public:
  static ncclResult_t get(int dev, std::shared_ptr<Domain>* out);
  ~Domain();

  const Device& device() const { return *device_; }
  fid_domain* fid() const { return domain_.get(); }
  std::mutex& mutex() { return mutex_; }
  uint64_t nextMrKey() { return mrKey_++; }

 private:
  explicit Domain(const Device& d) : device_(&d) {}
  const Device* device_;
  FidPtr<fid_fabric> fabric_;
  FidPtr<fid_domain> domain_;
  std::mutex mutex_;
  uint64_t mrKey_ = 1;
};

}  // namespace plexus::ofi
