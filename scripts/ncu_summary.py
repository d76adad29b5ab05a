#!/usr/bin/env python3
"""Summarises `ncu --csv --metrics gpu__time_duration.sum --print-units base` output: device time per step by
kernel (name shortened), the kernel count and the total, largest first. With dram__bytes_read.sum and
dram__bytes_write.sum among the metrics, also the DRAM bytes per step and their rate.
  ncu_summary.py FILE.csv STEPS [TOP]"""
import collections
import csv
import re
import sys


def strip_nested(name, open_ch, close_ch):
    out, depth = [], 0
    for ch in name:
        if ch == open_ch:
            depth += 1
        elif ch == close_ch:
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def short(name):
    name = name.replace("(anonymous namespace)::", "")
    name = strip_nested(name, "(", ")")          # parameters
    name = strip_nested(name, "<", ">")          # template arguments
    name = re.sub(r"^void ", "", name.strip())
    return name.split("::")[-1][:70] or "?"


def main():
    path, steps = sys.argv[1], int(sys.argv[2])
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 25
    lines = [l for l in open(path, errors="replace") if l.startswith('"')]
    total, count, dram = collections.Counter(), collections.Counter(), collections.Counter()
    for row in csv.DictReader(lines):
        if row.get("Metric Name") in ("dram__bytes_read.sum", "dram__bytes_write.sum"):
            dram[short(row["Kernel Name"])] += float(row["Metric Value"].replace(",", "")) / steps
            continue
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        ns = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "nsecond")
        scale = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3}.get(unit, 1e-6)
        k = short(row["Kernel Name"])
        total[k] += ns * scale / steps
        count[k] += 1.0 / steps
    all_ms = sum(total.values())
    def rate(nbytes, ms):  # DRAM GB and TB/s, when measured
        return f" {nbytes / 1e9:7.3f} GB {nbytes / 1e9 / ms:5.2f} TB/s" if dram and ms > 0 else ""

    all_bytes = sum(dram.values())
    print(f"total {all_ms:.3f} ms/step device time, {sum(count.values()):.0f} kernels/step{rate(all_bytes, all_ms)}")
    for k, ms in total.most_common(top):
        print(f"{ms:8.3f} ms {100 * ms / all_ms:5.1f}% x{count[k]:5.0f}{rate(dram[k], ms)}  {k}")


if __name__ == "__main__":
    main()
