#include "e2b/envd_wire.h"

#include <gtest/gtest.h>

#include "e2b/base64.h"
#include "pvesandbox/ssh_session.h"

namespace pvs::service::e2b {
namespace {

using ssh_detail::shell_quote;  // the one the data plane quotes with

TEST(Base64, RoundTripAndAlphabets) {
  for (std::string s : std::vector<std::string>{"", "f", "fo", "foo", "foob", "fooba", "foobar",
                                                std::string("\0\xff\xfe", 3)})
    EXPECT_EQ(base64_decode(base64_encode(s)), s);
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_decode("Zm8"), "fo");         // unpadded
  EXPECT_EQ(base64_decode("__8="), "\xff\xff");  // URL-safe
  EXPECT_EQ(base64_decode("//8="), "\xff\xff");
  EXPECT_FALSE(base64_decode("Z"));
  EXPECT_FALSE(base64_decode("Zm9v!"));
  EXPECT_FALSE(base64_decode("Z=m8"));
}

// What the SDK's commands.run('echo hi', {envs, cwd}) sends (protobuf-es toJson).
TEST(EnvdWire, StartAsTheSdkSendsIt) {
  auto r = parse_start(
      R"({"process":{"cmd":"/bin/bash","args":["-l","-c","echo hi"],"envs":{"B":"2","A":"1"},)"
      R"("cwd":"/tmp"},"stdin":false})");
  ASSERT_TRUE(r) << r.error->message;
  EXPECT_EQ(r.value->process.cmd, "/bin/bash");
  ASSERT_EQ(r.value->process.args.size(), 3u);
  ASSERT_EQ(r.value->process.envs.size(), 2u);
  EXPECT_EQ(r.value->process.envs[0].first, "A");
  EXPECT_EQ(r.value->process.cwd, "/tmp");
  EXPECT_EQ(r.value->stdin_open, false);
  EXPECT_FALSE(r.value->pty);
  EXPECT_EQ(policy_text(r.value->process), "echo hi");
  EXPECT_EQ(shell_line(r.value->process), "'/bin/bash' '-l' '-c' 'echo hi'");
}

// What an approval of a Start covers: every field the process acts on (#32, finding 2).
TEST(EnvdWire, CanonicalStartCoversEnvCwdArgsAndPty) {
  auto start = [](std::string_view json) {
    auto r = parse_start(json);
    EXPECT_TRUE(r) << r.error->message;
    return r ? canonical_start(*r.value) : std::string();
  };
  std::string base =
      start(R"({"process":{"cmd":"/bin/bash","args":["-l","-c","make"],"envs":{"B":"2","A":"1"},)"
            R"("cwd":"/tmp"},"stdin":false})");
  EXPECT_EQ(base, R"({"args":["-l","-c","make"],"cmd":"/bin/bash","cwd":"/tmp","default_envs":[],)"
                  R"("envs":[["A","1"],["B","2"]],"pty":null,"stdin":false})");
  // The same script with another env value, cwd or a pty is another request.
  EXPECT_NE(base, start(R"({"process":{"cmd":"/bin/bash","args":["-l","-c","make"],)"
                        R"("envs":{"B":"2","A":"x"},"cwd":"/tmp"},"stdin":false})"));
  EXPECT_NE(base, start(R"({"process":{"cmd":"/bin/bash","args":["-l","-c","make"],)"
                        R"("envs":{"B":"2","A":"1"},"cwd":"/"},"stdin":false})"));
  EXPECT_NE(base, start(R"({"process":{"cmd":"/bin/bash","args":["-l","-c","make"],)"
                        R"("envs":{"B":"2","A":"1"},"cwd":"/tmp"},"stdin":false,)"
                        R"("pty":{"size":{"cols":80,"rows":24}}})"));
}

// The sandbox's envVars are the environment of every command (BASH_ENV among them runs a file
// before it): an approval of a Start covers them too (#46, finding 3).
TEST(EnvdWire, CanonicalStartCoversTheSandboxEnvVars) {
  auto r = parse_start(R"({"process":{"cmd":"/bin/bash","args":["-l","-c","make"]}})");
  ASSERT_TRUE(r) << r.error->message;
  std::string plain = canonical_start(*r.value);
  std::string with = canonical_start(*r.value, {{"BASH_ENV", "/tmp/x"}, {"A", "1"}});
  EXPECT_NE(with.find(R"("default_envs":[["A","1"],["BASH_ENV","/tmp/x"]])"), std::string::npos)
      << with;
  EXPECT_NE(plain, with);
  EXPECT_NE(with, canonical_start(*r.value, {{"BASH_ENV", "/tmp/y"}, {"A", "1"}}));
}

TEST(EnvdWire, StartWithPtyAndTag) {
  auto r = parse_start(
      R"({"process":{"cmd":"/bin/bash","args":["-i","-l"]},"pty":{"size":{"cols":80,"rows":"24"}},)"
      R"("tag":"t1"})");
  ASSERT_TRUE(r) << r.error->message;
  ASSERT_TRUE(r.value->pty);
  EXPECT_EQ(r.value->pty->cols, 80u);
  EXPECT_EQ(r.value->pty->rows, 24u);
  EXPECT_EQ(r.value->tag, "t1");
  EXPECT_FALSE(r.value->stdin_open);  // absent
  EXPECT_EQ(policy_text(r.value->process), "'/bin/bash' '-i' '-l'");
}

TEST(EnvdWire, StartRefusesBadShapes) {
  auto bad = [](std::string_view json, std::string_view field) {
    auto r = parse_start(json);
    ASSERT_FALSE(r) << json;
    EXPECT_EQ(r.error->code, ConnectCode::kInvalidArgument);
    EXPECT_NE(r.error->message.find(field), std::string::npos) << r.error->message;
  };
  bad("[]", "JSON object");
  bad("{", "malformed JSON");
  bad("{}", "process");
  bad(R"({"process":{}})", "process.cmd");
  bad(R"({"process":{"cmd":1}})", "process.cmd");
  bad(R"({"process":{"cmd":"x","args":"y"}})", "process.args");
  bad(R"({"process":{"cmd":"x","args":[1]}})", "process.args[0]");
  bad(R"({"process":{"cmd":"x","envs":{"A":1}}})", "process.envs.A");
  bad(R"({"process":{"cmd":"x"},"stdin":"yes"})", "stdin");
  bad(R"({"process":{"cmd":"x"},"pty":{"size":{"cols":0,"rows":1}}})", "pty.size");
  bad(R"({"process":{"cmd":"x"},"pty":{"size":{"cols":-1,"rows":1}}})", "pty.size.cols");
}

TEST(EnvdWire, SnakeCaseNullsAndUnknownFields) {
  auto w = parse_watch_dir(R"({"path":"/x","include_entry":true,"recursive":null,"later":1})");
  ASSERT_TRUE(w) << w.error->message;
  EXPECT_TRUE(w.value->include_entry);
  EXPECT_FALSE(w.value->recursive);
}

// The polled watch's messages, as the Python SDK's ProtoJSONCodec sends and reads them.
TEST(EnvdWire, PolledWatchMessages) {
  auto id = parse_watcher_id(R"({"watcherId":"wAbc"})");
  ASSERT_TRUE(id);
  EXPECT_EQ(*id.value, "wAbc");
  EXPECT_EQ(*parse_watcher_id(R"({"watcher_id":"w1"})").value, "w1");
  EXPECT_EQ(parse_watcher_id("{}").error->message, "watcherId: required");
  EXPECT_FALSE(parse_watcher_id(R"({"watcherId":7})"));
  EXPECT_FALSE(parse_watcher_id(R"({"watcherId":")" + std::string(65, 'w') + "\"}"));
  EXPECT_EQ(watcher_created_reply("wAbc"), R"({"watcherId":"wAbc"})");
  EXPECT_EQ(watcher_events_reply({}), R"({"events":[]})");
  EXPECT_EQ(
      watcher_events_reply({{WatchEventType::kCreate, "a \"b\""}, {WatchEventType::kChmod, "d/e"}}),
      R"({"events":[{"name":"a \"b\"","type":"EVENT_TYPE_CREATE"},)"
      R"({"name":"d/e","type":"EVENT_TYPE_CHMOD"}]})");
  EXPECT_EQ(watch_event(WatchEventType::kWrite, "x"),
            R"({"filesystem":{"name":"x","type":"EVENT_TYPE_WRITE"}})");
}

