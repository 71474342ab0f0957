// The code interpreter's template on a stack of real containers, as lxc_code_interpreter_test
// and interp_bench (tests/bench/e2b) make it: the test's own package mirror (apt-repo.sh serves
// the packages the fixture lxc_debs fetched as http://deb.test/, StackOptions::egress) is the
// template `mirror`, and the shipped recipe (templates/code-interpreter) is built on it through
// the controller's POST /v1/templates; then the template's hot pool is waited for.
//
//   test::CodeInterpreterBuild b{PVS_CODE_INTERPRETER_DIR, PVS_APT_REPO_SCRIPT, PVS_LXC_DEBS};
//   std::string error = test::build_code_interpreter(stack, port, admin_token, b);
#pragma once

#include <Poco/Base64Encoder.h>

#include <chrono>
#include <cstdint>
#include <sstream>
#include <string>
#include <thread>
#include <utility>

#include "service/support/http_client.h"
#include "service/support/json_object.h"
#include "service/support/node_e2e_support.h"
#include "support/sshd_fixture.h"
#include "support/stack_fixture.h"

namespace pvs::test {

inline constexpr const char* kCodeInterpreterTemplate = "code-interpreter-v1";

struct CodeInterpreterBuild {
  CodeInterpreterBuild(std::string recipes, std::string script, std::string packages, int pool = 1)
      : recipe_dir(std::move(recipes)),
        apt_repo_script(std::move(script)),
        debs(std::move(packages)),
        pool_size(pool) {}
  std::string recipe_dir;       // templates/code-interpreter
  std::string apt_repo_script;  // tests/lxc/apt-repo.sh
  std::string debs;             // the fixture lxc_debs' packages
  int pool_size;                // the recipe's pool_size, replaced
  std::string kernel_config;    // "": none; else /etc/ipython/ipython_kernel_config.py's text
  std::string reply;            // out: the build's reply (its log)
  double seconds = 0;           // out: the build's time
};

inline std::string base64(const std::string& text) {
  std::ostringstream out;
  Poco::Base64Encoder enc(out);
  enc.rdbuf()->setLineLength(0);
  enc << text;
  enc.close();
  return out.str();
}

// The shipped recipe as a client sends it: its src file inline, on the mirror template,
// `pool_size` pool members, and the Jupyter kernels' system-wide configuration `kernel_config`
// when given. "" when the recipe no longer has a line this replaces.
inline std::string code_interpreter_recipe(const std::string& dir, int pool_size,
                                           const std::string& kernel_config = "") {
  std::string recipe = slurp(dir + "/recipe.yaml");
  std::string files = "files:\n";
  if (!kernel_config.empty()) {
    files += "  - path: /etc/ipython/ipython_kernel_config.py\n    content_base64: \"" +
             base64(kernel_config) + "\"\n";
  }
  const std::pair<std::string, std::string> edits[] = {
      {"    src: server.py\n",
       "    content_base64: \"" + base64(slurp(dir + "/server.py")) + "\"\n"},
      {"files:\n", files},
      {"name: code-interpreter-v1\n", "name: code-interpreter-v1\nbase: mirror\n"},
      {"pool_size: 2\n", "pool_size: " + std::to_string(pool_size) + "\n"}};
  for (const auto& [from, to] : edits) {
    auto at = recipe.find(from);
    if (at == std::string::npos) return "";
    recipe.replace(at, from.size(), to);
  }
  return recipe;
}

// The ready members of hot pool `name` (GET /v1/pools, an admin token).
inline int pool_ready(std::uint16_t port, const std::string& token, const std::string& name) {
  auto pools = service::json(http(port, "GET", "/v1/pools", "", token).body)->getArray("pools");
  for (unsigned k = 0; pools && k < pools->size(); ++k) {
    if (pools->getObject(k)->getValue<std::string>("name") == name)
      return pools->getObject(k)->getValue<int>("ready");
  }
  return 0;
}

// A template built on the stack's package mirror (apt-repo.sh serves `debs` as
// http://deb.test/): the template `mirror`, then `recipe` (its `base: mirror`) through the
// controller on `port` (`token`: an admin's); waits up to 3 minutes for `pool_size` ready
// members of the template `name`. "" or what failed; the build's reply and time in *reply,
// *seconds.
inline std::string build_on_mirror(Stack& stack, std::uint16_t port, const std::string& token,
                                   const std::string& apt_repo_script, const std::string& debs,
                                   const std::string& recipe, const std::string& name,
                                   int pool_size, std::string* reply, double* seconds) {
  auto served = run_captured({apt_repo_script, stack.www_dir(), debs}, stack.dir(), "", {});
  if (served.exit_code != 0) return "apt-repo.sh: " + served.out + served.err;
  auto mirror = http(port, "POST", "/v1/templates",
                     "name: mirror\nfiles:\n  - path: /etc/apt/sources.list\n"
                     "    content: \"deb [trusted=yes] http://deb.test/ ./\\n\"\n",
                     token);
  if (mirror.body.find("\"template\"") == std::string::npos) return "mirror: " + mirror.body;
  auto started = std::chrono::steady_clock::now();
  auto built = http(port, "POST", "/v1/templates", recipe, token);
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  *reply = built.body;
  if (built.body.find("\"template\"") == std::string::npos) return "build: " + built.body;
  for (int i = 0; i < 1800 && pool_ready(port, token, name) < pool_size; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (pool_ready(port, token, name) < pool_size)
    return "the pool of " + name + " did not fill in 3 minutes";
  return "";
}

// Serves the mirror, builds `mirror` and code-interpreter-v1 through the controller on `port`
// (`token`: an admin's), and waits up to 3 minutes for the pool to be full. "" or what failed.
inline std::string build_code_interpreter(Stack& stack, std::uint16_t port,
                                          const std::string& token, CodeInterpreterBuild& b) {
  std::string recipe = code_interpreter_recipe(b.recipe_dir, b.pool_size, b.kernel_config);
  if (recipe.empty()) return b.recipe_dir + "/recipe.yaml: not the recipe this expects";
  return build_on_mirror(stack, port, token, b.apt_repo_script, b.debs, recipe,
                         kCodeInterpreterTemplate, b.pool_size, &b.reply, &b.seconds);
}

}  // namespace pvs::test
