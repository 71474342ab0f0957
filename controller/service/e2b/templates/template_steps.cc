// The steps of an E2B template build mapped onto a recipe (template_wire.h, map_build). The
// recipe runs its phases in a fixed order: files (and env defaults), then packages, then the
// script (controller/src/templates/build.cc). A build whose steps keep that order maps exactly:
// its RUN steps become the script in their order, each `/bin/sh -c` of its own (a failing one
// ends the build, as a RUN does), with the ENV steps before each RUN exported in it. A build
// that needs another order is refused, saying which step and why.
#include <algorithm>
#include <map>

#include "e2b/base64.h"
#include "e2b/control_wire.h"
#include "e2b/filesystem/files_wire.h"
#include "e2b/templates/tar_reader.h"
#include "e2b/templates/template_wire.h"
#include "http/json.h"
#include "pvesandbox/ssh_session.h"

namespace pvs::service::e2b {

using ssh_detail::shell_quote;  // pvesandbox/ssh_session.h
namespace {

// aptInstall(packages, {noInstallRecommends, fixMissing}) as the SDK 2.51.0 writes it.
constexpr std::string_view kAptPrefix =
    "apt-get update && DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes apt-get install -y ";
constexpr const char* kOrder =
    "pve-sandbox's recipe copies files first, then installs packages, then runs the commands: "
    "order the template's steps copy -> aptInstall -> runCmd (setEnvs anywhere)";

// The packages of aptInstall's command, or nullopt when `command` is not that form.
std::optional<std::vector<std::string>> apt_packages(std::string_view command) {
  if (command.substr(0, kAptPrefix.size()) != kAptPrefix) return std::nullopt;
  command.remove_prefix(kAptPrefix.size());
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < command.size()) {
    auto sp = command.find(' ', i);
    if (sp == std::string_view::npos) sp = command.size();
    std::string word(command.substr(i, sp - i));
    i = sp + 1;
    if (word.empty()) continue;
    if (word == "--no-install-recommends" || word == "--fix-missing") continue;
    if (word[0] == '-') return std::nullopt;
    out.push_back(word);
  }
  if (out.empty()) return std::nullopt;
  return out;
}

ApiError step_error(int n, const BuildStep& s, const std::string& why) {
  return bad_request("step " + std::to_string(n) + " (" + s.type + "): " + why);
}

bool root_user(const std::string& user) {
  return user.empty() || user == "root";
}

// The files of COPY step `n`: its archive's entries under `src`, placed at `dest`.
ApiResult<void> copy_files(int n, const BuildStep& s, const UploadLookup& uploads,
                           const std::string& workdir,
                           std::map<std::string, TemplateRecipe::File>* files) {
  if (s.args.size() < 2 || s.args.size() > 4)
    return tl::unexpected(step_error(n, s, "args must be [src, dest, user, mode]"));
  const std::string& src_arg = s.args[0];
  std::string dest = s.args[1];
  if (s.args.size() > 2 && !root_user(s.args[2]))
    return tl::unexpected(
        step_error(n, s, "user \"" + s.args[2] + "\": copied files belong to root here"));
  std::optional<std::uint32_t> mode;
  if (s.args.size() > 3 && !s.args[3].empty()) {
    const std::string& m = s.args[3];
    if (m.size() > 5 || m.find_first_not_of("01234567") != std::string::npos ||
        std::stoul(m, nullptr, 8) > 07777)
      return tl::unexpected(step_error(n, s, "mode \"" + m + "\" is not an octal mode"));
    mode = static_cast<std::uint32_t>(std::stoul(m, nullptr, 8));
  }
  if (src_arg.find_first_of("*?[") != std::string::npos)
    return tl::unexpected(step_error(n, s,
                                     "a wildcard source is not supported: name the file "
                                     "or directory"));
  auto src = normal_relative(src_arg.empty() ? "." : src_arg);
  if (!src) return tl::unexpected(step_error(n, s, "the source must be a relative path"));
  if (!dest.empty() && dest[0] != '/' && !workdir.empty())
    dest = (workdir == "/" ? "" : workdir) + "/" + dest;  // as WORKDIR makes it
  if (dest.empty() || dest[0] != '/')
    return tl::unexpected(step_error(n, s,
                                     "the destination must be an absolute path (or "
                                     "relative to a setWorkdir before it)"));
  if (s.files_hash.empty()) return tl::unexpected(step_error(n, s, "filesHash is required"));
  auto archive = uploads(s.files_hash);
  if (!archive)
    return tl::unexpected(
        step_error(n, s, "its files (" + s.files_hash.substr(0, 12) + "...) were not uploaded"));
  auto entries = read_upload_tar(*archive, {kMaxRecipeFiles * 4, kMaxRecipeBytes});
  if (!entries)
    return tl::unexpected(step_error(n, s, "the uploaded archive: " + entries.error().message));
  const bool to_dir = dest.back() == '/';
  while (dest.size() > 1 && dest.back() == '/') dest.pop_back();
  std::size_t placed = 0;
  for (const auto& e : *entries) {
    if (e.directory) continue;
    std::string path;
    if (e.path == *src) {  // the source is this file
      auto slash = e.path.rfind('/');
      path = to_dir ? (dest == "/" ? "" : dest) + "/" + e.path.substr(slash + 1) : dest;
    } else if (src->empty() || e.path.rfind(*src + "/", 0) == 0) {  // a file of its directory
      path = (dest == "/" ? "" : dest) + "/" + e.path.substr(src->empty() ? 0 : src->size() + 1);
    } else {
      continue;
    }
    (*files)[path] = TemplateRecipe::File{path, e.content, mode.value_or(e.mode & 07777)};
    ++placed;
  }
  if (placed == 0)
    return tl::unexpected(step_error(n, s, "the archive holds no file of \"" + src_arg + "\""));
  return {};
}

// At most the recipe's files and bytes, checked after each COPY (an archive may be named by
// many steps).
bool within_limits(const std::map<std::string, TemplateRecipe::File>& files) {
  std::size_t bytes = 0;
  for (const auto& [path, f] : files) bytes += f.content.size();
  return files.size() <= kMaxRecipeFiles && bytes <= kMaxRecipeBytes;
}

ApiResult<std::string> base_of(const BuildStart& start) {
  if (!start.from_template.empty()) {
    if (start.from_template == kDefaultTemplate) return std::string();
    if (!valid_template_name(start.from_template))
      return tl::unexpected(bad_request("fromTemplate \"" + start.from_template +
                                        "\": not a template name (1-32 of [a-z0-9-])"));
    return start.from_template;
  }
  static const char* kDefaults[] = {"e2bdev/base", "debian", "debian:stable", "debian:latest"};
  for (const char* d : kDefaults)
    if (start.from_image == d) return std::string();
  return tl::unexpected(
      unsupported("fromImage \"" + start.from_image + "\"",
                  "templates are built on the node's default template (fromBaseImage(), "
                  "fromDebianImage()) or on a custom template (fromTemplate(name))"));
}

// The steps, one by one, into the recipe's parts (map_build).
class StepMapper {
 public:
  explicit StepMapper(const UploadLookup& uploads) : uploads_(uploads) {}

