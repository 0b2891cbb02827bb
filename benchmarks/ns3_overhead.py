"""Wall time per step of the ns3-v0 channel (issue 7 target: < 5 ms per step, import excluded).

Workload: 8 agents 5 m apart, 802.11a at a constant 6 Mbit/s, every agent broadcasts one 100-byte
payload (128 B IP packet) every step of 0.1 s simulated; without and with background traffic
(2 pairs at 1 Mbit/s each, Poisson). The in-process ``ideal-v0`` and ``bandwidth-v0`` channels run the
same workload in the same process for scale. Optional ``--pypi``: the other route of the issue (PyPI
``ns3`` 3.44 Python bindings, stepped in-process with ``Simulator.Stop`` + ``Run``), installed into
``bench-venvs/ns3-pypi`` by this script (about 0.5 GB and minutes to install; reinstalled when that venv does not
hold the whole package, e.g. after an interrupted install) and run in a subprocess.

    .venv/bin/python benchmarks/ns3_overhead.py [--steps 1000] [--pypi]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

if str(Path(__file__).resolve().parent) not in sys.path:  # imported by a test rather than run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peer_venv import ensure_peer_venv, installed_check, peer_ready  # noqa: E402

from coopsim.comm.bandwidth import BandwidthChannel  # noqa: E402
from coopsim.comm.ideal import IdealChannel  # noqa: E402
from coopsim.comm.ns3 import Ns3Channel  # noqa: E402
from coopsim.errors import int_at_least, run_script  # noqa: E402
from coopsim.platform.comm import MessageBatch  # noqa: E402

N, DT, PAYLOAD_BYTES = 8, 0.1, 100
ROOT = Path(__file__).resolve().parents[1]
PYPI_VENV = ROOT / "bench-venvs" / "ns3-pypi"
PYPI_REQ = "ns3==3.44.post0"
#: what makes ``bench-venvs/ns3-pypi`` ready: the wheel installed whole, with its ``ns`` package. Not imported by the
#: check: loading the bindings is what the route times (and a crash there is a result, not an unready venv)
PYPI_CHECK = (installed_check("ns3", "3.44.post0") + "\nimport importlib.util\n"
              "if importlib.util.find_spec('ns') is None:\n    raise SystemExit('ns3 is installed without its ns package')")


class Line:
    def __init__(self):
        self.pos = np.zeros((1, N, 3))
        self.pos[0, :, 0] = np.arange(N) * 5.0

    def positions(self):
        return self.pos


def batch(t: int) -> MessageBatch:
    return MessageBatch(np.zeros(N, np.int32), np.arange(N, dtype=np.int32), np.full(N, -1, np.int32),
                        np.zeros((N, PAYLOAD_BYTES // 4), np.float32), np.full(N, t * DT))


def child_cpu_s(ch) -> float:
    """CPU seconds (user + system) of the ns-3 child process, 0 for in-process channels."""
    proc = getattr(ch, "_proc", None)
    if proc is None:
        return 0.0
    fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def busy(ms: float) -> None:
    """Stand-in for a scenario step between send and deliver: spin this long on the CPU."""
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        pass


def measure(ch, steps: int, warmup: int = 20, work_ms: float = 0.0) -> dict:
    ch.reset(1, num_envs=1, num_agents=N, dt_s=DT, scenario=Line())
    times = np.zeros(steps)
    for t in range(warmup + steps):
        if t == warmup:
            cpu0 = time.process_time() + child_cpu_s(ch)
        t0 = time.perf_counter()
        ch.send(t, batch(t))
        if work_ms:
            busy(work_ms)
        ch.deliver(t + 1)
        if t >= warmup:
            times[t - warmup] = time.perf_counter() - t0 - work_ms / 1e3
    cpu = time.process_time() + child_cpu_s(ch) - cpu0
    s = ch.stats()
    ch.close()
    return dict(mean_ms=times.mean() * 1e3, p50_ms=np.percentile(times, 50) * 1e3,
                p95_ms=np.percentile(times, 95) * 1e3, cpu_ms=cpu / steps * 1e3,
                delivered=s.get("comm/delivered_copies", s.get("comm/copies_delivered", 0.0))
                / max(s.get("comm/offered_copies", s.get("comm/copies_offered", 1.0)), 1))


PYPI_SCRIPT = r'''
import sys, time
t0 = time.perf_counter()
from ns import ns
t_import = time.perf_counter() - t0
N, dt, T = 8, 0.1, int(sys.argv[1])
nodes = ns.NodeContainer(); nodes.Create(N)
wifi = ns.WifiHelper(); wifi.SetStandard(ns.WIFI_STANDARD_80211a)
wifi.SetRemoteStationManager("ns3::ConstantRateWifiManager", "DataMode", ns.StringValue("OfdmRate6Mbps"),
                             "ControlMode", ns.StringValue("OfdmRate6Mbps"))
phy = ns.YansWifiPhyHelper(); phy.SetChannel(ns.YansWifiChannelHelper.Default().Create())
mac = ns.WifiMacHelper(); mac.SetType("ns3::AdhocWifiMac")
dev = wifi.Install(phy, mac, nodes)
mob = ns.MobilityHelper(); mob.SetMobilityModel("ns3::ConstantPositionMobilityModel"); mob.Install(nodes)
ns.InternetStackHelper().Install(nodes)
addr = ns.Ipv4AddressHelper(); addr.SetBase(ns.Ipv4Address("10.0.0.0"), ns.Ipv4Mask("255.255.255.0")); addr.Assign(dev)
bcast = ns.InetSocketAddress(ns.Ipv4Address("255.255.255.255"), 9000).ConvertTo()
socks, mobs = [], []
for i in range(N):
    s = ns.Socket.CreateSocket(nodes.Get(i), ns.TypeId.LookupByName("ns3::UdpSocketFactory"))
    s.SetAllowBroadcast(True); socks.append(s); mobs.append(nodes.Get(i).GetObject[ns.MobilityModel]())
print(f"import_s {t_import:.1f}", flush=True)
t0 = time.perf_counter()
for t in range(T):
    for i in range(N):
        mobs[i].SetPosition(ns.Vector(5.0 * i, 0.0, 0.0))
    for i in range(N):
        socks[i].SendTo(ns.Packet(100), 0, bcast)
    ns.Simulator.Stop(ns.Seconds(dt)); ns.Simulator.Run()
print(f"step_ms {(time.perf_counter() - t0) / T * 1e3:.3f}", flush=True)
'''


def pypi_route(steps: int) -> str:
    py = PYPI_VENV / "bin" / "python"
    t0 = time.perf_counter()
    if peer_ready(py, PYPI_CHECK)[0]:
        install = "installed earlier"
    else:
        ensure_peer_venv(PYPI_VENV, PYPI_CHECK, [[PYPI_REQ]])
        install = f"venv + pip install {time.perf_counter() - t0:.0f} s"
    res = subprocess.run([str(py), "-c", PYPI_SCRIPT, str(steps)], capture_output=True, text=True, timeout=900)
    out = dict(line.split() for line in res.stdout.splitlines() if line.split()[:1] in (["import_s"], ["step_ms"]))
    if res.returncode != 0:
        crash = "segmentation violation" if "segmentation violation" in res.stderr else f"exit {res.returncode}"
        return (f"{install}; import {out.get('import_s', '?')} s; "
                f"stepping FAILED ({crash}, cppyy JIT: {('Failed to materialize' in res.stderr)})")
    return f"{install}; import {out['import_s']} s; {out['step_ms']} ms/step"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int_at_least(1), default=1000, help="timed steps per channel (>= 1)")
    ap.add_argument("--pypi", action="store_true", help="also install and time the PyPI ns3 route")
    args = ap.parse_args(argv)
    rows = [
        ("ideal-v0 (in-process, no network model)", IdealChannel()),
        ("bandwidth-v0 (in-process trace model)", BandwidthChannel()),
        ("ns3-v0, no background traffic", Ns3Channel()),
        ("ns3-v0, background 2 pairs x 1 Mbit/s", Ns3Channel(background_pairs=2, background_rate_bps=1e6,
                                                          background_position_m=(15.0, 2.0, 0.0))),
    ]
    results = [(name, measure(ch, args.steps)) for name, ch in rows]
    results.append(("ns3-v0, no bg, 3 ms scenario step between*", measure(Ns3Channel(), args.steps, work_ms=3.0)))
    base = results[2][1]["mean_ms"]
    print(f"8 agents, 802.11a 6 Mbit/s, {PAYLOAD_BYTES} B broadcasts every {DT} s step, {args.steps} steps")
    print(f"load average (1 min) {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; wall = per step, send + deliver;"
          " cpu = CPU of this process + the ns-3 child per step")
    print(f"{'channel':44s} {'wall ms':>8s} {'p50 ms':>8s} {'p95 ms':>8s} {'cpu ms':>8s} {'delivered':>10s} {'vs ns3':>7s}")
    for name, r in results:
        print(f"{name:44s} {r['mean_ms']:8.3f} {r['p50_ms']:8.3f} {r['p95_ms']:8.3f} {r['cpu_ms']:8.3f} "
              f"{r['delivered']:10.3f} {r['mean_ms'] / base:7.2f}")
    print("* send returns at once and ns-3 runs while the scenario steps: wall is send + deliver beyond the 3 ms"
          " spent in the scenario (cpu includes those 3 ms)")
    cpu = results[2][1]["cpu_ms"]
    print(f"target ns3-v0 without background < 5 ms/step: wall {base:.2f} ms ({'MET' if base < 5 else 'NOT MET'}), "
          f"cpu {cpu:.2f} ms ({'MET' if cpu < 5 else 'NOT MET'})")
    if args.pypi:
        print("PyPI ns3 3.44 route (in-process bindings):", pypi_route(min(args.steps, 300)))


if __name__ == "__main__":
    run_script(main)
