// File: verl/profiler/pickle_writer.h
//
// A streaming writer of Python pickle protocol 2 for the subset memory
// snapshots need: dict, list, str, int, float, bool, None, plus the memo
// (LONG_BINPUT / LONG_BINGET) so repeated objects such as stack frames are
// written once. Python's `pickle.load` (and PyTorch's memory_viz, which reads
// the same bytes) reads the result.
#ifndef VERL_PROFILER_PICKLE_WRITER_H_
#define VERL_PROFILER_PICKLE_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace verl::profiler {

class PickleWriter {
 public:
  PickleWriter();  // emits the PROTO 2 header

  void None();
  void Bool(bool v);
  void Int(int64_t v);
  void UInt(uint64_t v);  // e.g. addresses above 2^63
  void Float(double v);
  void String(absl::string_view v);  // UTF-8

  // Containers: Begin, then the items (for a dict: key, value, key, ...),
  // then End. Items are flushed in batches of 1000 as Python does.
  void BeginDict();
  void EndDict();
  void BeginList();
  void EndList();

  // Stores the object just completed in the memo and returns its id.
  uint32_t Memoize();
  // Pushes a memoized object again.
  void Get(uint32_t id);

  // Appends STOP and returns the bytes. The writer must not be used after.
  std::string Finish();

 private:
  void Item();
  void Begin(char empty_op);
  void End(char batch_op);

  struct Frame {
    char batch_op;
    int64_t pending = 0;   // items pushed since the last MARK
    int64_t per_item = 1;  // 2 stack entries per dict item
  };
  std::string out_;
  std::vector<Frame> open_;
  uint32_t next_memo_ = 0;
};

}  // namespace verl::profiler

#endif  // VERL_PROFILER_PICKLE_WRITER_H_
