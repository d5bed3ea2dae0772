// File: verl/infer/serve/server.cc
#include "verl/infer/serve/server.h"

#include <httplib.h>

#include <ctime>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "verl/core/status.h"
#include "verl/infer/serve/text_stream.h"
#include "verl/models/vlm/image.h"

namespace verl::infer::serve {
namespace {

void WriteJson(httplib::Response& res, int status, const Json& body) {
  res.status = status;
  res.set_content(DumpJson(body), "application/json");
}

void WriteError(httplib::Response& res, const absl::Status& status) {
  HttpError e = ApiError(status);
  WriteJson(res, e.status, e.body);
}

// Counts a generation request in flight for as long as it lives.
class InFlight {
 public:
  explicit InFlight(std::atomic<int>* counter) : counter_(counter) {}
  ~InFlight() { counter_->fetch_sub(1); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  std::atomic<int>* counter_;
};

}  // namespace

// One request from submission to its last byte: reads the job's tokens,
// turns them into text (stop strings, tool calls) and answers as one JSON
// object or as a stream of chunks. Cancels the engine request when the
// answer no longer needs it (all samples stopped, or the client left).
class Server::Generation {
 public:
  Generation(EngineWorker* worker, const models::Tokenizer* tokenizer,
             ApiRequest request, ResponseHeader header, int64_t prompt_tokens,
             std::shared_ptr<Job> job, std::unique_ptr<InFlight> in_flight)
      : worker_(worker),
        request_(std::move(request)),
        header_(std::move(header)),
        prompt_tokens_(prompt_tokens),
        job_(std::move(job)),
        in_flight_(std::move(in_flight)),
        consumed_(request_.sampling.n, 0),
        reported_tokens_(request_.sampling.n, 0),
        finished_(request_.sampling.n, false) {
    for (int64_t i = 0; i < request_.sampling.n; ++i) {
      streams_.emplace_back(tokenizer, request_.stop);
    }
  }
  ~Generation() {
    if (!job_done_) worker_->Cancel(job_);
  }

  bool stream() const { return request_.stream; }

  // Non-streaming: the whole response.
  absl::StatusOr<Json> Complete() {
    std::vector<Choice> choices(streams_.size());
    while (!AllFinished()) {
      VERL_ASSIGN_OR_RETURN(std::vector<Choice> part, Poll());
      for (Choice& c : part) {
        Choice& into = choices[c.index];
        into.index = c.index;
        into.text += c.text;
        into.tool_calls = std::move(c.tool_calls);
        into.tokens.insert(into.tokens.end(), c.tokens.begin(), c.tokens.end());
        into.token_logprobs.insert(into.token_logprobs.end(),
                                   c.token_logprobs.begin(),
                                   c.token_logprobs.end());
        into.token_ids.insert(into.token_ids.end(), c.token_ids.begin(),
                              c.token_ids.end());
        if (c.finish_reason) into.finish_reason = c.finish_reason;
      }
    }
    return ResponseJson(header_, choices, usage());
  }

  // Streaming: writes the next events; false ends the connection.
  bool Pump(httplib::DataSink& sink) {
    if (AllFinished()) {
      if (request_.include_usage) {
        Write(sink, SseEvent(UsageChunkJson(header_, usage())));
      }
      Write(sink, kSseDone);
      sink.done();
      return true;
    }
    absl::StatusOr<std::vector<Choice>> part = Poll();
    if (!part.ok()) {
      Write(sink, SseEvent(ApiError(part.status()).body));
      Write(sink, kSseDone);
      sink.done();
      return true;
    }
    bool ok = true;
    if (!sent_first_ && header_.endpoint == Endpoint::kChat) {
      // The role first, as OpenAI does, one chunk per choice.
      for (size_t i = 0; i < streams_.size(); ++i) {
        Choice c;
        c.index = static_cast<int64_t>(i);
        ok = ok && Write(sink, SseEvent(ChunkJson(header_, {c}, true)));
      }
    }
    sent_first_ = true;
    for (const Choice& c : *part) {
      ok = ok && Write(sink, SseEvent(ChunkJson(header_, {c}, false)));
    }
    return ok;
  }

