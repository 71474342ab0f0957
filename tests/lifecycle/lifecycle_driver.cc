// A controller that never stops: creates and destroys sandboxes at random on a stack made by
// pvs::test::Stack, until it is killed. The SIGKILL-restart test kills it at random points.
//
//   lifecycle_driver <pvesim port> <pvesim fingerprint> <stack dir> <netns 0|1> <seed>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "pvesandbox/manager.h"
#include "support/stack_fixture.h"

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: lifecycle_driver PORT FINGERPRINT DIR NETNS SEED\n");
    return 2;
  }
  auto config = pvs::test::Stack::config_for(std::stoi(argv[1]), argv[2], argv[3],
                                             std::string(argv[4]) == "1");
  std::mt19937 rng(static_cast<unsigned>(std::stoul(argv[5])));
  auto manager = pvs::Manager::open(config);
  if (!manager) {
    std::fprintf(stderr, "driver: open: %s\n", manager.error().message.c_str());
    return 1;
  }
  for (unsigned op = 0;; ++op) {
    auto live = (*manager)->list();
    bool create = live.size() < 2 || (live.size() < 6 && rng() % 2 == 0);
    if (create) {
      pvs::CreateOptions o;
      o.internet = rng() % 2 == 0;
      auto sb = (*manager)->create(o);
      std::printf("create %s\n", sb ? (*sb)->id().c_str() : sb.error().message.c_str());
    } else {
      auto& victim = live[rng() % live.size()];
      auto r = (*manager)->destroy_by_id(victim.id);
      std::printf("destroy %s %s\n", victim.id.c_str(), r ? "ok" : r.error().message.c_str());
    }
    std::fflush(stdout);
  }
}
