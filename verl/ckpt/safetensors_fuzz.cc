// File: verl/ckpt/safetensors_fuzz.cc
//
// libFuzzer entry for the safetensors reader. Any input must either be
// rejected with a Status or load completely; a file that loads must
// re-serialize into a file that loads to the same bytes. A crash, sanitizer
// report or CHECK failure is a finding. safetensors_fuzz_test runs this entry
// over malformed tables, truncations and byte flips without libFuzzer;
// docs/formats.md says how to fuzz it with clang.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <glog/logging.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "verl/ckpt/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using verl::ckpt::SafetensorsReader;
  auto reader = SafetensorsReader::FromBytes(
      std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  if (!reader.ok()) return 0;
  verl::ckpt::TensorMap loaded;
  for (const std::string& name : reader->names()) {
    auto t = reader->Get(name);
    if (!t.ok()) continue;      // e.g. a dtype LibTorch lacks
    loaded[name] = t->clone();  // touches every byte of the tensor
  }
  auto bytes = verl::ckpt::SerializeSafetensors(loaded, reader->metadata());
  CHECK(bytes.ok()) << bytes.status();
  auto again = SafetensorsReader::FromBytes(*bytes, "reserialized");
  CHECK(again.ok()) << again.status();
  CHECK(again->metadata() == reader->metadata());
  for (const auto& [name, t] : loaded) {
    auto u = again->Get(name);
    CHECK(u.ok()) << u.status();
    CHECK(u->sizes() == t.sizes() && u->scalar_type() == t.scalar_type());
    CHECK_EQ(std::memcmp(u->data_ptr(), t.data_ptr(), t.nbytes()), 0) << name;
  }
  return 0;
}
