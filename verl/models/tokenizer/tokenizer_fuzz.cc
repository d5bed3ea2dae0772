// File: verl/models/tokenizer/tokenizer_fuzz.cc
//
// libFuzzer entry for the tokenizer-side parsers of outside input. The first
// byte picks the target, the rest is the input:
//   0: tokenizer.json text (with the built-in tokenizer_config.json),
//   1: tokenizer_config.json text (with the built-in tokenizer.json),
//   2: chat-template source, parsed and rendered on a fixed chat,
//   3: text encoded and decoded by the built-in tokenizer; ASCII text must
//      round-trip exactly.
// Every call must return normally (a Status is fine); a crash, sanitizer
// report, CHECK failure or abort is a finding. tokenizer_fuzz_test runs this
// entry over seeds and mutations without libFuzzer; with clang, link this file
// with -fsanitize=fuzzer.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "verl/models/tokenizer/chat_template.h"
#include "verl/models/tokenizer/tokenizer.h"
#include "verl/models/tokenizer/tokenizer_builtin.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using verl::models::Tokenizer;
  if (size == 0) return 0;
  const std::string input(reinterpret_cast<const char*>(data + 1), size - 1);
  static const std::string kJson = verl::models::BuiltinTokenizerJson();
  static const std::string kConfig = verl::models::BuiltinTokenizerConfigJson();
  switch (data[0] % 4) {
    case 0:
    case 1: {
      const bool json = data[0] % 4 == 0;
      auto tok =
          Tokenizer::FromJson(json ? input : kJson, json ? kConfig : input);
      if (!tok.ok()) return 0;
      tok->Decode(tok->Encode("<|im_start|>Hi 42\n<|im_end|>", true), true);
      verl::models::ChatRequest req;
      req.messages_json = R"([{"role": "user", "content": "x"}])";
      (void)verl::models::ApplyChatTemplate(*tok, req);
      return 0;
    }
    case 2: {
      auto tmpl = verl::models::ChatTemplate::Parse(input);
      if (!tmpl.ok()) return 0;
      verl::models::ChatRequest req;
      req.messages_json =
          R"([{"role": "system", "content": "s"}, {"role": "user", "content":)"
          R"( "u"}, {"role": "assistant", "content": "<think>r</think>a",)"
          R"( "tool_calls": [{"function": {"name": "f", "arguments": {"x":)"
          R"( 1}}}]}, {"role": "tool", "content": "t"}])";
      req.tools_json = R"([{"type": "function", "function": {"name": "f"}}])";
      req.add_generation_prompt = true;
      req.now_unix_seconds = 0;
      (void)verl::models::ApplyChatTemplate(*tmpl, req,
                                            {{"eos_token", "</s>"}});
      return 0;
    }
    default: {
      static const Tokenizer tok = verl::models::MakeBuiltinTokenizer();
      const std::string decoded = tok.Decode(tok.Encode(input));
      bool ascii = true;
      for (char c : input) ascii &= static_cast<unsigned char>(c) < 0x80;
      if (ascii && decoded != input) std::abort();
      return 0;
    }
  }
}
