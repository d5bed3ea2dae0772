def verl_cc_library(name, **kwargs):
    native.cc_library(name = name, **kwargs)

def verl_cc_test(name, deps = [], **kwargs):
    native.cc_test(name = name, deps = deps + ["@system//:gtest"], **kwargs)

# A list constant loaded by BUILD files (as AVX2_COPTS is).
EXTRA_COPTS = ["-fopenmp-simd"]
