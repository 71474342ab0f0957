// Files through the controller binary against the whole stack, as in e2e_test.cc: streamed
// uploads and downloads of any size in bounded memory, and what breaks them.
#include "e2e_fixture.h"

namespace pvs::service {
namespace {

TEST_F(ServiceE2eTest, StreamedUploads) {
  auto created = test::http(port_, "POST", "/v1/sandboxes", "{}", "tok-demo");
  ASSERT_EQ(created.status, 201) << created.body;
  std::string id = json(created.body)->getValue<std::string>("id");
  std::string files = "/v1/sandboxes/" + id + "/files?path=" + stack_->home() + "/up/";
  auto pattern = [](std::size_t n, int seed) {
    std::string s(n, '\0');
    for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + seed) >> 3);
    return s;
  };
  auto get = [&](const std::string& name) {
    return test::http(port_, "GET", files + name, "", "tok-demo");
  };
  // With a Content-Length: 3 MiB in, the same 3 MiB back.
  std::string three = pattern(3 << 20, 1);
  auto put = test::http(port_, "PUT", files + "a.bin&mode=0600", three, "tok-demo",
                        {{"Content-Type", "application/octet-stream"}});
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(json(put.body)->getValue<std::uint64_t>("size"), three.size());
  EXPECT_EQ(get("a.bin").body, three);

  // Chunked, in uneven pieces.
  auto chunked = [&](const std::string& name, const std::string& data) {
    try {
      Poco::Net::HTTPClientSession session("127.0.0.1", port_);
      session.setTimeout(Poco::Timespan(60, 0));
      Poco::Net::HTTPRequest req("PUT", files + name, Poco::Net::HTTPMessage::HTTP_1_1);
      req.set("Authorization", "Bearer tok-demo");
      req.setContentType("application/octet-stream");
      req.setChunkedTransferEncoding(true);
      std::ostream& out = session.sendRequest(req);
      for (std::size_t at = 0; at < data.size() && out;) {
        std::size_t n = std::min<std::size_t>(data.size() - at, 10007 + at % 50000);
        out.write(data.data() + at, static_cast<std::streamsize>(n));
        at += n;
      }
      Poco::Net::HTTPResponse resp;
      std::string body;
      Poco::StreamCopier::copyToString(session.receiveResponse(resp), body);
      return std::make_pair(static_cast<int>(resp.getStatus()), body);
    } catch (const Poco::Exception& e) {
      return std::make_pair(-1, std::string(e.displayText()));
    }
  };
  std::string two = pattern(2 << 20, 2);
  auto c = chunked("b.bin", two);
  ASSERT_EQ(c.first, 200) << c.second;
  EXPECT_EQ(get("b.bin").body, two);

  // Over the limit, chunked: 413 and b.bin is unchanged. (The server may close the connection
  // before the client finished sending; then the client sees no status at all.)
  c = chunked("b.bin", pattern(kMaxUpload + (1 << 20), 3));
  EXPECT_TRUE(c.first == 413 || c.first == -1) << c.first << " " << c.second;
  EXPECT_EQ(get("b.bin").body, two);
  // Over the limit by Content-Length: refused on the headers alone, before a byte is read.
  auto raw_put = [&](const std::string& name, std::uint64_t length, const std::string& body) {
    Poco::Net::StreamSocket sock(Poco::Net::SocketAddress("127.0.0.1", port_));
    sock.setReceiveTimeout(Poco::Timespan(60, 0));
    std::string head =
        "PUT " + files + name + " HTTP/1.1\r\nHost: x\r\n" +
        "Authorization: Bearer tok-demo\r\nContent-Length: " + std::to_string(length) + "\r\n\r\n" +
        body;
    for (std::size_t at = 0; at < head.size();) {
      at += static_cast<std::size_t>(
          sock.sendBytes(head.data() + at, static_cast<int>(head.size() - at)));
    }
    sock.shutdownSend();
    std::string reply;
    char buf[4096];
    for (int n; (n = sock.receiveBytes(buf, sizeof buf)) > 0;) reply.append(buf, n);
    return reply;
  };
  auto big = raw_put("b.bin", kMaxUpload + 1, "");
  EXPECT_EQ(big.rfind("HTTP/1.1 413", 0), 0u) << big;
  EXPECT_EQ(get("b.bin").body, two);

  // A body that breaks off (after two 1 MiB chunks, ssh.transfer_chunk_mib): 400, and a.bin
  // is unchanged.
  auto cut = raw_put("a.bin", 3 << 20, pattern((2 << 20) + 4096, 5));
  EXPECT_EQ(cut.rfind("HTTP/1.1 400", 0), 0u) << cut;
  EXPECT_NE(cut.find("shorter than its Content-Length"), std::string::npos) << cut;
  EXPECT_EQ(get("a.bin").body, three);
  // No temporary files of the failed uploads are left.
  auto ls = test::http(port_, "GET", files + "&list=1", "", "tok-demo");
  EXPECT_EQ(json(ls.body)->getArray("entries")->size(), 2u) << ls.body;

