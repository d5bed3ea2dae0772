#include "verl/rl/workers/testing/batch_testutil.h"

#include <torch/types.h>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace verl::rl::testing {

core::Batch MakeRolloutBatch(int64_t vocab, int64_t P, int64_t R,
                             const std::vector<int64_t>& prompt_lens,
                             const std::vector<int64_t>& response_lens,
                             uint64_t seed, int64_t group_size) {
  const int64_t B = prompt_lens.size();
  torch::Generator gen = at::detail::createCPUGenerator(seed);
  at::Tensor ids = torch::randint(1, vocab, {B, P + R}, gen, torch::kLong);
  at::Tensor mask = torch::zeros({B, P + R}, torch::kLong);
  for (int64_t b = 0; b < B; ++b) {
    mask[b].narrow(0, P - prompt_lens[b], prompt_lens[b]).fill_(1);
    mask[b].narrow(0, P, response_lens[b]).fill_(1);
  }
  ids.mul_(mask);  // pad id 0
  at::Tensor pos = (mask.cumsum(1) - 1).clamp_min(0);
  std::vector<nlohmann::json> uid;
  for (int64_t b = 0; b < B; ++b)
    uid.push_back(absl::StrCat("g", b / group_size));
  auto batch = core::Batch::FromColumns(
      {{"input_ids", ids},
       {"attention_mask", mask},
       {"position_ids", pos},
       {"prompts", ids.narrow(1, 0, P).clone()},
       {"responses", ids.narrow(1, P, R).clone()},
       {"response_mask", mask.narrow(1, P, R).to(torch::kFloat)}},
      {{"uid", uid}});
  CHECK(batch.ok()) << batch.status();
  return *std::move(batch);
}

}  // namespace verl::rl::testing
