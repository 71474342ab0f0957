// E2B's template build calls (controller/service/e2b/templates): the bodies the `e2b` SDK
// 2.51.0 sends (taken from its Template.toJSON), the mapping onto a recipe, the upload archive
// reader, the replies, and the build table with a stand-in builder.
#include <gtest/gtest.h>

#include <Poco/DeflatingStream.h>
#include <Poco/JSON/Parser.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <sstream>
#include <thread>

#include "e2b/templates/tar_reader.h"
#include "e2b/templates/template_builds.h"
#include "e2b/templates/template_wire.h"

namespace pvs::service::e2b {
namespace {

// A ustar archive: {name, content, type} entries, then the two end blocks.
struct Entry {
  Entry(std::string n, std::string c, char t = '0', std::string l = "")
      : name(std::move(n)), content(std::move(c)), type(t), linkname(std::move(l)) {}
  std::string name, content;
  char type;
  std::string linkname;
};
std::string tar(const std::vector<Entry>& entries, bool gzip = true) {
  std::string out;
  for (const auto& e : entries) {
    char h[512] = {};
    std::memcpy(h, e.name.data(), std::min<std::size_t>(e.name.size(), 100));
    std::snprintf(h + 100, 8, "%07o", e.type == '5' ? 0755 : 0640);
    std::snprintf(h + 108, 8, "%07o", 0);
    std::snprintf(h + 116, 8, "%07o", 0);
    std::snprintf(h + 124, 12, "%011o", static_cast<unsigned>(e.content.size()));
    std::snprintf(h + 136, 12, "%011o", 0);
    h[156] = e.type;
    std::memcpy(h + 157, e.linkname.data(), std::min<std::size_t>(e.linkname.size(), 100));
    std::memcpy(h + 257, "ustar", 6);
    std::memcpy(h + 263, "00", 2);
    std::memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (unsigned char c : h) sum += c;
    std::snprintf(h + 148, 8, "%06o", sum);
    out.append(h, 512);
    out += e.content;
    out.append((512 - e.content.size() % 512) % 512, '\0');
  }
  out.append(1024, '\0');
  if (!gzip) return out;
  std::ostringstream z;
  Poco::DeflatingOutputStream deflate(z, Poco::DeflatingStreamBuf::STREAM_GZIP);
  deflate << out;
  deflate.close();
  return z.str();
}

const std::string kHashA(64, 'a'), kHashB(64, 'b');

BuildStart start(std::string_view body) {
  auto s = parse_build_start(body);
  EXPECT_TRUE(s) << s.error().message;
  return s ? *s : BuildStart{};
}

std::string step(std::string_view type, std::vector<std::string> args,
                 const std::string& hash = "") {
  std::string s = "{\"type\":\"" + std::string(type) + "\",\"args\":[";
  for (std::size_t i = 0; i < args.size(); ++i) s += (i ? ",\"" : "\"") + args[i] + "\"";
  s += "],\"force\":false";
  if (!hash.empty()) s += ",\"filesHash\":\"" + hash + "\"";
  return s + "}";
}

std::string body(const std::vector<std::string>& steps, std::string_view from = "e2bdev/base") {
  std::string s = "{\"steps\":[";
  for (std::size_t i = 0; i < steps.size(); ++i) s += (i ? "," : "") + steps[i];
  return s + "],\"force\":false,\"fromImage\":\"" + std::string(from) + "\"}";
}

UploadLookup uploads(std::map<std::string, std::string> by_hash) {
  return [by_hash](const std::string& h) -> std::optional<std::string> {
    auto it = by_hash.find(h);
    if (it == by_hash.end()) return std::nullopt;
    return it->second;
  };
}

void expect_400(const ApiResult<MappedBuild>& r, std::string_view text) {
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().status, 400);
  EXPECT_NE(r.error().message.find(text), std::string::npos) << r.error().message;
}

TEST(TemplateWire, RequestAsTheSdkSendsIt) {
  auto r = parse_build_request(R"({"name":"py-tools"})");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->name, "py-tools");
  EXPECT_EQ(parse_build_request(R"({"name":"py-tools:default","tags":["default"]})")->name,
            "py-tools");
  EXPECT_EQ(parse_build_request(R"({"alias":"old-style","cpuCount":2,"memoryMB":1024})")->name,
            "old-style");
  for (const char* bad : {R"({"name":"py:v1"})", R"({"name":"py","tags":["prod"]})",
                          R"({"name":"Py"})", R"({"name":"base"})", R"({})",
                          R"({"name":"py","extra":1})", R"({"name":"py","cpuCount":0})"}) {
    auto e = parse_build_request(bad);
    ASSERT_FALSE(e) << bad;
    EXPECT_EQ(e.error().status, 400);
  }
  auto reply = Poco::JSON::Parser().parse(build_request_reply("py", "b-1"));
  auto o = reply.extract<Poco::JSON::Object::Ptr>();
  EXPECT_EQ(o->getValue<std::string>("templateID"), "py");
  EXPECT_EQ(o->getValue<std::string>("buildID"), "b-1");
  EXPECT_EQ(o->getArray("names")->getElement<std::string>(0), "py");
}