TEST(EnvdWire, Selectors) {
  auto p = parse_selector_request(R"({"process":{"pid":4242}})");
  ASSERT_TRUE(p);
  EXPECT_EQ(p.value->pid, 4242u);
  auto t = parse_selector_request(R"({"process":{"tag":"web"}})");
  ASSERT_TRUE(t);
  EXPECT_EQ(t.value->tag, "web");
  EXPECT_FALSE(parse_selector_request(R"({"process":{}})"));
  EXPECT_FALSE(parse_selector_request(R"({"process":{"pid":1,"tag":"x"}})"));
  EXPECT_FALSE(parse_selector_request(R"({"process":{"pid":4294967296}})"));
  EXPECT_FALSE(parse_selector_request(R"({})"));
}

TEST(EnvdWire, SendInputAndSignal) {
  auto in = parse_send_input(R"({"process":{"pid":7},"input":{"stdin":"aGVsbG8K"}})");
  ASSERT_TRUE(in) << in.error->message;
  EXPECT_EQ(in.value->data, "hello\n");
  EXPECT_FALSE(in.value->pty);
  auto pty = parse_send_input(R"({"process":{"pid":7},"input":{"pty":"BA=="}})");
  ASSERT_TRUE(pty);
  EXPECT_TRUE(pty.value->pty);
  EXPECT_EQ(pty.value->data, "\x04");
  EXPECT_FALSE(parse_send_input(R"({"process":{"pid":7},"input":{"stdin":"***"}})"));
  EXPECT_FALSE(parse_send_input(R"({"process":{"pid":7},"input":{}})"));
  auto kill = parse_send_signal(R"({"process":{"pid":7},"signal":"SIGNAL_SIGKILL"})");
  ASSERT_TRUE(kill);
  EXPECT_EQ(kill.value->signal, 9);
  auto term = parse_send_signal(R"({"process":{"pid":7},"signal":15})");
  ASSERT_TRUE(term);
  EXPECT_EQ(term.value->signal, 15);
  EXPECT_FALSE(parse_send_signal(R"({"process":{"pid":7},"signal":"SIGNAL_UNSPECIFIED"})"));
  EXPECT_FALSE(parse_send_signal(R"({"process":{"pid":7},"signal":2})"));
  EXPECT_FALSE(parse_send_signal(R"({"process":{"pid":7}})"));
}

