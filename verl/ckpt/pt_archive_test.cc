// File: verl/ckpt/pt_archive_test.cc
//
// PtArchive and the restricted unpickler (pt_pickle.h) on `.pt` files laid
// out as torch.save writes them. testdata/make_torch_pt.py writes the files
// with Debian's python3 pickle and stub torch modules (no PyTorch here).
// Covered: OrderedDict state dicts with `_metadata`, plain dicts, protocol 4,
// views and strides, parameters; and a table of files the reader must refuse
// with an error naming the file (DTensor, numpy objects, big-endian, missing
// or short records, nested dicts, int keys).
#include "verl/ckpt/pt_archive.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>
#include <stdio.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "glog/logging.h"
#include "verl/ckpt/checkpoint_pt.h"
#include "verl/ckpt/pt_pickle.h"
#include "verl/core/file_util.h"
#include "verl/core/test_util.h"

namespace verl::ckpt {
namespace {

using ::verl::core::testing::StatusIs;
namespace fs = std::filesystem;

// Generates the archives once; returns their folder.
const std::string& Archives() {
  static const std::string* dir = [] {
    const char* t = std::getenv("TEST_TMPDIR");
    auto* d = new std::string(std::string(t ? t : "/tmp") + "/pt_archive");
    fs::create_directories(*d);
    const std::string cmd =
        "python3 verl/ckpt/testdata/make_torch_pt.py " + *d + " table 2>&1";
    const std::string out = core::testing::RunAndCapture(cmd);
    CHECK_EQ(out, "ok\n") << out;
    return d;
  }();
  return *dir;
}

std::map<std::string, at::Tensor> Expected() {
  const at::Tensor w = at::arange(12, at::kFloat).view({3, 4});
  return {{"w", w},
          {"wt", w.t()},
          {"row", at::arange(4, 8, at::kFloat)},
          {"b", at::tensor({1.0f, -2.0f, 0.5f}).to(at::kBFloat16)},
          {"ids", at::tensor({int64_t{7}, int64_t{-3}, int64_t{1} << 40})},
          {"flag", at::tensor({uint8_t{1}, uint8_t{0}}).to(at::kBool)},
          {"p", at::scalar_tensor(1.5f)},
          {"empty", at::zeros({0, 5})}};
}

TEST(PtArchiveTest, ReadsTorchSaveStateDicts) {
  const std::vector<std::string> order = {"w",   "wt",   "row", "b",
                                          "ids", "flag", "p",   "empty"};
  for (const std::string file : {"od_meta", "dict_p2", "dict_p4"}) {
    const std::string path = Archives() + "/" + file + ".pt";
    auto archive = PtArchive::Open(path);
    ASSERT_TRUE(archive.ok()) << archive.status();
    std::vector<std::string> names;
    for (const auto& t : archive->tensors()) names.push_back(t.name);
    EXPECT_EQ(names, order) << file;
    auto dict = LoadPtTensorDict(path);
    ASSERT_TRUE(dict.ok()) << dict.status();
    for (const auto& [name, want] : Expected()) {
      const PtTensorInfo* info = archive->Find(name);
      ASSERT_NE(info, nullptr) << file << " " << name;
      auto got = archive->Read(*info);
      ASSERT_TRUE(got.ok()) << got.status();
      for (const at::Tensor& t : {*got, dict->at(name)}) {
        EXPECT_EQ(t.scalar_type(), want.scalar_type()) << file << " " << name;
        EXPECT_EQ(t.sizes(), want.sizes()) << file << " " << name;
        EXPECT_TRUE(at::equal(t, want)) << file << " " << name;
      }
    }
  }
}

TEST(PtArchiveTest, ReadIntoASliceOfABiggerTensor) {
  const std::string path = Archives() + "/ours.pt";
  const at::Tensor a = at::randn({3, 5}), b = at::randn({2, 5});
  ASSERT_TRUE(SavePtTensorDict(path, {{"a", a}, {"b", b}}).ok());
  auto archive = PtArchive::Open(path);
  ASSERT_TRUE(archive.ok()) << archive.status();
  at::Tensor full = at::empty({5, 5});
  ASSERT_TRUE(
      archive->ReadInto(*archive->Find("a"), full.narrow(0, 0, 3)).ok());
  ASSERT_TRUE(
      archive->ReadInto(*archive->Find("b"), full.narrow(0, 3, 2)).ok());
  EXPECT_TRUE(at::equal(full, at::cat({a, b}, 0)));
  // A destination of the wrong shape or dtype is refused.
  EXPECT_THAT(
      archive->ReadInto(*archive->Find("a"), at::empty({3, 4})),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "tensor 'a': destination does not match its shape/dtype"));
  EXPECT_THAT(
      archive->ReadInto(*archive->Find("a"), at::empty({3, 5}, at::kDouble)),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "tensor 'a': destination does not match its shape/dtype"));
}

TEST(PtArchiveTest, RefusedFilesNameTheFileAndTheReason) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"dtensor",
       {"holds an object of class torch.distributed.tensor.DTensor",
        "torch._tensor._rebuild_from_type_v2", "to_local()"}},
      {"numpy", {"class numpy.core.multiarray._reconstruct"}},
      {"bigendian", {"byteorder 'big'"}},
      {"missing_record", {"no record missing_record/data/0"}},
      {"too_small", {"does not fit its storage record"}},
      {"out_of_storage", {"does not fit its storage record"}},
      {"nested", {"entry 'a' holds GenericDict, expected a plain tensor"}},
      {"int_key", {"dict key of type Int"}},
  };
  for (const auto& [file, expect] : cases) {
    const std::string path = Archives() + "/" + file + ".pt";
    auto archive = PtArchive::Open(path);
    // The code differs between cases; each case's message is checked below.
    ASSERT_FALSE(archive.ok()) << file;
    const std::string msg(archive.status().message());
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    for (const std::string& e : expect) {
      EXPECT_NE(msg.find(e), std::string::npos) << file << ": " << msg;
    }
    auto dict = LoadPtTensorDict(path);
    EXPECT_EQ(dict.status(), archive.status()) << file;
  }
}

TEST(PtArchiveTest, UnpicklerSurvivesMutatedInput) {
  const std::string bytes = *core::ReadFile(Archives() + "/dict_p4.pt");
  // The pickle record of a stored zip: find it by its PROTO 4 header.
  const size_t at = bytes.find("\x80\x04");
  ASSERT_NE(at, std::string::npos);
  const std::string pickle = bytes.substr(at, 700);
  std::mt19937 rng(5);
  int ok = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string p = pickle.substr(0, rng() % pickle.size());
    if (trial % 2) {
      p = pickle;
      for (int k = 0; k < 3; ++k)
        p[rng() % p.size()] = static_cast<char>(rng());
    }
    ok += UnpickleTorchSave(p, "fuzz").ok();
  }
  EXPECT_LT(ok, 3000);
}

}  // namespace
}  // namespace verl::ckpt
