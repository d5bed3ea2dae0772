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

// torch's side of the optimizer file, in Python without torch: the stub
// reader above plus the checks torch.optim.Optimizer.load_state_dict (torch
// 2.x) makes and the keys AdamW.step reads; prints a JSON summary.
constexpr char kOptimizerScript[] = R"PY(
import io, json, sys
exec(open(sys.argv[2]).read().split('print(json.dumps')[0])
sd = Stub(io.BytesIO(data)).load()
assert type(sd) is dict and list(sd) == ['state', 'param_groups'], list(sd)
groups = sd['param_groups']
assert type(groups) is list and len(groups) == 1
g = groups[0]
types = {'lr': float, 'betas': tuple, 'eps': float, 'weight_decay': float,
         'amsgrad': bool, 'maximize': bool, 'foreach': type(None),
         'capturable': bool, 'differentiable': bool, 'fused': type(None),
         'decoupled_weight_decay': bool, 'initial_lr': float, 'params': list,
         'param_names': list}
for k, t in types.items():
    assert type(g[k]) is t, (k, type(g[k]))
assert list(g)[-2:] == ['params', 'param_names'], list(g)
assert len(g['betas']) == 2 and all(type(b) is float for b in g['betas'])
assert g['params'] == list(range(len(g['param_names'])))
assert g['amsgrad'] is False and g['maximize'] is False
assert g['decoupled_weight_decay'] is True
ids = set(g['params'])  # load_state_dict's id_map
state = {}
for k, v in sd['state'].items():
    assert type(k) is int and k in ids, k
    assert list(v) == ['step', 'exp_avg', 'exp_avg_sq'], list(v)
    step = v['step']
    assert step['storage'] == 'FloatStorage' and step['shape'] == [], step
    state[g['param_names'][k]] = {'step': step['values'][0],
        'exp_avg': v['exp_avg']['values'], 'shape': v['exp_avg']['shape'],
        'exp_avg_sq': v['exp_avg_sq']['values']}
g.pop('params'); g.pop('foreach'); g.pop('fused')
print(json.dumps({'group': g, 'state': state}))
)PY";

// The scheduler entry of extra_state as torch's LambdaLR.load_state_dict
// takes it; prints the entry as JSON.
constexpr char kSchedulerScript[] = R"PY(
import io, json, sys
exec(open(sys.argv[2]).read().split('print(json.dumps')[0])
sd = Stub(io.BytesIO(data)).load()
s = sd['lr_scheduler']
# LambdaLR.state_dict() keys of torch 2.6 (verbose) and 2.7+ (_is_initial).
want = {'base_lrs', 'last_epoch', 'verbose', '_step_count',
        '_get_lr_called_within_step', '_is_initial', '_last_lr', 'lr_lambdas'}
assert set(s) == want, set(s) ^ want
lr_lambdas = s.pop('lr_lambdas')  # LambdaLR.load_state_dict
assert lr_lambdas == [None], lr_lambdas
assert type(s['last_epoch']) is int and type(s['_step_count']) is int
assert all(type(x) is float for x in s['base_lrs'] + s['_last_lr'])
for k in ('verbose', '_get_lr_called_within_step', '_is_initial'):
    assert s[k] is False, k
print(json.dumps(s))
)PY";

// A script file holding kDecodeScript, for the scripts above to exec.
std::string DecodeScriptPath() {
  const std::string path = TmpDir() + "/decode.py";
  WriteText(path, kDecodeScript);
  return path;
}

std::vector<double> Values(const at::Tensor& t) {
  const at::Tensor d = t.to(at::kDouble).contiguous().flatten();
  return std::vector<double>(d.data_ptr<double>(),
                             d.data_ptr<double>() + d.numel());
}

OptimizerGroup TestGroup() {
  OptimizerGroup g;
  g.param_names = {"model.a", "model.b", "model.frozen"};
  g.lr = 5e-4;
  g.initial_lr = 1e-3;
  g.beta1 = 0.8;
  g.beta2 = 0.95;
  g.eps = 1e-6;
  g.weight_decay = 0.1;
  return g;
}

