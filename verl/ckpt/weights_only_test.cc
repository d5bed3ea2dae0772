// File: verl/ckpt/weights_only_test.cc
#include "verl/ckpt/weights_only.h"

#include <ATen/ops/randn.h>
#include <ATen/ops/scalar_tensor.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "verl/ckpt/checkpoint_pt.h"
#include "verl/core/test_util.h"

namespace verl::ckpt {
namespace {

std::string Dir(const std::string& name) {
  const std::string dir = core::testing::FreshTestDir("weights_only_" + name);
  std::filesystem::create_directories(dir);
  return dir;
}

// A .pt archive whose data.pkl is `pickle` (a Python bytes literal).
std::string PythonArchive(const std::string& dir, const std::string& name,
                          const std::string& pickle) {
  const std::string path = dir + "/" + name;
  const std::string script = dir + "/mk.py";
  std::ofstream(script) << "import sys, zipfile\n"
                           "z = zipfile.ZipFile(sys.argv[1], 'w')\n"
                           "z.writestr('archive/data.pkl', "
                        << pickle
                        << ")\n"
                           "z.writestr('archive/version', '3\\n')\n"
                           "z.close()\n";
  EXPECT_EQ(
      core::testing::RunAndCapture("python3 " + script + " " + path + " 2>&1"),
      "");
  return path;
}

TEST(WeightsOnlyTest, EveryCheckpointFileKindPasses) {
  const std::string dir = Dir("kinds");
  ASSERT_TRUE(SavePtTensorDict(dir + "/model.pt",
                               {{"w", at::randn({3, 2})},
                                {"b", at::randn({2}).to(at::kBFloat16)}})
                  .ok());
  OptimizerGroup group;
  group.param_names = {"w"};
  ASSERT_TRUE(SavePtOptimizer(dir + "/optim.pt", group,
                              {{"w.exp_avg", at::randn({3, 2})},
                               {"w.exp_avg_sq", at::randn({3, 2})},
                               {"w.step", at::scalar_tensor(2, at::kLong)}})
                  .ok());
  ExtraState extra;
  extra.lr_scheduler_step = 3;
  extra.rng["cpu"] = CpuRngState();
  extra.user = {{"skipped_steps", 0}};
  ASSERT_TRUE(SavePtExtraState(dir + "/extra.pt", extra).ok());
  ASSERT_TRUE(SavePtJson(dir + "/data.pt",
                         {{"dataloader", {{"epoch", 1}, {"order", {3, 1, 2}}}},
                          {"trainer", {{"kl_coef", 0.5}, {"name", "x"}}},
                          {"none", nullptr},
                          {"big", int64_t{1} << 40}})
                  .ok());
  for (const char* f : {"model.pt", "optim.pt", "extra.pt", "data.pt"}) {
    EXPECT_TRUE(CheckWeightsOnlyLoadable(dir + "/" + f).ok())
        << CheckWeightsOnlyLoadable(dir + "/" + f);
  }
}

TEST(WeightsOnlyTest, RefusedGlobalsOpcodesAndProtocols) {
  const std::string dir = Dir("refused");
  struct Case {
    const char* name;
    const char* pickle;
    const char* expect;
  };
  const Case cases[] = {
      // LibTorch's typed lists (c10::List<double>) pickle as this call.
      {"doublelist",
       "b'\\x80\\x02ctorch.jit._pickle\\nbuild_doublelist\\nq\\x00.'",
       "GLOBAL torch.jit._pickle.build_doublelist"},
      {"eval", "b'\\x80\\x02cbuiltins\\neval\\nq\\x00.'",
       "GLOBAL builtins.eval"},
      // Protocol 4's SHORT_BINUNICODE and MEMOIZE are not implemented there.
      {"proto4", "b'\\x80\\x04\\x8c\\x01a\\x94.'",
       "pickle protocol 4 (torch.save writes 2), opcode 0x8c, opcode 0x94"},
  };
  for (const Case& c : cases) {
    const std::string path =
        PythonArchive(dir, std::string(c.name) + ".pt", c.pickle);
    const absl::Status s = CheckWeightsOnlyLoadable(path);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << c.name << ": " << s;
    EXPECT_NE(s.message().find(c.expect), std::string::npos)
        << c.name << ": " << s;
    EXPECT_NE(s.message().find(path), std::string::npos) << s;
  }
  // Allowed: OrderedDict (torch.save of a state_dict) and _codecs.encode.
  const std::string ok = PythonArchive(
      dir, "ordered.pt",
      "b'\\x80\\x02ccollections\\nOrderedDict\\nq\\x00)Rq\\x01.'");
  EXPECT_TRUE(CheckWeightsOnlyLoadable(ok).ok())
      << CheckWeightsOnlyLoadable(ok);
}

}  // namespace
}  // namespace verl::ckpt
