// A template recipe: what a custom template holds on top of its base (docs/templates.md).
//
//   name: py-tools                  # 1-32 of [a-z0-9-]: how creates and pools name it
//   base: 9000                      # a VMID or a custom template's name; absent: the node's
//   packages: [python3-venv, git]   # Debian packages, from the node's package mirror
//   files:                          # copied in before the script runs (none under /etc/apt/
//                                   #   with packages: is_apt_config_path)
//     - {path: /etc/motd, content: "hello\n"}
//     - {path: /opt/app/requirements.txt, src: requirements.txt, mode: "0600"}
//   env: {PIP_NO_CACHE_DIR: "1"}    # defaults every login shell of a sandbox gets
//   script: |                       # run as root (sh -e), after packages and files
//     pip3 install -r /opt/app/requirements.txt
//   start: python3 -m http.server 8000   # a service every sandbox of it runs, supervised
//   ready: '[ -n "$(ss -Htln sport = :8000)" ]'  # handed out once this exits 0
//   ready_timeout_seconds: 60       # how long the ready check may take (default 120)
//   pool_size: 2                    # hot pool members to keep of it (0: none)
//   disk_gb: 3                      # its disk holds at least this (the base's grown if smaller)
//
// `src` is a file next to the recipe (read when parsed from a file); `content_base64` carries
// binary content (what sandboxctl sends for a `src` file over the API). The digest is SHA-256
// over the canonical form (name, base, packages sorted, files sorted by path with their modes
// and contents, env, script; start when given, ready and ready_timeout_seconds when ready is
// given; disk_gb when given): equal digests build equal templates, so a second build of the
// same recipe is a cache hit. pool_size is not part of it (it changes no byte of the image).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "pvesandbox/common/error.h"

namespace pvs {

inline constexpr std::size_t kMaxRecipeFiles = 64;
inline constexpr std::size_t kMaxRecipeBytes = 8 << 20;  // all file contents together
inline constexpr int kMaxRecipePool = 64;
inline constexpr int kDefaultReadyTimeout = 120;  // seconds
inline constexpr int kMaxReadyTimeout = 1800;
inline constexpr std::size_t kMaxServiceCommand = 64 << 10;  // bytes of start, of ready
inline constexpr int kMaxRecipeDisk = 65536;                 // GiB

struct TemplateRecipe {
  struct File {
    std::string path;  // absolute, no "..", no NUL
    std::string content;
    std::uint32_t mode = 0644;
  };
  std::string name;
  std::string base;  // "": the node's template; digits: a VMID; else a custom template's name
  std::vector<std::string> packages;
  std::vector<File> files;
  std::map<std::string, std::string> env;
  std::string script;
  // The template's service (docs/templates.md, "Start and ready"): `start` runs, supervised,
  // from every boot of a sandbox of the template; the sandbox is handed out (a create's
  // reply, a hot pool member, a resume) once `ready` exits 0, tried until
  // ready_timeout_seconds (0: kDefaultReadyTimeout) pass. Either may be given alone. Shell
  // commands, run as the sandbox's SSH user in its home by `sh -l`.
  std::string start;
  std::string ready;
  int ready_timeout_seconds = 0;
  int pool_size = 0;
  // The least disk the template has, in GiB: a base with a smaller disk is grown to it before
  // the packages step (a larger one is kept). 0: the base's size.
  int disk_gb = 0;

  // The canonical form: one JSON object, keys and lists in a fixed order, contents base64.
  std::string canonical() const;
  // SHA-256 of canonical() without pool_size, lower-case hex (64 digits).
  std::string digest() const;
};

// True for /etc/apt and what lies under it (empty and "." parts ignored: "/etc//./apt/x" too).
// A recipe with packages may not copy files there: the packages step uses the base's apt
// sources and configuration as they are, and its egress is fixed from them before any file is
// copied (docs/templates.md). E2B's COPY steps are refused the same way.
bool is_apt_config_path(std::string_view path);
// The refusal's reason, for the recipe parser and E2B's steps alike.
inline constexpr std::string_view kAptFilesWithPackages =
    "is under /etc/apt/: a recipe with packages installs them from the base's own apt sources "
    "and configuration, never a file of the recipe (build a base template with the sources "
    "first, then the packages on it)";

// Template names, as recipes and creates give them: 1-32 of [a-z0-9-], a letter first.
bool valid_template_name(std::string_view name);

// Parses and validates a recipe (YAML, or JSON, which is YAML too). `source` names it in
// errors ("recipe.yaml:4: files[0].path: must be absolute"); `dir`: where `src` files are read
// from ("": `src` is refused, as for a recipe sent over the API). kInvalidArgument on any error.
Result<TemplateRecipe> parse_recipe(std::string_view text, std::string_view source,
                                    const std::string& dir = "");

}  // namespace pvs
