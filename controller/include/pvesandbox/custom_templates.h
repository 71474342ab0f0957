// Custom templates: Proxmox templates the controller builds from a recipe (template_recipe.h)
// and creates name (CreateOptions::template_name). Manager::build_template, custom_templates,
// delete_template; docs/templates.md walks an operator through one.
//
// A template is a container converted into a Proxmox template whose description (phase
// "pooled") carries the labels pve-sandbox/template-name, pve-sandbox/recipe-digest and
// pve-sandbox/template-base: Proxmox stays the source of truth, and every reconcile reads the
// catalogue back from there. A build in progress is a container in phase "creating" labelled
// pve-sandbox/build: a controller killed mid-build leaves it to recovery, which destroys it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace pvs {

// The labels of a custom template (and of a sandbox made from one: its template's name).
inline constexpr std::string_view kTemplateNameLabel = "pve-sandbox/template-name";
inline constexpr std::string_view kRecipeDigestLabel = "pve-sandbox/recipe-digest";
inline constexpr std::string_view kTemplateBaseLabel = "pve-sandbox/template-base";
inline constexpr std::string_view kTemplatePoolLabel = "pve-sandbox/template-pool";
// The shell test a build runs before it changes system files (packages, env, the default
// clean): root in a real container, whose init has `container=` in its environment (LXC sets
// it; systemd keeps it) or whose root is another user on the node (an unprivileged container's
// uid map, for an init such as sshd that writes over its environment). A "container" of pvesim's
// netns stand-in shares the host's file system as a user of the host: not root, so nothing
// there is changed.
inline constexpr std::string_view kInsideContainerTest =
    "[ \"$(id -u)\" = 0 ] && { grep -qaz '^container=' /proc/1/environ 2>/dev/null || "
    "awk '$1 == 0 && $2 != 0 { f = 1 } END { exit !f }' /proc/self/uid_map 2>/dev/null; }";

// The label of a container a build is making (its value: the template's name).
inline constexpr std::string_view kTemplateBuildLabel = "pve-sandbox/build";

struct CustomTemplate {
  std::string name;
  std::string digest;  // the recipe's (TemplateRecipe::digest)
  std::string node;    // where it lives
  int vmid = 0;
  std::string id;     // the id its description carries ("build-...")
  int base_vmid = 0;  // what it was built from
  int pool_size = 0;  // the recipe's pool_size
  std::int64_t created_at = 0;
  int in_use = 0;  // live sandboxes made from it (Manager::custom_templates)
};

// What a build reports as it goes: one line of a step's output, or a line of its own
// ("==> packages: ...") before each step.
using BuildOutput = std::function<void(std::string_view line)>;

struct TemplateBuild {
  CustomTemplate made;
  bool cached = false;  // a template of the same digest was there: nothing was built
  std::string log;      // what the build printed (its last 1 MiB)
  double seconds = 0;   // wall time of the build
};

}  // namespace pvs
