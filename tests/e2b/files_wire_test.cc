#include "e2b/filesystem/files_wire.h"

#include <gtest/gtest.h>

namespace pvs::service::e2b {
namespace {

TEST(FilesWire, Boundary) {
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=----abc"), "----abc");
  EXPECT_EQ(multipart_boundary("Multipart/Form-Data;boundary=\"a b\""), "a b");
  EXPECT_EQ(multipart_boundary("multipart/form-data; charset=x; boundary=zz"), "zz");
  EXPECT_FALSE(multipart_boundary("multipart/form-data"));
  EXPECT_FALSE(multipart_boundary("multipart/mixed; boundary=x"));
  EXPECT_FALSE(multipart_boundary("multipart/form-data; boundary=\"open"));
  EXPECT_FALSE(multipart_boundary("multipart/form-data; boundary=" + std::string(71, 'x')));
}

// What undici's FormData writes for the SDK's files.write('/tmp/a.txt', 'hi').
TEST(FilesWire, MultipartAsUndiciWritesIt) {
  std::string body =
      "------formdata-undici-0123\r\n"
      "Content-Disposition: form-data; name=\"file\"; filename=\"/tmp/a.txt\"\r\n"
      "Content-Type: application/octet-stream\r\n\r\n"
      "hi\r\n"
      "------formdata-undici-0123\r\n"
      "Content-Disposition: form-data; name=\"file\"; filename=\"b\"\r\n\r\n"
      "\r\n--not-a-boundary\r\n"
      "------formdata-undici-0123--\r\n";
  auto parts = parse_multipart(body, "----formdata-undici-0123");
  ASSERT_TRUE(parts) << parts.error().message;
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[0].name, "file");
  EXPECT_EQ((*parts)[0].filename, "/tmp/a.txt");
  EXPECT_EQ((*parts)[0].data, "hi");
  EXPECT_EQ((*parts)[1].data, "\r\n--not-a-boundary");
}

TEST(FilesWire, MultipartRefusals) {
  auto bad = [](std::string body, std::string_view text) {
    auto r = parse_multipart(body, "b");
    ASSERT_FALSE(r) << body;
    EXPECT_EQ(r.error().status, 400);
    EXPECT_NE(r.error().message.find(text), std::string::npos) << r.error().message;
  };
  bad("", "does not start");
  bad("--b\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nx", "no closing boundary");
  bad("--b\r\nno end of headers\r\n--b--", "end of its headers");
  bad("--b\r\nX: y\r\n\r\nx\r\n--b--", "without Content-Disposition");
  bad("--b\r\nContent-Disposition: attachment\r\n\r\nx\r\n--b--", "not form-data");
  bad("--bx", "trailing bytes");
  std::string many;
  for (int i = 0; i < 65; ++i)
    many += "--b\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\n\r\n";
  bad(many + "--b--", "more than 64 parts");
  EXPECT_TRUE(parse_multipart("--b--", "b"));
}

TEST(FilesWire, Paths) {
  EXPECT_EQ(*resolve_path("/a/b", "/root"), "/a/b");
  EXPECT_EQ(*resolve_path("a.txt", "/root"), "/root/a.txt");
  EXPECT_EQ(*resolve_path("~/x", "/home/user"), "/home/user/x");
  EXPECT_EQ(*resolve_path("~", "/root"), "/root");
  EXPECT_EQ(*resolve_path("/a/../../b/./c//", "/root"), "/b/c");
  EXPECT_EQ(*resolve_path("/..", "/root"), "/");
  EXPECT_FALSE(resolve_path("", "/root"));
  EXPECT_FALSE(resolve_path(std::string("/a\0b", 4), "/root"));
  EXPECT_FALSE(resolve_path("/" + std::string(4096, 'a'), "/root"));
  EXPECT_TRUE(is_user_name(""));
  EXPECT_TRUE(is_user_name("user"));
  EXPECT_FALSE(is_user_name("-x"));
  EXPECT_FALSE(is_user_name("Root"));
}

TEST(FilesWire, UploadReply) {
  EXPECT_EQ(upload_reply({{"/tmp/a.txt"}, {"/x"}}),
            R"([{"path":"/tmp/a.txt","name":"a.txt","type":"file"},)"
            R"({"path":"/x","name":"x","type":"file"}])");
}

// The SDK's getSignature (and envd's generateSignature): the values below are Python's
// hashlib + base64 of the same strings.
TEST(FilesWire, SignatureAsTheSdkMakesIt) {
  EXPECT_EQ(file_signature("/home/user/a.txt", "read", "", "tok123", std::nullopt),
            "v1_byj2OB/vujgbES/1KAKCaR27E+9eOrB6PzeTnIL8L6M");
  EXPECT_EQ(file_signature("/tmp/x", "write", "root", "tok123", 1764547200),
            "v1_2rBE5hwhCgC91nc4EaOCjXR5rdh5zw+MUPywqLrJPbQ");
  EXPECT_NE(file_signature("/tmp/x", "read", "root", "tok123", 1764547200),
            file_signature("/tmp/x", "write", "root", "tok123", 1764547200));
}

}  // namespace
}  // namespace pvs::service::e2b
