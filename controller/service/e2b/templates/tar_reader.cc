#include "e2b/templates/tar_reader.h"

#include <Poco/Exception.h>
#include <Poco/InflatingStream.h>

#include <set>
#include <sstream>

namespace pvs::service::e2b {
namespace {

constexpr std::size_t kBlock = 512;
constexpr std::size_t kMaxPax = 64 << 10;

ApiResult<std::string> gunzip(std::string_view data, std::size_t limit) {
  try {
    std::istringstream in{std::string(data)};
    Poco::InflatingInputStream inflate(in, Poco::InflatingStreamBuf::STREAM_GZIP);
    std::string out;
    char block[16384];
    while (inflate.read(block, sizeof block), inflate.gcount() > 0) {
      out.append(block, static_cast<std::size_t>(inflate.gcount()));
      if (out.size() > limit)
        return tl::unexpected(
            too_large("the archive unpacks to more than " + std::to_string(limit >> 20) + " MiB"));
    }
    if (inflate.bad()) return tl::unexpected(bad_request("the archive is not valid gzip"));
    return out;
  } catch (const Poco::Exception& e) {
    return tl::unexpected(bad_request("the archive is not valid gzip: " + e.message()));
  }
}

// A NUL-terminated field of a header.
std::string field(std::string_view header, std::size_t at, std::size_t len) {
  auto f = header.substr(at, len);
  return std::string(f.substr(0, f.find('\0')));
}

// An octal number field (spaces and NULs around it); -1 when it is not one (base-256 too).
std::int64_t octal(std::string_view header, std::size_t at, std::size_t len) {
  auto f = header.substr(at, len);
  if (!f.empty() && (static_cast<unsigned char>(f[0]) & 0x80)) return -1;
  std::size_t i = 0;
  while (i < f.size() && f[i] == ' ') ++i;
  std::int64_t v = 0;
  bool digits = false;
  for (; i < f.size() && f[i] >= '0' && f[i] <= '7'; ++i) {
    if (v > (std::int64_t{1} << 40)) return -1;
    v = v * 8 + (f[i] - '0');
    digits = true;
  }
  for (; i < f.size(); ++i)
    if (f[i] != ' ' && f[i] != '\0') return -1;
  return digits ? v : -1;
}

bool checksum_ok(std::string_view header) {
  std::int64_t want = octal(header, 148, 8);
  std::int64_t sum = 0;
  for (std::size_t i = 0; i < kBlock; ++i)
    sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(header[i]);
  return want == sum;
}

// The `path` record of a PAX extended header ("<len> path=<value>\n" records), if any.
ApiResult<std::string> pax_path(std::string_view pax) {
  std::string path;
  while (!pax.empty()) {
    auto space = pax.find(' ');
    if (space == std::string_view::npos || space == 0 || space > 8)
      return tl::unexpected(bad_request("a PAX header is malformed"));
    std::size_t len = 0;
    for (char c : pax.substr(0, space)) {
      if (c < '0' || c > '9') return tl::unexpected(bad_request("a PAX header is malformed"));
      len = len * 10 + static_cast<std::size_t>(c - '0');
    }
    if (len <= space + 1 || len > pax.size() || pax[len - 1] != '\n')
      return tl::unexpected(bad_request("a PAX header is malformed"));
    std::string_view record = pax.substr(space + 1, len - space - 2);
    auto eq = record.find('=');
    if (eq == std::string_view::npos)
      return tl::unexpected(bad_request("a PAX header is malformed"));
    if (record.substr(0, eq) == "path") path = std::string(record.substr(eq + 1));
    pax.remove_prefix(len);
  }
  return path;
}

bool all_zero(std::string_view block) {
  return block.find_first_not_of('\0') == std::string_view::npos;
}

// One entry's header checked; its name (prefix/name or the PAX path) normalised.
ApiResult<std::string> entry_name(std::string_view h, const std::string& pax_name) {
  std::string name = pax_name;
  if (name.empty()) {
    name = field(h, 0, 100);
    if (field(h, 257, 6) == "ustar") {
      std::string prefix = field(h, 345, 155);
      if (!prefix.empty()) name = prefix + "/" + name;
    }
  }
  auto n = normal_relative(name);
  if (!n || n->empty() || n->size() > 1024)
    return tl::unexpected(bad_request("entry \"" + name.substr(0, 200) +
                                      "\": names must be relative, without \"..\""));
  return *n;
}

}  // namespace

std::optional<std::string> normal_relative(std::string_view name) {
  if (name.empty() || name[0] == '/') return std::nullopt;
  std::string out;
  std::size_t i = 0;
  while (i <= name.size()) {
    auto slash = name.find('/', i);
    if (slash == std::string_view::npos) slash = name.size();
    std::string_view seg = name.substr(i, slash - i);
    i = slash + 1;
    if (seg.empty() || seg == ".") continue;
    if (seg == ".." || seg.find('\0') != std::string_view::npos ||
        seg.find('\n') != std::string_view::npos)
      return std::nullopt;
    if (!out.empty()) out.push_back('/');
    out.append(seg);
  }
  return out;
}

ApiResult<std::vector<TarEntry>> read_upload_tar(std::string_view data, const TarLimits& limits) {
  std::string unpacked;
  if (data.size() >= 2 && static_cast<unsigned char>(data[0]) == 0x1f &&
      static_cast<unsigned char>(data[1]) == 0x8b) {
    // Room for a header per entry, PAX headers and the end blocks on top of the contents.
    auto u = gunzip(data, limits.max_file_bytes + (limits.max_entries * 3 + 64) * kBlock);
    if (!u) return tl::unexpected(u.error());
    unpacked = std::move(*u);
    data = unpacked;
  }
  std::vector<TarEntry> out;
  std::set<std::string> names;
  std::size_t bytes = 0, pos = 0;
  std::string pax_name;
  while (true) {
    if (pos + kBlock > data.size())
      return tl::unexpected(bad_request("the archive is cut short (no end blocks)"));
    std::string_view h = data.substr(pos, kBlock);
    pos += kBlock;
    if (all_zero(h)) break;  // the end (a second zero block may follow)
    if (!checksum_ok(h)) return tl::unexpected(bad_request("a tar header's checksum is wrong"));
    std::int64_t size = octal(h, 124, 12);
    char type = h[156];
    if (size < 0 || static_cast<std::uint64_t>(size) > data.size() - pos)
      return tl::unexpected(bad_request("the archive is cut short (an entry ends past it)"));
    std::string_view body = data.substr(pos, static_cast<std::size_t>(size));
    pos += (static_cast<std::size_t>(size) + kBlock - 1) / kBlock * kBlock;
    if (pos > data.size()) pos = data.size();
    if (type == 'x' || type == 'g') {  // PAX: only a local `path` matters here
      if (body.size() > kMaxPax) return tl::unexpected(bad_request("a PAX header is too long"));
      auto p = pax_path(body);
      if (!p) return tl::unexpected(p.error());
      if (type == 'x') pax_name = *p;
      continue;
    }
    auto name = entry_name(h, pax_name);
    pax_name.clear();
    if (!name) return tl::unexpected(name.error());
    if (type != '0' && type != '\0' && type != '5')
      return tl::unexpected(bad_request("entry \"" + *name +
                                        "\": only regular files and directories are copied "
                                        "(no links, devices or FIFOs)"));
    if (out.size() >= limits.max_entries)
      return tl::unexpected(bad_request("the archive holds more than " +
                                        std::to_string(limits.max_entries) + " entries"));
    if (!names.insert(*name).second)
      return tl::unexpected(bad_request("entry \"" + *name + "\" is in the archive twice"));
    std::int64_t mode = octal(h, 100, 8);
    TarEntry e;
    e.path = *name;
    e.directory = type == '5';
    e.mode = mode < 0 ? 0644 : static_cast<std::uint32_t>(mode) & 07777;
    if (!e.directory) {
      bytes += body.size();
      if (bytes > limits.max_file_bytes)
        return tl::unexpected(too_large("the archive's files hold more than " +
                                        std::to_string(limits.max_file_bytes >> 20) + " MiB"));
      e.content = std::string(body);
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace pvs::service::e2b
