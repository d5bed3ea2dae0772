// File: verl/rl/data/parquet/parquet_test_util.h
//
// Helpers shared by the Parquet tests: fixture paths and a JSON normal form
// in which binary values read as "hex:<bytes>" (as testdata/rows.json spells
// them), so rows compare with ==.
#ifndef VERL_RL_DATA_PARQUET_PARQUET_TEST_UTIL_H_
#define VERL_RL_DATA_PARQUET_PARQUET_TEST_UTIL_H_

#include <functional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "verl/rl/data/parquet/thrift_compact.h"

namespace verl::rl::parquet::testing {

// verl/rl/data/parquet/testdata/<name> (tests run from the workspace root).
std::string Testdata(const std::string& name);

// Replaces every json binary by the string "hex:<lowercase hex>".
nlohmann::json HexBinary(const nlohmann::json& j);

// The inverse: every "hex:<bytes>" string becomes a json binary.
nlohmann::json UnhexBinary(const nlohmann::json& j);

// Decodes the footer of `file`, applies `edit` to its Thrift tree and
// returns the file with the re-encoded footer.
std::string RewriteFooter(const std::string& file,
                          const std::function<void(ThriftValue&)>& edit);

// A small valid file (snappy, dictionary pages, two row groups) with
// columns "q" (strings), "n" (integers) and "m" (list of {role, content}).
std::string SmallParquetFile();

// A malformed variant of SmallParquetFile: reading it as "bad.parquet" must
// fail with a message containing `want` (and the column path, if any).
struct MalformedCase {
  std::string name;
  std::string bytes;
  std::string want;
  std::string column;  // "" when the error is not about one column
};
std::vector<MalformedCase> MalformedCases();

}  // namespace verl::rl::parquet::testing

#endif  // VERL_RL_DATA_PARQUET_PARQUET_TEST_UTIL_H_