  ApiResult<void> step(int n, const BuildStep& s, MappedBuild* out) {
    if (s.type == "COPY") return copy(n, s, out);
    if (s.type == "ENV") return env(n, s, out);
    if (s.type == "RUN") return run(n, s, out);
    if (s.type == "USER") {
      if (s.args.size() != 1 || !is_user_name(s.args[0]))
        return tl::unexpected(step_error(n, s, "args must be [a user name]"));
      user_ = s.args[0] == "root" ? "" : s.args[0];
      user_step_ = n;
      return {};
    }
    if (s.type == "WORKDIR") {
      if (s.args.size() != 1 || s.args[0].empty() || s.args[0].size() > 4096 ||
          s.args[0].find_first_of(std::string("\0\n", 2)) != std::string::npos)
        return tl::unexpected(step_error(n, s, "args must be [a directory]"));
      const std::string& dir = s.args[0];
      if (dir[0] != '/' && workdir_.empty())
        return tl::unexpected(step_error(n, s, "a relative directory needs one before it"));
      workdir_ = dir[0] == '/' ? dir : (workdir_ == "/" ? "" : workdir_) + "/" + dir;
      return {};
    }
    return tl::unexpected(step_error(n, s,
                                     "not supported by pve-sandbox (served: COPY, ENV, RUN, "
                                     "aptInstall, USER, WORKDIR)"));
  }

