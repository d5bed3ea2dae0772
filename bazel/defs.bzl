"""Project-wide C++ rule wrappers: one place for copts, test sizes and tags."""

VERL_COPTS = [
    "-Wall",
    "-Wno-sign-compare",
    "-Wno-unused-parameter",
    "-Wno-unused-function",
    "-Wno-deprecated-declarations",
]

# Per-ISA kernel objects (one source compiled per ISA, chosen at run time by
# verl/core/cpu_isa.h): AVX2 + FMA, and AVX-512 (F, VL, BW, DQ) on top.
AVX2_COPTS = [
    "-mavx2",
    "-mfma",
]

AVX512_COPTS = AVX2_COPTS + [
    "-mavx512f",
    "-mavx512vl",
    "-mavx512bw",
    "-mavx512dq",
]

def verl_cc_library(name, copts = [], **kwargs):
    native.cc_library(name = name, copts = VERL_COPTS + copts, **kwargs)

def verl_cc_binary(name, copts = [], **kwargs):
    native.cc_binary(name = name, copts = VERL_COPTS + copts, **kwargs)

# Test sources (not the libraries they test) build at -O1: their bodies are
# glue around library calls, and -O1 compiles ~20% faster than -O2.
VERL_TEST_COPTS = ["-O1"]

def verl_cc_test(name, copts = [], deps = [], size = "small", **kwargs):
    """A GoogleTest binary linked with gtest_main; small unless said otherwise."""
    native.cc_test(
        name = name,
        copts = VERL_COPTS + VERL_TEST_COPTS + copts,
        deps = deps + ["@system//:gtest_main"],
        size = size,
        **kwargs
    )

def verl_cc_benchmark(name, copts = [], deps = [], tags = [], **kwargs):
    """A Google Benchmark binary; built by `bazel build //...`, run by hand."""
    native.cc_binary(
        name = name,
        copts = VERL_COPTS + copts,
        deps = deps + ["@system//:benchmark_main"],
        tags = tags + ["benchmark"],
        testonly = True,
        **kwargs
    )
