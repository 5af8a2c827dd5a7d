#!/usr/bin/env python3
"""test-doctor.py IBVFCTL - `ibvfctl doctor --root` on fixture trees.

One healthy node tree, then one change per case, each checked for the
verdict (and a word of the evidence) of the check it is meant to move, and
for ibvfctl's exit status (1 when a check fails, 0 otherwise; --strict: 1 on
a warning too). The trees model what the kernel shows in /proc and /sys
(sysfs links are relative, as the kernel writes them) and what containerd,
CRI-O and systemd keep in /etc. TAP output.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

IBVFCTL = sys.argv[1]
N = 0
FAILS = 0
MODULES = ["ib_core", "ib_uverbs", "ib_umad", "rdma_ucm", "rdma_cm", "mlx5_core", "mlx5_ib",
           "ib_ipoib", "nvidia", "nvidia_peermem"]


def ok(cond, desc):
    global N, FAILS
    N += 1
    if not cond:
        FAILS += 1
    print(("ok" if cond else "not ok") + f" {N} - {desc}", flush=True)


def w(root, rel, text, mode=None):
    p = os.path.join(root, rel.lstrip("/"))
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb" if isinstance(text, bytes) else "w") as f:
        f.write(text)


def ln(root, rel, target):
    p = os.path.join(root, rel.lstrip("/"))
    os.makedirs(os.path.dirname(p), exist_ok=True)
    if os.path.lexists(p):
        os.remove(p)
    os.symlink(target, p)


def rm(root, rel):
    p = os.path.join(root, rel.lstrip("/"))
    if os.path.isdir(p) and not os.path.islink(p):
        shutil.rmtree(p)
    elif os.path.lexists(p):
        os.remove(p)


def modules(root, names):
    w(root, "/proc/modules", "".join(f"{m} 16384 0 - Live 0x0000000000000000\n" for m in names))


def pci(root, chain):
    """PCI functions along @chain (root port first), as sysfs nests them."""
    path = "devices/pci0000:00"
    for bdf in chain:
        path += "/" + bdf
        os.makedirs(os.path.join(root, "sys", path), exist_ok=True)
        ln(root, f"/sys/bus/pci/devices/{bdf}", "../../../" + path)
    return os.path.join(root, "sys", path)


def driver(root, bdf, drv):
    real = os.path.realpath(os.path.join(root, f"sys/bus/pci/devices/{bdf}"))
    ln(root, os.path.relpath(real, root) + "/driver", "../../../../bus/pci/drivers/" + drv)


def ibdev(root, name, bdf, state=4, guid="0002:c903:0000:0001", link="InfiniBand",
          pkeys=("0xffff",), uverbs=None):
    base = f"/sys/class/infiniband/{name}"
    ln(root, base + "/device", "../../../bus/pci/devices/" + bdf)
    names = {1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE"}
    w(root, base + "/ports/1/state", f"{state}: {names[state]}\n")
    w(root, base + "/ports/1/link_layer", link + "\n")
    w(root, base + "/ports/1/gids/0", "fe80:0000:0000:0000:" + guid + "\n")
    for i, k in enumerate(pkeys):
        w(root, base + f"/ports/1/pkeys/{i}", k + "\n")
    if uverbs is not None:
        w(root, f"/sys/class/infiniband_verbs/uverbs{uverbs}/ibdev", name + "\n")
        w(root, f"/dev/infiniband/uverbs{uverbs}", "")


def acs_config(ctrl):
    cfg = bytearray(4096)
    hdr = 0x000D | (1 << 16) | (0 << 20)  # ACS, version 1, last capability
    cfg[0x100:0x104] = hdr.to_bytes(4, "little")
    cfg[0x106:0x108] = ctrl.to_bytes(2, "little")
    return bytes(cfg)


def healthy(root):
    modules(root, MODULES)
    w(root, "/sys/module/ib_core/parameters/netns_mode", "N\n")
    # a switch: root port 00:01.0 -> upstream 01:00.0 -> downstream 02:00.0 (HCA) / 02:01.0 (GPU)
    pci(root, ["0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0"])
    pci(root, ["0000:00:01.0", "0000:01:00.0", "0000:02:01.0", "0000:04:00.0"])
    for b in ["0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:02:01.0"]:
        w(root, f"/sys/bus/pci/devices/{b}/config", acs_config(0x0001))
    w(root, "/sys/bus/pci/devices/0000:04:00.0/vendor", "0x10de\n")
    w(root, "/sys/bus/pci/devices/0000:04:00.0/class", "0x030200\n")
    w(root, "/sys/bus/pci/devices/0000:03:00.0/vendor", "0x15b3\n")
    w(root, "/sys/bus/pci/devices/0000:03:00.0/class", "0x020700\n")
    driver(root, "0000:03:00.0", "mlx5_core")
    w(root, "/sys/bus/pci/devices/0000:03:00.0/sriov_totalvfs", "16\n")
    w(root, "/sys/bus/pci/devices/0000:03:00.0/sriov_numvfs", "2\n")
    ibdev(root, "mlx5_0", "0000:03:00.0", uverbs=0)
    for i, vf in enumerate(["0000:03:00.1", "0000:03:00.2"]):
        pci(root, ["0000:00:01.0", "0000:01:00.0", "0000:02:00.0", vf])
        ln(root, f"/sys/bus/pci/devices/0000:03:00.0/virtfn{i}", "../" + vf)
        ln(root, f"/sys/bus/pci/devices/{vf}/physfn", "../0000:03:00.0")
        driver(root, vf, "mlx5_core")
        ibdev(root, f"mlx5_{i + 1}", vf, guid=f"0002:c903:00ff:000{i + 1}", uverbs=i + 1,
              pkeys=("0xffff", "0x8001"))
    w(root, "/proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/sda1 intel_iommu=on iommu=pt\n")
    os.makedirs(os.path.join(root, "sys/class/iommu/dmar0"), exist_ok=True)
    w(root, "/etc/cni/net.d/10-ib.conflist", json.dumps(
        {"cniVersion": "1.0.0", "name": "ib", "plugins": [
            {"type": "ib-sriov", "pkey": "0x1", "rdmaIsolation": True}]}))
    w(root, "/lib/systemd/system/containerd.service",
      "[Unit]\nDescription=containerd\n[Service]\nExecStart=/usr/bin/containerd\n"
      "LimitNOFILE=infinity\n")
    w(root, "/etc/systemd/system/containerd.service.d/memlock.conf",
      "[Service]\nLimitMEMLOCK=infinity\n")
    w(root, "/proc/4242/comm", "containerd\n")
    w(root, "/proc/4242/limits",
      "Limit                     Soft Limit           Hard Limit           Units     \n"
      "Max locked memory         unlimited            unlimited            bytes     \n")
    w(root, "/etc/containerd/config.toml",
      'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = true # devices\n'
      '  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n'
      '    runtime_type = "io.containerd.runc.v2"\n')
    w(root, "/etc/cdi/nvidia.yaml", "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\n")


def run(root, *extra):
    p = subprocess.run([IBVFCTL, "--json", "doctor", "--root", root, "--no-store", *extra],
                       capture_output=True, text=True, timeout=60)
    try:
        checks = {c["id"]: c for c in json.loads(p.stdout)}
    except (ValueError, KeyError):
        print("# stdout: " + p.stdout.replace("\n", "\n# "))
        print("# stderr: " + p.stderr.replace("\n", "\n# "))
        checks = {}
    return p.returncode, checks


def case(desc, change, check, verdict, word=None, rc=None, extra=()):
    root = tempfile.mkdtemp(prefix="ibvf-doctor.")
    try:
        healthy(root)
        change(root)
        code, checks = run(root, *extra)
        c = checks.get(check, {})
        good = c.get("verdict") == verdict and (word is None or word in c.get("evidence", ""))
        if rc is not None:
            good = good and code == rc
        if not good:
            print(f"# {check}: {json.dumps(c)} exit {code}")
        ok(good, f"{desc}: {check} {verdict}" + (f" (exit {rc})" if rc is not None else ""))
        # every failing check names a fix, every ok/na check none
        for x in checks.values():
            if (x["verdict"] in ("fail", "warn")) != bool(x.get("fix")):
                ok(False, f"{desc}: {x['id']} {x['verdict']} with fix {x.get('fix')!r}")
                break
    finally:
        shutil.rmtree(root)


def nothing(_root):
    pass


def main():
    # the healthy node: nothing fails, nothing warns
    root = tempfile.mkdtemp(prefix="ibvf-doctor.")
    healthy(root)
    code, checks = run(root, "--strict")
    bad = {k: v["verdict"] for k, v in checks.items() if v["verdict"] in ("fail", "warn")}
    ok(code == 0 and not bad and len(checks) >= 20, f"healthy tree: exit 0, no fail/warn {bad}")
    ok(checks.get("memlock.crio", {}).get("verdict") == "not-applicable",
       "healthy tree: no CRI-O there, memlock.crio not-applicable")
    shutil.rmtree(root)

    # kernel modules
    case("ib_uverbs missing", lambda r: modules(r, [m for m in MODULES if m != "ib_uverbs"]),
         "kmod.ib_uverbs", "fail", "not loaded", rc=1)
    case("rdma_ucm missing", lambda r: modules(r, [m for m in MODULES if m != "rdma_ucm"]),
         "kmod.rdma_ucm", "warn", "RDMA CM", rc=0)
    case("rdma_ucm missing, --strict", lambda r: modules(r, [m for m in MODULES if m != "rdma_ucm"]),
         "kmod.rdma_ucm", "warn", rc=1, extra=("--strict",))
    case("ib_core built in (no /proc/modules line, /sys/module/ib_core)",
         lambda r: modules(r, [m for m in MODULES if m != "ib_core"]),
         "kmod.ib_core", "ok")
    case("mlx5_core without mlx5_ib",
         lambda r: (modules(r, [m for m in MODULES if m != "mlx5_ib"]),
                    rm(r, "/sys/class/infiniband")),
         "kmod.hca", "fail", "mlx5_ib is not", rc=1)
    case("no RDMA device", lambda r: rm(r, "/sys/class/infiniband"), "kmod.hca", "fail",
         "no RDMA device")
    case("ib_ipoib missing", lambda r: modules(r, [m for m in MODULES if m != "ib_ipoib"]),
         "kmod.ib_ipoib", "warn")
    case("GPU without nvidia_peermem",
         lambda r: modules(r, [m for m in MODULES if m != "nvidia_peermem"]),
         "kmod.gpudirect", "fail", "neither nvidia_peermem", rc=1)
    case("GPU, open kernel modules (dma-buf)",
         lambda r: (modules(r, [m for m in MODULES if m != "nvidia_peermem"]),
                    w(r, "/proc/driver/nvidia/version",
                      "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.14\n")),
         "kmod.gpudirect", "ok", "dma-buf")
    case("no GPU", lambda r: rm(r, "/sys/bus/pci/devices/0000:04:00.0/vendor"),
         "kmod.gpudirect", "not-applicable")

    # RDMA netns mode
    case("shared mode, rdmaIsolation asked",
         lambda r: w(r, "/sys/module/ib_core/parameters/netns_mode", "Y\n"),
         "rdma.netns_mode", "fail", "10-ib.conflist", rc=1)
    case("shared mode, nobody asks isolation",
         lambda r: (w(r, "/sys/module/ib_core/parameters/netns_mode", "Y\n"),
                    rm(r, "/etc/cni/net.d/10-ib.conflist")),
         "rdma.netns_mode", "warn", "every Pod sees")
    case("shared mode: the fix counts the netns that block the change",
         lambda r: (w(r, "/sys/module/ib_core/parameters/netns_mode", "Y\n"),
                    w(r, "/run/netns/cni-1", ""), w(r, "/run/netns/cni-2", "")),
         "rdma.netns_mode", "fail")
    case("exclusive mode", nothing, "rdma.netns_mode", "ok", "1 CNI network")
    case("ib_core absent", lambda r: (modules(r, []), rm(r, "/sys/module")),
         "rdma.netns_mode", "not-applicable")

    # uverbs
    case("a device without uverbs", lambda r: rm(r, "/sys/class/infiniband_verbs/uverbs2"),
         "rdma.uverbs", "fail", "mlx5_2: - no uverbs device", rc=1)
    case("uverbs without /dev node", lambda r: rm(r, "/dev/infiniband/uverbs0"),
         "rdma.uverbs", "fail", "no /dev/infiniband node")

    # memlock
    def unit_64k(r):
        rm(r, "/etc/systemd/system/containerd.service.d")
        w(r, "/lib/systemd/system/containerd.service", "[Service]\nLimitMEMLOCK=64K\n")
        rm(r, "/proc/4242")
    case("containerd unit LimitMEMLOCK=64K, not running", unit_64k, "memlock.containerd",
         "fail", "65536 bytes", rc=1)
    case("drop-in overrides the unit",
         lambda r: w(r, "/lib/systemd/system/containerd.service", "[Service]\nLimitMEMLOCK=64K\n"),
         "memlock.containerd", "ok", "unlimited")
    case("running containerd's limit wins over its unit file",
         lambda r: (w(r, "/etc/systemd/system/containerd.service.d/memlock.conf",
                      "[Service]\nLimitMEMLOCK=infinity\n"),
                    w(r, "/proc/4242/limits",
                      "Max locked memory         8388608              8388608              bytes\n")),
         "memlock.containerd", "fail", "/proc/4242/limits")
    case("1 GiB: a finite limit warns",
         lambda r: w(r, "/proc/4242/limits",
                     "Max locked memory         1073741824           1073741824           bytes\n"),
         "memlock.containerd", "warn", "1073741824")

    def spec(value):
        def change(r):
            w(r, "/etc/containerd/config.toml",
              'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\nenable_cdi = true\n'
              '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n'
              "base_runtime_spec = '/etc/containerd/base.json'\n")
            w(r, "/etc/containerd/base.json",
              '{"ociVersion": "1.1.0", "process": {"rlimits": [{"type": "RLIMIT_NOFILE", '
              '"hard": 1048576, "soft": 1048576}, {"type": "RLIMIT_MEMLOCK", "hard": '
              f'{value}, "soft": {value}}}]}}}}')
        return change
    case("base_runtime_spec RLIMIT_MEMLOCK 65536 beats an unlimited containerd", spec(65536),
         "memlock.containerd", "fail", "base_runtime_spec")
    case("base_runtime_spec RLIMIT_MEMLOCK 2^64-1", spec(18446744073709551615),
         "memlock.containerd", "ok", "base_runtime_spec")
    case("nothing known: no unit limit, no process",
         lambda r: (rm(r, "/etc/systemd/system/containerd.service.d"), rm(r, "/proc/4242")),
         "memlock.containerd", "warn", "systemd default")
    case("no containerd at all",
         lambda r: (rm(r, "/etc/systemd/system"), rm(r, "/lib/systemd"), rm(r, "/proc/4242"),
                    rm(r, "/etc/containerd")),
         "memlock.containerd", "not-applicable")
    case("CRI-O default_ulimits memlock=-1:-1 (multi-line array)",
         lambda r: w(r, "/etc/crio/crio.conf",
                     '[crio.runtime]\ndefault_ulimits = [\n  "nofile=1048576:1048576",\n'
                     '  "memlock=-1:-1", # RDMA\n]\n'),
         "memlock.crio", "ok", "default_ulimits")
    case("CRI-O running with 64 KiB",
         lambda r: (w(r, "/proc/77/comm", "crio\n"),
                    w(r, "/proc/77/limits",
                      "Max locked memory         65536                65536                bytes\n")),
         "memlock.crio", "fail", "running crio")

    # SR-IOV, VF ports, the SM
    case("no VFs configured", lambda r: w(r, "/sys/bus/pci/devices/0000:03:00.0/sriov_numvfs",
                                          "0\n"),
         "sriov.vfs", "warn", "0 of 16")
    case("a VF bound to no driver", lambda r: rm(r, "/sys/bus/pci/devices/0000:03:00.2/driver"),
         "sriov.vf_driver", "warn", "0000:03:00.2")
    case("a VF with port GUID 0",
         lambda r: ibdev(r, "mlx5_2", "0000:03:00.2", state=2, guid="0000:0000:0000:0000"),
         "sriov.vf_guid", "fail", "mlx5_2 (0000:03:00.2, INIT)", rc=1)
    case("a VF stuck in INIT with a GUID behind an ACTIVE PF (upstream OpenSM)",
         lambda r: ibdev(r, "mlx5_2", "0000:03:00.2", state=2, guid="0002:c903:00ff:0002"),
         "sm.virtualization", "fail", "0x0002c90300ff0002 INIT while PF mlx5_0", rc=1)
    case("a VF port DOWN", lambda r: ibdev(r, "mlx5_1", "0000:03:00.1", state=1),
         "sriov.vf_port", "warn", "mlx5_1 DOWN")
    case("PF DOWN too: not the SM's virtualization",
         lambda r: (ibdev(r, "mlx5_0", "0000:03:00.0", state=1),
                    ibdev(r, "mlx5_2", "0000:03:00.2", state=2)),
         "sm.virtualization", "ok")
    case("without a store the P_Key check does not apply", nothing, "sriov.vf_pkey",
         "not-applicable")

    # PCIe
    case("IOMMU on without passthrough",
         lambda r: w(r, "/proc/cmdline", "root=/dev/sda1 intel_iommu=on\n"),
         "pci.iommu", "warn", "not in passthrough")
    case("no IOMMU", lambda r: (w(r, "/proc/cmdline", "root=/dev/sda1\n"),
                                rm(r, "/sys/class/iommu/dmar0")),
         "pci.iommu", "ok", "no IOMMU")
    case("ACS P2P redirect on the switch's downstream port",
         lambda r: w(r, "/sys/bus/pci/devices/0000:02:01.0/config", acs_config(0x001d)),
         "pci.acs", "warn", "0000:02:01.0 ACSCtl 0x001d (RR+CR)")
    case("ACS redirect on the root port above the common switch does not count",
         lambda r: w(r, "/sys/bus/pci/devices/0000:00:01.0/config", acs_config(0x000c)),
         "pci.acs", "ok", "3 bridge(s)")
    case("config space cut at 64 bytes (not root)",
         lambda r: w(r, "/sys/bus/pci/devices/0000:01:00.0/config", bytes(64)),
         "pci.acs", "warn", "cannot be read")
    case("no GPU: ACS does not apply", lambda r: rm(r, "/sys/bus/pci/devices/0000:04:00.0/class"),
         "pci.acs", "not-applicable")

    # RoCE
    def roce(arp_ignore):
        def change(r):
            for i, (dev, net, bdf) in enumerate([("mlx5_8", "ens1f0", "0000:05:00.0"),
                                                 ("mlx5_9", "ens1f1", "0000:05:00.1")]):
                pci(r, ["0000:00:02.0", bdf])
                ibdev(r, dev, bdf, link="Ethernet", uverbs=8 + i)
                w(r, f"/sys/class/infiniband/{dev}/ports/1/gid_attrs/ndevs/0", net + "\n")
                w(r, f"/proc/sys/net/ipv4/conf/{net}/arp_ignore", f"{arp_ignore}\n")
                w(r, f"/proc/sys/net/ipv4/conf/{net}/arp_announce", "2\n")
                w(r, f"/proc/sys/net/ipv4/conf/{net}/rp_filter", "2\n")
            w(r, "/proc/sys/net/ipv4/conf/all/rp_filter", "0\n")
        return change
    case("two RoCE netdevs with arp_ignore=0", roce(0), "roce.arp", "warn",
         "ens1f0 arp_ignore=0")
    case("two RoCE netdevs, right settings", roce(1), "roce.arp", "ok", "2 RoCE netdevs")

    def strict_all(r):
        roce(1)(r)
        w(r, "/proc/sys/net/ipv4/conf/all/rp_filter", "1\n")
        w(r, "/proc/sys/net/ipv4/conf/ens1f0/rp_filter", "0\n")
    case("all/rp_filter=1 over the interface's 0: strict (max of the two)", strict_all,
         "roce.arp", "warn", "ens1f0 arp_ignore=1 arp_announce=2 rp_filter=1 (wrong)")
    case("one RDMA netdev only", nothing, "roce.arp", "not-applicable")

    # CDI
    case("CDI specs, enable_cdi off (containerd 1.7)",
         lambda r: w(r, "/etc/containerd/config.toml",
                     'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n'
                     "  enable_cdi = false\n"),
         "containerd.cdi", "fail", "enable_cdi is off", rc=1)
    case("containerd 2.x: on by default",
         lambda r: w(r, "/etc/containerd/config.toml",
                     "version = 3\n[plugins.'io.containerd.cri.v1.runtime']\n"
                     "  device_ownership_from_security_context = true\n"),
         "containerd.cdi", "ok", "version 3")
    case("enable_cdi under another table does not count",
         lambda r: w(r, "/etc/containerd/config.toml",
                     'version = 2\n[plugins."io.containerd.grpc.v1.cri".registry]\n'
                     "  enable_cdi = true\n"),
         "containerd.cdi", "fail", "key not set")
    case("no CDI spec", lambda r: rm(r, "/etc/cdi"), "containerd.cdi", "not-applicable")

    # bad input: --root that is not a directory
    p = subprocess.run([IBVFCTL, "doctor", "--root", "/nonexistent/ibvf", "--no-store"],
                       capture_output=True, text=True)
    ok(p.returncode == 2 and "not a directory" in p.stderr,
       f"--root of no directory: exit 2 with a message (exit {p.returncode}: {p.stderr.strip()})")
    p = subprocess.run([IBVFCTL, "doctor", "--bogus"], capture_output=True, text=True)
    ok(p.returncode == 2, "unknown option: exit 2")
    p = subprocess.run([IBVFCTL, "doctor", "--help"], capture_output=True, text=True)
    ok(p.returncode == 0 and "--root" in p.stdout, "--help names --root")

    print(f"1..{N}")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
