// File: verl/ckpt/weights_only.h
//
// Whether Python's `torch.load(path, weights_only=True)` (the default since
// torch 2.6) would accept a `.pt` file. torch's restricted unpickler
// (torch/_weights_only_unpickler.py) runs only a fixed set of protocol-2
// opcodes and resolves only allow-listed globals: the tensor rebuild
// functions, storage and tensor classes, dtypes, torch.Size / device,
// collections.OrderedDict / Counter, _codecs.encode and a few builtins. The
// file's pickle is run through the project's pickle VM with a trace
// (core::PickleTrace) and every opcode and GLOBAL is checked against those
// lists. Tests use it on every file the trainer writes.
#ifndef VERL_CKPT_WEIGHTS_ONLY_H_
#define VERL_CKPT_WEIGHTS_ONLY_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace verl::ckpt {

// True for a global ("module.name") torch's weights_only unpickler allows
// without add_safe_globals.
bool IsWeightsOnlyGlobal(absl::string_view global);
// True for an opcode that unpickler implements.
bool IsWeightsOnlyOpcode(uint8_t opcode);

// OK if torch.load(path, weights_only=True) would unpickle the file;
// InvalidArgument listing every refused GLOBAL and opcode (and a protocol
// other than torch.save's 2) otherwise. Unreadable files: the reader's error.
absl::Status CheckWeightsOnlyLoadable(const std::string& path);

}  // namespace verl::ckpt

#endif  // VERL_CKPT_WEIGHTS_ONLY_H_
