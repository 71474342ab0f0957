// TypedLine: the line a terminal's shell ends up with, as terminal.input judges it.
#include "policy/typed_line.h"

#include <gtest/gtest.h>

namespace pvs::service {
namespace {

std::vector<std::string> lines_of(TypedLine& t, std::string_view bytes) {
  auto next = t.after(bytes);
  auto lines = next.lines;
  t.commit(std::move(next));
  return lines;
}

TEST(TypedLine, LinesSplitAcrossCallsAreJudgedWhole) {
  TypedLine t;
  EXPECT_TRUE(lines_of(t, "rm -r").empty());
  EXPECT_EQ(t.current(), "rm -r");
  EXPECT_EQ(lines_of(t, "f /\r"), std::vector<std::string>{"rm -rf /"});
  EXPECT_EQ(t.current(), "");
  EXPECT_EQ(lines_of(t, "a\nb\rc"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(t.current(), "c");
}

TEST(TypedLine, AfterLeavesTheStateAloneUntilCommit) {
  TypedLine t;
  lines_of(t, "echo ");
  auto next = t.after("hi\r");
  EXPECT_EQ(next.lines, std::vector<std::string>{"echo hi"});
  EXPECT_EQ(t.current(), "echo ");  // not sent yet (pending or refused): nothing changed
  t.clear();
  EXPECT_EQ(t.current(), "");
}

TEST(TypedLine, EditingKeysChangeTheLineAsReadlineWould) {
  TypedLine t;
  EXPECT_EQ(lines_of(t, "rm -rf /tmpx\x7f\r"), std::vector<std::string>{"rm -rf /tmp"});
  EXPECT_EQ(lines_of(t, "ls \xc3\xa9\x08\r"), std::vector<std::string>{"ls "});  // one UTF-8 char
  EXPECT_EQ(lines_of(t, "echo one two  \x17three\r"), std::vector<std::string>{"echo one three"});
  EXPECT_EQ(lines_of(t, "rm -rf /\x15ls\r"), std::vector<std::string>{"ls"});  // C-u
  EXPECT_EQ(lines_of(t, "sleep 9\x03uptime\r"), std::vector<std::string>{"uptime"});
}

TEST(TypedLine, EscapeSequencesAndControlBytesAreNotPartOfTheLine) {
  TypedLine t;
  // Arrows (CSI), F1 (SS3), Alt-x, an OSC title; a CSI split across two calls.
  EXPECT_EQ(lines_of(t, "ls\x1b[A\x1bOP\x1bx\x1b]0;t\a -l\r"), std::vector<std::string>{"ls -l"});
  EXPECT_TRUE(lines_of(t, "cat\x1b[1").empty());
  EXPECT_EQ(lines_of(t, ";5C f\x01\x02\r"), std::vector<std::string>{"cat f"});
  EXPECT_EQ(lines_of(t, "a\tb\r"), std::vector<std::string>{"a\tb"});
  // A runaway sequence ends after 64 bytes; what follows is text again.
  EXPECT_EQ(lines_of(t, "\x1b[" + std::string(70, '1') + "x\r"),
            std::vector<std::string>{"1111111x"});
}

TEST(TypedLine, AVeryLongLineKeepsItsEnd) {
  TypedLine t;
  std::string big(TypedLine::kMaxLine + 10, 'a');
  auto lines = lines_of(t, big + "rm -rf /\r");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].size(), TypedLine::kMaxLine);
  EXPECT_TRUE(lines[0].ends_with("rm -rf /"));
}

}  // namespace
}  // namespace pvs::service
