// Key names to bytes and the screen renderer, fed directly (no pty, no network).
#include <gtest/gtest.h>

#include "pvesandbox/terminal.h"

namespace pvs {
namespace {

std::string key(std::string_view name) {
  auto r = encode_key(name);
  EXPECT_TRUE(r) << name << ": " << r.error().message;
  return r ? *r : std::string("<error>");
}

TEST(TerminalKeys, NamedKeysInDefaultModes) {
  EXPECT_EQ(key("Enter"), "\r");
  EXPECT_EQ(key("enter"), "\r");
  EXPECT_EQ(key("Tab"), "\t");
  EXPECT_EQ(key("Escape"), "\x1b");
  EXPECT_EQ(key("Esc"), "\x1b");
  EXPECT_EQ(key("Backspace"), "\x7f");
  EXPECT_EQ(key("Space"), " ");
  EXPECT_EQ(key("Up"), "\x1b[A");
  EXPECT_EQ(key("Down"), "\x1b[B");
  EXPECT_EQ(key("Right"), "\x1b[C");
  EXPECT_EQ(key("Left"), "\x1b[D");
  EXPECT_EQ(key("Delete"), "\x1b[3~");
  EXPECT_EQ(key("Insert"), "\x1b[2~");
  EXPECT_EQ(key("PageUp"), "\x1b[5~");
  EXPECT_EQ(key("PageDown"), "\x1b[6~");
  EXPECT_EQ(key("F1"), "\x1bOP");
  EXPECT_EQ(key("F5"), "\x1b[15~");
  EXPECT_EQ(key("F12"), "\x1b[24~");
  EXPECT_FALSE(key("Home").empty());
  EXPECT_FALSE(key("End").empty());
}

TEST(TerminalKeys, ModifiersAndCharacters) {
  EXPECT_EQ(key("C-c"), "\x03");
  EXPECT_EQ(key("C-d"), "\x04");
  EXPECT_EQ(key("C-a"), "\x01");
  EXPECT_EQ(key("C-z"), "\x1a");
  EXPECT_EQ(key("C-Z"), "\x1a");
  EXPECT_EQ(key("C-["), "\x1b");
  EXPECT_EQ(key("C-@"), std::string(1, '\0'));
  EXPECT_EQ(key("M-x"), "\x1bx");
  EXPECT_EQ(key("M-C-x"), "\x1b\x18");
  EXPECT_EQ(key("S-a"), "A");
  EXPECT_EQ(key("q"), "q");
  EXPECT_EQ(key("-"), "-");
  EXPECT_EQ(key("é"), "é");
  EXPECT_EQ(key("C-Left"), "\x1b[1;5D");
  EXPECT_EQ(key("S-Tab"), "\x1b[Z");
}

TEST(TerminalKeys, UnknownNamesAreRefusedByName) {
  for (std::string_view bad : {"Foo", "", "F13", "F0", "C-", "C-é", "X-a", "Enterr", "ab"}) {
    auto r = encode_key(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message.find("\"" + std::string(bad) + "\""), std::string::npos)
        << r.error().message;
  }
}

TEST(TerminalKeys, ApplicationCursorModeChangesArrows) {
  TerminalScreen screen(80, 24);
  screen.feed("\x1b[?1h");  // DECCKM, as vi and less set it
  EXPECT_EQ(*screen.key("Up"), "\x1bOA");
  screen.feed("\x1b[?1l");
  EXPECT_EQ(*screen.key("Up"), "\x1b[A");
}

TEST(TerminalScreenTest, TextCursorAndTrailingSpaces) {
  TerminalScreen screen(20, 4);
  screen.feed("hello   \r\nworld");
  auto s = screen.snapshot();
  ASSERT_EQ(s.lines.size(), 4u);
  EXPECT_EQ(s.lines[0], "hello");
  EXPECT_EQ(s.lines[1], "world");
  EXPECT_EQ(s.lines[2], "");
  EXPECT_EQ(s.cursor_row, 1);
  EXPECT_EQ(s.cursor_col, 5);
  EXPECT_EQ(s.cols, 20);
  EXPECT_EQ(s.rows, 4);
  EXPECT_EQ(s.text(), "hello\nworld\n\n");
  EXPECT_EQ(s.output_bytes, 15u);
}

TEST(TerminalScreenTest, EscapesAreRenderedNotShown) {
  TerminalScreen screen(20, 3);
  screen.feed("\x1b[1;31mred\x1b[0m \x1b[2;5Hat\x1b[1;1Hx");
  auto s = screen.snapshot();
  EXPECT_EQ(s.lines[0], "xed");
  EXPECT_EQ(s.lines[1], "    at");
  EXPECT_EQ(s.text().find('\x1b'), std::string::npos);
}

TEST(TerminalScreenTest, TitleWideCharactersAndResize) {
  TerminalScreen screen(10, 3);
  screen.feed("\x1b]2;my title\x07日本x");
  auto s = screen.snapshot();
  EXPECT_EQ(s.title, "my title");
  EXPECT_EQ(s.lines[0], "日本x");
  EXPECT_EQ(s.cursor_col, 5);
  screen.resize(30, 5);
  s = screen.snapshot();
  EXPECT_EQ(s.cols, 30);
  EXPECT_EQ(s.lines.size(), 5u);
}

TEST(TerminalScreenTest, ScrollbackKeepsTheLastLines) {
  TerminalScreen screen(10, 2, 3);
  for (int i = 1; i <= 6; ++i) screen.feed("l" + std::to_string(i) + "\r\n");
  auto s = screen.snapshot(10);
  EXPECT_EQ(s.lines[0], "l6");
  ASSERT_EQ(s.scrollback.size(), 3u);  // the ring holds 3
  EXPECT_EQ(s.scrollback[0], "l3");
  EXPECT_EQ(s.scrollback[2], "l5");
  EXPECT_EQ(screen.snapshot(1).scrollback, std::vector<std::string>{"l5"});
  EXPECT_TRUE(screen.snapshot(0).scrollback.empty());
}

TEST(TerminalScreenTest, AlternateScreenAndQueries) {
  TerminalScreen screen(20, 3);
  screen.feed("shell$ ");
  screen.feed("\x1b[?1049h\x1b[H\x1b[2Jfull screen");
  auto s = screen.snapshot();
  EXPECT_TRUE(s.alternate_screen);
  EXPECT_EQ(s.lines[0], "full screen");
  screen.feed("\x1b[?1049l");
  s = screen.snapshot();
  EXPECT_FALSE(s.alternate_screen);
  EXPECT_EQ(s.lines[0], "shell$");
  screen.feed("\x1b[6n");  // cursor position report
  EXPECT_EQ(screen.take_replies(), "\x1b[1;8R");
  EXPECT_EQ(screen.take_replies(), "");
}

}  // namespace
}  // namespace pvs