 private:
  bool Write(httplib::DataSink& sink, const std::string& data) {
    return sink.write(data.data(), data.size());
  }

  bool AllFinished() const {
    for (bool f : finished_) {
      if (!f) return false;
    }
    return true;
  }

  Usage usage() const {
    Usage u;
    u.prompt_tokens = prompt_tokens_;
    for (const TextStream& s : streams_) u.completion_tokens += s.num_tokens();
    return u;
  }

  // Waits for new tokens; returns the choices with something to say (text,
  // log-probs or a finish reason).
  absl::StatusOr<std::vector<Choice>> Poll() {
    Job::Update u = job_->WaitForUpdate(consumed_);
    if (u.done) job_done_ = true;
    if (!u.status.ok() && !cancelled_) return u.status;
    std::vector<Choice> out;
    bool all_done = true;
    for (size_t i = 0; i < streams_.size(); ++i) {
      if (finished_[i]) continue;
      TextStream& s = streams_[i];
      for (size_t t = 0; t < u.tokens[i].size(); ++t) {
        s.Add(u.tokens[i][t], u.logprobs[i][t]);
      }
      consumed_[i] += u.tokens[i].size();
      const bool ended = s.stopped() || !u.finish_reasons[i].empty() || u.done;
      Choice c;
      c.index = static_cast<int64_t>(i);
      // With tools, the answer is parsed as a whole at the end.
      const bool hold = request_.parse_tool_calls && !ended;
      if (!hold) c.text = s.TakeDelta(ended);
      if ((request_.logprobs || request_.return_token_ids) && !hold) {
        const int64_t kept = s.num_tokens();
        for (int64_t t = reported_tokens_[i]; t < kept; ++t) {
          if (request_.logprobs) {
            c.tokens.push_back(s.token_texts()[t]);
            c.token_logprobs.push_back(s.logprobs()[t]);
          }
          if (request_.return_token_ids) {
            c.token_ids.push_back(s.token_ids()[t]);
          }
        }
        reported_tokens_[i] = kept;
      }
      if (ended) {
        finished_[i] = true;
        c.finish_reason = s.stopped() || u.finish_reasons[i].empty()
                              ? "stop"
                              : u.finish_reasons[i];
        if (request_.parse_tool_calls) {
          c.text = s.text();
          ExtractToolCalls(absl::StrCat(header_.id, "_", i), &c);
        }
      } else {
        all_done = false;
      }
      if (!c.text.empty() || !c.tokens.empty() || !c.token_ids.empty() ||
          c.finish_reason) {
        out.push_back(std::move(c));
      }
    }
    if (all_done && !job_done_ && !cancelled_) {
      // Every sample hit a stop string: free the engine's slots now.
      cancelled_ = true;
      worker_->Cancel(job_);
    }
    return out;
  }

  EngineWorker* worker_;
  const ApiRequest request_;
  const ResponseHeader header_;
  const int64_t prompt_tokens_;
  std::shared_ptr<Job> job_;
  std::unique_ptr<InFlight> in_flight_;
  std::vector<TextStream> streams_;
  std::vector<size_t> consumed_;
  std::vector<int64_t> reported_tokens_;
  std::vector<bool> finished_;
  bool job_done_ = false;
  bool cancelled_ = false;
  bool sent_first_ = false;
};

Server::Server(std::unique_ptr<LLMEngine> engine, models::Tokenizer tokenizer,
               ServerOptions options)
    : tokenizer_(std::move(tokenizer)),
      formatter_(tokenizer_),
      options_(std::move(options)),
      created_(static_cast<int64_t>(std::time(nullptr))),
      worker_(std::move(engine)),
      http_(std::make_unique<httplib::Server>()) {
  if (options_.image_processor) {
    vlm_.emplace(tokenizer_, *options_.image_processor);
  }
  const size_t threads = options_.max_concurrent_requests + 4;
  http_->new_task_queue = [threads] {
    return new httplib::ThreadPool(threads);
  };
  http_->set_payload_max_length(options_.max_request_bytes);
  Route();
}

Server::~Server() {
  Stop();
  worker_.Shutdown();
}

absl::StatusOr<int> Server::Bind() {
  int port = options_.port;
  if (port == 0) {
    port = http_->bind_to_any_port(options_.host);
    if (port < 0) port = 0;
  } else if (!http_->bind_to_port(options_.host, port)) {
    port = 0;
  }
  if (port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options_.host, ":", options_.port,
                     " (address in use, or not an address of this machine)"));
  }
  return port;
}

