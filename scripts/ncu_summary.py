"""One line per profiled kernel from `ncu` text output on stdin: grid and block, duration, DRAM and SM throughput,
occupancy, waves, cycles per issued instruction and the stall reasons above 0.3 cycles per issued instruction.

    ncu --profile-from-start off -k regex:ntt_ --section SpeedOfLight --section Occupancy --section LaunchStats \\
        --section WarpStateStats --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio" \\
        python3 scripts/profile_keyswitch.py --ncu 2>&1 | python3 scripts/ncu_summary.py

Keeps a device run's output short (a few hundred characters per kernel instead of a page).
"""
from __future__ import annotations

import re
import sys

HEADER = re.compile(r"^\s+(.*?) \((\d+), (\d+), (\d+)\)x\((\d+), (\d+), (\d+)\), Context")
METRICS = {"Duration": "time", "DRAM Throughput": "dram", "Compute (SM) Throughput": "sm",
           "Achieved Occupancy": "occ", "Theoretical Occupancy": "theo", "Waves Per SM": "waves",
           "Warp Cycles Per Issued Instruction": "cpi"}
STALL = re.compile(r"smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio\s+\S+\s+([\d.,]+)")
TO_US = {"ns": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "nsecond": 1e-3}


def short_name(signature: str) -> str:
    name = re.sub(r"\(anonymous namespace\)::|unnamed>::|void |fhe::cuda::", "", signature)
    depth = 0
    for i, ch in enumerate(name):  # cut at the argument list: the first "(" outside template brackets
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "(" and depth == 0:
            return name[:i]
    return name


def number(text: str) -> float:
    return float(text.replace(",", ""))


def summarize(lines) -> list[str]:
    out: list[str] = []
    kernel: dict | None = None

    def flush():
        if kernel is None:
            return
        stalls = sorted(kernel["stalls"].items(), key=lambda kv: -kv[1])
        stall_text = " ".join(f"{name} {value:.1f}" for name, value in stalls if value >= 0.3 and name != "selected")
        fields = [f"{kernel['name']} {kernel['grid']}"]
        m = kernel["m"]
        if "time" in m:
            fields.append(f"{m['time']:.1f} us")
        for key, label in (("dram", "dram"), ("sm", "sm")):
            if key in m:
                fields.append(f"{label} {m[key]:.0f}%")
        if "occ" in m:
            fields.append(f"occ {m['occ']:.0f}/{m.get('theo', float('nan')):.0f}%")
        if "waves" in m:
            fields.append(f"waves {m['waves']:.2f}")
        if "cpi" in m:
            fields.append(f"cpi {m['cpi']:.1f}")
        out.append(", ".join(fields) + (f": {stall_text}" if stall_text else ""))

    for line in lines:
        header = HEADER.match(line)
        if header:
            flush()
            g = header.groups()
            kernel = {"name": short_name(g[0]), "grid": f"({g[1]},{g[2]})x{g[4]}", "m": {}, "stalls": {}}
            continue
        if kernel is None:
            continue
        stall = STALL.search(line)
        if stall:
            kernel["stalls"][stall.group(1)] = number(stall.group(2))
            continue
        for metric, key in METRICS.items():
            parts = line.split()
            if line.strip().startswith(metric + " ") and parts:
                try:
                    value = number(parts[-1])
                except ValueError:
                    break
                if key == "time":
                    value *= TO_US.get(parts[-2], 1.0)
                kernel["m"][key] = value
                break
    flush()
    return out


if __name__ == "__main__":
    print("\n".join(summarize(sys.stdin)))