  // Every upload is audited with the bytes it received.
  std::string audit = slurp(dir_ + "/audit.log");
  EXPECT_NE(audit.find("\"size\":" + std::to_string(three.size())), std::string::npos);
  EXPECT_NE(audit.find("\"status\":413"), std::string::npos);
  EXPECT_EQ(test::http(port_, "DELETE", "/v1/sandboxes/" + id, "", "tok-demo").status, 204);
}

// GET .../files streams from SFTP (chunked): whole files come back byte for byte; a missing
// file, a directory and a file over the limit are refused before the reply begins; a read that
// breaks off after it began (here: /dev/zero, size 0 to stat, endless to read) resets the
// connection before the final chunk, so no client can take a partial file for a whole one.
TEST_F(ServiceE2eTest, StreamedDownloads) {
  auto created = test::http(port_, "POST", "/v1/sandboxes", "{}", "tok-demo");
  ASSERT_EQ(created.status, 201) << created.body;
  std::string id = json(created.body)->getValue<std::string>("id");
  std::string dir = stack_->home() + "/down";
  auto exec = test::http(
      port_, "POST", "/v1/sandboxes/" + id + "/exec",
      "{\"command\":\"mkdir -p " + dir + " && : > " + dir + "/empty && head -c " +
          std::to_string(kMaxDownload) + " /dev/urandom > " + dir + "/max.bin && head -c " +
          std::to_string(kMaxDownload + 1) + " /dev/zero > " + dir + "/over.bin\"}",
      "tok-demo");
  ASSERT_EQ(exec.status, 200) << exec.body;
  std::string files = "/v1/sandboxes/" + id + "/files?path=";
  auto get = [&](const std::string& path) {
    return test::http(port_, "GET", files + path, "", "tok-demo");
  };
  auto max = get(dir + "/max.bin");
  ASSERT_EQ(max.status, 200);
  EXPECT_EQ(max.headers["Transfer-Encoding"], "chunked");
  EXPECT_EQ(max.body, slurp(dir + "/max.bin"));  // the netns CT shares the host's files
  auto empty = get(dir + "/empty");
  EXPECT_EQ(empty.status, 200);
  EXPECT_EQ(empty.body, "");
  EXPECT_EQ(get(dir + "/nosuch").status, 404);
  EXPECT_EQ(get(dir).status, 400);
  EXPECT_EQ(get(dir + "/over.bin").status, 413);
  // Listings say whether a limit cut them short; a bad limit is refused.
  auto listed = get(dir + "&list=true");
  ASSERT_EQ(listed.status, 200) << listed.body;
  EXPECT_EQ(json(listed.body)->getArray("entries")->size(), 3u);
  EXPECT_FALSE(json(listed.body)->getValue<bool>("truncated"));
  auto cut = get(dir + "&list=true&limit=2");
  ASSERT_EQ(cut.status, 200) << cut.body;
  EXPECT_EQ(json(cut.body)->getArray("entries")->size(), 2u);
  EXPECT_TRUE(json(cut.body)->getValue<bool>("truncated"));
  EXPECT_EQ(get(dir + "&list=true&limit=0").status, 400);

  // Broken off after the reply began: 200 and chunks, then a reset without the final chunk.
  Poco::Net::StreamSocket sock(Poco::Net::SocketAddress("127.0.0.1", port_));
  sock.setReceiveTimeout(Poco::Timespan(60, 0));
  std::string head = "GET " + files + "/dev/zero HTTP/1.1\r\nHost: x\r\n" +
                     "Authorization: Bearer tok-demo\r\n\r\n";
  sock.sendBytes(head.data(), static_cast<int>(head.size()));
  std::string reply;
  char buf[65536];
  try {
    for (int n; (n = sock.receiveBytes(buf, sizeof buf)) > 0;) reply.append(buf, n);
  } catch (const Poco::Exception&) {  // reset by peer: the expected end
  }
  EXPECT_EQ(reply.rfind("HTTP/1.1 200", 0), 0u) << reply.substr(0, 200);
  EXPECT_NE(reply.find("Transfer-Encoding: chunked"), std::string::npos);
  EXPECT_GT(reply.size(), 1u << 20);
  EXPECT_NE(reply.substr(reply.size() - 5), "0\r\n\r\n") << "a partial file must not end cleanly";

  // The service is fine afterwards.
  EXPECT_EQ(get(dir + "/empty").status, 200);
  EXPECT_EQ(test::http(port_, "DELETE", "/v1/sandboxes/" + id, "", "tok-demo").status, 204);
}

// The HTTPS listener (Poco NetSSL) with a self-signed certificate made by the openssl CLI, and
// sandboxctl trusting exactly that certificate through --cacert / SANDBOXCTL_CACERT.

}  // namespace
}  // namespace pvs::service