PtTensorDict TestOptimizerState() {
  return {{"model.a.exp_avg", at::randn({3, 2})},
          {"model.a.exp_avg_sq", at::rand({3, 2})},
          {"model.a.step", at::scalar_tensor(7, at::kLong)},
          {"model.b.exp_avg", at::randn({4})},
          {"model.b.exp_avg_sq", at::rand({4})},
          {"model.b.step", at::scalar_tensor(7, at::kLong)}};
}

TEST(CheckpointPtTest, OptimizerIsTorchStateDictLayout) {
  const std::string path = TmpDir() + "/optim.pt";
  const OptimizerGroup group = TestGroup();
  const PtTensorDict state = TestOptimizerState();
  ASSERT_TRUE(SavePtOptimizer(path, group, state).ok());
  // Round trip to the flat form.
  OptimizerGroup back_group;
  auto back = LoadPtOptimizer(path, &back_group);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), state.size());
  for (const auto& [name, t] : state) {
    EXPECT_EQ(back->at(name).scalar_type(), t.scalar_type()) << name;
    EXPECT_TRUE(at::equal(back->at(name), t)) << name;
  }
  EXPECT_EQ(back_group.param_names, group.param_names);
  EXPECT_EQ(back_group.lr, group.lr);
  EXPECT_EQ(back_group.initial_lr, group.initial_lr);
  EXPECT_EQ(back_group.beta1, group.beta1);
  EXPECT_EQ(back_group.beta2, group.beta2);
  EXPECT_EQ(back_group.eps, group.eps);
  EXPECT_EQ(back_group.weight_decay, group.weight_decay);
  // torch's view of the same file.
  const std::string out =
      RunPython(kOptimizerScript, path + " " + DecodeScriptPath());
  const nlohmann::json json = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << out;
  EXPECT_EQ(json["group"]["lr"], group.lr);
  EXPECT_EQ(json["group"]["initial_lr"], group.initial_lr);
  EXPECT_EQ(json["group"]["betas"], nlohmann::json({0.8, 0.95}));
  EXPECT_EQ(json["group"]["eps"], group.eps);
  EXPECT_EQ(json["group"]["weight_decay"], group.weight_decay);
  EXPECT_EQ(json["group"]["param_names"], nlohmann::json(group.param_names));
  ASSERT_EQ(json["state"].size(), 2u) << out;  // model.frozen has no state
  for (const char* name : {"model.a", "model.b"}) {
    const nlohmann::json& s = json["state"][name];
    const std::string n = name;
    EXPECT_EQ(s["step"], 7.0);
    EXPECT_EQ(s["shape"],
              nlohmann::json(state.at(n + ".exp_avg").sizes().vec()));
    EXPECT_EQ(s["exp_avg"].get<std::vector<double>>(),
              Values(state.at(n + ".exp_avg")));
    EXPECT_EQ(s["exp_avg_sq"].get<std::vector<double>>(),
              Values(state.at(n + ".exp_avg_sq")));
  }
}

TEST(CheckpointPtTest, OptimizerReadsTheOldFlatLayout) {
  const std::string path = TmpDir() + "/optim_flat.pt";
  const PtTensorDict state = TestOptimizerState();
  ASSERT_TRUE(
      SavePtTensorDict(path, state).ok());  // what earlier versions wrote
  OptimizerGroup group;
  group.lr = 3;
  auto back = LoadPtOptimizer(path, &group);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), state.size());
  for (const auto& [name, t] : state) {
    EXPECT_TRUE(at::equal(back->at(name), t)) << name;
  }
  EXPECT_TRUE(group.param_names.empty());
  EXPECT_EQ(group.lr, 0);
}

