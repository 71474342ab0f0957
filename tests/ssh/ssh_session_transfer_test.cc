// SshSession's large uploads (SshConfig::transfer_chunk / transfer_connections) against a real
// OpenSSH sshd: chunks over several connections keep every byte in place, at every size around
// a chunk's, and fail as a single upload would.
#include "ssh_session_fixture.h"

namespace pvs {
namespace {

constexpr std::size_t kChunk = 64 << 10;

// Over libssh2 only: ssh_session_bulk_test.cc covers what bulk_client carries.
SshConfig chunked(SshConfig c, int connections = 4) {
  c.transfer_chunk = kChunk;
  c.transfer_connections = connections;
  c.bulk_client.clear();
  return c;
}

TEST_F(SshSessionTest, ChunkedUploadsKeepEveryByteAtEverySize) {
  SshSession s(chunked(config()));
  const std::string dir = sshd_->home() + "/chunks";
  ASSERT_TRUE(s.mkdir(dir, 0755, true));
  const std::size_t sizes[] = {0,          1,          kChunk - 1,     kChunk,
                               kChunk + 1, 3 * kChunk, 7 * kChunk / 2, 40 * kChunk + 7};
  int seed = 1;
  for (std::size_t size : sizes) {
    SCOPED_TRACE("size " + std::to_string(size));
    const std::string data = random_bytes(size, seed++);
    const std::string remote = dir + "/f.bin";
    ASSERT_TRUE(s.upload(remote, data, upload_opts(0600)));
    EXPECT_EQ(run(s, "sha256sum " + remote).out.substr(0, 64), local_sha256(data));
    EXPECT_EQ(s.stat(remote)->mode & 0777, 0600u);
    auto down = s.download(remote);
    ASSERT_TRUE(down) << down.error().to_string();
    EXPECT_TRUE(*down == data) << "downloaded " << down->size() << " bytes, differ";
    // From a stream (it does not seek), with fsync.
    std::istringstream in(data);
    UploadOptions synced;
    synced.fsync = true;
    ASSERT_TRUE(s.upload(remote, in, synced));
    std::ostringstream out;
    auto n = s.download(remote, out);
    ASSERT_TRUE(n) << n.error().to_string();
    EXPECT_EQ(*n, size);
    EXPECT_TRUE(out.str() == data);
  }
  EXPECT_EQ(names_in(s, dir), std::vector<std::string>{"f.bin"});  // no temporary files
  EXPECT_EQ(s.stats().exec_connections, 4);
}

// Many chunks per connection, two uploads at once: each chunk lands at its offset however the
// connections interleave.
TEST_F(SshSessionTest, ChunkedUploadsLandInPlaceRepeatedly) {
  SshSession s(chunked(config(), 3));
  const std::string home = sshd_->home();
  for (int i = 0; i < 5; ++i) {
    const std::string a = random_bytes(150 * kChunk + 123, 77 + i),
                      b = random_bytes(60 * kChunk, i);
    auto other = std::async(std::launch::async, [&] { return s.upload(home + "/b.bin", b); });
    ASSERT_TRUE(s.upload(home + "/a.bin", a));
    ASSERT_TRUE(other.get());
    ASSERT_TRUE(*s.download(home + "/a.bin") == a) << "round " << i;
    ASSERT_TRUE(*s.download(home + "/b.bin") == b) << "round " << i;
  }
  ASSERT_TRUE(s.remove(home + "/a.bin"));
  ASSERT_TRUE(s.remove(home + "/b.bin"));
}

TEST_F(SshSessionTest, ChunkedUploadsFailAsOneWould) {
  SshSession s(chunked(config()));
  const std::string dir = sshd_->home() + "/chunk-errors";
  ASSERT_TRUE(s.mkdir(dir, 0755, true));
  const std::string remote = dir + "/f.bin";
  const std::string data = random_bytes(10 * kChunk, 5);
  ASSERT_TRUE(s.upload(remote, data));
  // A source that breaks after some chunks.
  expect_broken_upload_leaves_old(s, dir, remote, data, 4 * kChunk + 99, 6);
  // A missing directory.
  auto no_dir = s.upload(dir + "/nope/f.bin", data);
  ASSERT_FALSE(no_dir);
  EXPECT_EQ(no_dir.error().ssh, SshErrc::kNoSuchFile);
}

// The process's budget for chunks bounds the connections an upload gets: room for two chunks
// gives two, room for one (or none) one stream.
TEST_F(SshSessionTest, ChunkedUploadsStayWithinTheMemoryBudget) {
  const std::string data = random_bytes(10 * kChunk + 5, 11);
  const std::string remote = sshd_->home() + "/budget.bin";
  for (std::uint64_t chunks : {0, 1, 2}) {
    SCOPED_TRACE("room for " + std::to_string(chunks) + " chunks");
    SshConfig c = chunked(config());
    c.transfer_memory = chunks * kChunk;
    SshSession s(c);
    ASSERT_TRUE(s.upload(remote, data));
    EXPECT_TRUE(*s.download(remote) == data);
    EXPECT_EQ(s.stats().exec_connections, chunks == 2 ? 2 : 1);
  }
  // A chunk above 2 MiB without room: the first 2 MiB read, then the rest, as one stream.
  SshConfig c = config();
  c.transfer_chunk = 4 << 20;
  c.transfer_memory = 0;
  c.bulk_client.clear();
  SshSession s(c);
  const std::string big = random_bytes(10 << 20, 12);
  std::istringstream in(big);
  ASSERT_TRUE(s.upload(remote, in));
  EXPECT_TRUE(*s.download(remote) == big);
  EXPECT_EQ(s.stats().exec_connections, 1);
  ASSERT_TRUE(s.remove(remote));
}

// create_parents opens first and makes the parent only when the open finds none: every way an
// upload's first op starts (one op for a small source, the creation before chunks, one stream
// for want of room, one connection) keeps every byte of a stream read once.
TEST_F(SshSessionTest, ParentsAreMadeWhenTheFirstOpenFindsNone) {
  struct Way {
    const char* name;
    std::size_t bytes;
    int connections;
    std::uint64_t memory;
  };
  const Way ways[] = {{"small", kChunk / 2, 4, 256 << 20},
                      {"chunks", 3 * kChunk + 1, 4, 256 << 20},
                      {"no room", 3 * kChunk + 1, 4, 0},
                      {"one connection", 3 * kChunk + 1, 1, 256 << 20}};
  int n = 0;
  for (const Way& way : ways) {
    SCOPED_TRACE(way.name);
    SshConfig c = chunked(config(), way.connections);
    c.transfer_memory = way.memory;
    SshSession s(c);
    const std::string data = random_bytes(way.bytes, 20 + n);
    const std::string remote = sshd_->home() + "/made-" + std::to_string(n++) + "/a/b/f.bin";
    std::istringstream in(data);
    ASSERT_TRUE(s.upload(remote, in, upload_opts(0600, true)));
    EXPECT_TRUE(*s.download(remote) == data);
    EXPECT_EQ(names_in(s, remote.substr(0, remote.size() - 6)), std::vector<std::string>{"f.bin"});
  }
}

// A mode its owner may not write: the chunks' ops open the file again, so it is made writable
// and given its mode once written.
TEST_F(SshSessionTest, ChunkedUploadsOfAReadOnlyMode) {
  SshSession s(chunked(config()));
  const std::string data = random_bytes(5 * kChunk + 1, 13);
  const std::string remote = sshd_->home() + "/ro-chunks.bin";
  ASSERT_TRUE(s.upload(remote, data, upload_opts(0444)));
  EXPECT_EQ(s.stat(remote)->mode & 0777, 0444u);
  EXPECT_TRUE(*s.download(remote) == data);
  EXPECT_GT(s.stats().exec_connections, 1);
  ASSERT_TRUE(s.remove(remote));
}

TEST_F(SshSessionTest, OneTransferConnectionStaysOnOne) {
  SshSession s(chunked(config(), 1));
  const std::string data = random_bytes(20 * kChunk, 9);
  const std::string remote = sshd_->home() + "/one.bin";
  ASSERT_TRUE(s.upload(remote, data));
  EXPECT_TRUE(*s.download(remote) == data);
  EXPECT_EQ(s.stats().exec_connections, 1);
  ASSERT_TRUE(s.remove(remote));
}

}  // namespace
}  // namespace pvs
