// Custom templates (zero-duration tasks): the build time of a small recipe next to its peer, a
// plain create + destroy of the default template (clone, start, SSH: what a build does before
// its steps); and time to first command on a hot pool of the custom template next to a hot pool
// of the default one (target: the same within noise), each a claim + `true` + destroy, the two
// alternated.
//   netns: the recipe is two files and a script (the stand-in shares the host's file system)
//   lxc:   real containers with the node's resolver; the recipe also points apt at the bench's
//          own mirror (tests/lxc/apt-repo.sh, served as deb.test) and installs a package
//          through the build's egress allowlist, and sets an env default
//
//   lifecycle_template_bench [iterations=20] [netns|lxc]
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "bench_args.h"
#include "manager_testing.h"
#include "stack_loop.h"

namespace {

using pvs::bench::Clock;
using pvs::bench::ms_since;
using pvs::bench::p50;

bool wait_ready(pvs::Manager& m, std::size_t pool) {
  for (int i = 0; i < 2000; ++i) {
    if (m.pools().at(pool).ready >= 1) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  pvs::bench::Args args(argc, argv,
                        "lifecycle_template_bench [iterations=20] [netns|lxc]\n"
                        "  recipe build time vs a create; TTFC on a custom vs default hot pool",
                        2);
  int n = args.count(1, 20);
  const std::string backend = argc > 2 ? argv[2] : "netns";
  if (backend != "netns" && backend != "lxc") return std::fprintf(stderr, "netns or lxc\n"), 2;
  pvs::test::StackOptions so;
  so.backend = backend;
  so.egress = backend == "lxc";
  pvs::test::Stack stack(so);
  std::string extra;  // what the recipe holds on real containers only
  if (backend == "lxc") {
    if (std::system((std::string(PVS_APT_REPO_SCRIPT) + " " + stack.www_dir()).c_str()) != 0)
      return 1;
    // On a base whose apt sources are the bench's mirror (built below): a recipe with packages
    // copies nothing under /etc/apt/.
    extra = "packages: [pvs-hello]\nenv: {GREETING: hi}\nbase: mirror\n";
  }
  const std::string work = stack.dir() + "/tpl";
  auto* pw = ::getpwnam(stack.user().c_str());
  if (::mkdir(work.c_str(), 0755) != 0 || !pw || ::chown(work.c_str(), pw->pw_uid, pw->pw_gid))
    return 1;
  auto c = stack.manager_config();
  if (backend == "netns") c.template_clean_command = "true";  // lxc: the default clean
  pvs::HotPoolProfile base_hot, custom_hot;
  base_hot.name = "base-hot";
  base_hot.size = 1;
  custom_hot.name = "custom-hot";
  custom_hot.template_name = "bench";
  custom_hot.size = 1;
  c.hot_pools = {base_hot, custom_hot};
  auto m = pvs::lifecycle::open_manager(c, {});
  if (!m) return std::fprintf(stderr, "open: %s\n", m.error().message.c_str()), 1;
  std::vector<double> build, create, base_ttfc, custom_ttfc;
  if (backend == "lxc") {
    auto mirror = pvs::parse_recipe(
        "name: mirror\nfiles:\n"
        "  - {path: /etc/apt/sources.list, content: \"deb [trusted=yes] http://deb.test/ "
        "./\\n\"}\n",
        "bench");
    if (!mirror) return std::fprintf(stderr, "recipe: %s\n", mirror.error().message.c_str()), 1;
    if (auto b = (*m)->build_template(*mirror, {}); !b)
      return std::fprintf(stderr, "build: %s\n", b.error().message.c_str()), 1;
  }
  for (int i = 0; i < n; ++i) {
    auto r = pvs::parse_recipe("name: bench" + std::to_string(i) + "\nfiles:\n  - {path: " + work +
                                   "/a, content: a}\n  - {path: " + work + "/b/c, content: c}\n" +
                                   extra + "script: echo built >" + work + "/s\n",
                               "bench");
    if (!r) return std::fprintf(stderr, "recipe: %s\n", r.error().message.c_str()), 1;
    auto t = Clock::now();
    auto b = (*m)->build_template(*r, {});
    if (!b) return std::fprintf(stderr, "build: %s\n", b.error().message.c_str()), 1;
    build.push_back(ms_since(t));
    if (!(*m)->delete_template(r->name)) return 1;
    pvs::CreateOptions cold;  // a hostname: never a hot member
    cold.hostname = "peer";
    t = Clock::now();
    auto sb = (*m)->create(cold);
    if (!sb || !(*sb)->destroy()) return 1;
    create.push_back(ms_since(t));
  }
  auto r = pvs::parse_recipe("name: bench\nscript: 'true'\n", "bench");
  if (!r || !(*m)->build_template(*r, {})) return 1;
  for (int i = 0; i < n; ++i) {
    for (int which = 0; which < 2; ++which) {
      if (!wait_ready(**m, static_cast<std::size_t>(which))) return 1;
      pvs::CreateOptions o;
      if (which == 1) o.template_name = "bench";
      auto t = Clock::now();
      auto sb = (*m)->create(o);
      if (!sb || !(*sb)->exec("true", {})) return 1;
      (which == 0 ? base_ttfc : custom_ttfc).push_back(ms_since(t));
      (void)(*sb)->destroy();
    }
  }
  std::printf("%s stack, zero-duration tasks, %d iterations, p50 (ms)\n", backend.c_str(), n);
  std::printf("  build of a small recipe (%s)   %8.2f\n",
              backend == "lxc" ? "files, a package, env, script" : "2 files, script", p50(build));
  std::printf("  peer: create + destroy, default template    %8.2f  (build/create %.2f)\n",
              p50(create), p50(build) / p50(create));
  std::printf("  first command, hot pool of the default      %8.2f\n", p50(base_ttfc));
  std::printf("  first command, hot pool of the custom one   %8.2f  (ratio %.2f)\n",
              p50(custom_ttfc), p50(custom_ttfc) / p50(base_ttfc));
  return 0;
}
