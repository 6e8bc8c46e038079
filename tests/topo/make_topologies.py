#!/usr/bin/env python3
"""Writes the server topologies of the topology tests as hwloc XML (the format lstopo --of xml and
NCCL_TOPO_DUMP_FILE write), beside this script:

  server-8gpu-4nic.xml  2 sockets x 16 cores, 4 host bridges; behind each a PCIe switch with 2 GPUs and 1 NIC
                        (mlx5_N / ibN): each GPU's own NIC is PIX, its socket's other NIC PHB, the rest SYS.
  server-mixed.xml      2 sockets; on socket 0 a switch with GPU0 and a nested switch with GPU1 (PXB between
                        them), NIC mlx5_0 behind socket 0's second host bridge (PHB from both GPUs); NIC mlx5_1
                        on socket 1 (SYS); a plain Ethernet NIC eth2 on socket 1.
  server-8gpu-nvlink.xml  server-8gpu-4nic.xml with NVLink, as hwloc's NVML backend records it (an NVLinkBandwidth
                        distances matrix, MB/s): GPU0..GPU3 linked pairwise (4 links, 100 GB/s each way), GPU4..GPU7
                        each on an NVSwitch (18 links, 450 GB/s), no NVLink between the two groups.
  host-2numa-2nic.xml   no GPU: 2 sockets, one NIC each (host-backend choices by CPU set).
  host-2numa-interleaved.xml  no GPU, no NIC: 2 sockets whose CPUs interleave (even ones on socket 0, odd on 1),
                        so that this machine's CPUs 0 and 1 sit on different NUMA nodes (ring orders by place).

Run it to regenerate them: python3 tests/topo/make_topologies.py
"""
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
GEN4 = "31.507692"  # hwloc's GB/s for a PCIe 4.0 x16 link
GEN5 = "63.015385"


class Xml:
    def __init__(self):
        self.lines = []
        self.gp = 0
        self.opened = []  # depths of the objects open, innermost last

    def gpi(self):
        self.gp += 1
        return self.gp

    def open(self, depth, attrs):
        self.lines.append("  " * depth + "<object " + attrs + f' gp_index="{self.gpi()}">')
        self.opened.append(depth)

    def leaf(self, depth, attrs):
        self.lines.append("  " * depth + "<object " + attrs + f' gp_index="{self.gpi()}"/>')

    def close(self, depth):
        self.close_to(depth)

    def close_to(self, depth):
        """Closes every open object down to and including the one at `depth`."""
        while self.opened and self.opened[-1] >= depth:
            self.lines.append("  " * self.opened.pop() + "</object>")


def mask(cpus):
    m = 0
    for c in cpus:
        m |= 1 << c
    return "0x%08x" % m if m < (1 << 32) else hex(m)


def sets(cpus, nodes):
    cs, ns = mask(cpus), mask(nodes)
    return f'cpuset="{cs}" complete_cpuset="{cs}" nodeset="{ns}" complete_nodeset="{ns}"'


def pcidev(x, depth, busid, cls, vendor, device, link, osdevs=()):
    attrs = f'type="PCIDev" pci_busid="{busid}" pci_type="{cls} [{vendor}:{device}] [{vendor}:0000] 00" pci_link_speed="{link}"'
    if not osdevs:
        x.leaf(depth, attrs)
        return
    x.open(depth, attrs)
    for name, kind in osdevs:
        x.leaf(depth + 1, f'type="OSDev" name="{name}" osdev_type="{kind}"')
    x.close(depth)


def bridge(x, depth, busid, lo, hi, link):
    x.open(depth, f'type="Bridge" bridge_type="1-1" depth="{depth}" bridge_pci="0000:[{lo:02x}-{hi:02x}]" '
                  f'pci_busid="{busid}" pci_type="0604 [10b5:c010] [0000:0000] 00" pci_link_speed="{link}"')


def gpu(x, depth, bus, link=GEN5):
    pcidev(x, depth, f"0000:{bus:02x}:00.0", "0302", "10de", "2335", link)