TEST(TemplateWire, StartBodyAsTheSdkSendsIt) {
  // Template().fromBaseImage().copy(...).aptInstall([...], {noInstallRecommends}).setEnvs()
  // .runCmd(), as Template.toJSON prints it.
  auto s = start(body({step("COPY", {"hello.txt", "/opt/x/", "", ""}, kHashA),
                       step("RUN", {"apt-get update && DEBIAN_FRONTEND=noninteractive "
                                    "DEBCONF_NOWARNINGS=yes apt-get install -y "
                                    "--no-install-recommends curl git",
                                    "root"}),
                       step("ENV", {"FOO", "bar"}), step("RUN", {"echo hi"})}));
  ASSERT_EQ(s.steps.size(), 4u);
  EXPECT_EQ(s.from_image, "e2bdev/base");
  EXPECT_EQ(s.steps[0].files_hash, kHashA);
  for (const char* bad :
       {R"({"fromImage":"a","fromTemplate":"b"})", R"({"steps":[]})",
        R"({"fromImage":"e2bdev/base","startCmd":1})", R"({"fromImage":"x","readyCmd":[]})",
        R"({"fromImage":"x","fromImageRegistry":{"type":"registry"}})", R"([1])", "{",
        R"({"fromImage":"x","steps":[{"args":[]}]})", R"({"fromImage":"x","steps":[1]})",
        R"({"fromImage":"x","steps":[{"type":"RUN","args":[1]}]})",
        R"({"fromImage":"x","steps":[{"type":"COPY","filesHash":"zz"}]})",
        R"({"fromImage":"x","steps":[{"type":"RUN","what":1}]})"}) {
    auto e = parse_build_start(bad);
    ASSERT_FALSE(e) << bad;
    EXPECT_EQ(e.error().status, 400);
  }
}

TEST(TemplateWire, MapsStepsOntoARecipeInOrder) {
  auto archive_a = tar({{"hello.txt", "hello\n"}});
  auto archive_b = tar({{"d", "", '5'}, {"d/a.txt", "A"}, {"d/sub/b.txt", "B"}}, false);
  auto r = map_build(
      "tools",
      start(body({step("COPY", {"hello.txt", "/opt/x/", "", ""}, kHashA),
                  step("COPY", {"d", "/opt/d", "root", "0600"}, kHashB), step("ENV", {"A", "1"}),
                  step("RUN", {"apt-get update && DEBIAN_FRONTEND=noninteractive "
                               "DEBCONF_NOWARNINGS=yes apt-get install -y curl",
                               "root"}),
                  step("ENV", {"B", "it's"}), step("RUN", {"echo $A $B"}), step("USER", {"root"}),
                  step("RUN", {"false", "root"})})),
      uploads({{kHashA, archive_a}, {kHashB, archive_b}}));
  ASSERT_TRUE(r) << r.error().message;
  const auto& rec = r->recipe;
  EXPECT_EQ(rec.name, "tools");
  EXPECT_EQ(rec.base, "");
  EXPECT_EQ(rec.packages, std::vector<std::string>{"curl"});
  ASSERT_EQ(rec.files.size(), 3u);
  std::map<std::string, const TemplateRecipe::File*> files;
  for (const auto& f : rec.files) files[f.path] = &f;
  ASSERT_TRUE(files.count("/opt/x/hello.txt"));
  EXPECT_EQ(files["/opt/x/hello.txt"]->content, "hello\n");
  EXPECT_EQ(files["/opt/x/hello.txt"]->mode, 0640u);
  ASSERT_TRUE(files.count("/opt/d/a.txt") && files.count("/opt/d/sub/b.txt"));
  EXPECT_EQ(files["/opt/d/sub/b.txt"]->content, "B");
  EXPECT_EQ(files["/opt/d/a.txt"]->mode, 0600u);
  EXPECT_EQ(rec.env, (std::map<std::string, std::string>{{"A", "1"}, {"B", "it's"}}));
  // Each RUN in its own shell, after the ENV before it, behind a marker naming its step.
  EXPECT_EQ(rec.script,
            "export A='1'\nexport B='it'\\''s'\n"
            "printf '%s\\n' '--> step 6: RUN echo $A $B'\n/bin/sh -c 'echo $A $B'\n"
            "printf '%s\\n' '--> step 8: RUN false'\n/bin/sh -c 'false'\n");
  EXPECT_EQ(r->first_file_step, 1);
  EXPECT_EQ(r->first_package_step, 4);
  // A single file to a path that is not a directory is that path.
  auto one = map_build("t", start(body({step("COPY", {"./hello.txt", "/etc/motd"}, kHashA)})),
                       uploads({{kHashA, archive_a}}));
  ASSERT_TRUE(one) << one.error().message;
  EXPECT_EQ(one->recipe.files.at(0).path, "/etc/motd");
}

