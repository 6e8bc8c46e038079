#include "topo/hw_topo.h"

#include <plexus/cuda/driver.h>
#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "misc/debug.h"
#include "misc/env.h"
#include "topo/nvml.h"

#ifdef PLEXUS_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace plexus {

const char* pathName(PathType p) {
  static const char* names[] = {"LOC", "NVL", "PIX", "PXB", "PHB", "SYS"};
  return names[(int)p];
}

std::vector<bool> parseCpuList(const std::string& list, bool* ok) {
  std::vector<bool> set;
  if (ok) *ok = true;
  size_t at = 0;
  while (at < list.size()) {
    const size_t end = std::min(list.find(',', at), list.size());
    const std::string part = list.substr(at, end - at);
    // "N" or "N-M", digits only.
    const char* p = part.c_str();
    char* end1 = nullptr;
    char* end2 = nullptr;
    const unsigned long lo = std::isdigit((unsigned char)*p) ? std::strtoul(p, &end1, 10) : 0;
    unsigned long hi = lo;
    bool good = end1 && end1 != p;
    if (good && *end1 == '-') {
      good = std::isdigit((unsigned char)end1[1]);
      if (good) hi = std::strtoul(end1 + 1, &end2, 10);
      good = good && *end2 == '\0';
    } else {
      good = good && *end1 == '\0';
    }
    if (!good || hi < lo || hi > 65535) {
      if (ok) *ok = false;
      return {};
    }
    if (set.size() <= hi) set.resize(hi + 1, false);
    for (unsigned c = lo; c <= hi; c++) set[c] = true;
    at = end + 1;
  }
  return set;
}

std::string cpuListText(const std::vector<bool>& set) {
  std::string out;
  for (size_t c = 0; c < set.size();) {
    if (!set[c]) {
      c++;
      continue;
    }
    size_t e = c;
    while (e + 1 < set.size() && set[e + 1]) e++;
    out += (out.empty() ? "" : ",") + std::to_string(c) + (e > c ? "-" + std::to_string(e) : "");
    c = e + 1;
  }
  return out;
}

std::string intersectCpuLists(const std::string& a, const std::string& b) {
  std::vector<bool> x = parseCpuList(a), y = parseCpuList(b);
  x.resize(std::min(x.size(), y.size()));
  for (size_t c = 0; c < x.size(); c++) x[c] = x[c] && y[c];
  return cpuListText(x);
}

std::string bindingCpus(const HwDevice* gpu, const std::string& jobCpus, bool ignoreJobAffinity) {
  if (!gpu || gpu->cpus.empty()) return jobCpus;
  if (ignoreJobAffinity) return gpu->cpus;
  const std::string both = intersectCpuLists(gpu->cpus, jobCpus);
  return both.empty() ? jobCpus : both;
}

std::string cudaBusId(int ordinal) {
  const cuda::Driver* d = cuda::driver(nullptr);
  cuda::CUdevice dev = 0;
  char id[32] = "";
  if (!d || d->deviceGet(&dev, ordinal) != cuda::CUDA_SUCCESS ||
      d->deviceGetPCIBusId(id, sizeof id, dev) != cuda::CUDA_SUCCESS)
    return "";
  return normalizeBusId(id);
}

