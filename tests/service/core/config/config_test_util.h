// What the config tests share: a token hash, the environment with the Proxmox secret, and the
// error of a YAML text without its line number.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <string>

#include "core/config/config.h"

namespace pvs::service::testing {

inline const char* kHash =
    "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";  // "test"
inline const std::map<std::string, std::string> kEnv = {{"PVS_TEST_SECRET", "s3cr3t-uuid"}};

// The message without its line number ("controller.yaml:12: ..." -> "controller.yaml: ...").
inline std::string error_of(const std::string& yaml) {
  auto c = parse_config(yaml, "controller.yaml", &kEnv);
  EXPECT_FALSE(c.has_value()) << yaml;
  return c ? ""
           : std::regex_replace(c.error().message, std::regex("^controller.yaml:[0-9]+:"),
                                "controller.yaml:");
}

// A minimal controller.yaml (tokens ci and ops, an approver) with `policy` as its policy: section.
inline std::string with_policy(const std::string& policy) {
  return std::string("auth:\n  tokens:\n    - {name: ci, sha256: ") + kHash +
         "}\n    - {name: ops, sha256: " + std::string(63, '0') + "1, approver: true}\n" +
         "proxmox:\n  url: https://127.0.0.1:8006\n  node: pve\n"
         "  token_id: sandbox@pve!controller\n  token_secret_env: PVS_TEST_SECRET\n"
         "  template_vmid: 9000\nssh:\n  host_key_policy: insecure\npolicy:\n" +
         policy;
}

}  // namespace pvs::service::testing
