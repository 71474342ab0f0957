// Template recipes (template_recipe.h): parsing, validation with clear errors, the digest.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "core.h"
#include "pvesandbox/template_recipe.h"

namespace pvs {
namespace {

const char* kFull = R"(name: py-tools
base: "9000"
packages: [python3-venv, git]
files:
  - {path: /etc/motd, content: "hello\n"}
  - {path: /opt/app/bin, content_base64: "AAEC", mode: "0755"}
env: {PIP_NO_CACHE_DIR: "1"}
script: |
  echo hi
pool_size: 2
)";

std::string error_of(std::string_view text, const std::string& dir = "") {
  auto r = parse_recipe(text, "r.yaml", dir);
  return r ? "" : r.error().message;
}

TEST(TemplateRecipe, ParsesEveryField) {
  auto r = parse_recipe(kFull, "r.yaml");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->name, "py-tools");
  EXPECT_EQ(r->base, "9000");
  EXPECT_EQ(r->packages, (std::vector<std::string>{"python3-venv", "git"}));
  ASSERT_EQ(r->files.size(), 2u);
  EXPECT_EQ(r->files[0].content, "hello\n");
  EXPECT_EQ(r->files[0].mode, 0644u);
  EXPECT_EQ(r->files[1].content, std::string("\0\1\2", 3));
  EXPECT_EQ(r->files[1].mode, 0755u);
  EXPECT_EQ(r->env.at("PIP_NO_CACHE_DIR"), "1");
  EXPECT_EQ(r->script, "echo hi\n");
  EXPECT_EQ(r->pool_size, 2);
  EXPECT_EQ(r->digest().size(), 64u);
}

TEST(TemplateRecipe, JsonIsARecipeToo) {
  auto r = parse_recipe(R"({"name":"a1","files":[{"path":"/x","content":"y"}]})", "body");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->files[0].path, "/x");
}

TEST(TemplateRecipe, DigestIsCanonical) {
  auto a = parse_recipe(kFull, "a");
  // Packages and files in another order, another pool size: the same image.
  auto b = parse_recipe(R"(name: py-tools
base: "9000"
packages: [git, python3-venv]
files:
  - {path: /opt/app/bin, content_base64: "AAEC", mode: "755"}
  - {path: /etc/motd, content: "hello\n"}
env: {PIP_NO_CACHE_DIR: "1"}
script: "echo hi\n"
pool_size: 5
)",
                        "b");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->digest(), b->digest());
  auto c = *a;
  c.files[0].content = "hello!\n";  // a copied file's content is part of it
  EXPECT_NE(c.digest(), a->digest());
  c = *a;
  c.files[1].mode = 0700;
  EXPECT_NE(c.digest(), a->digest());
  c = *a;
  c.script += "\n";
  EXPECT_NE(c.digest(), a->digest());
}