std::string normalizeBusId(const std::string& s) {
  // The last "[dddd:]bb:dd.f" in the string: a sysfs path names the device last.
  for (size_t end = s.size(); end > 0; end--) {
    size_t start = end;
    while (start > 0 && (std::isxdigit((unsigned char)s[start - 1]) || s[start - 1] == ':' || s[start - 1] == '.'))
      start--;
    std::string id = s.substr(start, end - start);
    unsigned dom = 0, bus = 0, dev = 0, fn = 0;
    char tail = 0;
    if (std::sscanf(id.c_str(), "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) == 4 ||
        (dom = 0, std::sscanf(id.c_str(), "%x:%x.%x%c", &bus, &dev, &fn, &tail) == 3)) {
      char out[32];
      std::snprintf(out, sizeof out, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
      return out;
    }
    end = start;
    if (end == 0) break;
  }
  return "";
}

#ifdef PLEXUS_HAVE_HWLOC

struct HwTopology::Impl {
  hwloc_topology_t topo = nullptr;
};

namespace {

std::string cpuList(hwloc_const_bitmap_t set) {
  if (!set || hwloc_bitmap_iszero(set)) return "";
  char* s = nullptr;
  hwloc_bitmap_list_asprintf(&s, set);
  std::string out = s ? s : "";
  free(s);
  return out;
}

std::string busIdOf(hwloc_obj_t o) {
  char out[32];
  std::snprintf(out, sizeof out, "%04x:%02x:%02x.%x", o->attr->pcidev.domain, o->attr->pcidev.bus, o->attr->pcidev.dev,
                o->attr->pcidev.func);
  return out;
}

bool isBridge(hwloc_obj_t o) { return o && o->type == HWLOC_OBJ_BRIDGE; }
bool isHostBridge(hwloc_obj_t o) { return isBridge(o) && o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST; }

// NVIDIA display (0x0300) or 3D (0x0302) controllers.
bool isGpu(hwloc_obj_t o) {
  return o->attr->pcidev.vendor_id == 0x10de &&
         (o->attr->pcidev.class_id == 0x0300 || o->attr->pcidev.class_id == 0x0302);
}

// hwloc's hwloc_get_common_ancestor_obj compares depths, which I/O objects do not have (they are all negative).
hwloc_obj_t commonAncestor(hwloc_obj_t a, hwloc_obj_t b) {
  for (hwloc_obj_t x = a; x; x = x->parent)
    for (hwloc_obj_t y = b; y; y = y->parent)
      if (x == y) return x;
  return nullptr;
}

// Bridges strictly between a device and its ancestor `top`.
int bridgesBelow(hwloc_obj_t o, hwloc_obj_t top) {
  int n = 0;
  for (hwloc_obj_t p = o->parent; p && p != top; p = p->parent) n += isBridge(p);
  return n;
}

int numaOf(hwloc_topology_t t, hwloc_obj_t o) {
  hwloc_obj_t cpuSide = hwloc_get_non_io_ancestor_obj(t, o);
  if (!cpuSide || !cpuSide->nodeset) return -1;
  return hwloc_bitmap_weight(cpuSide->nodeset) == 1 ? hwloc_bitmap_first(cpuSide->nodeset) : -1;
}

}  // namespace

HwTopology::~HwTopology() {
  if (impl_) {
    if (impl_->topo) hwloc_topology_destroy(impl_->topo);
    delete impl_;
  }
}

std::unique_ptr<HwTopology> HwTopology::load(const std::string& file, std::string* error) {
  std::unique_ptr<HwTopology> h(new HwTopology);
  h->impl_ = new Impl;
  hwloc_topology_t& t = h->impl_->topo;
  if (hwloc_topology_init(&t) != 0) {
    *error = std::string("hwloc_topology_init failed: ") + std::strerror(errno);
    return nullptr;
  }
  // PCI bridges and devices, and the OS devices that name NICs (ib0, mlx5_0) and GPUs.
  hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  // Every PCI device, not only the "important" ones: an NVSwitch (a bridge-class device) must stay for the GPUs'
  // NVLinkBandwidth distances through it to mean anything.
  hwloc_topology_set_type_filter(t, HWLOC_OBJ_PCI_DEVICE, HWLOC_TYPE_FILTER_KEEP_ALL);
  if (!file.empty() && hwloc_topology_set_xml(t, file.c_str()) != 0) {
    *error = "cannot read the topology file " + file + ": " + std::strerror(errno) +
             " (it must be an hwloc XML topology, as lstopo --of xml or NCCL_TOPO_DUMP_FILE write)";
    return nullptr;
  }
  if (hwloc_topology_load(t) != 0) {
    *error = (file.empty() ? std::string("hwloc cannot load this machine's topology")
                           : "the topology file " + file + " is not a valid hwloc XML topology") +
             ": " + std::strerror(errno);
    return nullptr;
  }
  h->source_ = file.empty() ? "live" : file;
  h->build();
  return h;
}

void HwTopology::build() {
  hwloc_topology_t t = impl_->topo;
  packages_ = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
  numaNodes_ = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  cores_ = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
  hwloc_bitmap_t usable = hwloc_bitmap_dup(hwloc_topology_get_allowed_cpuset(t));
  if (source_ == "live") {
    hwloc_bitmap_t bound = hwloc_bitmap_alloc();
    if (hwloc_get_cpubind(t, bound, HWLOC_CPUBIND_PROCESS) == 0 && !hwloc_bitmap_iszero(bound))
      hwloc_bitmap_and(usable, usable, bound);
    hwloc_bitmap_free(bound);
  }
  usableCpus_ = std::max(1, hwloc_bitmap_weight(usable));
  usableCpuList_ = cpuList(usable);
  hwloc_bitmap_free(usable);

  for (hwloc_obj_t o = hwloc_get_next_pcidev(t, nullptr); o; o = hwloc_get_next_pcidev(t, o)) {
    HwDevice d{};
    d.busId = busIdOf(o);
    d.obj = o;
    d.linkGBs = o->attr->pcidev.linkspeed;
    d.numa = numaOf(t, o);
    hwloc_obj_t cpuSide = hwloc_get_non_io_ancestor_obj(t, o);
    d.cpus = cpuSide ? cpuList(cpuSide->cpuset) : "";
    if (isGpu(o)) {
      d.kind = HwDevice::Kind::Gpu;
      d.name = "GPU" + std::to_string(gpus_.size());
      gpus_.push_back(d);
      continue;
    }
    std::string verbs, net;
    for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling) {
      if (c->type != HWLOC_OBJ_OS_DEVICE || !c->name) continue;
      if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS && verbs.empty()) verbs = c->name;
      if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && net.empty()) net = c->name;
    }
    if (verbs.empty() && net.empty()) continue;
    d.kind = HwDevice::Kind::Nic;
    d.name = verbs.empty() ? net : verbs;
    d.netdev = net;
    nics_.push_back(d);
  }
  auto byBus = [](const HwDevice& a, const HwDevice& b) { return a.busId < b.busId; };
  std::sort(gpus_.begin(), gpus_.end(), byBus);
  for (size_t i = 0; i < gpus_.size(); i++) gpus_[i].name = "GPU" + std::to_string(i);
  readNvLinks();
}

