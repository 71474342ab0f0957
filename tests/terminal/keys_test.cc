// Key names -> bytes.
#include "../../controller/src/terminal/keys.h"

#include <gtest/gtest.h>

#include "pvesandbox/terminal.h"

namespace pvs::terminal {
namespace {

std::string bytes(std::string_view name) {
  auto r = key_bytes(name);
  EXPECT_TRUE(r) << name << ": " << r.error().message;
  return r ? *r : std::string();
}

TEST(KeysTest, NamedKeys) {
  EXPECT_EQ(bytes("Enter"), "\r");
  EXPECT_EQ(bytes("Tab"), "\t");
  EXPECT_EQ(bytes("Escape"), "\x1b");
  EXPECT_EQ(bytes("Backspace"), "\x7f");
  EXPECT_EQ(bytes("Up"), "\x1b[A");
  EXPECT_EQ(bytes("Down"), "\x1b[B");
  EXPECT_EQ(bytes("Right"), "\x1b[C");
  EXPECT_EQ(bytes("Left"), "\x1b[D");
  EXPECT_EQ(bytes("Home"), "\x1b[H");
  EXPECT_EQ(bytes("End"), "\x1b[F");
  EXPECT_EQ(bytes("PageUp"), "\x1b[5~");
  EXPECT_EQ(bytes("PageDown"), "\x1b[6~");
  EXPECT_EQ(bytes("Insert"), "\x1b[2~");
  EXPECT_EQ(bytes("Delete"), "\x1b[3~");
  EXPECT_EQ(bytes("F1"), "\x1bOP");
  EXPECT_EQ(bytes("F4"), "\x1bOS");
  EXPECT_EQ(bytes("F5"), "\x1b[15~");
  EXPECT_EQ(bytes("F12"), "\x1b[24~");
  for (auto name : fixed_key_names()) EXPECT_FALSE(bytes(name).empty()) << name;
}

TEST(KeysTest, ControlKeys) {
  EXPECT_EQ(bytes("C-a"), "\x01");
  EXPECT_EQ(bytes("C-c"), "\x03");
  EXPECT_EQ(bytes("C-d"), "\x04");
  EXPECT_EQ(bytes("C-z"), "\x1a");
  EXPECT_EQ(bytes("C-C"), "\x03");
  EXPECT_EQ(bytes("C-["), "\x1b");
  EXPECT_EQ(bytes("C-\\"), "\x1c");
  EXPECT_EQ(bytes("C-]"), "\x1d");
  EXPECT_EQ(bytes("C-@"), std::string(1, '\0'));
}

TEST(KeysTest, MetaKeys) {
  EXPECT_EQ(bytes("M-x"),
            "\x1b"
            "x");
  EXPECT_EQ(bytes("M-."), "\x1b.");
  EXPECT_EQ(bytes("M-Enter"), "\x1b\r");
  EXPECT_EQ(bytes("M-C-x"), "\x1b\x18");
  EXPECT_EQ(bytes("M-\xc3\xbc"), "\x1b\xc3\xbc");
}

TEST(KeysTest, UnknownNamesAreNamedInTheError) {
  for (std::string_view bad :
       {"", "enter", "F13", "F0", "C-", "C-1", "C-ab", "M-", "M-xy", "Ctrl-c", "Up "}) {
    auto r = key_bytes(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message.find("\"" + std::string(bad) + "\""), std::string::npos)
        << r.error().message;
  }
}

TEST(KeysTest, EncodeInputItems) {
  auto r = encode_terminal_input(
      {TerminalInput::text("ls -l"), TerminalInput::key("Enter"), TerminalInput::key("C-d")});
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, "ls -l\r\x04");
  auto bad = encode_terminal_input({TerminalInput::text("x"), TerminalInput::key("Nope")});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("Nope"), std::string::npos);
}

}  // namespace
}  // namespace pvs::terminal