// start, ready and ready_timeout_seconds (docs/templates.md, "Start and ready").
TEST(TemplateRecipe, StartAndReadyAreParsedCheckedAndDigested) {
  auto r = parse_recipe(
      "name: web\nstart: python3 -m http.server 8000\n"
      "ready: '[ -n \"$(ss -Htln sport = :8000)\" ]'\nready_timeout_seconds: 30\n",
      "r.yaml");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->start, "python3 -m http.server 8000");
  EXPECT_EQ(r->ready, R"x([ -n "$(ss -Htln sport = :8000)" ])x");
  EXPECT_EQ(r->ready_timeout_seconds, 30);
  auto c = *r;
  c.start += " --bind 127.0.0.1";
  EXPECT_NE(c.digest(), r->digest());
  c = *r;
  c.ready_timeout_seconds = 31;
  EXPECT_NE(c.digest(), r->digest());
  c = *r;  // the default timeout spelt out is the same recipe
  c.ready_timeout_seconds = 0;
  auto d = c;
  d.ready_timeout_seconds = kDefaultReadyTimeout;
  EXPECT_EQ(c.digest(), d.digest());
  // The canonical form is a recipe that parses back to the same digest (the fuzz target's
  // property): with both, with start alone, with ready alone.
  for (const char* text : {"name: a\nstart: x\nready: y\nready_timeout_seconds: 9\n",
                           "name: a\nstart: x\n", "name: a\nready: y\n"}) {
    auto one = parse_recipe(text, "r.yaml");
    ASSERT_TRUE(one) << one.error().message;
    auto back = parse_recipe(one->canonical(), "canonical");
    ASSERT_TRUE(back) << text << ": " << back.error().message;
    EXPECT_EQ(back->digest(), one->digest()) << text;
  }
  // A recipe without either keeps the canonical form (and digest) it had before they existed.
  auto plain = parse_recipe(kFull, "a");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->canonical().find("start"), std::string::npos);
  EXPECT_EQ(plain->canonical().find("ready"), std::string::npos);

  EXPECT_NE(error_of("name: a\nstart: ' '").find("start: is empty"), std::string::npos);
  EXPECT_NE(error_of("name: a\nready: ''").find("ready: is empty"), std::string::npos);
  EXPECT_NE(error_of("name: a\nstart: x\nready_timeout_seconds: 5")
                .find("ready_timeout_seconds: needs a ready check"),
            std::string::npos);
  EXPECT_NE(error_of("name: a\nready: x\nready_timeout_seconds: 0").find("ready_timeout"),
            std::string::npos);
  EXPECT_NE(error_of("name: a\nready: x\nready_timeout_seconds: 1801").find("ready_timeout"),
            std::string::npos);
  EXPECT_NE(error_of("name: a\nstart: [x]").find("start"), std::string::npos);
  EXPECT_NE(error_of("name: a\nstart: " + std::string(kMaxServiceCommand + 1, 'x'))
                .find("start: is longer than 64 KiB"),
            std::string::npos);
}

TEST(TemplateRecipe, RefusesWithClearErrors) {
  EXPECT_NE(error_of("files: []").find("name: is required"), std::string::npos);
  EXPECT_NE(error_of("name: Bad_Name").find("name: must be 1-32"), std::string::npos);
  EXPECT_NE(error_of("name: a\nbase: 'x y'").find("base:"), std::string::npos);
  EXPECT_NE(error_of("name: a\npackages: ['rm -rf']").find("not a Debian package"),
            std::string::npos);
  EXPECT_NE(error_of("name: a\npackages: [git, git]").find("named twice"), std::string::npos);
  EXPECT_NE(error_of("name: a\nfiles: [{path: rel, content: x}]")
                .find("files[0].path: must be "
                      "an absolute path"),
            std::string::npos);
  EXPECT_NE(error_of("name: a\nfiles: [{path: /a/../b, content: x}]").find(".."),
            std::string::npos);
  EXPECT_NE(error_of("name: a\nfiles: [{path: /a}]").find("exactly one of"), std::string::npos);
  EXPECT_NE(error_of("name: a\nfiles: [{path: /a, content: x, mode: '9'}]").find("octal"),
            std::string::npos);
  EXPECT_NE(error_of("name: a\nfiles: [{path: /a, src: f}]").find("recipe's directory"),
            std::string::npos);
  EXPECT_NE(error_of("name: a\nfiles: [{path: /a, content: x}, {path: /a, content: y}]")
                .find("copied twice"),
            std::string::npos);
  EXPECT_NE(error_of("name: a\nenv: {'1X': y}").find("not a variable name"), std::string::npos);
  EXPECT_NE(error_of("name: a\npool_size: 99").find("pool_size"), std::string::npos);
  EXPECT_NE(error_of("name: a\nsurprise: 1").find("surprise"), std::string::npos);
  EXPECT_NE(error_of("name: a\nfiles: [{path: /a, content: x, extra: 1}]").find("extra"),
            std::string::npos);
  EXPECT_NE(error_of("name: [").find("r.yaml:"), std::string::npos);
}

