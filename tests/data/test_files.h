// Files for the data tests: token files of either width, written byte by byte (little-endian), a
// FIFO, and a fresh directory.
#ifndef PIPETRAIN_TESTS_DATA_TEST_FILES_H_
#define PIPETRAIN_TESTS_DATA_TEST_FILES_H_

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace pipetrain::testing {

// A fresh directory under the test temp dir.
inline std::string FreshDir() {
  std::string templ = ::testing::TempDir() + "/pipetrain_data_XXXXXX";
  const char* made = ::mkdtemp(templ.data());
  EXPECT_NE(made, nullptr);
  return templ;
}

// `ids` as `width`-byte little-endian integers.
inline std::string WriteIds(const std::string& path, const std::vector<uint32_t>& ids, int width) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (const uint32_t id : ids) {
    for (int b = 0; b < width; ++b) out.put(static_cast<char>((id >> (8 * b)) & 0xFF));
  }
  out.close();
  EXPECT_TRUE(out.good()) << path;
  return path;
}

inline std::string WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  out.close();
  EXPECT_TRUE(out.good()) << path;
  return path;
}

inline std::string MakeFifo(const std::string& path) {
  EXPECT_EQ(::mkfifo(path.c_str(), 0644), 0) << path;
  return path;
}

}  // namespace pipetrain::testing

#endif  // PIPETRAIN_TESTS_DATA_TEST_FILES_H_