  // The recipe as JSON (template_recipe.h's fields), for parse_recipe to validate as any
  // recipe: the steps' parts, and the build's start and ready commands.
  std::string recipe_json(const std::string& name, const std::string& base,
                          const BuildStart& start) const {
    JsonWriter w;
    w.begin_object().key("name").value(name);
    if (!base.empty()) w.key("base").value(base);
    w.key("packages").begin_array();
    for (const auto& p : packages) w.value(p);
    w.end_array().key("files").begin_array();
    for (const auto& [path, f] : files) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", f.mode);
      w.begin_object().key("path").value(path).key("mode").value(mode);
      w.key("content_base64").value(base64_encode(f.content)).end_object();
    }
    w.end_array().key("env").value(env_vars).key("script").value(script);
    if (!start.start_cmd.empty()) w.key("start").value(start.start_cmd);
    if (!start.ready_cmd.empty()) w.key("ready").value(start.ready_cmd);
    return w.end_object().take();
  }

  std::map<std::string, TemplateRecipe::File> files;
  std::map<std::string, std::string> env_vars;
  std::vector<std::string> packages;
  std::string script;

 private:
  ApiResult<void> keep_order(int n, const BuildStep& s, int want) {
    if (want < phase_)
      return tl::unexpected(
          step_error(n, s, "comes after step " + std::to_string(phase_step_) + ": " + kOrder));
    if (want > phase_) phase_ = want, phase_step_ = n;
    return {};
  }
  // A step that would run as the USER set before it: only root runs steps here.
  ApiResult<void> as_root(int n, const BuildStep& s) {
    if (user_.empty()) return {};
    return tl::unexpected(step_error(n, s,
                                     "runs as \"" + user_ + "\" (step " +
                                         std::to_string(user_step_) +
                                         "'s USER): template steps run as root here"));
  }
  ApiResult<void> copy(int n, const BuildStep& s, MappedBuild* out) {
    if (out->first_file_step == 0) out->first_file_step = n;
    ApiResult<void> ok = keep_order(n, s, 0);
    if (ok && (s.args.size() < 3 || s.args[2].empty())) ok = as_root(n, s);
    if (ok) ok = copy_files(n, s, uploads_, workdir_, &files);
    if (ok && !within_limits(files))
      ok = tl::unexpected(step_error(n, s,
                                     "the steps copy more than the recipe's " +
                                         std::to_string(kMaxRecipeFiles) + " files or " +
                                         std::to_string(kMaxRecipeBytes >> 20) + " MiB"));
    for (const auto& [path, f] : files)
      if (ok && apt_copy_step_ == 0 && is_apt_config_path(path))
        apt_copy_step_ = n, apt_copy_path_ = path;
    return ok;
  }
  ApiResult<void> env(int n, const BuildStep& s, MappedBuild* out) {
    if (s.args.empty() || s.args.size() % 2 != 0)
      return tl::unexpected(step_error(n, s, "args must be name, value pairs"));
    for (std::size_t k = 0; k + 1 < s.args.size(); k += 2) {
      if (!is_env_name(s.args[k]))
        return tl::unexpected(step_error(n, s, "\"" + s.args[k] + "\" is not a variable name"));
      env_vars[s.args[k]] = pending_env_[s.args[k]] = s.args[k + 1];
    }
    if (out->first_file_step == 0) out->first_file_step = n;
    return {};
  }
  ApiResult<void> run(int n, const BuildStep& s, MappedBuild* out) {
    if (s.args.empty() || s.args.size() > 2 || s.args[0].empty())
      return tl::unexpected(step_error(n, s, "args must be [command, user]"));
    ApiResult<void> ok;
    if (s.args.size() == 2 && !root_user(s.args[1]))
      return tl::unexpected(
          step_error(n, s, "user \"" + s.args[1] + "\": template commands run as root here"));
    if (s.args.size() < 2 && !(ok = as_root(n, s))) return ok;
    if (auto pkgs = apt_packages(s.args[0])) {
      if (!(ok = keep_order(n, s, 1))) return ok;
      if (apt_copy_step_ > 0)  // the same refusal as parse_recipe's, naming the steps
        return tl::unexpected(step_error(n, s,
                                         "step " + std::to_string(apt_copy_step_) + " copies \"" +
                                             apt_copy_path_ + "\", which " +
                                             std::string(kAptFilesWithPackages)));
      for (auto& p : *pkgs)
        if (std::find(packages.begin(), packages.end(), p) == packages.end()) packages.push_back(p);
      if (out->first_package_step == 0) out->first_package_step = n;
      return {};
    }
    if (!(ok = keep_order(n, s, 2))) return ok;
    for (const auto& [k, v] : pending_env_) script += "export " + k + "=" + shell_quote(v) + "\n";
    pending_env_.clear();
    if (workdir_ != script_dir_) {  // as WORKDIR does: made if missing
      script += "mkdir -p " + shell_quote(workdir_) + " && cd " + shell_quote(workdir_) + "\n";
      script_dir_ = workdir_;
    }
    script += "printf '%s\\n' " + shell_quote(step_marker(n, s.args[0])) + "\n";
    script += "/bin/sh -c " + shell_quote(s.args[0]) + "\n";
    return {};
  }

