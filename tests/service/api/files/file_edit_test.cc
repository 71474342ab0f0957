// The edit of files/edit and the MCP edit_file tool: exact matches, counts, CRLF, binary
// refusal, and the unified diff around each change.
#include "core/text/file_edit.h"

#include <gtest/gtest.h>

namespace pvs::service {
namespace {

EditResult edit(std::string_view content, std::string old_s, std::string new_s, bool all = false) {
  auto r = apply_edit(content, {std::move(old_s), std::move(new_s), all});
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  return r ? *r : EditResult{};
}

TEST(FileEdit, ReplacesTheOneOccurrence) {
  auto r = edit("a = 1\nb = 2\nc = 3\n", "b = 2", "b = 20");
  EXPECT_EQ(r.content, "a = 1\nb = 20\nc = 3\n");
  EXPECT_EQ(r.replaced, 1u);
  EXPECT_FALSE(r.crlf);
}

TEST(FileEdit, RefusesWhatCannotBeApplied) {
  using K = EditError::Kind;
  auto none = apply_edit("abc\n", {"xyz", "q", false});
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().kind, K::kNotFound);
  EXPECT_NE(none.error().message.find("not found"), std::string::npos);
  auto many = apply_edit("x\nx\nx\n", {"x", "y", false});
  ASSERT_FALSE(many);
  EXPECT_EQ(many.error().kind, K::kAmbiguous);
  EXPECT_EQ(many.error().occurrences, 3u);
  EXPECT_NE(many.error().message.find("occurs 3 times"), std::string::npos);
  EXPECT_NE(many.error().message.find("replace_all"), std::string::npos);
  EXPECT_EQ(apply_edit("abc", {"", "x", false}).error().kind, K::kEmptyOld);
  EXPECT_EQ(apply_edit("abc", {"b", "b", false}).error().kind, K::kSame);
  EXPECT_EQ(apply_edit(std::string_view("a\0b", 3), {"a", "c", false}).error().kind, K::kBinary);
}

TEST(FileEdit, ReplaceAllCountsNonOverlappingOccurrences) {
  auto r = edit("aaaa", "aa", "b", true);
  EXPECT_EQ(r.content, "bb");
  EXPECT_EQ(r.replaced, 2u);
  auto s = edit("x.x.x", "x", "yy", true);
  EXPECT_EQ(s.content, "yy.yy.yy");
  EXPECT_EQ(s.replaced, 3u);
}

TEST(FileEdit, CrlfFilesMatchLfOldStringsAndKeepTheirLineEnds) {
  std::string file = "one\r\ntwo\r\nthree\r\n";
  auto r = edit(file, "one\ntwo\n", "uno\ndos\n");
  EXPECT_TRUE(r.crlf);
  EXPECT_EQ(r.content, "uno\r\ndos\r\nthree\r\n");
  // A match without newlines needs no conversion.
  auto s = edit(file, "two", "2");
  EXPECT_FALSE(s.crlf);
  EXPECT_EQ(s.content, "one\r\n2\r\nthree\r\n");
  // The diff shows lines without '\r'.
  std::string d = unified_diff("/f", file, r);
  EXPECT_EQ(d.find('\r'), std::string::npos) << d;
  EXPECT_NE(d.find("-one\n-two\n+uno\n+dos\n three\n"), std::string::npos) << d;
}

TEST(FileEdit, DiffHasContextAndLineNumbers) {
  std::string file;
  for (int i = 1; i <= 20; ++i) file += "line " + std::to_string(i) + "\n";
  auto r = edit(file, "line 10\n", "ten\nTEN\n");
  EXPECT_EQ(unified_diff("/tmp/f.txt", file, r),
            "--- /tmp/f.txt\n+++ /tmp/f.txt\n"
            "@@ -7,7 +7,8 @@\n"
            " line 7\n line 8\n line 9\n-line 10\n+ten\n+TEN\n line 11\n line 12\n line 13\n");
}

TEST(FileEdit, DiffOfAReplacementInsideALine) {
  auto r = edit("int x = 1;\nint y = 2;\n", "= 2", "= 3");
  EXPECT_EQ(unified_diff("f", "int x = 1;\nint y = 2;\n", r),
            "--- f\n+++ f\n@@ -1,2 +1,2 @@\n int x = 1;\n-int y = 2;\n+int y = 3;\n");
}

TEST(FileEdit, DiffOfDeletedLinesAndJoinedLines) {
  std::string file = "a\nfoo\nb\n";
  auto del = edit(file, "foo\n", "");
  EXPECT_EQ(del.content, "a\nb\n");
  EXPECT_EQ(unified_diff("f", file, del), "--- f\n+++ f\n@@ -1,3 +1,2 @@\n a\n-foo\n b\n");
  // Removing a line's newline joins it with the next: both old lines go, the joined one comes.
  auto join = edit(file, "foo\n", "foo ");
  EXPECT_EQ(join.content, "a\nfoo b\n");
  EXPECT_EQ(unified_diff("f", file, join), "--- f\n+++ f\n@@ -1,3 +1,2 @@\n a\n-foo\n-b\n+foo b\n");
}

TEST(FileEdit, NearbyChangesShareAHunkAndFarOnesDoNot) {
  std::string file;
  for (int i = 1; i <= 40; ++i)
    file += (i == 5 || i == 8 || i == 30 ? "X" : "l") + std::to_string(i) + "\n";
  auto r = edit(file, "X", "Y", true);
  EXPECT_EQ(r.replaced, 3u);
  std::string d = unified_diff("f", file, r);
  EXPECT_NE(
      d.find("@@ -2,10 +2,10 @@\n l2\n l3\n l4\n-X5\n+Y5\n l6\n l7\n-X8\n+Y8\n l9\n l10\n l11\n"),
      std::string::npos)
      << d;
  EXPECT_NE(d.find("@@ -27,7 +27,7 @@\n"), std::string::npos) << d;
  // Two occurrences on one line are one change.
  auto same_line = edit("a b a\n", "a", "c", true);
  EXPECT_EQ(unified_diff("f", "a b a\n", same_line),
            "--- f\n+++ f\n@@ -1,1 +1,1 @@\n-a b a\n+c b c\n");
}

TEST(FileEdit, ChangesOnAdjacentLinesAreOneBlock) {
  auto r = edit("a\nb\nb\nc\n", "b", "B", true);
  EXPECT_EQ(unified_diff("f", "a\nb\nb\nc\n", r),
            "--- f\n+++ f\n@@ -1,4 +1,4 @@\n a\n-b\n-b\n+B\n+B\n c\n");
}

TEST(FileEdit, LineNumbersFollowEarlierChanges) {
  std::string file;
  for (int i = 1; i <= 30; ++i) file += (i == 2 || i == 25 ? "X" : "l") + std::to_string(i) + "\n";
  auto r = edit(file, "X", "Y\nY", true);  // each change adds a line
  std::string d = unified_diff("f", file, r);
  EXPECT_NE(d.find("@@ -1,5 +1,6 @@"), std::string::npos) << d;
  EXPECT_NE(d.find("@@ -22,7 +23,8 @@"), std::string::npos) << d;
}

TEST(FileEdit, LargeDiffsAreCut) {
  std::string file;
  for (int i = 0; i < 5000; ++i) file += "x" + std::to_string(i) + "\n";
  auto r = edit(file, "x", "y", true);
  EXPECT_EQ(r.replaced, 5000u);
  std::string d = unified_diff("f", file, r, {3, 1024, 240});
  EXPECT_LE(d.size(), 1100u);
  EXPECT_NE(d.find("... (diff cut)"), std::string::npos);
}

TEST(FileEdit, TenMebibyteFileWithNoTrailingNewline) {
  std::string file(kMaxEditFileBytes - 16, 'a');
  for (std::size_t i = 100; i < file.size(); i += 100) file[i] = '\n';
  file += "\nthe end";
  auto r = edit(file, "the end", "THE END");
  EXPECT_EQ(r.content.substr(r.content.size() - 7), "THE END");
  std::string d = unified_diff("big", file, r);
  EXPECT_NE(d.find("-the end\n+THE END\n"), std::string::npos) << d;
}

}  // namespace
}  // namespace pvs::service