def ib_nic(x, depth, bus, index, link=GEN5):
    pcidev(x, depth, f"0000:{bus:02x}:00.0", "0207", "15b3", "1021", link,
           [(f"mlx5_{index}", 3), (f"ib{index}", 2)])


def eth_nic(x, depth, bus, name, link=GEN4):
    pcidev(x, depth, f"0000:{bus:02x}:00.0", "0200", "8086", "1593", link, [(name, 2)])


def machine(x, packages, cores_per_package, io, interleaved=False):
    """io(x, package, depth): writes the package's I/O (host bridges) at that depth. interleaved: CPU c is on
    package c % packages (as some two-socket machines number them) instead of in blocks."""
    all_cpus = list(range(packages * cores_per_package))
    nodes = list(range(packages))
    x.lines += ['<?xml version="1.0" encoding="UTF-8"?>', '<!DOCTYPE topology SYSTEM "hwloc2.dtd">',
                '<topology version="2.0">']
    cs, ns = mask(all_cpus), mask(nodes)
    x.open(1, f'type="Machine" os_index="0" cpuset="{cs}" complete_cpuset="{cs}" allowed_cpuset="{cs}" '
              f'nodeset="{ns}" complete_nodeset="{ns}" allowed_nodeset="{ns}"')
    for p in range(packages):
        cpus = (list(range(p, packages * cores_per_package, packages)) if interleaved else
                list(range(p * cores_per_package, (p + 1) * cores_per_package)))
        x.open(2, f'type="Package" os_index="{p}" ' + sets(cpus, [p]))
        x.leaf(3, f'type="NUMANode" os_index="{p}" ' + sets(cpus, [p]) + ' local_memory="274877906944"')
        for c in cpus:
            x.open(3, f'type="Core" os_index="{c}" ' + sets([c], [p]))
            x.leaf(4, f'type="PU" os_index="{c}" ' + sets([c], [p]))
            x.close(3)
        io(x, p, 3)
        x.close(2)
    x.close(1)
    x.lines.append("</topology>")


def port(x, depth, busid, bus, link, device):
    """A PCIe port (a bridge to one bus) with one device behind it: device(x, depth, bus)."""
    bridge(x, depth, busid, bus, bus, link)
    device(x, depth + 1, bus)
    x.close(depth)


def host_bridge(x, depth, lo, hi):
    x.open(depth, f'type="Bridge" bridge_type="0-1" depth="0" bridge_pci="0000:[{lo:02x}-{hi:02x}]"')


def switch_on_host_bridge(x, d, base, hi):
    """A host bridge for buses base..hi, its root port, and a PCIe switch's upstream port below it: the switch's
    downstream ports go at depth d + 3, on bus base + 2."""
    host_bridge(x, d, base, hi)
    bridge(x, d + 1, f"0000:{base:02x}:01.0", base + 1, hi, GEN5)       # root port
    bridge(x, d + 2, f"0000:{base + 1:02x}:00.0", base + 2, hi, GEN5)   # switch upstream port


def server_8gpu_4nic():
    x = Xml()

    def io(x, p, d):
        for s in range(2):  # two host bridges per socket, each with a switch: GPU, GPU, NIC
            k = p * 2 + s
            base = 0x10 + k * 0x20
            switch_on_host_bridge(x, d, base, base + 0x1f)
            for i, dev in enumerate((gpu, gpu, lambda x, d, bus: ib_nic(x, d, bus, k))):  # downstream ports
                port(x, d + 3, f"0000:{base + 2:02x}:{i:02x}.0", base + 3 + i, GEN5, dev)
            x.close(d)

    machine(x, 2, 16, io)
    return x


