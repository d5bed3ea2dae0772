#!/usr/bin/python3
"""The BLIS_ARCH_TYPE the project's binaries set at load time, for Python
benchmarks whose PyTorch side must run the same BLIS kernels.

The rule of verl/core/blis_arch.h: Debian's BLIS 0.9 runs its generic
kernels on AMD families >= 0x1A (Zen 5); with AVX-512 F/DQ/BW/VL the 'skx'
kernels are ~4x faster. Run as a script it prints the value ("" if none).
"""
import os


def blis_arch_override(cpuinfo="/proc/cpuinfo"):
    info = {}
    with open(cpuinfo) as f:
        for line in f:
            if not line.strip():
                break  # the first processor's block
            key, _, value = line.partition(":")
            info[key.strip()] = value.strip()
    flags = set(info.get("flags", "").split())
    if (info.get("vendor_id") == "AuthenticAMD"
            and info.get("cpu family", "").isdigit()
            and int(info["cpu family"]) >= 0x1A
            and {"avx512f", "avx512dq", "avx512bw", "avx512vl"} <= flags):
        return "skx"
    return ""


def set_blis_arch():
    """Sets BLIS_ARCH_TYPE (unless already set) before torch loads BLIS."""
    arch = blis_arch_override()
    if arch:
        os.environ.setdefault("BLIS_ARCH_TYPE", arch)


if __name__ == "__main__":
    print(blis_arch_override())
