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
#include <vector>

namespace pvs {

// The labels of a custom template (and of a sandbox made from one: its template's name).
inline constexpr std::string_view kTemplateNameLabel = "pve-sandbox/template-name";
inline constexpr std::string_view kRecipeDigestLabel = "pve-sandbox/recipe-digest";
inline constexpr std::string_view kTemplateBaseLabel = "pve-sandbox/template-base";
inline constexpr std::string_view kTemplatePoolLabel = "pve-sandbox/template-pool";
// The nodes a copy serves: comma-separated names, "*" for every node of the cluster.
inline constexpr std::string_view kTemplateNodesLabel = "pve-sandbox/template-nodes";
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

// A template captured from a sandbox (Manager::capture_template): the token that owns it (the
// only one that creates from it, lists and deletes it) and the sandbox it was taken from.
inline constexpr std::string_view kTemplateOwnerLabel = "pve-sandbox/template-owner";
inline constexpr std::string_view kTemplateSourceLabel = "pve-sandbox/template-source";
// A fork's base (Manager::fork): destroyed once nothing uses it ("1").
inline constexpr std::string_view kTemplateForkLabel = "pve-sandbox/template-fork";

// One node's copy of a custom template, and the nodes that create from it: the node it lives
// on, and on a cluster the nodes that clone it from there with `target` (shared storage).
struct TemplateCopy {
  std::string node;
  int vmid = 0;
  std::string id;     // the id its description carries ("build-...")
  int base_vmid = 0;  // what it was built from on its node
  std::vector<std::string> serves;
};

struct CustomTemplate {
  std::string name;
  std::string digest;  // the recipe's (TemplateRecipe::digest)
  std::string node;    // where its first copy lives (copies[0])
  int vmid = 0;        // the first copy's
  std::string id;      // the first copy's description id ("build-...")
  int base_vmid = 0;   // what the first copy was built from
  int pool_size = 0;   // the recipe's pool_size
  std::int64_t created_at = 0;
  int in_use = 0;                    // live sandboxes made from it (Manager::custom_templates)
  std::vector<TemplateCopy> copies;  // per node holding one, in the configuration's node order
  std::vector<std::string> nodes;    // every node a create may place it on (the copies' serves)
  // Captured from a sandbox (Manager::capture_template): its owner ("" for an operator's
  // template built from a recipe, which every token may use), the sandbox it was taken from,
  // and whether it is a fork's base.
  std::string owner;
  std::string source;
  bool fork_base = false;
  // The SSH host key its clones start with, where it is not the node template's: a capture's
  // is its sandbox's own key. A create's first connection pins it. Empty: the configured policy.
  std::string host_key;
};

// What a build reports as it goes: one line of a step's output, or a line of its own
// ("==> packages: ...") before each step.
using BuildOutput = std::function<void(std::string_view line)>;

struct TemplateBuild {
  CustomTemplate made;
  bool cached = false;  // a copy of the same digest served every node: nothing was built
  std::vector<std::string> built_on;  // the nodes a copy was built on now (empty: cached)
  std::string log;                    // what the build printed (its last 1 MiB)
  double seconds = 0;                 // wall time of the build
};

}  // namespace pvs
