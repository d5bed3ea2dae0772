// File: verl/ckpt/checkpoint_pt_test.cc
#include "verl/ckpt/checkpoint_pt.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>
#include <stdio.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "verl/core/file_util.h"
#include "verl/core/test_util.h"

namespace verl::ckpt {
namespace {
namespace fs = std::filesystem;

std::string TmpDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(t ? t : "/tmp") + "/pt_test";
  fs::create_directories(dir);
  return dir;
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// Runs python3 with `script` and `arg`; returns stdout ("" on failure).
std::string RunPython(const std::string& script, const std::string& arg) {
  const std::string py = TmpDir() + "/script.py";
  WriteText(py, script);
  return core::testing::RunAndCapture("python3 " + py + " " + arg + " 2>&1");
}

// An independent reader: Python's zipfile + pickletools to check the
// structure torch.load expects, and a stub unpickler that decodes
// _rebuild_tensor_v2 storages from the archive's data/<key> records.
constexpr char kDecodeScript[] = R"PY(
import io, json, pickle, pickletools, struct, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = z.namelist()
prefix = names[0].split('/')[0]
assert prefix + '/data.pkl' in names, names
assert prefix + '/version' in names, names
data = z.read(prefix + '/data.pkl')
pickletools.dis(data, out=io.StringIO())
FMT = {'FloatStorage': 'f', 'LongStorage': 'q', 'DoubleStorage': 'd',
       'BFloat16Storage': 'H', 'ByteStorage': 'B'}
def rebuild(storage, offset, size, stride, *rest):
    stype, raw = storage
    fmt = FMT[stype]
    vals = struct.unpack('<%d%s' % (len(raw) // struct.calcsize(fmt), fmt), raw)
    n = 1
    for s in size: n *= s
    return {'storage': stype, 'shape': list(size), 'values': list(vals[offset:offset + n])}
class Stub(pickle.Unpickler):
    def find_class(self, mod, name):
        if (mod, name) == ('torch._utils', '_rebuild_tensor_v2'): return rebuild
        if mod == 'torch' and name.endswith('Storage'): return name
        if (mod, name) == ('collections', 'OrderedDict'): return dict
        raise pickle.UnpicklingError('unexpected global %s.%s' % (mod, name))
    def persistent_load(self, pid):
        typename, stype, key, location, numel = pid
        assert typename == 'storage' and location == 'cpu'
        return (stype, z.read(prefix + '/data/' + key))
print(json.dumps(Stub(io.BytesIO(data)).load()))
)PY";

TEST(CheckpointPtTest, PythonReadsWhatWeWrite) {
  const std::string path = TmpDir() + "/py.pt";
  PtTensorDict dict = {{"model.w", at::randn({3, 4})},
                       {"model.ids", at::arange(5, at::kLong)},
                       {"empty", at::zeros({0, 4})},
                       {"half", at::randn({2, 2}).to(at::kBFloat16)}};
  ASSERT_TRUE(SavePtTensorDict(path, dict).ok());
  const std::string out = RunPython(kDecodeScript, path);
  nlohmann::json json = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << out;
  ASSERT_EQ(json.size(), 4u) << out;
  EXPECT_EQ(json["model.w"]["storage"], "FloatStorage");
  EXPECT_EQ(json["model.w"]["shape"], nlohmann::json({3, 4}));
  const at::Tensor w = dict["model.w"].to(at::kDouble).flatten();
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(json["model.w"]["values"][i].get<double>(), w[i].item<double>());
  }
  EXPECT_EQ(json["model.ids"]["values"], nlohmann::json({0, 1, 2, 3, 4}));
  EXPECT_EQ(json["empty"]["shape"], nlohmann::json({0, 4}));
  EXPECT_EQ(json["half"]["storage"], "BFloat16Storage");
  const at::Tensor bits = dict["half"].view(at::kShort).to(at::kInt).flatten();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(json["half"]["values"][i].get<int>(),
              bits[i].item<int>() & 0xffff);
  }
}

TEST(CheckpointPtTest, RoundTripIsBitIdentical) {
  const std::string path = TmpDir() + "/rt.pt";
  PtTensorDict dict = {{"a", at::randn({17, 3})},
                       {"b", at::randn({5}).to(at::kBFloat16)},
                       {"c", at::randint(0, 100, {4}, at::kLong)},
                       {"s", at::scalar_tensor(3.5)}};
  ASSERT_TRUE(SavePtTensorDict(path, dict).ok());
  auto back = LoadPtTensorDict(path);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), dict.size());
  for (const auto& [name, t] : dict) {
    EXPECT_EQ(back->at(name).scalar_type(), t.scalar_type()) << name;
    EXPECT_TRUE(at::equal(back->at(name), t)) << name;
  }
}

