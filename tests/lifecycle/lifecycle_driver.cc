// A controller that never stops: creates and destroys sandboxes at random on a stack made by
// pvs::test::Stack, from several threads at once, until it is killed. The SIGKILL-restart
// test kills it at random points.
//
//   lifecycle_driver <pvesim port> <pvesim fingerprint> <stack dir> <netns 0|1> <seed> [threads]
//                    [warm pool size] [hot pool size]
//   lifecycle_driver <pvesim port> <pvesim fingerprint> <stack dir> <netns 0|1> build <recipe>
//     builds the template of the recipe file (its clean command: none), each line of output on
//     stdout; the template test kills it mid-build.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "pvesandbox/manager.h"
#include "support/stack_fixture.h"

int main(int argc, char** argv) {
  if (argc < 6 || argc > 9) {
    std::fprintf(stderr,
                 "usage: lifecycle_driver PORT FINGERPRINT DIR NETNS SEED [THREADS [WARM_POOL "
                 "[HOT_POOL]]]\n");
    return 2;
  }
  auto config = pvs::test::Stack::config_for(std::stoi(argv[1]), argv[2], argv[3],
                                             std::string(argv[4]) == "1");
  if (std::string(argv[5]) == "build" && argc == 7) {
    config.template_clean_command.clear();
    std::ifstream in(argv[6]);
    std::stringstream text;
    text << in.rdbuf();
    auto recipe = pvs::parse_recipe(text.str(), argv[6]);
    if (!recipe) {
      std::fprintf(stderr, "driver: %s\n", recipe.error().message.c_str());
      return 1;
    }
    auto manager = pvs::Manager::open(config);
    if (!manager) {
      std::fprintf(stderr, "driver: %s\n", manager.error().message.c_str());
      return 1;
    }
    auto built = (*manager)->build_template(*recipe, [](std::string_view line) {
      std::fprintf(stdout, "%.*s\n", static_cast<int>(line.size()), line.data());
      std::fflush(stdout);
    });
    std::printf("%s\n", built ? "built" : built.error().message.c_str());
    return built ? 0 : 1;
  }
  unsigned seed = static_cast<unsigned>(std::stoul(argv[5]));
  int threads = argc >= 7 ? std::stoi(argv[6]) : 1;
  if (argc >= 8) config.warm_pool = std::stoi(argv[7]);
  if (argc >= 9 && std::stoi(argv[8]) > 0) {
    pvs::HotPoolProfile hot;
    hot.name = "hot";
    hot.size = std::stoi(argv[8]);
    config.hot_pools.push_back(hot);
  }
  auto manager = pvs::Manager::open(config);
  if (!manager) {
    std::fprintf(stderr, "driver: open: %s\n", manager.error().message.c_str());
    return 1;
  }
  std::mutex out_mu;
  // One line per event, written whole: the test counts "begin" lines (operations begun,
  // finished or cut by the kill) and "create"/"destroy" lines (operations finished).
  auto say = [&](const std::string& line) {
    std::lock_guard lock(out_mu);
    std::fputs((line + "\n").c_str(), stdout);
    std::fflush(stdout);
  };
  auto work = [&](unsigned worker) {
    std::mt19937 rng(seed + worker);
    for (;;) {
      auto live = (*manager)->list();
      bool create = live.size() < 2 || (live.size() < 6 && rng() % 2 == 0);
      if (create) {
        say("begin create");
        pvs::CreateOptions o;
        o.internet = rng() % 2 == 0;
        auto sb = (*manager)->create(o);
        say("create " + (sb ? (*sb)->id() : sb.error().message));
      } else {
        auto& victim = live[rng() % live.size()];
        say("begin destroy");
        auto r = (*manager)->destroy_by_id(victim.id);
        say("destroy " + victim.id + " " + (r ? "ok" : r.error().message));
      }
    }
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(work, static_cast<unsigned>(i));
  work(0);  // never returns: the process ends by SIGKILL
}
