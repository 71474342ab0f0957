// Screen: libvterm fed with what programs write, read back as text.
#include "../../controller/src/terminal/screen.h"

#include <gtest/gtest.h>

#include <string>

namespace pvs::terminal {
namespace {

TEST(ScreenTest, PlainTextAndCursor) {
  Screen s(5, 20, 100);
  s.feed("hello\r\nworld");
  TerminalScreen v = s.snapshot(0);
  ASSERT_EQ(v.lines.size(), 5u);
  EXPECT_EQ(v.rows, 5);
  EXPECT_EQ(v.cols, 20);
  EXPECT_EQ(v.lines[0], "hello");
  EXPECT_EQ(v.lines[1], "world");
  EXPECT_EQ(v.lines[2], "");
  EXPECT_EQ(v.cursor_row, 1);
  EXPECT_EQ(v.cursor_col, 5);
  EXPECT_EQ(v.output_bytes, 12u);
  EXPECT_TRUE(v.scrollback.empty());
}

TEST(ScreenTest, TrailingBlanksTrimmedInnerKept) {
  Screen s(2, 20, 10);
  s.feed("a  b     ");
  EXPECT_EQ(s.snapshot(0).lines[0], "a  b");
}

TEST(ScreenTest, CursorMovementOverwrites) {
  Screen s(4, 20, 10);
  s.feed("abcdef");
  s.feed("\x1b[1;3H");  // row 1, col 3 (1-based)
  s.feed("X");
  s.feed("\x1b[3;5HY");
  s.feed("\x1b[2D");  // back two columns
  TerminalScreen v = s.snapshot(0);
  EXPECT_EQ(v.lines[0], "abXdef");
  EXPECT_EQ(v.lines[2], "    Y");
  EXPECT_EQ(v.cursor_row, 2);
  EXPECT_EQ(v.cursor_col, 3);
}

TEST(ScreenTest, EraseLineAndClearScreen) {
  Screen s(3, 20, 10);
  s.feed("one\r\ntwo\r\nthree");
  s.feed("\x1b[2;2H\x1b[K");  // erase to the end of row 2 from column 2
  EXPECT_EQ(s.snapshot(0).lines[1], "t");
  s.feed("\x1b[H\x1b[2J");
  TerminalScreen v = s.snapshot(0);
  for (const auto& l : v.lines) EXPECT_EQ(l, "");
  EXPECT_EQ(v.cursor_row, 0);
  EXPECT_EQ(v.cursor_col, 0);
}

TEST(ScreenTest, AlternateScreenAsFullScreenProgramsUseIt) {
  Screen s(3, 20, 10);
  s.feed("$ vi x\r\n");
  s.feed("\x1b[?1049h\x1b[H\x1b[2J~\r\n~\r\n\"x\" [New]");
  TerminalScreen in = s.snapshot(0);
  EXPECT_TRUE(in.alt_screen);
  EXPECT_EQ(in.lines[0], "~");
  EXPECT_EQ(in.lines[2], "\"x\" [New]");
  s.feed("\x1b[?1049l");
  TerminalScreen out = s.snapshot(0);
  EXPECT_FALSE(out.alt_screen);
  EXPECT_EQ(out.lines[0], "$ vi x");
  EXPECT_EQ(out.lines[1], "");
}

TEST(ScreenTest, LongOutputGoesToABoundedScrollback) {
  Screen s(4, 20, 50);
  for (int i = 0; i < 100; ++i) s.feed("line " + std::to_string(i) + "\r\n");
  TerminalScreen v = s.snapshot(1000);
  // The last line is the empty one the cursor is on; 97..99 above it.
  EXPECT_EQ(v.lines[0], "line 97");
  EXPECT_EQ(v.lines[2], "line 99");
  EXPECT_EQ(v.lines[3], "");
  ASSERT_EQ(v.scrollback.size(), 50u);
  EXPECT_EQ(v.scrollback.front(), "line 47");
  EXPECT_EQ(v.scrollback.back(), "line 96");
  TerminalScreen last2 = s.snapshot(2);
  ASSERT_EQ(last2.scrollback.size(), 2u);
  EXPECT_EQ(last2.scrollback[0], "line 95");
}

TEST(ScreenTest, AlternateScreenDoesNotFillTheScrollback) {
  Screen s(3, 20, 50);
  s.feed("\x1b[?1049h");
  for (int i = 0; i < 20; ++i) s.feed("x\r\n");
  EXPECT_TRUE(s.snapshot(100).scrollback.empty());
}

TEST(ScreenTest, TitleFromOsc) {
  Screen s(3, 20, 10);
  s.feed("\x1b]0;first title\x07");
  EXPECT_EQ(s.snapshot(0).title, "first title");
  s.feed("\x1b]2;second\x1b\\");
  EXPECT_EQ(s.snapshot(0).title, "second");
  EXPECT_EQ(s.snapshot(0).lines[0], "");
}

TEST(ScreenTest, Utf8AndWideCharacters) {
  Screen s(2, 20, 10);
  s.feed("gr\xc3\xbc\xc3\x9f \xe4\xb8\xad\xe6\x96\x87!");  // "grüß 中文!"
  TerminalScreen v = s.snapshot(0);
  EXPECT_EQ(v.lines[0], "gr\xc3\xbc\xc3\x9f \xe4\xb8\xad\xe6\x96\x87!");
  EXPECT_EQ(v.cursor_col, 10);  // two wide characters take two columns each
}

TEST(ScreenTest, SplitEscapeSequenceAcrossFeeds) {
  Screen s(2, 20, 10);
  s.feed("ab\x1b[");
  s.feed("1;1HZ");
  EXPECT_EQ(s.snapshot(0).lines[0], "Zb");
}

TEST(ScreenTest, ResizeKeepsContentAndClamps) {
  Screen s(4, 20, 10);
  s.feed("hello\r\nworld");
  s.resize(6, 40);
  TerminalScreen v = s.snapshot(0);
  EXPECT_EQ(v.rows, 6);
  EXPECT_EQ(v.cols, 40);
  ASSERT_EQ(v.lines.size(), 6u);
  EXPECT_EQ(v.lines[0], "hello");
  s.feed("\x1b[1;35Hfar");
  EXPECT_EQ(s.snapshot(0).lines[0], "hello" + std::string(29, ' ') + "far");
  s.resize(0, 5000);
  EXPECT_EQ(s.snapshot(0).rows, 1);
  EXPECT_EQ(s.snapshot(0).cols, 1000);
}

TEST(ScreenTest, CursorVisibility) {
  Screen s(2, 10, 0);
  s.feed("\x1b[?25l");
  EXPECT_FALSE(s.snapshot(0).cursor_visible);
  s.feed("\x1b[?25h");
  EXPECT_TRUE(s.snapshot(0).cursor_visible);
}

TEST(ScreenTest, RepliesToQueries) {
  Screen s(5, 20, 0);
  s.feed("\x1b[3;4H\x1b[6n");  // where is the cursor?
  EXPECT_EQ(s.take_replies(), "\x1b[3;4R");
  EXPECT_EQ(s.take_replies(), "");
}

}  // namespace
}  // namespace pvs::terminal