void HwTopology::readNvLinks() {
  const size_t n = gpus_.size();
  if (n < 2) return;
  hwloc_topology_t t = impl_->topo;
  auto gpuIndex = [&](hwloc_obj_t o) -> int {
    if (o && o->type == HWLOC_OBJ_OS_DEVICE) o = o->parent;  // hwloc's NVML backend names the GPUs' OS devices
    for (size_t i = 0; i < n; i++)
      if (gpus_[i].obj == o) return (int)i;
    return -1;
  };
  unsigned nr = 1;
  hwloc_distances_s* d = nullptr;
  if (hwloc_distances_get_by_name(t, "NVLinkBandwidth", &nr, &d, 0) == 0 && nr >= 1 && d) {
    // MB/s between objects; GPUs on an NVSwitch have their bandwidth to the switch, so two of them reach each other
    // at the smaller of the two.
    std::vector<float> direct(n * n, 0), toSwitch(n, 0);
    const unsigned m = d->nbobjs;
    for (unsigned i = 0; i < m; i++)
      for (unsigned j = 0; j < m; j++) {
        const int a = gpuIndex(d->objs[i]), b = gpuIndex(d->objs[j]);
        const float gbs = (float)d->values[i * m + j] / 1000.0f;
        if (a >= 0 && b >= 0 && a != b)
          direct[a * n + b] = gbs;
        else if (a >= 0 && b < 0 && d->objs[j])
          toSwitch[a] = std::max(toSwitch[a], gbs);
      }
    hwloc_distances_release(t, d);
    for (size_t a = 0; a < n; a++)
      for (size_t b = 0; b < n; b++)
        if (a != b && toSwitch[a] > 0 && toSwitch[b] > 0)
          direct[a * n + b] = std::max(direct[a * n + b], std::min(toSwitch[a], toSwitch[b]));
    nvlink_ = direct;
    nvlinkSource_ = "hwloc NVLinkBandwidth";
  } else if (source_ == "live") {
    std::vector<std::string> ids;
    for (const HwDevice& g : gpus_) ids.push_back(g.busId);
    std::string why;
    nvlink_ = nvmlNvLinkGBs(ids, &why);
    if (!nvlink_.empty()) nvlinkSource_ = "NVML";
  }
  if (std::all_of(nvlink_.begin(), nvlink_.end(), [](float g) { return g <= 0; })) {
    nvlink_.clear();
    nvlinkSource_.clear();
  }
}