void Server::Serve() {
  serving_ = true;
  if (!stop_requested_) http_->listen_after_bind();
  serving_ = false;
}

void Server::Stop() {
  // httplib's stop() does nothing before listening has begun: a Stop() that
  // races a starting Serve() waits until it listens (or gave up) instead of
  // leaving it to serve forever.
  stop_requested_ = true;
  while (serving_ && !http_->is_running()) std::this_thread::yield();
  if (http_->is_running()) http_->stop();
}

void Server::Route() {
  http_->Get("/health", [](const httplib::Request&, httplib::Response& res) {
    WriteJson(res, 200, {{"status", "ok"}});
  });
  http_->Get("/v1/models",
             [this](const httplib::Request&, httplib::Response& res) {
               WriteJson(res, 200,
                         ModelsJson(options_.served_model_name, created_,
                                    worker_.max_model_len()));
             });
  auto generate = [this](Endpoint endpoint) {
    return
        [this, endpoint](const httplib::Request& req, httplib::Response& res) {
          absl::StatusOr<std::shared_ptr<Generation>> gen =
              Start(req.body, endpoint);
          if (!gen.ok()) return WriteError(res, gen.status());
          if (!(*gen)->stream()) {
            absl::StatusOr<Json> body = (*gen)->Complete();
            if (!body.ok()) return WriteError(res, body.status());
            return WriteJson(res, 200, *body);
          }
          res.set_header("Cache-Control", "no-cache");
          std::shared_ptr<Generation> g = *std::move(gen);
          res.set_chunked_content_provider(
              "text/event-stream",
              [g](size_t, httplib::DataSink& sink) { return g->Pump(sink); });
        };
  };
  http_->Post("/v1/completions", generate(Endpoint::kCompletions));
  http_->Post("/v1/chat/completions", generate(Endpoint::kChat));
  // Statuses httplib sets itself (404 route, 413 body, 400 bad HTTP) get
  // an OpenAI error body too.
  http_->set_error_handler(
      [](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return;
        std::string message = absl::StrCat("HTTP status ", res.status);
        if (res.status == 404) {
          message = absl::StrCat("no route ", req.method, " ", req.path);
        } else if (res.status == 413) {
          message = "the request body exceeds the server's size limit";
        }
        HttpError e = HttpStatusError(res.status, message);
        res.set_content(DumpJson(e.body), "application/json");
      });
  http_->set_exception_handler([](const httplib::Request&,
                                  httplib::Response& res,
                                  std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    WriteError(res, absl::InternalError(what.substr(0, what.find('\n'))));
  });
}

