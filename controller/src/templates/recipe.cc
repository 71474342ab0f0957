// Template recipes (template_recipe.h): the strict parser, validation, canonical form, digest.
#include "pvesandbox/template_recipe.h"

#include <Poco/Base64Decoder.h>
#include <Poco/Base64Encoder.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Stringifier.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "lifecycle/core.h"
#include "pvesandbox/common/text.h"
#include "pvesandbox/common/yaml_reader.h"

namespace pvs {

namespace {

bool valid_package(std::string_view p) {
  // Debian policy: lower case letters, digits, + - . ; at least two, alphanumeric first. An
  // architecture qualifier (":amd64") and a version pin ("=1.2-3") are allowed too.
  if (p.size() < 2 || p.size() > 128) return false;
  if (!std::isalnum(static_cast<unsigned char>(p[0]))) return false;
  return std::all_of(p.begin(), p.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.' ||
           c == ':' || c == '=' || c == '~';
  });
}

bool valid_env_name(std::string_view n) {
  if (n.empty() || n.size() > 128 || std::isdigit(static_cast<unsigned char>(n[0]))) return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

std::string valid_path_error(const std::string& p) {
  if (p.empty() || p[0] != '/') return "must be an absolute path";
  if (p.size() > 4096) return "is longer than 4096 bytes";
  if (p.find('\0') != std::string::npos || p.find('\n') != std::string::npos)
    return "holds a NUL or newline";
  if (p.back() == '/') return "names a directory";
  std::istringstream parts(p);
  for (std::string part; std::getline(parts, part, '/');)
    if (part == "..") return "holds \"..\"";
  return "";
}

std::string base64(std::string_view data) {
  std::ostringstream out;
  Poco::Base64Encoder enc(out);
  enc.rdbuf()->setLineLength(0);
  enc.write(data.data(), static_cast<std::streamsize>(data.size()));
  enc.close();
  return out.str();
}

// Read in blocks: the decoder's error on bad input sets badbit here (istream::read catches
// it), where a string built from istreambuf_iterators leaked its buffer when it threw.
bool unbase64(const std::string& text, std::string* out) {
  try {
    std::istringstream in(text);
    Poco::Base64Decoder dec(in);
    std::string decoded;
    char block[4096];
    while (dec.read(block, sizeof block), dec.gcount() > 0) decoded.append(block, dec.gcount());
    if (dec.bad()) return false;
    *out = std::move(decoded);
    return true;
  } catch (...) {
    return false;
  }
}

// One entry of `files`: path, mode and exactly one of content, content_base64, src.
void read_file_entry(yaml::Map& f, const std::string& dir, TemplateRecipe::File* file) {
  std::string content, b64, src, mode;
  f.string("path", &file->path, yaml::Need::kRequired);
  f.string("content", &content);
  f.string("content_base64", &b64);
  f.string("src", &src);
  f.string("mode", &mode);
  if (!f.ok()) return;
  if (auto why = valid_path_error(file->path); !why.empty()) return f.fail("path", why);
  int given = f.has("content") + f.has("content_base64") + f.has("src");
  if (given != 1) return f.fail("path", "give exactly one of content, content_base64 and src");
  if (!mode.empty()) {
    char* end = nullptr;
    unsigned long m = std::strtoul(mode.c_str(), &end, 8);
    if (mode.size() > 4 || *end != '\0' || m > 07777)
      return f.fail("mode", "must be octal, e.g. \"0644\"");
    file->mode = static_cast<std::uint32_t>(m);
  }
  if (f.has("content_base64") && !unbase64(b64, &file->content))
    return f.fail("content_base64", "is not base64");
  if (f.has("content")) file->content = std::move(content);
  if (!f.has("src")) return;
  if (dir.empty()) return f.fail("src", "files by name need the recipe's directory (sandboxctl)");
  if (src.empty() || src[0] == '/' || src.find("..") != std::string::npos)
    return f.fail("src", "must be a path below the recipe's directory");
  std::ifstream in(dir + "/" + src, std::ios::binary);
  if (!in) return f.fail("src", "cannot read " + pvs::quoted(src));
  file->content.assign(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

bool is_apt_config_path(std::string_view path) {
  std::vector<std::string_view> parts;
  while (!path.empty() && parts.size() < 2) {
    auto slash = path.find('/');
    auto part = path.substr(0, slash);
    if (!part.empty() && part != ".") parts.push_back(part);
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
  }
  return parts.size() == 2 && parts[0] == "etc" && parts[1] == "apt";
}

bool valid_template_name(std::string_view name) {
  if (name.empty() || name.size() > 32 || !(name[0] >= 'a' && name[0] <= 'z')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

std::string TemplateRecipe::canonical() const {
  Poco::JSON::Object o(Poco::JSON_PRESERVE_KEY_ORDER);
  o.set("name", name);
  o.set("base", base);
  std::vector<std::string> sorted = packages;
  std::sort(sorted.begin(), sorted.end());
  Poco::JSON::Array pk;
  for (auto& p : sorted) pk.add(p);
  o.set("packages", pk);
  std::vector<const File*> fs;
  for (auto& f : files) fs.push_back(&f);
  std::sort(fs.begin(), fs.end(), [](auto* a, auto* b) { return a->path < b->path; });
  Poco::JSON::Array fa;
  for (auto* f : fs) {
    Poco::JSON::Object e(Poco::JSON_PRESERVE_KEY_ORDER);
    e.set("path", f->path);
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", f->mode);
    e.set("mode", std::string(mode));
    e.set("content_base64", base64(f->content));
    fa.add(e);
  }
  o.set("files", fa);
  Poco::JSON::Object env_o(Poco::JSON_PRESERVE_KEY_ORDER);
  for (auto& [k, v] : env) env_o.set(k, v);  // std::map: sorted
  o.set("env", env_o);
  o.set("script", script);
  // Each only when given: older recipes keep their digest, and the canonical form is a recipe
  // parse_recipe takes (no empty command, no timeout without a ready check).
  if (!start.empty()) o.set("start", start);
  if (!ready.empty()) {
    o.set("ready", ready);
    o.set("ready_timeout_seconds",
          ready_timeout_seconds > 0 ? ready_timeout_seconds : kDefaultReadyTimeout);
  }
  if (disk_gb > 0) o.set("disk_gb", disk_gb);
  std::ostringstream out;
  Poco::JSON::Stringifier::condense(o, out);
  return out.str();
}

std::string TemplateRecipe::digest() const {
  return lifecycle::sha256_hex(canonical());
}

Result<TemplateRecipe> parse_recipe(std::string_view text, std::string_view source,
                                    const std::string& dir) {
  auto doc = yaml::Document::parse(text, source);
  if (!doc) return fail(ErrorCode::kInvalidArgument, doc.error().message);
  yaml::Map top = doc->root();
  TemplateRecipe r;
  top.string("name", &r.name, yaml::Need::kRequired);
  if (top.ok() && !valid_template_name(r.name))
    top.fail("name", "must be 1-32 of [a-z0-9-], a letter first");
  top.string("base", &r.base);
  if (top.ok() && !r.base.empty() && !valid_template_name(r.base) &&
      !std::all_of(r.base.begin(), r.base.end(), [](char c) { return c >= '0' && c <= '9'; }))
    top.fail("base", "must be a VMID or a template's name");
  top.string_list("packages", &r.packages);
  std::set<std::string> seen;
  for (auto& p : r.packages) {
    if (!top.ok()) break;
    if (!valid_package(p)) top.fail("packages", "not a Debian package name: " + pvs::quoted(p));
    if (!seen.insert(p).second) top.fail("packages", "named twice: " + pvs::quoted(p));
  }
  auto files = top.maps("files");
  if (files.size() > kMaxRecipeFiles)
    top.fail("files", "at most " + std::to_string(kMaxRecipeFiles) + " files");
  std::size_t bytes = 0;
  std::set<std::string> paths;
  for (auto& f : files) {
    if (!top.ok()) break;
    TemplateRecipe::File file;
    read_file_entry(f, dir, &file);
    if (!f.ok()) break;
    if (!paths.insert(file.path).second) f.fail("path", "copied twice: " + pvs::quoted(file.path));
    if (f.ok() && !r.packages.empty() && is_apt_config_path(file.path))
      f.fail("path", pvs::quoted(file.path) + " " + std::string(kAptFilesWithPackages));
    bytes += file.content.size();
    if (bytes > kMaxRecipeBytes)
      f.fail("path", "the files hold more than " + std::to_string(kMaxRecipeBytes >> 20) + " MiB");
    f.finish();
    r.files.push_back(std::move(file));
  }
  top.string_map("env", &r.env);
  for (auto& [k, v] : r.env) {
    if (!top.ok()) break;
    if (!valid_env_name(k)) top.fail("env", "not a variable name: " + pvs::quoted(k));
    if (v.find('\0') != std::string::npos || v.find('\n') != std::string::npos)
      top.fail("env", pvs::quoted(k) + " holds a NUL or newline");
  }
  top.string("script", &r.script);
  if (r.script.size() > (1 << 20)) top.fail("script", "is longer than 1 MiB");
  top.string("start", &r.start);
  top.string("ready", &r.ready);
  for (auto [key, command] : {std::pair{"start", &r.start}, std::pair{"ready", &r.ready}}) {
    if (!top.ok()) break;
    if (command->size() > kMaxServiceCommand)
      top.fail(key, "is longer than " + std::to_string(kMaxServiceCommand >> 10) + " KiB");
    else if (command->find('\0') != std::string::npos)
      top.fail(key, "holds a NUL");
    else if (top.has(key) && command->find_first_not_of(" \t\n") == std::string::npos)
      top.fail(key, "is empty");
  }
  top.integer("ready_timeout_seconds", &r.ready_timeout_seconds, 1, kMaxReadyTimeout);
  if (top.ok() && top.has("ready_timeout_seconds") && r.ready.empty())
    top.fail("ready_timeout_seconds", "needs a ready check (ready)");
  top.integer("pool_size", &r.pool_size, 0, kMaxRecipePool);
  top.integer("disk_gb", &r.disk_gb, 1, kMaxRecipeDisk);
  if (auto st = top.finish(); !st) return fail(ErrorCode::kInvalidArgument, st.error().message);
  return r;
}

}  // namespace pvs
