// Files of a sandbox (room api/files/): GET /v1/sandboxes/{id}/files (a download streamed from
// SFTP, or a directory listing), PUT .../files (an upload streamed to SFTP, atomic, checked
// against its Content-Digest) and POST .../files/edit (file_edit.h). The policy judges the path
// the sandbox resolves (real_path.h). A handler class with narrow dependencies: the config's
// limits, the sandboxes a caller may use (SandboxOps), the policy gate and the reply helpers.
//
// edit_file is what the MCP tool edit_file shares with POST .../files/edit.
#pragma once

#include <cstdint>
#include <string>

#include "api/sandboxes/sandbox_ops.h"
#include "core/config/config.h"
#include "http/replies.h"
#include "http/request_context.h"
#include "http/requests.h"
#include "policy/gate.h"

namespace pvs::service {

// What files/edit did: the reply of the REST call and of the MCP tool edit_file.
struct EditReply {
  std::string path;
  std::size_t replaced = 0;
  std::uint64_t size = 0;  // of the file now
  bool crlf = false;       // matched with CRLF line ends
  std::string diff;        // unified, a few lines of context, cut at 4 KiB
};
std::string edit_reply_json(const EditReply& reply);

class FileRoutes {
 public:
  FileRoutes(const ServiceConfig& config, SandboxOps& sandboxes, PolicyGate& gate, Replies& replies)
      : config_(config), sandboxes_(sandboxes), gate_(gate), replies_(replies) {}

  void download(RequestContext& ctx);  // GET .../files
  void upload(RequestContext& ctx);    // PUT .../files
  void edit(RequestContext& ctx);      // POST .../files/edit

  // files/edit: the file read whole (at most kMaxEditFileBytes, text only), the edit applied,
  // written back atomically (temporary file beside it, renamed over it) with its mode.
  EditReply edit_file(Sandbox& sandbox, const EditRequest& request);

 private:
  const ServiceConfig& config_;
  SandboxOps& sandboxes_;
  PolicyGate& gate_;
  Replies& replies_;
};

}  // namespace pvs::service
