// Custom templates on a cluster (custom_templates.h): which nodes build a copy, which copy a
// node creates from, and the label that records the nodes a copy serves. Pure functions
// (tests/lifecycle/template_spread_test.cc); spread.cc also holds the hot pool profiles a
// template's pool_size makes (ManagerCore::sync_template_pools).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "pvesandbox/custom_templates.h"

namespace pvs::lifecycle {

// A node that needs a copy, and the VMID its copy is built from there.
struct NodeBase {
  std::string node;
  int base = 0;
};

// The builds that give every node in `unserved` a copy: nodes with the same base share one (a
// base several nodes clone is a template on shared storage, so is a clone of it: it is cloned
// to the others with `target`, as the nodes' own template is), nodes with a base of their own
// get one each. Groups in the order of their first node; a group's first node builds.
std::vector<std::vector<std::string>> build_groups(const std::vector<NodeBase>& unserved);

// The copy a create on `node` clones: the one on it, else one that serves it (null if none).
const TemplateCopy* copy_for(const CustomTemplate& t, std::string_view node);

// kTemplateNodesLabel's value for a copy serving `serves` ("*" when that is every node of
// `all`); empty if it would not fit a label value (128 bytes).
std::string nodes_label(const std::vector<std::string>& serves,
                        const std::vector<std::string>& all);
// Back: the nodes a copy on `home` serves (`home` alone for an absent or empty label).
std::vector<std::string> parse_nodes_label(std::string_view value,
                                           const std::vector<std::string>& all,
                                           const std::string& home);

// The copies in the order of `node_order` (others last), the first copy's node, vmid, id and
// base in the template's own fields, and `nodes`: the nodes the copies serve, in that order.
void finish_template(CustomTemplate& t, const std::vector<std::string>& node_order);

}  // namespace pvs::lifecycle
