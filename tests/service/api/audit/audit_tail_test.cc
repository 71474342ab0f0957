// The audit tail reader (audit_tail.h): the last records of a log read backwards in blocks.
#include "api/audit/audit_tail.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "core/observability/audit.h"

#include "service/support/audit_file_fixture.h"

namespace pvs::service {
namespace {

class AuditTailTest : public test::AuditFileTest {
 protected:
  void write(const std::string& text) { std::ofstream(path_, std::ios::binary) << text; }
  static std::string line(int i, const std::string& action = "sandbox.exec",
                          const std::string& sandbox = "sb-000000000001") {
    return "{\"n\":" + std::to_string(i) + ",\"action\":\"" + action + "\",\"sandbox\":\"" +
           sandbox + "\"}";
  }
  AuditTail tail(AuditTailOptions o) {
    auto t = read_audit_tail(path_, o);
    EXPECT_TRUE(t) << t.error().message;
    return t ? *t : AuditTail{};
  }
  static AuditTailOptions opts(std::size_t limit, std::size_t block = 64 * 1024) {
    AuditTailOptions o;
    o.limit = limit;
    o.block_bytes = block;
    return o;
  }
};

TEST_F(AuditTailTest, LastRecordsNewestLastAcrossBlockSizes) {
  std::string text;
  for (int i = 0; i < 50; ++i) text += line(i) + "\n";
  write(text);
  // Block sizes smaller than a line, equal to odd sizes and larger than the file.
  for (std::size_t block : {1u, 7u, 33u, 64u, 4096u, 1u << 20}) {
    auto t = tail(opts(5, block));
    ASSERT_EQ(t.records.size(), 5u) << block;
    for (int i = 0; i < 5; ++i) EXPECT_EQ(t.records[i], line(45 + i)) << block;
    EXPECT_FALSE(t.truncated);
    auto all = tail(opts(1000, block));
    ASSERT_EQ(all.records.size(), 50u) << block;
    EXPECT_EQ(all.records.front(), line(0)) << block;
    EXPECT_EQ(all.records.back(), line(49)) << block;
  }
}

TEST_F(AuditTailTest, PartialLastLineAndGarbageAreSkipped) {
  write(line(1) + "\nnot json\n\n[1,2]\n" + line(2) + "\n{\"n\":3,\"act");
  auto t = tail(opts(10, 5));
  ASSERT_EQ(t.records.size(), 2u);
  EXPECT_EQ(t.records[0], line(1));
  EXPECT_EQ(t.records[1], line(2));
  // A complete JSON object without its newline is still a write in progress.
  write(line(1) + "\n" + line(2));
  t = tail(opts(10));
  ASSERT_EQ(t.records.size(), 1u);
  EXPECT_EQ(t.records[0], line(1));
  // A single line without a newline: nothing yet; an empty file: nothing.
  write(line(1));
  EXPECT_TRUE(tail(opts(10)).records.empty());
  write("");
  EXPECT_TRUE(tail(opts(10)).records.empty());
}

TEST_F(AuditTailTest, FiltersByActionAndSandbox) {
  std::string text;
  for (int i = 0; i < 30; ++i) {
    text += line(i, i % 3 == 0 ? "sandbox.create" : "sandbox.exec",
                 i % 2 == 0 ? "sb-00000000000a" : "sb-00000000000b") +
            "\n";
  }
  // The value appearing elsewhere in a line is not a match.
  text += "{\"action\":\"sandbox.exec\",\"params\":{\"note\":\"sandbox.create\"}}\n";
  write(text);
  auto o = opts(4, 16);
  o.action = "sandbox.create";
  auto t = tail(o);
  ASSERT_EQ(t.records.size(), 4u);
  EXPECT_EQ(t.records[0], line(18, "sandbox.create", "sb-00000000000a"));
  EXPECT_EQ(t.records[3], line(27, "sandbox.create", "sb-00000000000b"));
  o.sandbox = "sb-00000000000a";
  o.limit = 100;
  t = tail(o);
  ASSERT_EQ(t.records.size(), 5u);  // 0, 6, 12, 18, 24
  EXPECT_EQ(t.records[0], line(0, "sandbox.create", "sb-00000000000a"));
  o.action = "sandbox.nothing";
  EXPECT_TRUE(tail(o).records.empty());
}

TEST_F(AuditTailTest, RealAuditLinesRoundTrip) {
  auto log = AuditLog::open(path_, false);
  ASSERT_TRUE(log);
  for (int i = 0; i < 3; ++i) {
    AuditRecord r;
    r.action = i == 1 ? "sandbox.create" : "sandbox.exec";
    r.sandbox = "sb-4f2a9c1e0b7d";
    r.params_json = "{\"command\":\"echo \\\"quoted\\\" \\u00e9\"}";
    r.status = 200;
    ASSERT_TRUE((*log)->append(r));
  }
  auto o = opts(10);
  o.action = "sandbox.create";
  auto t = tail(o);
  ASSERT_EQ(t.records.size(), 1u);
  EXPECT_NE(t.records[0].find("\"action\":\"sandbox.create\""), std::string::npos);
  EXPECT_EQ(t.records[0].back(), '}');
}

TEST_F(AuditTailTest, HugeFileCostsOnlyItsTail) {
  // ~40 MB of log: the tail is found reading only the last block or so.
  {
    std::ofstream out(path_, std::ios::binary);
    std::string filler = line(0, "sandbox.exec", "sb-" + std::string(500, 'f')) + "\n";
    for (int i = 0; i < 80000; ++i) out << filler;
    for (int i = 1; i <= 3; ++i) out << line(i, "sandbox.create") << "\n";
  }
  auto t = tail(opts(3));
  ASSERT_EQ(t.records.size(), 3u);
  EXPECT_EQ(t.records[2], line(3, "sandbox.create"));
  EXPECT_LE(t.scanned_bytes, 64u * 1024);
  // A filter matching only old records scans back until the bound, then says so.
  auto o = opts(10);
  o.action = "sandbox.destroy";
  o.max_scan_bytes = 1 << 20;
  t = tail(o);
  EXPECT_TRUE(t.records.empty());
  EXPECT_TRUE(t.truncated);
  EXPECT_LE(t.scanned_bytes, (1u << 20) + 64 * 1024);
}

TEST_F(AuditTailTest, OverlongLinesAndReplyBound) {
  std::string text = line(1) + "\n{\"action\":\"x\",\"pad\":\"" + std::string(5000, 'p') + "\"}\n" +
                     line(2) + "\n" + line(3) + "\n";
  write(text);
  auto o = opts(10, 100);
  o.max_line_bytes = 1000;
  auto t = tail(o);
  ASSERT_EQ(t.records.size(), 3u);  // the long line is skipped, its neighbours are not
  EXPECT_EQ(t.records[0], line(1));
  o.max_reply_bytes = line(2).size() + line(3).size();
  t = tail(o);
  ASSERT_EQ(t.records.size(), 2u);
  EXPECT_EQ(t.records[0], line(2));
  EXPECT_TRUE(t.truncated);
}

TEST_F(AuditTailTest, MissingFileIsNotFound) {
  auto t = read_audit_tail(path_ + ".nope", opts(1));
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().code, ErrorCode::kNotFound);
}

}  // namespace
}  // namespace pvs::service