TEST(CheckpointPtTest, OptimizerErrorsNameFileAndEntry) {
  const std::string dir = TmpDir();
  PtTensorDict stray = TestOptimizerState();
  stray["model.gone.exp_avg"] = at::zeros({1});
  absl::Status s = SavePtOptimizer(dir + "/o1.pt", TestGroup(), stray);
  EXPECT_NE(s.message().find("'model.gone.exp_avg' belongs to no parameter"),
            std::string::npos)
      << s;
  PtTensorDict no_sq = TestOptimizerState();
  no_sq.erase("model.b.exp_avg_sq");
  s = SavePtOptimizer(dir + "/o2.pt", TestGroup(), no_sq);
  EXPECT_NE(s.message().find("'model.b' has a step but no exp_avg_sq"),
            std::string::npos)
      << s;
  // A torch state dict without parameter names (AdamW(model.parameters())).
  nlohmann::json unnamed = {{"state", nlohmann::json::object()}};
  unnamed["param_groups"] = nlohmann::json::array(
      {{{"lr", 0.1}, {"params", nlohmann::json::array({0})}}});
  ASSERT_TRUE(SavePtJson(dir + "/o3.pt", unnamed).ok());
  auto r = LoadPtOptimizer(dir + "/o3.pt");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("o3.pt: param_groups[0] has no "
                                      "param_names"),
            std::string::npos)
      << r.status();
  // amsgrad's extra moment is refused, not dropped.
  WritePythonArchive(
      dir + "/o4.pt",
      "b'\\x80\\x02}(X\\x05\\x00\\x00\\x00state}K\\x00}X\\x0e\\x00\\x00\\x00"
      "max_exp_avg_sqK\\x01ssX\\x0c\\x00\\x00\\x00param_groups]}(X\\x06\\x00"
      "\\x00\\x00params]K\\x00aX\\x0b\\x00\\x00\\x00param_names]X\\x01\\x00"
      "\\x00\\x00wauau.'");
  r = LoadPtOptimizer(dir + "/o4.pt");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("o4.pt: state[0] ('w') has entry "
                                      "'max_exp_avg_sq'"),
            std::string::npos)
      << r.status();
}

TEST(CheckpointPtTest, SchedulerIsLambdaLrStateDict) {
  const std::string path = TmpDir() + "/extra_sched.pt";
  ExtraState state;
  state.lr_scheduler_step = 5;
  state.lr_scheduler_base_lr = 1e-3;
  state.lr_scheduler_last_lr = 2.5e-4;
  state.rng["cpu"] = CpuRngState();
  ASSERT_TRUE(SavePtExtraState(path, state).ok());
  const std::string out =
      RunPython(kSchedulerScript, path + " " + DecodeScriptPath());
  const nlohmann::json json = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << out;
  // After 5 scheduler.step() calls: last_epoch 5, _step_count 6.
  EXPECT_EQ(json["last_epoch"], 5);
  EXPECT_EQ(json["_step_count"], 6);
  EXPECT_EQ(json["base_lrs"], nlohmann::json({1e-3}));
  EXPECT_EQ(json["_last_lr"], nlohmann::json({2.5e-4}));
  auto back = LoadPtExtraState(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->lr_scheduler_step, 5);
  EXPECT_EQ(back->lr_scheduler_base_lr, 1e-3);
  EXPECT_EQ(back->lr_scheduler_last_lr, 2.5e-4);
}

TEST(CheckpointPtTest, OldSchedulerEntryStillLoads) {
  const std::string path = TmpDir() + "/extra_old.pt";
  // What earlier versions wrote: {"lr_scheduler": {"last_epoch": s}, ...}.
  WritePythonArchive(path,
                     "b'\\x80\\x02}(X\\x0c\\x00\\x00\\x00lr_scheduler}X\\n"
                     "\\x00\\x00\\x00last_epochK\\x04sX\\n\\x00\\x00\\x00"
                     "extra_jsonX\\x02\\x00\\x00\\x00{}u.'");
  auto back = LoadPtExtraState(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->lr_scheduler_step, 4);
  EXPECT_EQ(back->lr_scheduler_base_lr, 0);
}

}  // namespace
}  // namespace verl::ckpt
