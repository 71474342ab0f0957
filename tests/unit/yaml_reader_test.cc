#include "pvesandbox/common/yaml_reader.h"

#include <gtest/gtest.h>

namespace pvs::yaml {
namespace {

struct Sample {
  std::string name = "default";
  int port = 80;
  bool tls = false;
  std::vector<std::string> tags;
  std::string mode = "fast";
};

Status read(std::string_view text, Sample* s) {
  auto doc = Document::parse(text, "s.yaml");
  if (!doc) return fail(doc.error());
  Map top = doc->root();
  top.string("name", &s->name);
  top.integer("port", &s->port, 1, 65535);
  top.string_list("tags", &s->tags);
  Map opts = top.map("options");
  opts.boolean("tls", &s->tls);
  opts.one_of("mode", &s->mode, {"fast", "safe"});
  if (s->tls && s->port == 80) opts.fail("tls", "needs a port other than 80");
  if (auto st = opts.finish(); !st) return st;
  return top.finish();
}

std::string error_of(std::string_view text) {
  Sample s;
  auto st = read(text, &s);
  return st ? "" : st.error().message;
}

TEST(YamlReader, TypedValuesAndDefaults) {
  Sample s;
  ASSERT_TRUE(read("port: 8443\ntags: [a, b]\noptions:\n  tls: yes\n  mode: safe\n", &s));
  EXPECT_EQ(s.name, "default");  // absent: the default stays
  EXPECT_EQ(s.port, 8443);
  EXPECT_TRUE(s.tls);
  EXPECT_EQ(s.tags, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(s.mode, "safe");
  Sample nulls;
  ASSERT_TRUE(read("name:\nport:\n", &nulls));  // null: the default too
  EXPECT_EQ(nulls.port, 80);
}

TEST(YamlReader, ErrorsNameTheFileTheLineAndTheKeyPath) {
  EXPECT_EQ(error_of("port: 0\n"), "s.yaml:1: port: must be an integer in [1, 65535], not \"0\"");
  EXPECT_EQ(error_of("name: x\noptions:\n  mode: slow\n"),
            "s.yaml:3: options.mode: must be one of fast, safe, not \"slow\"");
  EXPECT_EQ(error_of("options:\n  tls: maybe\n"),
            "s.yaml:2: options.tls: must be true or false, not \"maybe\"");
  EXPECT_EQ(error_of("options:\n  tls: true\n"),
            "s.yaml:2: options.tls: needs a port other than 80");
  EXPECT_EQ(error_of("tags: x\n"), "s.yaml:1: tags: must be a list of strings");
  EXPECT_EQ(error_of("options: 3\n"), "s.yaml:1: options: must be a mapping");
  EXPECT_EQ(error_of("port: 1\nportt: 2\n"), "s.yaml:2: portt: unknown key");
  EXPECT_EQ(error_of("options:\n  colour: red\n"), "s.yaml:2: options.colour: unknown key");
  EXPECT_EQ(error_of("port: 1\nport: 2\n"), "s.yaml:2: duplicate key \"port\"");
  EXPECT_EQ(error_of("options:\n  tls: true\n  tls: false\n"), "s.yaml:3: duplicate key \"tls\"");
  EXPECT_EQ(error_of(""), "s.yaml: the file is empty");
  EXPECT_EQ(error_of("- a\n- b\n"), "s.yaml:1: the top level must be a mapping");
  EXPECT_NE(error_of("port: [1\n").find("s.yaml:"), std::string::npos);
}

TEST(YamlReader, TheFirstErrorWinsAndLaterReadsChangeNothing) {
  Sample s;
  auto st = read("port: x\ntags: [a]\n", &s);
  ASSERT_FALSE(st);
  EXPECT_TRUE(s.tags.empty());
  EXPECT_NE(st.error().message.find("port"), std::string::npos);
}

TEST(YamlReader, ListsOfMappingsAndRequiredKeys) {
  auto doc = Document::parse("items:\n  - id: 1\n  - {}\n", "l.yaml");
  ASSERT_TRUE(doc);
  Map top = doc->root();
  auto items = top.maps("items");
  ASSERT_EQ(items.size(), 2u);
  int id = 0;
  items[0].integer("id", &id, 0, 9, Need::kRequired);
  EXPECT_EQ(id, 1);
  items[1].integer("id", &id, 0, 9, Need::kRequired);
  auto st = top.finish();
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().message, "l.yaml:3: items[1].id: is required");
}

// A mapping keyed by names the operator chooses (egress.lists): its keys in document order,
// each read as a map, unknown keys below still refused.
TEST(YamlReader, KeysOfAMappingInDocumentOrder) {
  auto doc = Document::parse("lists:\n  zeta: {n: 1}\n  alpha: {n: 2}\n", "k.yaml");
  ASSERT_TRUE(doc) << doc.error().message;
  Map top = doc->root();
  Map lists = top.map("lists");
  EXPECT_EQ(lists.keys(), (std::vector<std::string>{"zeta", "alpha"}));
  int sum = 0;
  for (const auto& k : lists.keys()) {
    int n = 0;
    Map m = lists.map(k);
    m.integer("n", &n, 0, 9);
    sum += n;
    EXPECT_TRUE(m.finish());
  }
  EXPECT_EQ(sum, 3);
  EXPECT_TRUE(top.map("absent").keys().empty());
  EXPECT_TRUE(lists.finish());
  EXPECT_TRUE(top.finish());
}

}  // namespace
}  // namespace pvs::yaml