absl::StatusOr<std::vector<int64_t>> Server::PromptIds(
    const ApiRequest& request, MultiModalInput* mm) {
  std::vector<int64_t> ids;
  if (!request.images.empty()) {
    if (!vlm_) {
      return ParamError("messages",
                        "image_url content parts need a vision-language "
                        "model; this server's model is text-only");
    }
    if (!request.tools.empty() || !request.chat_template_kwargs.empty()) {
      return ParamError("messages",
                        "tools and chat_template_kwargs are not supported "
                        "with image_url content parts");
    }
    std::vector<models::vlm::Image> images;
    for (size_t i = 0; i < request.images.size(); ++i) {
      absl::StatusOr<models::vlm::Image> image = models::vlm::DecodeImage(
          request.images[i], absl::StrCat("image ", i));
      if (!image.ok()) return ParamError("messages", image.status().message());
      images.push_back(*std::move(image));
    }
    absl::StatusOr<models::vlm::ProcessedPrompt> processed =
        vlm_->ProcessMessages(request.messages, images);
    if (!processed.ok()) {
      return ParamError("messages", processed.status().message());
    }
    *mm = {processed->pixel_values, processed->image_grid_thw};
    ids = std::move(processed->input_ids);
  } else if (request.endpoint == Endpoint::kChat) {
    models::ChatRequest chat;
    chat.messages_json = request.messages.dump();
    if (!request.tools.empty()) chat.tools_json = request.tools.dump();
    if (!request.chat_template_kwargs.empty()) {
      chat.kwargs_json = request.chat_template_kwargs.dump();
    }
    chat.add_generation_prompt = true;
    absl::StatusOr<std::string> text = formatter_.Apply(chat);
    if (!text.ok()) {
      return ParamError(
          "messages", absl::StrCat("chat template: ", text.status().message()));
    }
    ids = tokenizer_.Encode(*text);
  } else if (request.prompt_text) {
    ids = tokenizer_.Encode(*request.prompt_text);
  } else {
    ids = request.prompt_ids;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= worker_.vocab_size()) {
        return ParamError("prompt",
                          absl::StrCat("token id ", ids[i], " at ", i,
                                       " is outside the vocabulary [0, ",
                                       worker_.vocab_size(), ")"));
      }
    }
  }
  if (ids.empty()) {
    return ParamError(
        request.endpoint == Endpoint::kChat ? "messages" : "prompt",
        "the prompt is empty");
  }
  return ids;
}

absl::StatusOr<std::shared_ptr<Server::Generation>> Server::Start(
    const std::string& body, Endpoint endpoint) {
  VERL_ASSIGN_OR_RETURN(ApiRequest request,
                        ParseRequest(body, endpoint, options_.limits));
  if (request.model != options_.served_model_name) {
    return ModelNotFound(request.model);
  }
  MultiModalInput mm;
  VERL_ASSIGN_OR_RETURN(std::vector<int64_t> prompt, PromptIds(request, &mm));
  const int64_t len = static_cast<int64_t>(prompt.size());
  const int64_t max_len = worker_.max_model_len();
  const char* prompt_param =
      endpoint == Endpoint::kChat ? "messages" : "prompt";
  if (len >= max_len) {
    return ParamError(
        prompt_param,
        absl::StrCat("This model's maximum context length is ", max_len,
                     " tokens. However, your prompt has ", len,
                     " tokens, which leaves no room for the completion."),
        "context_length_exceeded");
  }
  const int64_t max_tokens = request.max_tokens.value_or(
      endpoint == Endpoint::kChat ? max_len - len : 16);
  if (len + max_tokens > max_len) {
    return ParamError(
        "max_tokens",
        absl::StrCat("This model's maximum context length is ", max_len,
                     " tokens. However, you requested ", len + max_tokens,
                     " tokens (", len, " in the ", prompt_param, ", ",
                     max_tokens,
                     " in the completion). Please reduce the length of the ",
                     prompt_param, " or completion."),
        "context_length_exceeded");
  }
  request.sampling.max_tokens = max_tokens;
  if (in_flight_.fetch_add(1) >= options_.max_concurrent_requests) {
    in_flight_.fetch_sub(1);
    return absl::ResourceExhaustedError(absl::StrCat(
        "the server has ", options_.max_concurrent_requests,
        " requests in flight (--max_concurrent_requests); retry later"));
  }
  auto in_flight = std::make_unique<InFlight>(&in_flight_);
  std::shared_ptr<Job> job =
      worker_.Submit(prompt, request.sampling, std::move(mm));
  VERL_RETURN_IF_ERROR(job->WaitAccepted());
  ResponseHeader header;
  header.id = absl::StrFormat("%s-%x%06x",
                              endpoint == Endpoint::kChat ? "chatcmpl" : "cmpl",
                              created_, next_id_.fetch_add(1));
  header.created = static_cast<int64_t>(std::time(nullptr));
  header.model = options_.served_model_name;
  header.endpoint = endpoint;
  header.logprobs = request.logprobs;
  header.return_token_ids = request.return_token_ids;
  return std::make_shared<Generation>(&worker_, &tokenizer_, std::move(request),
                                      std::move(header), len, std::move(job),
                                      std::move(in_flight));
}

}  // namespace verl::infer::serve
