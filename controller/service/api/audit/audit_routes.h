// The audit tail (admin): GET /v1/audit?limit=N[&action=A][&sandbox=ID], the last records of
// the controller's audit log, read backwards from the end of the file (audit_tail.h). It needs
// only the file's path and the reply helpers.
#pragma once

#include <string>

#include "http/replies.h"
#include "http/request_context.h"

namespace pvs::service {

class AuditRoutes {
 public:
  // `audit_file`: the log's path, or "" when this controller keeps no audit log.
  AuditRoutes(std::string audit_file, Replies& replies)
      : audit_file_(std::move(audit_file)), replies_(replies) {}

  void tail(RequestContext& ctx);

 private:
  const std::string audit_file_;
  Replies& replies_;
};

}  // namespace pvs::service