PathType HwTopology::path(const HwDevice& a, const HwDevice& b) const {
  if (a.obj == b.obj) return PathType::LOC;
  if (nvlinkGBs(a, b) > 0) return PathType::NVL;
  hwloc_topology_t t = impl_->topo;
  auto* oa = (hwloc_obj_t)a.obj;
  auto* ob = (hwloc_obj_t)b.obj;
  hwloc_obj_t common = commonAncestor(oa, ob);
  if (isBridge(common) && !isHostBridge(common))
    return std::max(bridgesBelow(oa, common), bridgesBelow(ob, common)) <= 1 ? PathType::PIX : PathType::PXB;
  if (isHostBridge(common)) return PathType::PHB;
  // Under different host bridges: one CPU (NUMA node) or across the CPUs' interconnect.
  hwloc_obj_t ca = hwloc_get_non_io_ancestor_obj(t, oa), cb = hwloc_get_non_io_ancestor_obj(t, ob);
  if (ca == cb || (ca->nodeset && cb->nodeset && hwloc_bitmap_isequal(ca->nodeset, cb->nodeset))) return PathType::PHB;
  return PathType::SYS;
}

namespace {
uint64_t placeCode(int package, int numa, int hostBridge, int pciSwitch) {
  auto field = [](int index) { return (uint64_t)(index < 0 || index >= 0xffff ? 0 : index + 1); };
  return field(package) << 48 | field(numa) << 32 | field(hostBridge) << 16 | field(pciSwitch);
}
int packageIndex(hwloc_topology_t t, hwloc_const_cpuset_t cpus) {
  if (!cpus || hwloc_bitmap_iszero(cpus)) return -1;
  hwloc_obj_t pu = hwloc_get_pu_obj_by_os_index(t, (unsigned)hwloc_bitmap_first(cpus));
  hwloc_obj_t pkg = pu ? hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, pu) : nullptr;
  return pkg ? (int)pkg->logical_index : -1;
}
int numaIndex(hwloc_topology_t t, hwloc_const_cpuset_t cpus) {
  if (!cpus || hwloc_bitmap_iszero(cpus)) return -1;
  const int first = hwloc_bitmap_first(cpus);
  for (hwloc_obj_t n = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, nullptr); n;
       n = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, n))
    if (n->cpuset && hwloc_bitmap_isset(n->cpuset, (unsigned)first)) return (int)n->logical_index;
  return -1;
}
}  // namespace

uint64_t HwTopology::place(const HwDevice& gpu) const {
  hwloc_topology_t t = impl_->topo;
  auto* o = (hwloc_obj_t)gpu.obj;
  // The host bridge above the device, and the bridge right below it on the way: the top of its switch tree.
  hwloc_obj_t hostBridge = nullptr, top = nullptr;
  for (hwloc_obj_t p = o->parent, below = nullptr; p; below = isBridge(p) ? p : below, p = p->parent)
    if (isHostBridge(p)) {
      hostBridge = p;
      top = below;
      break;
    }
  hwloc_obj_t cpuSide = hwloc_get_non_io_ancestor_obj(t, o);
  return placeCode(cpuSide ? packageIndex(t, cpuSide->cpuset) : -1, cpuSide ? numaIndex(t, cpuSide->cpuset) : -1,
                   hostBridge ? (int)hostBridge->logical_index : -1, top ? (int)top->logical_index : -1);
}

uint64_t HwTopology::placeOfCpus(const std::string& cpus) const {
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  uint64_t code = 0;
  if (hwloc_bitmap_list_sscanf(set, cpus.c_str()) == 0)
    code = placeCode(packageIndex(impl_->topo, set), numaIndex(impl_->topo, set), -1, -1);
  hwloc_bitmap_free(set);
  return code;
}

float HwTopology::pathGBs(const HwDevice& a, const HwDevice& b) const {
  if (const float nvl = nvlinkGBs(a, b); nvl > 0) return nvl;
  // PCIe 4.0 x16 where the file gives no link speed; the CPUs' interconnect as NCCL assumes for SYS.
  const float la = a.linkGBs > 0 ? a.linkGBs : 24.0f, lb = b.linkGBs > 0 ? b.linkGBs : 24.0f;
  const float link = std::min(la, lb);
  return path(a, b) == PathType::SYS ? std::min(link, 10.0f) : link;
}