// setStartCmd('python3 -m http.server 8000', waitForPort(8000)) and setReadyCmd alone, as the
// SDK's serialize() sends them: the recipe's start and ready (a ready check's timeout is the
// default: the SDK has none to give).
TEST(TemplateWire, StartAndReadyCommandsAreTheRecipes) {
  auto none = uploads({});
  auto both = map_build("web",
                        start(R"({"fromImage":"e2bdev/base","steps":[],"force":false,)"
                              R"("startCmd":"python3 -m http.server 8000",)"
                              R"("readyCmd":"[ -n \"$(ss -Htuln sport = :8000)\" ]"})"),
                        none);
  ASSERT_TRUE(both) << both.error().message;
  EXPECT_EQ(both->recipe.start, "python3 -m http.server 8000");
  EXPECT_EQ(both->recipe.ready, R"x([ -n "$(ss -Htuln sport = :8000)" ])x");
  EXPECT_EQ(both->recipe.ready_timeout_seconds, 0);
  auto ready = map_build("w", start(R"({"fromTemplate":"base","readyCmd":"sleep 1"})"), none);
  ASSERT_TRUE(ready) << ready.error().message;
  EXPECT_EQ(ready->recipe.start, "");
  EXPECT_EQ(ready->recipe.ready, "sleep 1");
  // A digest of its own: the same steps with another start command build another template.
  EXPECT_NE(both->recipe.digest(),
            map_build("web", start(R"({"fromImage":"e2bdev/base","startCmd":"true"})"), none)
                ->recipe.digest());
  expect_400(map_build("w", start(R"({"fromTemplate":"base","startCmd":"  "})"), none),
             "start: is empty");
  auto big = parse_build_start(R"({"fromTemplate":"base","startCmd":")" +
                               std::string(kMaxServiceCommand + 1, 'x') + "\"}");
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("startCmd: must be a string of at most 64 KiB"),
            std::string::npos);
}

TEST(TemplateWire, BasesServedAndRefused) {
  auto none = uploads({});
  for (const char* image : {"e2bdev/base", "debian:stable", "debian"})
    EXPECT_EQ(map_build("t", start(body({}, image)), none)->recipe.base, "") << image;
  auto from = map_build("t", start(R"({"fromTemplate":"py-tools"})"), none);
  ASSERT_TRUE(from);
  EXPECT_EQ(from->recipe.base, "py-tools");
  EXPECT_EQ(map_build("t", start(R"({"fromTemplate":"base"})"), none)->recipe.base, "");
  expect_400(map_build("t", start(body({}, "python:3")), none), "fromBaseImage()");
  expect_400(map_build("t", start(body({}, "debian:bullseye")), none), "not supported");
  expect_400(map_build("t", start(R"({"fromTemplate":"Not_A_Name"})"), none), "fromTemplate");
}