def server_8gpu_nvlink():
    x = Xml()

    def io(x, p, d):
        for s in range(2):
            k = p * 2 + s
            base = 0x10 + k * 0x20
            switch_on_host_bridge(x, d, base, base + 0x1f)
            for i, dev in enumerate((gpu, gpu, lambda x, d, bus: ib_nic(x, d, bus, k))):
                port(x, d + 3, f"0000:{base + 2:02x}:{i:02x}.0", base + 3 + i, GEN5, dev)
            x.close(d)
        if p == 1:  # the NVSwitch, a PCI device of its own on socket 1
            host_bridge(x, d, 0xf0, 0xff)
            port(x, d + 1, "0000:f0:01.0", 0xf1, GEN4,
                 lambda x, d, bus: pcidev(x, d, f"0000:{bus:02x}:00.0", "0680", "10de", "22a3", GEN4))
            x.close(d)

    machine(x, 2, 16, io)
    gps = [int(m) for m in re.findall(r'pci_type="0302 [^"]*" [^>]*gp_index="(\d+)"', "\n".join(x.lines))]
    switch = int(re.search(r'pci_type="0680 [^"]*" [^>]*gp_index="(\d+)"', "\n".join(x.lines)).group(1))
    objs = gps + [switch]
    n = len(objs)

    def bw(i, j):
        if i == j:
            return 0
        if i < 4 and j < 4:
            return 100000
        if {i, j} <= {4, 5, 6, 7, 8} and 8 in (i, j):  # a GPU and the switch
            return 450000
        return 0

    idx = " ".join(map(str, objs)) + " "
    vals = " ".join(str(bw(i, j)) for i in range(n) for j in range(n)) + " "
    # hwloc's length attributes count the characters of the content.
    x.lines[-1:-1] = [f'  <distances2 type="PCIDev" nbobjs="{n}" kind="9" name="NVLinkBandwidth" indexing="gp">',
                      f'    <indexes length="{len(idx)}">{idx}</indexes>',
                      f'    <u64values length="{len(vals)}">{vals}</u64values>',
                      '  </distances2>']
    return x


def server_mixed():
    x = Xml()

    def io(x, p, d):
        if p == 0:
            switch_on_host_bridge(x, d, 0x10, 0x2f)                     # switch A
            port(x, d + 3, "0000:12:00.0", 0x13, GEN5, gpu)             # A downstream: GPU0
            bridge(x, d + 3, "0000:12:01.0", 0x14, 0x2f, GEN5)          # A downstream: switch B
            bridge(x, d + 4, "0000:14:00.0", 0x15, 0x2f, GEN5)          # switch B upstream
            port(x, d + 5, "0000:15:00.0", 0x16, GEN5, gpu)             # B downstream: GPU1
            x.close(d)
            host_bridge(x, d, 0x30, 0x3f)
            port(x, d + 1, "0000:30:01.0", 0x31, GEN5, lambda x, d, bus: ib_nic(x, d, bus, 0))
            x.close(d)
        else:
            host_bridge(x, d, 0x80, 0x9f)
            port(x, d + 1, "0000:80:01.0", 0x81, GEN5, lambda x, d, bus: ib_nic(x, d, bus, 1))
            port(x, d + 1, "0000:80:02.0", 0x82, GEN4, lambda x, d, bus: eth_nic(x, d, bus, "eth2"))
            x.close(d)

    machine(x, 2, 8, io)
    return x


def host_2numa_2nic():
    x = Xml()

    def io(x, p, d):
        base = 0x20 + p * 0x60
        host_bridge(x, d, base, base + 0xf)
        port(x, d + 1, f"0000:{base:02x}:01.0", base + 1, GEN4, lambda x, d, bus: eth_nic(x, d, bus, f"ens{p + 1}"))
        x.close(d)

    machine(x, 2, 4, io)
    return x


def host_2numa_interleaved():
    x = Xml()
    machine(x, 2, 4, lambda x, p, d: None, interleaved=True)
    return x


for name, make in (("server-8gpu-4nic.xml", server_8gpu_4nic), ("server-8gpu-nvlink.xml", server_8gpu_nvlink),
                   ("server-mixed.xml", server_mixed),
                   ("host-2numa-2nic.xml", host_2numa_2nic), ("host-2numa-interleaved.xml", host_2numa_interleaved)):
    with open(os.path.join(HERE, name), "w") as f:
        f.write("\n".join(make().lines) + "\n")
    print("wrote", name)
