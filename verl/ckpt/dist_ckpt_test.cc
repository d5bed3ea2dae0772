// File: verl/ckpt/dist_ckpt_test.cc
//
// dist_ckpt: a tensor saved as 2-d boxes over 4 "ranks" (one process writes
// every rank's file) reads back whole and as arbitrary boxes (resharding)
// bit for bit; bad checkpoints (missing / truncated rank file, metadata that
// disagrees with the files, overlapping or incomplete chunks) fail Open or
// Finalize with one line naming the file.
#include "verl/ckpt/dist_ckpt.h"

#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "verl/core/file_util.h"
#include "verl/core/test_util.h"

namespace verl::ckpt {
namespace {

namespace fs = std::filesystem;
using core::testing::StatusIs;

// A [6, 10] tensor split 2 x 2 (rows 0..3 | 4..5, cols 0..6 | 7..9) over
// ranks 0..3, a per-rank [1, 3] row of a [4, 3] "rng" tensor, and a scalar
// on rank 0.
struct Saved {
  at::Tensor w, rng, scalar;
};

Saved Write(const std::string& dir) {
  Saved s;
  s.w = at::arange(60, at::kFloat).reshape({6, 10});
  s.rng = at::arange(12, at::kByte).reshape({4, 3});
  s.scalar = at::scalar_tensor(7, at::kLong);
  const int64_t r0[] = {0, 4}, rn[] = {4, 2}, c0[] = {0, 7}, cn[] = {7, 3};
  for (int rank = 0; rank < 4; ++rank) {
    const int i = rank / 2, j = rank % 2;
    std::map<std::string, DistSlice> slices;
    slices["w"] = {s.w.narrow(0, r0[i], rn[i]).narrow(1, c0[j], cn[j]),
                   {6, 10},
                   {r0[i], c0[j]}};
    slices["rng"] = {s.rng.narrow(0, rank, 1), {4, 3}, {rank, 0}};
    if (rank == 0) slices["step"] = {s.scalar, {}, {}};
    EXPECT_TRUE(SaveDistCkptRank(dir, rank, 4, slices, {{"lr", 0.5}}).ok());
  }
  EXPECT_TRUE(FinalizeDistCkpt(dir, 4).ok());
  return s;
}

TEST(DistCkptTest, ReadsWholeTensorsAndAnyBox) {
  const std::string dir = core::testing::FreshTestDir("dist_ckpt_rw");
  const Saved s = Write(dir);
  auto reader = DistCkptReader::Open(dir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  const DistCkptMetadata& m = (*reader)->metadata();
  EXPECT_EQ(m.world_size, 4);
  EXPECT_EQ(m.common["lr"], 0.5);
  EXPECT_EQ(m.tensors.at("w").chunks.size(), 4u);
  EXPECT_EQ(m.tensors.at("w").shape, (std::vector<int64_t>{6, 10}));
  auto full = (*reader)->ReadFull("w");
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_TRUE(at::equal(*full, s.w));
  // Boxes straddling every chunk boundary (another layout's shards).
  for (int64_t r = 0; r < 6; ++r) {
    for (int64_t c = 0; c < 10; c += 3) {
      const int64_t nr = std::min<int64_t>(3, 6 - r);
      const int64_t nc = std::min<int64_t>(4, 10 - c);
      auto box = (*reader)->ReadBox("w", {r, c}, {nr, nc});
      ASSERT_TRUE(box.ok()) << box.status();
      EXPECT_TRUE(at::equal(*box, s.w.narrow(0, r, nr).narrow(1, c, nc)));
    }
  }
  auto row = (*reader)->ReadChunk("rng", 2);
  ASSERT_TRUE(row.ok());
  EXPECT_TRUE(at::equal(*row, s.rng.narrow(0, 2, 1)));
  auto step = (*reader)->ReadFull("step");
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(step->item<int64_t>(), 7);
  EXPECT_THAT((*reader)->ReadBox("w", {5, 0}, {2, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument, "outside"));
  EXPECT_THAT((*reader)->ReadFull("nope"),
              StatusIs(absl::StatusCode::kNotFound, "'nope'"));
}

// Each bad input: how to break a good checkpoint, and the error's code and
// text.
struct BadCase {
  const char* name;
  void (*corrupt)(const std::string& dir);
  absl::StatusCode code;
  const char* message;
};

void EditMetadata(const std::string& dir, const std::string& from,
                  const std::string& to) {
  const std::string path = dir + "/.metadata";
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  const size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  text.replace(at, from.size(), to);
  std::ofstream(path, std::ios::trunc) << text;
}

const BadCase kBad[] = {
    {"missing rank file",
     [](const std::string& d) { fs::remove(d + "/__2_0.distcp"); },
     absl::StatusCode::kNotFound, "__2_0.distcp: missing"},
    {"truncated data file",
     [](const std::string& d) {
       fs::resize_file(d + "/__1_0.distcp",
                       fs::file_size(d + "/__1_0.distcp") - 9);
     },
     absl::StatusCode::kInvalidArgument, "__1_0.distcp"},
    {"metadata world size larger than the files",
     [](const std::string& d) {
       EditMetadata(d, "\"world_size\": 4", "\"world_size\": 5");
     },
     absl::StatusCode::kNotFound, "__4_0.distcp: missing"},
    {"metadata shape inconsistent with the files",
     [](const std::string& d) {
       auto j = *core::ReadJsonFile(d + "/.metadata");
       j["tensors"]["w"]["shape"][0] = 7;
       ASSERT_TRUE(core::WriteFileAtomic(d + "/.metadata", j.dump()).ok());
     },
     absl::StatusCode::kDataLoss, "cover"},
    {"no metadata", [](const std::string& d) { fs::remove(d + "/.metadata"); },
     absl::StatusCode::kNotFound, ".metadata: missing"},
};

TEST(DistCkptTest, BadCheckpointsFailWithOneLine) {
  for (const BadCase& c : kBad) {
    SCOPED_TRACE(c.name);
    const std::string dir = core::testing::FreshTestDir("dist_ckpt_bad");
    Write(dir);
    c.corrupt(dir);
    auto reader = DistCkptReader::Open(dir);
    EXPECT_THAT(reader, StatusIs(c.code, c.message));
    if (!reader.ok()) {
      EXPECT_EQ(std::string(reader.status().message()).find('\n'),
                std::string::npos);
    }
  }
}

TEST(DistCkptTest, FinalizeRefusesOverlapsAndGaps) {
  const std::string dir = core::testing::FreshTestDir("dist_ckpt_overlap");
  at::Tensor t = at::ones({4, 2});
  ASSERT_TRUE(
      SaveDistCkptRank(dir, 0, 2, {{"t", {t.narrow(0, 0, 3), {4, 2}, {0, 0}}}})
          .ok());
  ASSERT_TRUE(
      SaveDistCkptRank(dir, 1, 2, {{"t", {t.narrow(0, 2, 2), {4, 2}, {2, 0}}}})
          .ok());
  EXPECT_THAT(FinalizeDistCkpt(dir, 2),
              StatusIs(absl::StatusCode::kDataLoss, "overlap"));
  ASSERT_TRUE(
      SaveDistCkptRank(dir, 1, 2, {{"t", {t.narrow(0, 3, 0), {4, 2}, {3, 0}}}})
          .ok());
  EXPECT_THAT(FinalizeDistCkpt(dir, 2),
              StatusIs(absl::StatusCode::kDataLoss, "cover 6 of 8"));
  EXPECT_THAT(FinalizeDistCkpt(dir, 3),
              StatusIs(absl::StatusCode::kDataLoss, "world size 2, not 3"));
}

}  // namespace
}  // namespace verl::ckpt