TEST(CheckpointPtTest, ExtraStateAndRngRoundTrip) {
  const std::string path = TmpDir() + "/extra.pt";
  std::mt19937 engine(123);
  engine.discard(77);
  ExtraState state;
  state.lr_scheduler_step = 42;
  state.rng["cpu"] = CpuRngState();
  state.rng["mt19937"] = Mt19937State(engine);
  state.user = {{"epoch", 3}, {"note", "x"}};
  const at::Tensor expect_next = at::rand({4});  // draws after the capture
  const uint32_t expect_mt = engine();
  ASSERT_TRUE(SavePtExtraState(path, state).ok());
  auto back = LoadPtExtraState(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->lr_scheduler_step, 42);
  EXPECT_EQ(back->user, state.user);
  ASSERT_TRUE(RestoreCpuRngState(back->rng.at("cpu")).ok());
  EXPECT_TRUE(at::equal(at::rand({4}), expect_next));
  std::mt19937 restored;
  ASSERT_TRUE(RestoreMt19937State(back->rng.at("mt19937"), &restored).ok());
  EXPECT_EQ(restored(), expect_mt);
  ExtraState none;
  ASSERT_TRUE(SavePtExtraState(path, none).ok());
  auto back2 = LoadPtExtraState(path);
  ASSERT_TRUE(back2.ok()) << back2.status();
  EXPECT_EQ(back2->lr_scheduler_step, -1);
}

#ifdef VERL_WITH_CUDA
TEST(CheckpointPtTest, CudaRngStateRoundTrip) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU visible";
  const at::Tensor state = CudaRngState();
  ASSERT_TRUE(state.defined());
  const at::Tensor first = at::rand({8}, at::kCUDA).cpu();
  ExtraState extra;
  extra.rng["cuda"] = state;
  const std::string path = TmpDir() + "/cuda_rng.pt";
  ASSERT_TRUE(SavePtExtraState(path, extra).ok());
  auto back = LoadPtExtraState(path);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_TRUE(RestoreCudaRngState(back->rng.at("cuda")).ok());
  EXPECT_TRUE(at::equal(at::rand({8}, at::kCUDA).cpu(), first));
}
#endif

// Writes a Python-made archive whose pickle is `pickle_expr` (evaluated by
// python3 into bytes).
void WritePythonArchive(const std::string& path, const std::string& pickle) {
  const std::string script =
      "import sys, zipfile\n"
      "z = zipfile.ZipFile(sys.argv[1], 'w')\n"
      "z.writestr('archive/data.pkl', " +
      pickle +
      ")\n"
      "z.writestr('archive/version', '3\\n')\n"
      "z.close()\nprint('ok')\n";
  ASSERT_EQ(RunPython(script, path), "ok\n");
}

struct BadCase {
  std::string name;
  std::function<void(const std::string& good, const std::string& path)> make;
  std::string expect;  // substring of the error
};

TEST(CheckpointPtTest, MalformedFilesGiveClearErrors) {
  const std::string good = TmpDir() + "/good.pt";
  ASSERT_TRUE(SavePtTensorDict(good, {{"w", at::randn({64, 64})}}).ok());
  const std::string bytes = *core::ReadFile(good);
  auto write = [](const std::string& path, const std::string& b) {
    WriteText(path, b);
  };
  std::vector<BadCase> cases = {
      {"missing", [](auto&, auto&) {}, "bad_missing"},
      {"empty", [&](auto&, auto& p) { write(p, ""); }, "bad_empty"},
      {"not_zip", [&](auto&, auto& p) { write(p, "hello world"); },
       "truncated or corrupted"},
      {"truncated_half",
       [&](auto&, auto& p) { write(p, bytes.substr(0, bytes.size() / 2)); },
       "truncated or corrupted"},
      {"truncated_tail",
       [&](auto&, auto& p) { write(p, bytes.substr(0, bytes.size() - 10)); },
       "truncated or corrupted"},
      {"flipped_data",
       [&](auto&, auto& p) {
         std::string b = bytes;
         b[bytes.size() / 2] ^= 0x40;  // inside the tensor record: CRC
         write(p, b);
       },
       "truncated or corrupted"},
      {"dtensor",
       [&](auto&, auto& p) {
         WritePythonArchive(p,
                            "b'\\x80\\x02}q\\x00X\\x01\\x00\\x00\\x00wq\\x01"
                            "ctorch.distributed._tensor.api\\nDTensor\\nq\\x02)"
                            "\\x81q\\x03s.'");
       },
       "cannot load"},
      {"not_a_dict",
       [&](auto&, auto& p) { WritePythonArchive(p, "b'\\x80\\x02K\\x07.'"); },
       "expected a dict"},
      {"int_value",
       [&](auto&, auto& p) {
         WritePythonArchive(p, "b'\\x80\\x02}(X\\x01\\x00\\x00\\x00wK\\x07u.'");
       },
       "entry 'w' holds Int, expected a plain tensor"},
  };
  for (const BadCase& c : cases) {
    const std::string path = TmpDir() + "/bad_" + c.name + ".pt";
    fs::remove(path);
    c.make(good, path);
    auto st = LoadPtTensorDict(path);
    // The code differs between cases; each case's message is checked below.
    ASSERT_FALSE(st.ok()) << c.name;
    EXPECT_NE(st.status().message().find("bad_" + c.name), std::string::npos)
        << c.name << ": " << st.status();
    EXPECT_NE(st.status().message().find(c.expect), std::string::npos)
        << c.name << ": " << st.status();
  }
}

}  // namespace
}  // namespace verl::ckpt