// Template().fromDockerfile("FROM debian:stable\nENV A=1\nCOPY hello.txt /opt/\nRUN echo hi")
// as the SDK sends it: USER root and WORKDIR / first, USER user and WORKDIR /home/user last.
TEST(TemplateWire, ADockerfileAsTheSdkParsesIt) {
  auto r = map_build(
      "t",
      start(R"({"steps":[{"type":"USER","args":["root"],"force":false},)"
            R"({"type":"WORKDIR","args":["/"],"force":false},)"
            R"({"type":"ENV","args":["A","1"],"force":false},)"
            R"({"type":"COPY","args":["hello.txt","/opt/","",""],"force":false,"filesHash":")" +
            kHashA +
            R"("},{"type":"RUN","args":["echo hi"],"force":false},)"
            R"({"type":"USER","args":["user"],"force":false},)"
            R"({"type":"WORKDIR","args":["/home/user"],"force":false}],)"
            R"("force":false,"fromImage":"debian:stable"})"),
      uploads({{kHashA, tar({{"hello.txt", "x"}})}}));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->recipe.files.at(0).path, "/opt/hello.txt");
  EXPECT_EQ(r->recipe.script,
            "export A='1'\nmkdir -p '/' && cd '/'\nprintf '%s\\n' '--> step 5: RUN echo hi'\n"
            "/bin/sh -c 'echo hi'\n");
  // A relative destination is below the WORKDIR before it, as in Docker.
  auto rel = map_build("t",
                       start(body({step("WORKDIR", {"/srv"}), step("WORKDIR", {"app"}),
                                   step("COPY", {"hello.txt", "conf/"}, kHashA)})),
                       uploads({{kHashA, tar({{"hello.txt", "x"}})}}));
  ASSERT_TRUE(rel) << rel.error().message;
  EXPECT_EQ(rel->recipe.files.at(0).path, "/srv/app/conf/hello.txt");
}

TEST(TemplateWire, RefusesWhatTheRecipeCannotDoSaying) {
  auto a = tar({{"hello.txt", "x"}});
  auto with_a = uploads({{kHashA, a}});
  // Out of the recipe's order.
  expect_400(
      map_build(
          "t", start(body({step("RUN", {"echo 1"}), step("COPY", {"hello.txt", "/opt/"}, kHashA)})),
          with_a),
      "step 2 (COPY): comes after step 1: pve-sandbox's recipe copies files first");
  expect_400(map_build("t",
                       start(body({step("RUN", {"echo"}),
                                   step("RUN", {"apt-get update && DEBIAN_FRONTEND=noninteractive "
                                                "DEBCONF_NOWARNINGS=yes apt-get install -y git",
                                                "root"})})),
                       with_a),
             "step 2 (RUN): comes after step 1");
  expect_400(map_build("t", start(body({step("EXPOSE", {"80"})})), with_a),
             "step 1 (EXPOSE): not supported");
  expect_400(map_build("t", start(body({step("USER", {"user"}), step("RUN", {"id"})})), with_a),
             "step 2 (RUN): runs as \"user\" (step 1's USER): template steps run as root here");
  expect_400(
      map_build(
          "t",
          start(body({step("USER", {"user"}), step("COPY", {"hello.txt", "/o/", "", ""}, kHashA)})),
          with_a),
      "runs as \"user\"");
  expect_400(map_build("t", start(body({step("WORKDIR", {"rel"})})), with_a),
             "a relative directory needs one before it");
  expect_400(map_build("t", start(body({step("RUN", {"id", "user"})})), with_a),
             "run as root here");
  expect_400(map_build("t", start(body({step("ENV", {"1X", "v"})})), with_a),
             "not a variable name");
  expect_400(map_build("t", start(body({step("COPY", {"hello.txt", "rel/"}, kHashA)})), with_a),
             "absolute path");
  expect_400(map_build("t", start(body({step("COPY", {"*.txt", "/opt/"}, kHashA)})), with_a),
             "wildcard");
  expect_400(map_build("t", start(body({step("COPY", {"hello.txt", "/o/"}, kHashB)})), with_a),
             "were not uploaded");
  expect_400(map_build("t", start(body({step("COPY", {"nope", "/o/"}, kHashA)})), with_a),
             "holds no file of \"nope\"");
  expect_400(
      map_build("t", start(body({step("COPY", {"hello.txt", "/o/", "bob"}, kHashA)})), with_a),
      "belong to root");
  // Many steps of one archive: the recipe's bounds hold after each.
  std::vector<std::string> many;
  for (int i = 0; i <= 64; ++i)
    many.push_back(step("COPY", {"hello.txt", "/o/" + std::to_string(i)}, kHashA));
  expect_400(map_build("t", start(body(many)), with_a), "step 65 (COPY): the steps copy more");
  // The recipe's own rules: a package name, the same path twice is the last copy's.
  expect_400(map_build("t",
                       start(body({step("RUN", {"apt-get update && DEBIAN_FRONTEND=noninteractive"
                                                " DEBCONF_NOWARNINGS=yes apt-get install -y Bad!",
                                                "root"})})),
                       with_a),
             "not a Debian package name");
}