TEST(EnvdWire, FilesystemRequests) {
  EXPECT_EQ(*parse_path_request(R"({"path":"/a/b"})").value, "/a/b");
  EXPECT_FALSE(parse_path_request(R"({"path":""})"));
  EXPECT_FALSE(parse_path_request(R"({})"));
  auto l = parse_list_dir(R"({"path":"/x","depth":2})");
  ASSERT_TRUE(l);
  EXPECT_EQ(l.value->depth, 2u);
  auto m = parse_move(R"({"source":"/a","destination":"/b"})");
  ASSERT_TRUE(m);
  EXPECT_EQ(m.value->destination, "/b");
  EXPECT_FALSE(parse_move(R"({"source":"/a"})"));
}

TEST(EnvdWire, ProcessEvents) {
  EXPECT_EQ(start_event(12), R"({"event":{"start":{"pid":12}}})");
  EXPECT_EQ(data_event(Stream::kStdout, "hi\n"), R"({"event":{"data":{"stdout":"aGkK"}}})");
  EXPECT_EQ(data_event(Stream::kStderr, ""), R"({"event":{"data":{"stderr":""}}})");
  EXPECT_EQ(keepalive_event(), R"({"event":{"keepalive":{}}})");
  EXPECT_EQ(end_event(end_for_exit(0)),
            R"({"event":{"end":{"exitCode":0,"exited":true,"status":"exit status 0"}}})");
  EXPECT_EQ(end_event(end_for_exit(3)),
            R"({"event":{"end":{"exitCode":3,"exited":true,"status":"exit status 3",)"
            R"("error":"exit status 3"}}})");
  EndInfo killed = end_for_signal("KILL");
  EXPECT_EQ(killed.exit_code, -1);
  EXPECT_FALSE(killed.exited);
  EXPECT_EQ(killed.status, "signal: killed");
}

TEST(EnvdWire, EntriesAndList) {
  Entry e{"a.txt", FileKind::kFile, "/root/a.txt", 5, 0644, "root", "root", 0, std::nullopt};
  EXPECT_EQ(entry_reply(e),
            R"({"entry":{"name":"a.txt","type":"FILE_TYPE_FILE","path":"/root/a.txt","size":"5",)"
            R"("mode":420,"permissions":"-rw-r--r--","owner":"root","group":"root",)"
            R"("modifiedTime":"1970-01-01T00:00:00.000Z"}})");
  EXPECT_EQ(permissions_string(FileKind::kDirectory, 0755), "drwxr-xr-x");
  EXPECT_EQ(permissions_string(FileKind::kSymlink, 0777), "Lrwxrwxrwx");
  EXPECT_EQ(entries_reply({}), R"({"entries":[]})");
  ProcessInfo p{{"/bin/bash", {"-l", "-c", "sleep 9"}, {{"K", "V"}}, "/tmp"}, 5, "t"};
  EXPECT_EQ(list_reply({p}),
            R"({"processes":[{"config":{"cmd":"/bin/bash","args":["-l","-c","sleep 9"],)"
            R"("envs":{"K":"V"},"cwd":"/tmp"},"pid":5,"tag":"t"}]})");
}

TEST(EnvdWire, ShellQuoting) {
  EXPECT_EQ(shell_quote("it's"), R"('it'\''s')");
  EXPECT_EQ(shell_quote(""), "''");
  ProcessConfig c{"/usr/bin/env", {"a b", "$HOME"}, {}, std::nullopt};
  EXPECT_EQ(shell_line(c), "'/usr/bin/env' 'a b' '$HOME'");
  ProcessConfig sh{"sh", {"-c", "ls"}, {}, std::nullopt};
  EXPECT_EQ(policy_text(sh), "ls");
}

}  // namespace
}  // namespace pvs::service::e2b
