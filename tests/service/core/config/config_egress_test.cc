// controller.yaml's egress section (named allowlists), the per-token caps and the policy's
// egress conditions: parsed, checked where written (file:line), described.
#include <gtest/gtest.h>

#include "core/config/config.h"
#include "service/core/config/config_test_util.h"

namespace pvs::service {
namespace {

using testing::error_of;
using testing::kEnv;
using testing::kHash;

std::string with(const std::string& egress, const std::string& token_extra = "",
                 const std::string& extra = "") {
  return egress + "auth:\n  tokens:\n    - name: ci\n      sha256: " + kHash + "\n" + token_extra +
         "proxmox:\n  url: https://127.0.0.1:8006\n  node: pve\n"
         "  token_id: sandbox@pve!controller\n  token_secret_env: PVS_TEST_SECRET\n"
         "  template_vmid: 9000\n"
         "ssh:\n  host_key_policy: insecure\n" +
         extra;
}

const std::string kLists =
    "egress:\n"
    "  max_names: 8\n"
    "  lists:\n"
    "    python-packages:\n"
    "      names: [pypi.org, files.pythonhosted.org]\n"
    "    git:\n"
    "      names: ['*.github.com', github.com]\n"
    "      ports: [443, 22]\n";

TEST(ConfigEgress, NamedListsAndTokenCaps) {
  auto c = parse_config(with(kLists,
                             "      egress:\n        lists: [python-packages]\n"
                             "        names: ['*.example.com']\n        max_names: 3\n"),
                        "controller.yaml", &kEnv);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->egress.max_names, 8);
  ASSERT_EQ(c->egress.lists.size(), 2u);
  auto& py = c->egress.lists.at("python-packages");
  EXPECT_EQ(py.names, (std::vector<std::string>{"files.pythonhosted.org", "pypi.org"}));
  EXPECT_EQ(py.ports, (std::vector<std::uint16_t>{80, 443}));
  EXPECT_EQ(c->egress.lists.at("git").ports, (std::vector<std::uint16_t>{22, 443}));
  auto& caps = c->tokens[0].egress;
  ASSERT_TRUE(caps.lists && caps.names);
  EXPECT_EQ(*caps.lists, (std::vector<std::string>{"python-packages"}));
  EXPECT_EQ(*caps.names, (std::vector<std::string>{"*.example.com"}));
  EXPECT_EQ(caps.max_names, 3);
  auto text = describe(*c);
  EXPECT_NE(text.find("egress list python-packages: files.pythonhosted.org pypi.org ports 80 443"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("egress caps ci: lists=1 names=1 max_names=3"), std::string::npos) << text;
}

TEST(ConfigEgress, NoSectionMeansNoListsAndNoCaps) {
  auto c = parse_config(with(""), "controller.yaml", &kEnv);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_TRUE(c->egress.lists.empty());
  EXPECT_EQ(c->egress.max_names, 64);
  EXPECT_FALSE(c->tokens[0].egress.lists);
  EXPECT_FALSE(c->tokens[0].egress.names);
}

TEST(ConfigEgress, ErrorsNameTheKey) {
  EXPECT_EQ(error_of(with("egress:\n  lists:\n    Python:\n      names: [pypi.org]\n")),
            "controller.yaml: egress.lists.Python: a list name is 1-64 of [a-z0-9._-], starting "
            "with a letter or digit");
  EXPECT_EQ(error_of(with("egress:\n  lists:\n    py:\n      names: [PyPI.org]\n")),
            "controller.yaml: egress.lists.py.names: egress name \"PyPI.org\" may hold only a-z "
            "0-9 - and dots (lower case) (a lower-case DNS name, or *. and one for its "
            "subdomains)");
  EXPECT_NE(error_of(with("egress:\n  lists:\n    py:\n      names: [203.0.113.11]\n"))
                .find("controller.yaml: egress.lists.py.names: egress name \"203.0.113.11\" is "
                      "an address: egress allowlists are by DNS name"),
            std::string::npos);
  EXPECT_EQ(error_of(with("egress:\n  lists:\n    py:\n      ports: [443]\n")),
            "controller.yaml: egress.lists.py.names: is required (at least one name)");
  EXPECT_EQ(error_of(with("egress:\n  lists:\n    py:\n      names: [a.org]\n      ports: [0]\n")),
            "controller.yaml: egress.lists.py.ports: must be a list of integers in [1, 65535], not "
            "\"0\"");
  EXPECT_EQ(error_of(with("egress:\n  lists:\n    py:\n      names: [a.org]\n      port: [1]\n")),
            "controller.yaml: egress.lists.py.port: unknown key");
  EXPECT_EQ(error_of(with("egress:\n  max_names: 65\n")),
            "controller.yaml: egress.max_names: must be an integer in [1, 64], not \"65\"");
  EXPECT_EQ(error_of(with(kLists, "      egress:\n        lists: [nope]\n")),
            "controller.yaml: auth.tokens[0].egress.lists: no list named \"nope\" in egress.lists");
  EXPECT_EQ(error_of(with(kLists, "      egress:\n        names: ['*.com']\n")),
            "controller.yaml: auth.tokens[0].egress.names: *.com: com is a public suffix (Public "
            "Suffix List, ICANN section): its subdomains belong to different owners; list the "
            "hosts, or a wildcard under one owner's domain (*.example.com)");
  EXPECT_EQ(
      error_of(with(kLists, "", "policy:\n  default:\n    - {action: internet, egress: some}\n")),
      "controller.yaml: policy.default[0].egress: must be one of off, on, allowlist, not "
      "\"some\"");
  EXPECT_EQ(error_of(with(kLists, "",
                          "policy:\n  default:\n    - {action: internet, egress_list: nope}\n")),
            "controller.yaml: policy.default[0].egress_list: no list named \"nope\" in "
            "egress.lists");
  // The line is the key's.
  auto c = parse_config(with("egress:\n  lists:\n    py:\n      names: [PyPI.org]\n"),
                        "controller.yaml", &kEnv);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message.rfind("controller.yaml:4: egress.lists.py.names", 0), 0u)
      << c.error().message;
}

}  // namespace
}  // namespace pvs::service
