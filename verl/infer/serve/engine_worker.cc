// File: verl/infer/serve/engine_worker.cc
#include "verl/infer/serve/engine_worker.h"

#include <glog/logging.h>

#include <exception>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace verl::infer::serve {

Job::Job(std::vector<int64_t> prompt, SamplingParams params,
         MultiModalInput images)
    : prompt_(std::move(prompt)),
      params_(std::move(params)),
      images_(std::move(images)),
      samples_(static_cast<size_t>(params_.n)) {}

absl::Status Job::WaitAccepted() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return accepted_ || done_; });
  return status_;
}

Job::Update Job::WaitForUpdate(const std::vector<size_t>& from) {
  std::unique_lock<std::mutex> lock(mu_);
  auto has_news = [&] {
    if (done_) return true;
    for (size_t i = 0; i < samples_.size(); ++i) {
      if (samples_[i].tokens.size() > from[i] ||
          !samples_[i].finish_reason.empty()) {
        return true;
      }
    }
    return false;
  };
  cv_.wait(lock, has_news);
  Update u;
  for (size_t i = 0; i < samples_.size(); ++i) {
    const Sample& s = samples_[i];
    const size_t start = std::min(from[i], s.tokens.size());
    u.tokens.emplace_back(s.tokens.begin() + start, s.tokens.end());
    u.logprobs.emplace_back(s.logprobs.begin() + start, s.logprobs.end());
    u.finish_reasons.push_back(s.finish_reason);
  }
  u.done = done_;
  u.status = status_;
  return u;
}

void Job::Accept(int64_t engine_id) {
  engine_id_ = engine_id;
  std::lock_guard<std::mutex> lock(mu_);
  accepted_ = true;
  cv_.notify_all();
}

void Job::Fail(absl::Status status) { Close(std::move(status)); }

void Job::AddToken(int64_t sample, int64_t token, float logprob) {
  std::lock_guard<std::mutex> lock(mu_);
  samples_[sample].tokens.push_back(token);
  samples_[sample].logprobs.push_back(logprob);
  cv_.notify_all();
}

void Job::Finish(const RequestOutput& output) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const CompletionOutput& c : output.outputs) {
    Sample& s = samples_[c.index];
    // The callback already delivered every token; the output is the truth.
    s.tokens = c.token_ids;
    s.logprobs = c.logprobs;
    s.finish_reason = c.finish_reason;
  }
  done_ = true;
  cv_.notify_all();
}

void Job::Close(absl::Status status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (done_) return;
  status_ = std::move(status);
  done_ = true;
  cv_.notify_all();
}

EngineWorker::EngineWorker(std::unique_ptr<LLMEngine> engine)
    : engine_(std::move(engine)),
      max_model_len_(engine_->options().max_model_len),
      vocab_size_(engine_->model_config().vocab_size) {
  engine_->SetTokenCallback(
      [this](int64_t request, int64_t sample, int64_t token, float logprob) {
        auto it = running_.find(request);
        if (it != running_.end()) it->second->AddToken(sample, token, logprob);
      });
  thread_ = std::thread([this] { Loop(); });
}

EngineWorker::~EngineWorker() { Shutdown(); }

std::shared_ptr<Job> EngineWorker::Submit(std::vector<int64_t> prompt,
                                          const SamplingParams& params,
                                          MultiModalInput images) {
  auto job =
      std::make_shared<Job>(std::move(prompt), params, std::move(images));
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) {
    job->Close(absl::UnavailableError("the server is shutting down"));
    return job;
  }
  pending_.push_back(job);
  cv_.notify_all();
  return job;
}

void EngineWorker::Cancel(const std::shared_ptr<Job>& job) {
  std::lock_guard<std::mutex> lock(mu_);
  cancels_.push_back(job);
  cv_.notify_all();
}

void EngineWorker::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

EngineStats EngineWorker::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void EngineWorker::Loop() {
  for (;;) {
    std::deque<std::shared_ptr<Job>> incoming, cancels;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        return stop_ || !pending_.empty() || !cancels_.empty() ||
               engine_->HasUnfinished();
      });
      if (stop_) break;
      incoming.swap(pending_);
      cancels.swap(cancels_);
    }
    for (auto& job : incoming) {
      absl::StatusOr<int64_t> id =
          engine_->AddRequest(job->prompt(), job->params(), job->images());
      if (!id.ok()) {
        job->Fail(id.status());
        continue;
      }
      running_[*id] = job;
      job->Accept(*id);
    }
    for (auto& job : cancels) {
      auto it = running_.find(job->engine_id_);
      if (job->engine_id_ < 0 || it == running_.end()) continue;
      engine_->AbortRequest(job->engine_id_);
      running_.erase(it);
      job->Close(absl::CancelledError("cancelled"));
    }
    if (!engine_->HasUnfinished()) continue;
    std::vector<RequestOutput> finished;
    try {
      finished = engine_->Step();
    } catch (const std::exception& e) {
      // E.g. out of memory: the running requests fail, the server lives on.
      const std::string what = e.what();
      const absl::Status error = absl::InternalError(absl::StrCat(
          "engine step failed: ", what.substr(0, what.find('\n'))));
      LOG(ERROR) << error.message();
      for (auto& [id, job] : running_) {
        engine_->AbortRequest(id);
        job->Close(error);
      }
      running_.clear();
    }
    for (const RequestOutput& out : finished) {
      auto it = running_.find(out.request_id);
      if (it == running_.end()) continue;
      it->second->Finish(out);
      running_.erase(it);
    }
    std::lock_guard<std::mutex> lock(mu_);
    stats_ = engine_->stats();
  }
  for (auto& [id, job] : running_) {
    engine_->AbortRequest(id);
    job->Close(absl::UnavailableError("the server is shutting down"));
  }
  running_.clear();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& job : pending_) {
    job->Close(absl::UnavailableError("the server is shutting down"));
  }
  pending_.clear();
}

}  // namespace verl::infer::serve