// copy(..., '/etc/apt/') and aptInstall: refused as a recipe with such a file and packages is
// (the packages step's egress is the base's apt sources alone); either step alone is served.
TEST(TemplateWire, RefusesACopyUnderEtcAptWithAptInstall) {
  auto with_a = uploads({{kHashA, tar({{"sources.list", "deb http://any.example/ ./\n"}})}});
  const std::string apt = step("RUN", {"apt-get update && DEBIAN_FRONTEND=noninteractive "
                                       "DEBCONF_NOWARNINGS=yes apt-get install -y git",
                                       "root"});
  expect_400(
      map_build(
          "t",
          start(body({step("COPY", {"sources.list", "/opt/"}, kHashA),
                      step("COPY", {"sources.list", "/etc/apt/sources.list.d/"}, kHashA), apt})),
          with_a),
      "step 3 (RUN): step 2 copies \"/etc/apt/sources.list.d/sources.list\", which is "
      "under /etc/apt/: a recipe with packages installs them from the base's own apt "
      "sources");
  expect_400(
      map_build("t",
                start(body({step("WORKDIR", {"/etc"}),
                            step("COPY", {"sources.list", "./apt/apt.conf.d/99x"}, kHashA), apt})),
                with_a),
      "step 3 (RUN): step 2 copies");
  EXPECT_TRUE(map_build(
      "t", start(body({step("COPY", {"sources.list", "/etc/apt/sources.list"}, kHashA)})), with_a));
  EXPECT_TRUE(map_build("t", start(body({apt})), with_a));
}

TEST(TemplateWire, UploadArchivesAreReadStrictly) {
  auto ok = read_upload_tar(tar({{"./a/b.txt", "hi"}, {"a", "", '5'}}), {});
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->at(0).path, "a/b.txt");
  EXPECT_EQ(ok->at(0).content, "hi");
  EXPECT_TRUE(ok->at(1).directory);
  auto refused = [](const std::string& data, std::string_view why) {
    auto r = read_upload_tar(data, {4, 16});
    ASSERT_FALSE(r) << why;
    EXPECT_NE(r.error().message.find(why), std::string::npos) << r.error().message;
  };
  refused(tar({{"link", "", '2', "/etc/shadow"}}), "only regular files and directories");
  refused(tar({{"hard", "", '1', "x"}}), "only regular files and directories");
  refused(tar({{"../escape", "x"}}), "without \"..\"");
  refused(tar({{"/abs", "x"}}), "must be relative");
  refused(tar({{"a", "x"}, {"a", "y"}}), "twice");
  refused(tar({{"a", std::string(17, 'x')}}), "more than");
  refused(tar({{"a", ""}, {"b", ""}, {"c", ""}, {"d", ""}, {"e", ""}}), "more than 4 entries");
  refused("\x1f\x8b not gzip", "gzip");
  refused(tar({{"a", "x"}}, false).substr(0, 512), "cut short");
  refused(tar({{"a", "x"}}, false).substr(0, 1024), "cut short");
  auto bad_sum = tar({{"a", "x"}}, false);
  bad_sum[0] = 'b';
  refused(bad_sum, "checksum");
  EXPECT_EQ(normal_relative("./a//b/"), "a/b");
  EXPECT_EQ(normal_relative("."), "");
  EXPECT_FALSE(normal_relative("a/../b"));
}

