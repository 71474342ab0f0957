// terminal_safe (text.h): what a terminal would act on is shown as an escape instead.
#include <gtest/gtest.h>

#include <Poco/JSON/Parser.h>

#include "pvesandbox/common/text.h"

namespace pvs {
namespace {

TEST(TerminalSafe, PlainTextPassesUnchanged) {
  EXPECT_EQ(terminal_safe("apt-get install -y python3 'a\\nb' | tee /tmp/x"),
            "apt-get install -y python3 'a\\nb' | tee /tmp/x");
  EXPECT_EQ(terminal_safe("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80"),
            "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80");  // é, 日本, an emoji
  EXPECT_EQ(terminal_safe(""), "");
}

// The forgery of #32: a carriage return and "erase line" make a terminal show only what follows.
TEST(TerminalSafe, ControlsBecomeVisible) {
  EXPECT_EQ(terminal_safe("curl x|sh #\r\x1b[2Kls -l"), "curl x|sh #\\r\\x1b[2Kls -l");
  EXPECT_EQ(terminal_safe("a\nb\tc\x7f\x01"), "a\\nb\\tc\\x7f\\x01");
  EXPECT_EQ(terminal_safe(std::string_view("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(terminal_safe("\xc2\x9b"
                          "31m"),
            "\\u009b31m");                          // C1 CSI, UTF-8 encoded
  EXPECT_EQ(terminal_safe("\xc2\x85"), "\\u0085");  // NEL
}

TEST(TerminalSafe, FormatCharactersBecomeVisible) {
  EXPECT_EQ(terminal_safe("ls \xe2\x80\xae"
                          "txt.exe"),
            "ls \\u202etxt.exe");  // RLO
  EXPECT_EQ(terminal_safe("a\xe2\x80\x8b"
                          "b"),
            "a\\u200bb");                                                    // zero width space
  EXPECT_EQ(terminal_safe("\xe2\x81\xa6x\xe2\x81\xa9"), "\\u2066x\\u2069");  // LRI .. PDI
  EXPECT_EQ(terminal_safe("\xef\xbb\xbf"
                          "x"),
            "\\ufeffx");                                        // BOM
  EXPECT_EQ(terminal_safe("\xe2\x80\xa8"), "\\u2028");          // line separator
  EXPECT_EQ(terminal_safe("\xc2\xad"), "\\u00ad");              // soft hyphen
  EXPECT_EQ(terminal_safe("\xf3\xa0\x80\x81"), "\\U000e0001");  // language tag
  // Neighbours of the ranges stay: U+2010 (hyphen), U+2030 (per mille), U+00AE.
  EXPECT_EQ(terminal_safe("\xe2\x80\x90\xe2\x80\xb0\xc2\xae"), "\xe2\x80\x90\xe2\x80\xb0\xc2\xae");
}

TEST(TerminalSafe, MalformedUtf8IsShownByteByByte) {
  EXPECT_EQ(terminal_safe("a\xff"
                          "b"),
            "a\\xffb");
  EXPECT_EQ(terminal_safe("\xc0\x9b"), "\\xc0\\x9b");                    // an overlong ESC
  EXPECT_EQ(terminal_safe("\xed\xa0\x80"), "\\xed\\xa0\\x80");           // a surrogate
  EXPECT_EQ(terminal_safe("\xe2\x80"), "\\xe2\\x80");                    // cut short
  EXPECT_EQ(terminal_safe("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
}

TEST(TerminalSafe, LinesKeepNewlinesAndTabs) {
  EXPECT_EQ(terminal_safe("-a\n+b\tc\r\x1b[2K", TerminalText::kLines), "-a\n+b\tc\\r\\x1b[2K");
}

TEST(TerminalSafe, JsonStaysValidAndMeansTheSame) {
  std::string doc = "{\"summary\":\"x\x7f\xc2\x9b\xe2\x80\xae\xf3\xa0\x80\x81y\"}\n";
  std::string safe = terminal_safe(doc, TerminalText::kJson);
  EXPECT_EQ(safe, "{\"summary\":\"x\\u007f\\u009b\\u202e\\udb40\\udc01y\"}\n");
  auto o = Poco::JSON::Parser().parse(safe).extract<Poco::JSON::Object::Ptr>();
  EXPECT_EQ(o->getValue<std::string>("summary"), "x\x7f\xc2\x9b\xe2\x80\xae\xf3\xa0\x80\x81y");
}

}  // namespace
}  // namespace pvs
