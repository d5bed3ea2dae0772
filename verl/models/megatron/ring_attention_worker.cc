// File: verl/models/megatron/ring_attention_worker.cc
//
// Test worker for ring_attention_test, started as cp = N ranks by the
// launcher. Every rank draws the same packed q/k/v (sequences of mixed
// lengths, none a multiple of 2*cp, one of length 1) and computes the
// single-process reference with VarlenCausalAttention (the decoder's packed
// attention) and autograd. Then it checks the CpLayout (rank r holds chunks
// r and 2cp-1-r of every padded sequence; Shard+Gather is the identity) and
// runs RingAttention on its shard over the cp group: the gathered output
// must equal the reference and the q/k/v gradients, summed over cp (each
// rank's cover its own tokens), must equal the reference gradients
// (<= 1e-5 relative), for GQA and MHA head layouts and with query tiles
// of 3 rows (the transient-memory bound).
// Prints "rank R: OK (max rel err E at NAME)" or "rank R FAILED: ..." and
// exits non-zero on failure.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/autograd.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "verl/core/status.h"
#include "verl/models/attention.h"
#include "verl/parallel/distributed.h"
#include "verl/parallel/megatron/context_parallel.h"
#include "verl/parallel/megatron/mappings.h"
#include "verl/parallel/megatron/parallel_state.h"
#include "verl/parallel/megatron/test_compare.h"
#include "verl/parallel/test_worker.h"

namespace verl::models {
namespace {

namespace mg = parallel::megatron;

constexpr double kTol = 1e-5;

// Chunks r and 2cp-1-r of every padded sequence, in sequence order.
absl::Status CheckLayout(const mg::CpLayout& layout,
                         const std::vector<int64_t>& cu, mg::Comparer& cmp,
                         const mg::CommPtr& cp) {
  const int n = layout.cp(), r = layout.rank();
  const std::vector<int64_t>& pcu = layout.padded_cu_seqlens();
  std::vector<int64_t> want_seq, want_off;
  for (size_t s = 0; s + 1 < cu.size(); ++s) {
    const int64_t padded = pcu[s + 1] - pcu[s];
    const int64_t len = cu[s + 1] - cu[s];
    if (padded % (2 * n) != 0 || padded < len || padded >= len + 2 * n) {
      return absl::InternalError(
          absl::StrCat("sequence ", s, " padded to ", padded, " from ", len));
    }
    const int64_t chunk = padded / (2 * n);
    for (int64_t c : {int64_t{r}, int64_t{2 * n - 1 - r}}) {
      for (int64_t o = c * chunk; o < (c + 1) * chunk; ++o) {
        want_seq.push_back(static_cast<int64_t>(s));
        want_off.push_back(o);
      }
    }
  }
  if (!at::equal(layout.seq_ids(r), at::tensor(want_seq, at::kLong)) ||
      !at::equal(layout.offsets(r), at::tensor(want_off, at::kLong))) {
    return absl::InternalError("layout: chunks differ from r, 2cp-1-r");
  }
  at::Tensor x = at::arange(cu.back(), at::kDouble).unsqueeze(1) * 3 + 1;
  VERL_RETURN_IF_ERROR(
      cmp.Expect("shard+gather", layout.Gather(layout.Shard(x), cp), x));
  return absl::OkStatus();
}

// tile_rows 0: the default tiles (one tile here); else query tiles of that
// many rows.
absl::Status RunCase(int64_t heads, int64_t kv_heads, int64_t tile_rows,
                     const mg::CommPtr& cp, mg::Comparer& cmp) {
  const std::vector<int64_t> cu = {0, 5, 12, 13, 29, 40, 57};
  const int64_t t = cu.back(), d = 8;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(3);
  at::Tensor q = at::randn({t, heads, d}, gen).requires_grad_(true);
  at::Tensor k = at::randn({t, kv_heads, d}, gen).requires_grad_(true);
  at::Tensor v = at::randn({t, kv_heads, d}, gen).requires_grad_(true);
  at::Tensor c = at::randn({t, heads, d}, gen);

  VarlenCausalAttention reference(cu);
  at::Tensor want = reference.Attend(0, q, k, v);
  std::vector<at::Tensor> want_grads =
      torch::autograd::grad({(want * c).sum()}, {q, k, v});

  VERL_ASSIGN_OR_RETURN(mg::CpLayout layout,
                        mg::CpLayout::Create(cu, cp->size(), cp->rank()));
  VERL_RETURN_IF_ERROR(CheckLayout(layout, cu, cmp, cp));
  auto shared = std::make_shared<const mg::CpLayout>(layout);
  const int64_t max_tile_cells =
      tile_rows > 0 ? tile_rows * heads * shared->local_tokens()
                    : mg::kRingMaxTileCells;
  at::Tensor local =
      mg::RingAttention(shared->Shard(q), shared->Shard(k), shared->Shard(v),
                        shared, cp, max_tile_cells);
  at::Tensor got = shared->Gather(local, cp);
  std::vector<at::Tensor> grads =
      torch::autograd::grad({(got * c).sum()}, {q, k, v});
  const std::string tag = absl::StrCat("heads ", heads, "/", kv_heads,
                                       " tile rows ", tile_rows, ": ");
  VERL_RETURN_IF_ERROR(cmp.Expect(tag + "output", got, want));
  const char* names[] = {"dq", "dk", "dv"};
  for (int i = 0; i < 3; ++i) {
    at::Tensor sum = mg::AllReduceSum(grads[i], *cp);
    VERL_RETURN_IF_ERROR(cmp.Expect(tag + names[i], sum, want_grads[i]));
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  parallel::DistributedContext dist = parallel::JoinTestJob();
  const int rank = dist.env.rank;
  mg::ModelParallelSizes sizes;
  sizes.cp = dist.world->size();
  absl::StatusOr<std::shared_ptr<mg::ParallelState>> mpu =
      mg::ParallelState::Initialize(dist.world, sizes);
  mg::Comparer cmp(kTol);
  absl::Status s = mpu.status();
  if (s.ok()) {
    const mg::CommPtr& cp = (*mpu)->group(mg::MpuGroup::kCp);
    s = RunCase(/*heads=*/4, /*kv_heads=*/2, /*tile_rows=*/0, cp, cmp);
    if (s.ok()) s = RunCase(3, 3, 0, cp, cmp);
    // Tiles of 3 query rows, the last one shorter (34 or 20 rows per rank).
    if (s.ok()) s = RunCase(4, 2, 3, cp, cmp);
  }
  return mg::RankResult(rank, s, cmp);
}

}  // namespace
}  // namespace verl::models

int main(int argc, char** argv) { return verl::models::Main(argc, argv); }