bool HwTopology::writeXml(const std::string& file, std::string* error) const {
  if (hwloc_topology_export_xml(impl_->topo, file.c_str(), 0) != 0) {
    *error = "cannot write the topology to " + file + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

namespace {

void treeOf(hwloc_topology_t t, hwloc_obj_t o, int depth, const HwTopology& h, std::string* out) {
  std::string line;
  switch (o->type) {
    case HWLOC_OBJ_MACHINE:
      line = "Machine";
      break;
    case HWLOC_OBJ_PACKAGE:
      line = "Package " + std::to_string(o->os_index) + " (CPUs " + cpuList(o->cpuset) + ")";
      break;
    case HWLOC_OBJ_NUMANODE:
      line = "NUMA node " + std::to_string(o->os_index) + " (CPUs " + cpuList(o->cpuset) + ")";
      break;
    case HWLOC_OBJ_BRIDGE:
      if (isHostBridge(o))
        line = "Host bridge";
      else
        line = "PCI bridge " + busIdOf(o);
      break;
    case HWLOC_OBJ_PCI_DEVICE: {
      const std::string id = busIdOf(o);
      if (const HwDevice* g = h.gpuByBusId(id)) {
        line = g->name + " " + id + " (NVIDIA GPU)";
        std::string links;
        for (const HwDevice& peer : h.gpus())
          if (const float gbs = h.nvlinkGBs(*g, peer); gbs > 0)
            links += (links.empty() ? "" : ", ") + peer.name + " " + format("%g", gbs) + " GB/s";
        if (!links.empty()) line += "; NVLink to " + links;
      } else if (const HwDevice* n = h.nicByBusId(id))
        line = "NIC " + n->name + " " + id + (n->netdev.empty() || n->netdev == n->name ? "" : " (" + n->netdev + ")");
      break;
    }
    default:
      break;
  }
  // Objects without a line (caches, cores, other PCI devices) are looked through: their children keep the depth.
  const int childDepth = line.empty() ? depth : depth + 1;
  bool shown = false;
  std::string below;
  for (hwloc_obj_t c = o->first_child; c; c = c->next_sibling) treeOf(t, c, childDepth, h, &below);
  for (hwloc_obj_t c = o->memory_first_child; c; c = c->next_sibling) treeOf(t, c, childDepth, h, &below);
  for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling) treeOf(t, c, childDepth, h, &below);
  // Bridges lead somewhere only if a GPU or NIC sits below them.
  if (!line.empty() && (o->type != HWLOC_OBJ_BRIDGE || !below.empty())) {
    out->append(std::string(2 * depth, ' ') + line + "\n");
    shown = true;
  }
  if (shown || line.empty()) out->append(below);
}

}  // namespace

std::string HwTopology::tree() const {
  std::string out;
  treeOf(impl_->topo, hwloc_get_root_obj(impl_->topo), 0, *this, &out);
  return out;
}

#else  // no hwloc

struct HwTopology::Impl {};
HwTopology::~HwTopology() = default;
std::unique_ptr<HwTopology> HwTopology::load(const std::string&, std::string* error) {
  *error = "Plexus was built without hwloc (install libhwloc-dev and rebuild)";
  return nullptr;
}
void HwTopology::build() {}
void HwTopology::readNvLinks() {}
PathType HwTopology::path(const HwDevice&, const HwDevice&) const { return PathType::SYS; }
uint64_t HwTopology::place(const HwDevice&) const { return 0; }
uint64_t HwTopology::placeOfCpus(const std::string&) const { return 0; }
float HwTopology::pathGBs(const HwDevice&, const HwDevice&) const { return 0; }
bool HwTopology::writeXml(const std::string&, std::string* error) const {
  *error = "Plexus was built without hwloc";
  return false;
}
std::string HwTopology::tree() const { return ""; }

#endif

float HwTopology::nvlinkGBs(const HwDevice& a, const HwDevice& b) const {
  if (nvlink_.empty() || a.kind != HwDevice::Kind::Gpu || b.kind != HwDevice::Kind::Gpu) return 0;
  const size_t n = gpus_.size();
  size_t i = n, j = n;
  for (size_t k = 0; k < n; k++) {
    if (gpus_[k].obj == a.obj) i = k;
    if (gpus_[k].obj == b.obj) j = k;
  }
  return i < n && j < n && i != j ? nvlink_[i * n + j] : 0;
}

PathType HwTopology::pathFromCpus(const HwDevice& d, const std::string& cpus) const {
  const bool near = cpus.empty() || d.cpus.empty() || !intersectCpuLists(cpus, d.cpus).empty();
  return near ? PathType::PHB : PathType::SYS;
}

const HwDevice* HwTopology::gpuByBusId(const std::string& busId) const {
  for (const HwDevice& d : gpus_)
    if (d.busId == busId) return &d;
  return nullptr;
}

const HwDevice* HwTopology::nicByBusId(const std::string& busId) const {
  for (const HwDevice& d : nics_)
    if (d.busId == busId) return &d;
  return nullptr;
}

const HwTopology* HwTopology::process(std::string* why) {
  static std::once_flag once;
  // Never destroyed: threads may ask while the process exits, and hwloc's components (dlopened) stay loaded.
  static HwTopology* topo = nullptr;
  static std::string error;
  std::call_once(once, [] {
    std::string file = envStr("TOPO_FILE", "");
    if (const char* p = getenv("PLEXUS_TOPO_FILE"); p && *p) file = p;
    topo = load(file, &error).release();
    if (!topo) {
      WARN("topology: %s; NICs are used in the order the net plugin lists them", error.c_str());
      return;
    }
    INFO(NCCL_INIT | NCCL_GRAPH,
         "topology (%s): %d package(s), %d NUMA node(s), %d core(s), %d usable CPU(s) [%s], "
         "%zu NVIDIA GPU(s), %zu NIC(s)",
         topo->source().c_str(), topo->packages(), topo->numaNodes(), topo->cores(), topo->usableCpus(),
         topo->usableCpuList().c_str(), topo->gpus().size(), topo->nics().size());
    const std::string dump = envStr("TOPO_DUMP_FILE", "");
    if (!dump.empty()) {
      std::string e;
      if (topo->writeXml(dump, &e))
        INFO(NCCL_INIT | NCCL_GRAPH, "topology written to %s (NCCL_TOPO_DUMP_FILE)", dump.c_str());
      else
        WARN("topology: %s (NCCL_TOPO_DUMP_FILE)", e.c_str());
    }
  });
  if (why) *why = error;
  return topo;
}

std::vector<int> netDeviceOrder(const HwTopology* topo, const std::vector<std::string>& busIds,
                                const std::vector<bool>& usable, const std::string& gpuBusId,
                                const std::string& cpuList, int* nearest, std::string* why) {
  struct Ranked {
    int dev;
    int rank;  // path type, or one past SYS where the topology does not place the device
    float gbs;
  };
  std::vector<Ranked> ranked;
  const HwDevice* gpu = topo && !gpuBusId.empty() ? topo->gpuByBusId(gpuBusId) : nullptr;
  for (size_t d = 0; d < busIds.size(); d++) {
    if (!usable[d]) {
      if (why) *why += "  device " + std::to_string(d) + ": not used (its getProperties failed)\n";
      continue;
    }
    const HwDevice* nic = topo ? topo->nicByBusId(busIds[d]) : nullptr;
    Ranked r{(int)d, (int)PathType::SYS + 1, 0};
    if (nic) {
      const PathType p = gpu ? topo->path(*gpu, *nic) : topo->pathFromCpus(*nic, cpuList);
      r.rank = (int)p;
      r.gbs = gpu ? topo->pathGBs(*gpu, *nic) : (nic->linkGBs > 0 ? nic->linkGBs : 24.0f);
    }
    if (why) {
      *why += "  device " + std::to_string(d) + (busIds[d].empty() ? "" : " (" + busIds[d] + ")") + ": ";
      if (!nic)
        *why += topo ? "not in the topology, used after those it places\n" : "no topology\n";
      else
        *why += std::string(pathName((PathType)r.rank)) + " from " +
                (gpu ? gpu->name + " " + gpu->busId : "CPUs " + cpuList) + ", " + std::to_string((int)r.gbs) +
                " GB/s\n";
    }
    ranked.push_back(r);
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const Ranked& a, const Ranked& b) { return a.rank != b.rank ? a.rank < b.rank : a.gbs > b.gbs; });
  std::vector<int> order;
  *nearest = 0;
  for (const Ranked& r : ranked) {
    if (r.rank == ranked[0].rank && r.gbs == ranked[0].gbs) (*nearest)++;
    order.push_back(r.dev);
  }
  return order;
}

}  // namespace plexus