  const UploadLookup& uploads_;
  std::map<std::string, std::string> pending_env_;  // ENV not yet exported to the script
  int phase_ = 0, phase_step_ = 0;  // 0 files, 1 packages, 2 commands; the step that set it
  std::string user_;                // a USER other than root, and its step
  int user_step_ = 0;
  std::string workdir_, script_dir_;  // WORKDIR, and where the script is
  int apt_copy_step_ = 0;             // the first COPY of a file under /etc/apt/, and the file
  std::string apt_copy_path_;
};

}  // namespace

std::string step_marker(int step, std::string_view command) {
  std::string shown(command.substr(0, 80));
  std::replace(shown.begin(), shown.end(), '\n', ' ');
  return "--> step " + std::to_string(step) + ": RUN " + shown;
}

int marker_step(std::string_view line) {
  constexpr std::string_view kPrefix = "--> step ";
  if (line.substr(0, kPrefix.size()) != kPrefix) return 0;
  line.remove_prefix(kPrefix.size());
  int n = 0;
  for (char c : line.substr(0, 4)) {
    if (c < '0' || c > '9') break;
    n = n * 10 + (c - '0');
  }
  return n;
}

std::string failed_step(const MappedBuild& build, std::string_view error, int last_marker) {
  auto starts = [&](std::string_view p) { return error.substr(0, p.size()) == p; };
  if ((starts("files") || starts("file modes") || starts("packages and env")) &&
      build.first_file_step > 0)
    return std::to_string(build.first_file_step);
  if (starts("packages") && build.first_package_step > 0)
    return std::to_string(build.first_package_step);
  if (starts("script") && last_marker > 0) return std::to_string(last_marker);
  if (starts("clean") || starts("stop") || starts("script") || starts("start and ready"))
    return "finalize";
  return "base";
}

ApiResult<MappedBuild> map_build(const std::string& name, const BuildStart& start,
                                 const UploadLookup& uploads) {
  auto base = base_of(start);
  if (!base) return tl::unexpected(base.error());
  MappedBuild out;
  StepMapper m(uploads);
  for (std::size_t i = 0; i < start.steps.size(); ++i)
    if (auto ok = m.step(static_cast<int>(i) + 1, start.steps[i], &out); !ok)
      return tl::unexpected(ok.error());
  auto recipe = parse_recipe(m.recipe_json(name, *base, start), "the template");
  if (!recipe) return tl::unexpected(bad_request(recipe.error().message));
  out.recipe = std::move(*recipe);
  return out;
}

}  // namespace pvs::service::e2b