// The packages step's egress is the base's apt sources: a recipe with packages copies nothing
// under /etc/apt/ (a sources file would add its host, an apt.conf.d hook run as root with it).
TEST(TemplateRecipe, RefusesFilesUnderEtcAptWithPackages) {
  for (const char* path : {"/etc/apt/sources.list.d/any.list", "/etc/apt/apt.conf.d/99hook",
                           "/etc/apt/sources.list", "/etc//./apt/sources.list", "/etc/apt"}) {
    std::string err = error_of("name: a\npackages: [git]\nfiles: [{path: '" + std::string(path) +
                               "', content: x}]");
    EXPECT_NE(err.find("files[0].path: \"" + std::string(path) + "\" is under /etc/apt/"),
              std::string::npos)
        << path << ": " << err;
    EXPECT_NE(err.find("base's own apt sources"), std::string::npos) << err;
    // Without packages nothing reads them during the build: a file like any other.
    auto plain =
        parse_recipe("name: a\nfiles: [{path: '" + std::string(path) + "', content: x}]", "r.yaml");
    EXPECT_TRUE(plain) << path << ": " << plain.error().message;
  }
  auto near = parse_recipe(
      "name: a\npackages: [git]\nfiles: [{path: /etc/aptitude/x, content: x}, "
      "{path: /opt/etc/apt/x, content: x}, {path: /etc/apt-x, content: x}]",
      "r.yaml");
  EXPECT_TRUE(near) << near.error().message;
  EXPECT_TRUE(is_apt_config_path("/etc/apt/x"));
  EXPECT_TRUE(is_apt_config_path("//etc/./apt//x"));
  EXPECT_FALSE(is_apt_config_path("/etc/aptx/x"));
  EXPECT_FALSE(is_apt_config_path("/etc"));
}

TEST(TemplateRecipe, ReadsSrcFilesFromTheRecipesDirectory) {
  char dir[] = "/tmp/recipe-test-XXXXXX";
  ASSERT_TRUE(::mkdtemp(dir));
  std::ofstream(std::string(dir) + "/req.txt") << "requests\n";
  auto r = parse_recipe("name: a\nfiles: [{path: /opt/req.txt, src: req.txt}]", "r.yaml", dir);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->files[0].content, "requests\n");
  EXPECT_NE(error_of("name: a\nfiles: [{path: /x, src: ../etc/passwd}]", dir).find("below"),
            std::string::npos);
  EXPECT_NE(error_of("name: a\nfiles: [{path: /x, src: missing}]", dir).find("cannot read"),
            std::string::npos);
  std::remove((std::string(dir) + "/req.txt").c_str());
  ::rmdir(dir);
}

TEST(TemplateRecipe, ThePackagesStepMayReachTheMirrorsOfTheAptSources) {
  auto e = lifecycle::apt_mirror_egress(
      "deb http://deb.debian.org/debian bookworm main\n"
      "# deb http://commented.example.org/ x\n"
      "deb [trusted=yes] http://repo.test:8080/debian ./\n"
      "Types: deb\nURIs: https://Security.Debian.org/debian-security\n"
      "deb http://10.0.0.1/debian x\n"
      "deb http://10.1/debian x\n");
  ASSERT_TRUE(e.allowlist());
  // Comments are not sources; an IP address cannot be allowlisted by name and is left out.
  EXPECT_EQ(e.list.names,
            (std::vector<std::string>{"deb.debian.org", "repo.test", "security.debian.org"}));
  EXPECT_EQ(e.list.ports, (std::vector<std::uint16_t>{80, 443, 8080}));
  EXPECT_FALSE(lifecycle::apt_mirror_egress("deb file:/srv/repo ./\n").allowlist());
}

// disk_gb: parsed in its range, part of the digest only when given (older recipes keep theirs),
// and its canonical form parses back to the same digest.
TEST(TemplateRecipe, DiskGbIsParsedCheckedAndDigestedWhenGiven) {
  auto r = parse_recipe("name: big\ndisk_gb: 3\n", "r.yaml");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->disk_gb, 3);
  auto back = parse_recipe(r->canonical(), "canonical");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->digest(), r->digest());
  auto plain = parse_recipe("name: big\n", "r.yaml");
  ASSERT_TRUE(plain);
  EXPECT_NE(plain->digest(), r->digest());
  EXPECT_EQ(plain->canonical().find("disk_gb"), std::string::npos);
  EXPECT_NE(error_of("name: a\ndisk_gb: 0").find("disk_gb"), std::string::npos);
  EXPECT_NE(error_of("name: a\ndisk_gb: 65537").find("disk_gb"), std::string::npos);
  EXPECT_NE(error_of("name: a\ndisk_gb: big").find("disk_gb"), std::string::npos);
}

}  // namespace
}  // namespace pvs