TEST(TemplateWire, StatusRepliesInTheSdksShape) {
  auto q = parse_status_query({{"logsOffset", "3"}, {"limit", "10"}, {"level", "warn"}});
  ASSERT_TRUE(q);
  EXPECT_EQ(q->offset, 3u);
  EXPECT_EQ(q->min_level, 2);
  EXPECT_FALSE(parse_status_query({{"logsOffset", "-1"}}));
  EXPECT_FALSE(parse_status_query({{"limit", "1000"}}));
  EXPECT_FALSE(parse_status_query({{"what", "1"}}));
  StatusView v{
      "t", "b", "error", {{0, 1, "line"}}, std::string("step failed"), "3", {{0, 3, "==> failed"}}};
  auto o = Poco::JSON::Parser().parse(build_status_reply(v)).extract<Poco::JSON::Object::Ptr>();
  EXPECT_EQ(o->getValue<std::string>("status"), "error");
  auto entry = o->getArray("logEntries")->getObject(0);
  EXPECT_EQ(entry->getValue<std::string>("timestamp"), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(entry->getValue<std::string>("level"), "info");
  EXPECT_EQ(o->getArray("logs")->size(), 0u);
  EXPECT_EQ(o->getObject("reason")->getValue<std::string>("step"), "3");
  EXPECT_EQ(
      o->getObject("reason")->getArray("logEntries")->getObject(0)->getValue<std::string>("level"),
      "error");
  EXPECT_EQ(marker_step(step_marker(12, "echo")), 12);
  MappedBuild m;
  m.first_file_step = 1;
  m.first_package_step = 2;
  EXPECT_EQ(failed_step(m, "script: exited with 1", 5), "5");
  EXPECT_EQ(failed_step(m, "packages:1: exited with 100", 0), "2");
  EXPECT_EQ(failed_step(m, "files: /x: denied", 0), "1");
  EXPECT_EQ(failed_step(m, "clone: no space", 0), "base");
  EXPECT_TRUE(is_build_id(mint_build_id()));
  EXPECT_FALSE(is_build_id("not-an-id"));
}

TEST(TemplateBuildTable, RequestUploadStartStatus) {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  TemplateBuilds table(
      [&](const TemplateRecipe& r, const BuildOutput& out) -> Result<TemplateBuild> {
        out("==> script");
        out(step_marker(2, "false"));
        out("boom");
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return release; });
        if (r.script.find("false") != std::string::npos)
          return fail(ErrorCode::kInvalidArgument, "script: exited with 1\n...boom");
        return TemplateBuild{};
      });
  EXPECT_EQ(table.upload_link("t", kHashA).error().status, 404);  // no build waits
  auto id = table.request("t");
  ASSERT_TRUE(id);
  auto link = table.upload_link("t", kHashA);
  ASSERT_TRUE(link);
  EXPECT_FALSE(link->present);
  EXPECT_EQ(link->token.size(), 64u);
  EXPECT_TRUE(table.expects(link->token));
  EXPECT_TRUE(table.upload(link->token, tar({{"a", "x"}})));
  EXPECT_FALSE(table.expects(link->token));
  EXPECT_EQ(table.upload(link->token, "again").error().status, 404);  // one upload per link
  EXPECT_TRUE(table.upload_link("t", kHashA)->present);
  EXPECT_TRUE(table.archive("t", kHashA));
  EXPECT_FALSE(table.archive("u", kHashA));

  auto mapped =
      map_build("t", start(body({step("COPY", {"a", "/o/"}, kHashA), step("RUN", {"false"})})),
                [&](const std::string& h) { return table.archive("t", h); });
  ASSERT_TRUE(mapped) << mapped.error().message;
  std::atomic<bool> done{false};
  ASSERT_TRUE(
      table.start("t", *id, *mapped, [&](const MappedBuild&, const Result<TemplateBuild>& r) {
        EXPECT_FALSE(r);
        done = true;
      }));
  EXPECT_EQ(table.start("t", *id, *mapped, nullptr).error().status, 409);
  EXPECT_EQ(table.status("other", *id, {}).error().status, 404);
  EXPECT_EQ(table.status("t", *id, {})->status, "building");
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  while (!done) std::this_thread::yield();
  auto s = table.status("t", *id, {});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->status, "error");
  EXPECT_EQ(s->reason_step, "2");
  EXPECT_NE(s->reason->find("boom"), std::string::npos);
  ASSERT_GE(s->lines.size(), 4u);
  EXPECT_EQ(s->lines[3].message, "boom");
  // Paging as the SDK does it: logsOffset past what it has seen.
  StatusQuery q;
  q.offset = s->lines.size();
  EXPECT_TRUE(table.status("t", *id, q)->lines.empty());
}

TEST(TemplateBuildTable, Bounded) {
  TemplateBuilds::Limits limits;
  limits.max_builds = 2;
  limits.max_upload_bytes = 8;
  TemplateBuilds table([](const TemplateRecipe&, const BuildOutput&) { return TemplateBuild{}; },
                       limits);
  ASSERT_TRUE(table.request("a"));
  ASSERT_TRUE(table.request("b"));
  EXPECT_EQ(table.request("c").error().status, 429);  // two waiting: none can go
  auto link = table.upload_link("a", kHashA);
  ASSERT_TRUE(link);
  EXPECT_EQ(table.upload(link->token, std::string(9, 'x')).error().status, 413);
}

}  // namespace
}  // namespace pvs::service::e2b
