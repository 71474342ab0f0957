// The MCP file tools: read_file (numbered lines, paged), write_file, edit_file (the REST
// files/edit), list_dir.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "api/files/real_path.h"
#include "api/mcp/tool_impl.h"
#include "core/text/file_edit.h"
#include "http/auth.h"
#include "http/requests.h"
#include "policy/canonical.h"
#include "policy/content_check.h"

namespace pvs::service::mcp {

namespace {

constexpr std::size_t kDefaultReadLines = 2000;
constexpr std::size_t kMaxReadOutput = 256 << 10;  // bytes of text one read_file returns
constexpr std::size_t kMaxLineShown = 2000;
constexpr std::size_t kDefaultListEntries = 1000;

std::string octal(std::uint32_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04o", mode & 07777);
  return buf;
}

struct Page {
  std::string text;
  std::size_t first = 0, last = 0, total = 0;  // 1-based lines shown, lines in the file
  bool cut = false;                            // stopped at kMaxReadOutput
  bool crlf = false;
};

// Lines [offset, offset + limit) of `content`, numbered as cat -n does.
Page page_of(std::string_view content, std::size_t offset, std::size_t limit) {
  Page p;
  p.crlf = content.find("\r\n") != std::string_view::npos;
  std::size_t line = 0, pos = 0;
  while (pos < content.size()) {
    std::size_t nl = content.find('\n', pos);
    std::size_t end = nl == std::string_view::npos ? content.size() : nl;
    ++line;
    if (line >= offset && line < offset + limit && !p.cut) {
      std::string_view l = content.substr(pos, end - pos);
      if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
      char num[24];
      std::snprintf(num, sizeof num, "%6zu\t", line);
      std::string row = num;
      row.append(l.substr(0, kMaxLineShown));
      if (l.size() > kMaxLineShown) row += " [... line cut]";
      row += '\n';
      if (p.text.size() + row.size() > kMaxReadOutput) {
        p.cut = true;
      } else {
        p.text += row;
        if (p.first == 0) p.first = line;
        p.last = line;
      }
    }
    pos = nl == std::string_view::npos ? content.size() : nl + 1;
  }
  p.total = line;
  return p;
}

}  // namespace

ToolResult tool_read_file(ToolContext& c) {
  auto [id, rest] = c.split_sandbox_id();
  JsonBody body = parse_arguments(rest);
  auto path = validate_path(body.string("path", kMaxPathBytes).value_or(""));
  auto offset = body.integer("offset", 1, INT64_MAX).value_or(1);
  auto limit = body.integer("limit", 1, INT64_MAX).value_or(kDefaultReadLines);
  finish_arguments(body);
  if (!path) throw path.error();
  c.record.params_json = "{\"path\":" + to_json_string(*path) + "}";
  auto sandbox = c.sandbox(id);
  auto attrs = sandbox->stat(*path);
  if (!attrs) throw from_error(attrs.error());
  if (attrs->is_dir()) throw bad_request(*path + " is a directory: use list_dir");
  if (attrs->size > kMaxEditFileBytes)
    throw too_large(*path + " is " + std::to_string(attrs->size) +
                    " bytes, more than read_file reads (10 MiB): use exec with head, tail, sed "
                    "or grep");
  auto content = sandbox->read_file(*path, kMaxEditFileBytes);
  if (!content) throw from_error(content.error());
  if (looks_binary(*content))
    throw unprocessable("binary_file", *path + " is a binary file (" +
                                           std::to_string(content->size()) +
                                           " bytes); read_file shows text only: inspect it "
                                           "with exec (file, xxd, strings)");
  if (content->empty()) return {false, "(empty file)", ""};
  Page p = page_of(*content, static_cast<std::size_t>(offset), static_cast<std::size_t>(limit));
  if (p.first == 0)
    throw bad_request("offset " + std::to_string(offset) + " is past the end: the file has " +
                      std::to_string(p.total) + " lines");
  std::string text = std::move(p.text);
  if (p.first > 1 || p.last < p.total)
    text += "[lines " + std::to_string(p.first) + "-" + std::to_string(p.last) + " of " +
            std::to_string(p.total) +
            (p.last < p.total ? "; more with offset=" + std::to_string(p.last + 1) : "") + "]\n";
  if (p.crlf) text += "[the file has CRLF line ends, not shown; edit_file keeps them]\n";
  return {false, std::move(text), ""};
}

ToolResult tool_write_file(ToolContext& c) {
  auto [id, rest] = c.split_sandbox_id();
  JsonBody body = parse_arguments(rest);
  auto path = validate_path(body.string("path", kMaxPathBytes).value_or(""));
  auto content = body.string("content", c.ops.config.max_upload_bytes);
  auto mode_text = body.string("mode", 5);
  if (!content && !body.finish()) body.reject("content", "required (may be empty)");
  finish_arguments(body);
  if (!path) throw path.error();
  std::uint32_t mode = 0644;
  if (mode_text) {
    auto m = parse_mode(*mode_text);
    if (!m) throw m.error();
    mode = *m;
  }
  c.record.params_json = "{\"path\":" + to_json_string(*path) + ",\"mode\":\"" + octal(mode) +
                         "\",\"size\":" + std::to_string(content->size()) + "}";
  auto sandbox = c.sandbox(id);
  *path = real_write_path(*sandbox, *path);  // judged and written: links resolved
  PolicyRequest asked;
  asked.action = PolicyAction::kFilesWrite;
  asked.path = *path;
  asked.canonical = canonical_write(*path, mode, sha256_hex(*content));
  asked.content = *content;
  c.record.policy_json = c.gate.admit_tool(c.call.principal, id, asked, c.call.progress,
                                           c.call.resume_approval, c.call.pending_approval);
  std::istringstream in(*content);
  UploadOptions options;
  options.mode = mode;
  options.create_parents = true;
  options.atomic = true;
  if (auto st = sandbox->upload(*path, in, options, content->size()); !st)
    throw from_error(st.error());
  return {false, "wrote " + std::to_string(content->size()) + " bytes to " + *path, ""};
}

ToolResult tool_edit_file(ToolContext& c) {
  auto [id, rest] = c.split_sandbox_id();
  auto req = parse_edit(rest, c.ops.config);
  if (!req) throw req.error();
  c.record.params_json = "{\"path\":" + to_json_string(req->path) +
                         ",\"replace_all\":" + (req->spec.replace_all ? "true" : "false") +
                         ",\"old_bytes\":" + std::to_string(req->spec.old_string.size()) +
                         ",\"new_bytes\":" + std::to_string(req->spec.new_string.size()) + "}";
  auto sandbox = c.sandbox(id);
  req->path = real_file_path(*sandbox, req->path);  // judged and edited: the link's target
  PolicyRequest asked;
  asked.action = PolicyAction::kFilesEdit;
  asked.path = req->path;
  asked.canonical = canonical_edit(*req);
  auto edited = edited_content(c.ops.config.policy, c.call.principal.name, *sandbox, *req);
  if (edited) asked.content = *edited;
  c.record.policy_json = c.gate.admit_tool(c.call.principal, id, asked, c.call.progress,
                                           c.call.resume_approval, c.call.pending_approval);
  EditReply reply = c.ops.files.edit_file(*sandbox, *req);
  std::string text = "replaced " + std::to_string(reply.replaced) +
                     (reply.replaced == 1 ? " occurrence" : " occurrences") + " in " + reply.path +
                     "\n" + reply.diff;
  return {false, std::move(text), edit_reply_json(reply)};
}

ToolResult tool_list_dir(ToolContext& c) {
  auto [id, rest] = c.split_sandbox_id();
  JsonBody body = parse_arguments(rest);
  auto path = validate_path(body.string("path", kMaxPathBytes).value_or(""));
  auto limit = body.integer("limit", 1, kMaxListLimit).value_or(kDefaultListEntries);
  finish_arguments(body);
  if (!path) throw path.error();
  c.record.params_json = "{\"path\":" + to_json_string(*path) + "}";
  auto sandbox = c.sandbox(id);
  ListOptions options;
  options.max_entries = static_cast<std::size_t>(limit);
  auto listing = sandbox->list_dir(*path, options);
  if (!listing) throw from_error(listing.error());
  auto entries = std::move(listing->entries);
  std::sort(entries.begin(), entries.end(),
            [](const SftpEntry& a, const SftpEntry& b) { return a.name < b.name; });
  std::string text;
  for (const auto& e : entries) {
    const char* type = e.attrs.is_dir()       ? "dir "
                       : e.attrs.is_symlink() ? "link"
                       : e.attrs.is_regular() ? "file"
                                              : "other";
    char size[24];
    std::snprintf(size, sizeof size, "%10llu", static_cast<unsigned long long>(e.attrs.size));
    text += std::string(type) + " " + octal(e.attrs.mode) + " " + size + " " + e.name +
            (e.attrs.is_dir() ? "/" : "") + "\n";
  }
  if (entries.empty()) text = "(empty directory)\n";
  if (listing->truncated)
    text += "[listing cut at " + std::to_string(entries.size()) + " entries]\n";
  return {false, std::move(text), ""};
}

}  // namespace pvs::service::mcp
