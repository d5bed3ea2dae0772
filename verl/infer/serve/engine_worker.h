// File: verl/infer/serve/engine_worker.h
//
// The engine behind the server: one thread owns the LLMEngine and steps it
// while any request is unfinished; HTTP handler threads Submit() requests
// and read their tokens as they are sampled (so concurrent requests share
// the continuous batch and streams see every step). A handler that no
// longer needs a request (client gone, stop string seen) Cancel()s it and
// the engine frees its KV blocks.
#ifndef VERL_INFER_SERVE_ENGINE_WORKER_H_
#define VERL_INFER_SERVE_ENGINE_WORKER_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "verl/infer/engine.h"
#include "verl/infer/sampling_params.h"

namespace verl::infer::serve {

// One submitted request as both threads see it.
class Job {
 public:
  struct Sample {
    std::vector<int64_t> tokens;
    std::vector<float> logprobs;
    std::string finish_reason;  // set when the engine finished the sample
  };
  // What a handler reads: tokens from index `from[i]` on of each sample.
  struct Update {
    std::vector<std::vector<int64_t>> tokens;
    std::vector<std::vector<float>> logprobs;
    std::vector<std::string> finish_reasons;  // "" while running
    bool done = false;  // every sample finished, cancelled or failed
    absl::Status status;
  };

  Job(std::vector<int64_t> prompt, SamplingParams params,
      MultiModalInput images = {});

  // Blocks until the engine accepted the request or refused it (the
  // engine's validation error).
  absl::Status WaitAccepted();
  // Blocks until there is something past `from` (sizes per sample) or the
  // job is done, and returns it.
  Update WaitForUpdate(const std::vector<size_t>& from);

  const std::vector<int64_t>& prompt() const { return prompt_; }
  const SamplingParams& params() const { return params_; }
  const MultiModalInput& images() const { return images_; }

 private:
  friend class EngineWorker;
  void Accept(int64_t engine_id);
  void Fail(absl::Status status);
  void AddToken(int64_t sample, int64_t token, float logprob);
  void Finish(const RequestOutput& output);
  void Close(absl::Status status);  // cancelled or shut down

  const std::vector<int64_t> prompt_;
  const SamplingParams params_;
  const MultiModalInput images_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Sample> samples_;
  bool accepted_ = false;
  bool done_ = false;
  absl::Status status_;
  int64_t engine_id_ = -1;  // engine thread only
};

class EngineWorker {
 public:
  // Starts the engine thread. `engine` is used by that thread only.
  explicit EngineWorker(std::unique_ptr<LLMEngine> engine);
  ~EngineWorker();  // Shutdown()

  // `images`: a vision-language prompt's pixel values (engine AddRequest).
  std::shared_ptr<Job> Submit(std::vector<int64_t> prompt,
                              const SamplingParams& params,
                              MultiModalInput images = {});
  // Aborts the job in the engine if it is still running (no-op otherwise).
  void Cancel(const std::shared_ptr<Job>& job);
  // Stops the thread; unfinished jobs end with Unavailable.
  void Shutdown();

  // Immutable engine facts, safe from any thread.
  int64_t max_model_len() const { return max_model_len_; }
  int64_t vocab_size() const { return vocab_size_; }
  // Engine counters (copied under the worker's lock after each step).
  EngineStats stats() const;

 private:
  void Loop();

  std::unique_ptr<LLMEngine> engine_;
  const int64_t max_model_len_;
  const int64_t vocab_size_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> pending_;
  std::deque<std::shared_ptr<Job>> cancels_;
  bool stop_ = false;
  EngineStats stats_;
  // Engine thread only.
  std::unordered_map<int64_t, std::shared_ptr<Job>> running_;
  std::thread thread_;
};

}  // namespace verl::infer::serve

#endif  // VERL_INFER_SERVE_ENGINE_WORKER_H_
