// The tools as a model sees them (tools/list). Descriptions say what a tool does, when to use
// it and what comes back; schemas are strict (unknown arguments are refused).
#include "api/mcp/tools.h"
#include "http/json.h"

namespace pvs::service::mcp {

namespace {

#define PVS_SANDBOX_ID                                                \
  R"J("sandbox_id":{"type":"string","pattern":"^sb-[0-9a-f]{12}$",)J" \
  R"J("description":"The sandbox's id, as sandbox_create or sandbox_list return it"})J"
#define PVS_TERMINAL_ID                                               \
  R"J("terminal_id":{"type":"string","pattern":"^t-[0-9a-f]{12}$",)J" \
  R"J("description":"The terminal's id, as terminal_open returns it"})J"
#define PVS_PATH(what) R"("path":{"type":"string","minLength":1,"description":")" what R"("})"

// clang-format off
constexpr ToolDef kTools[] = {
    {"sandbox_create", "Create a sandbox",
     "Create a fresh, disposable Linux sandbox (a container with a shell, SSH and its own "
     "filesystem; no internet unless asked). Returns its id (use it as sandbox_id in the other "
     "tools), address, state and expiry. Sandboxes expire after ttl_seconds; destroy them when "
     "done.",
     R"J({"type":"object","additionalProperties":false,"properties":{)J"
     R"J("cpus":{"type":"integer","minimum":1,"description":"CPU cores (default 1)"},)J"
     R"J("memory_mb":{"type":"integer","minimum":64,"description":"Memory in MiB (default 512)"},)J"
     R"J("disk_gb":{"type":"integer","minimum":0,"description":"Root disk in GiB (0: the template's)"},)J"
     R"J("internet":{"description":"Outbound access (default false): true for all HTTP/HTTPS, or only some hosts: {\"allow\":[\"pypi.org\",\"*.github.com\"],\"ports\":[443]} (ports default 80 and 443), or an operator's named list: {\"list\":\"python-packages\"}",)J"
     R"J("oneOf":[{"type":"boolean"},{"type":"object","additionalProperties":false,"required":["allow"],"properties":{"allow":{"type":"array","items":{"type":"string"},"maxItems":64},"ports":{"type":"array","items":{"type":"integer","minimum":1,"maximum":65535},"maxItems":16}}},{"type":"object","additionalProperties":false,"required":["list"],"properties":{"list":{"type":"string"}}}]},)J"
     R"J("ttl_seconds":{"type":"integer","minimum":0,"description":"Lifetime; 0: the server's default"},)J"
     R"J("on_expiry":{"type":"string","enum":["destroy","pause"],"description":"What the end of its lifetime does: destroy it (default), or pause it with its files kept"},)J"
     R"J("auto_resume":{"type":"boolean","description":"With on_expiry pause: the next tool call on it resumes it (default false)"},)J"
     R"J("labels":{"type":"object","additionalProperties":{"type":"string"},"description":"Labels to find it by later"},)J"
     R"J("hostname":{"type":"string","description":"A DNS label; default sandbox-<vmid>"},)J"
     R"J("profile":{"type":"string","description":"A hot pool profile configured by the operator"},)J"
     R"J("template":{"type":"string","description":"A template to start from: the operator's, or one sandbox_capture saved"},)J"
     R"J("volumes":{"type":"array","maxItems":64,"description":"Your volumes (disks that outlive sandboxes, made by the operator or the REST API) to mount","items":{"type":"object","additionalProperties":false,"required":["volume","path"],"properties":{"volume":{"type":"string","description":"The volume's name or id"},"path":{"type":"string","description":"Where to mount it, e.g. /mnt/work"},"read_only":{"type":"boolean"}}}}}})J",
     false, false, false, true},
    {"sandbox_list", "List sandboxes",
     "List the sandboxes you own (optionally only those carrying every given label): id, "
     "state, address, internet, expiry.",
     R"J({"type":"object","additionalProperties":false,"properties":{)J"
     R"J("labels":{"type":"object","additionalProperties":{"type":"string"},"description":"Only sandboxes with all of these labels"}}})J",
     true, false, true, false},
    {"sandbox_destroy", "Destroy a sandbox",
     "Destroy a sandbox and everything in it (irreversible).",
     R"J({"type":"object","additionalProperties":false,"required":["sandbox_id"],"properties":{)J"
     PVS_SANDBOX_ID "}}",
     false, true, true, false},
    {"sandbox_ports", "List a sandbox's open ports",
     "List the TCP ports something listens on in a sandbox (a web app, an API, a notebook), "
     "each with its addresses and its preview path on this server "
     "(/v1/sandboxes/<id>/ports/<port>/): open it with the same bearer token.",
     R"J({"type":"object","additionalProperties":false,"required":["sandbox_id"],"properties":{)J"
     PVS_SANDBOX_ID "}}",
     true, false, true, false},
    {"sandbox_preview", "Make a preview link to a sandbox's port",
     "Make a link to a port of a sandbox (a web app, a notebook) that a person can open in a "
     "browser without the API token, until it expires: its path on this server "
     "(/v1/previews/...). Anyone holding the link reaches that port, so share it only with "
     "whoever should.",
     R"J({"type":"object","additionalProperties":false,"required":["sandbox_id","port"],"properties":{)J"
     PVS_SANDBOX_ID ","
     R"J("port":{"type":"integer","minimum":1,"maximum":65535,"description":"The port the service listens on"},)J"
     R"J("expires_in_seconds":{"type":"integer","minimum":60,"description":"How long the link works (default 3600)"}}})J",
     false, false, true, false},
    {"sandbox_pause", "Pause a sandbox",
     "Pause a sandbox you are done with for now: its container stops, its files stay (running "
     "programs end). It costs nothing while paused; sandbox_resume starts it again.",
     R"J({"type":"object","additionalProperties":false,"required":["sandbox_id"],"properties":{)J"
     PVS_SANDBOX_ID "}}",
     false, false, false, false},
    {"sandbox_resume", "Resume a sandbox",
     "Start a paused sandbox again, with its files as they were; returns once it answers.",
     R"J({"type":"object","additionalProperties":false,"required":["sandbox_id"],"properties":{)J"
     PVS_SANDBOX_ID ","
     R"J("ttl_seconds":{"type":"integer","minimum":0,"description":"Its lifetime from now; 0: the time it had left"}}})J",
     false, false, false, false},
    {"sandbox_capture", "Save a sandbox's files as a template",
     "Save a sandbox's files as they are now as a template of your own (running programs and "
     "memory are not kept). sandbox_create with template set to its name starts a new sandbox "
     "from those files. The sandbox keeps running.",
     R"J({"type":"object","additionalProperties":false,"required":["sandbox_id"],"properties":{)J"
     PVS_SANDBOX_ID ","
     R"J("name":{"type":"string","pattern":"^[a-z][a-z0-9-]{0,31}$","description":"The template's name (default: snap- and 12 hex digits)"}}})J",
     false, false, false, false},
    {"sandbox_fork", "Fork a sandbox",
     "Make new sandboxes of a sandbox's files as they are now, with its size, labels and "
     "internet: all of them or none. Returns their ids; each is yours to destroy. Running "
     "programs are not copied (each new sandbox starts fresh from the files).",
     R"J({"type":"object","additionalProperties":false,"required":["sandbox_id"],"properties":{)J"
     PVS_SANDBOX_ID ","
     R"J("count":{"type":"integer","minimum":1,"maximum":64,"description":"How many (default 1)"},)J"
     R"J("ttl_seconds":{"type":"integer","minimum":1,"description":"Their lifetime (default: the server's)"}}})J",
     false, false, false, true},
    {"exec", "Run a shell command",
     "Run a shell command (sh -c) in a sandbox and wait for it. Returns the exit code, stdout "
     "and stderr; long output keeps its beginning and end with the middle left out. The command "
     "is killed when timeout_seconds pass (default 50). Each call is a new shell: use cwd and env "
     "rather than cd/export in an earlier call.",
     R"J({"type":"object","additionalProperties":false,"required":["sandbox_id","command"],"properties":{)J"
     PVS_SANDBOX_ID ","
     R"J("command":{"type":"string","minLength":1,"description":"Shell command line"},)J"
     R"J("cwd":{"type":"string","description":"Absolute working directory (default: the home directory)"},)J"
     R"J("env":{"type":"object","additionalProperties":{"type":"string"},"description":"Environment variables"},)J"
     R"J("stdin":{"type":"string","description":"Text written to the command's standard input"},)J"
     R"J("timeout_seconds":{"type":"integer","minimum":1,"description":"Kill the command after this long (default 50)"}}})J",
     false, false, false, true},
    {"read_file", "Read a text file",
     "Read a text file from a sandbox. Returns its lines numbered like cat -n (the number and "
     "tab are not part of the file); use offset and limit to page through long files. Binary "
     "files are refused (inspect them with exec).",
     R"J({"type":"object","additionalProperties":false,"required":["sandbox_id","path"],"properties":{)J"
     PVS_SANDBOX_ID "," PVS_PATH("Absolute path of the file") ","
     R"J("offset":{"type":"integer","minimum":1,"description":"First line to return (1-based, default 1)"},)J"
     R"J("limit":{"type":"integer","minimum":1,"description":"Lines to return (default 2000)"}}})J",
     true, false, true, false},
    {"write_file", "Write a file",
     "Create or replace a file in a sandbox with the given text (atomically; parent directories "
     "are created). Prefer edit_file to change part of an existing file.",
     R"J({"type":"object","additionalProperties":false,"required":["sandbox_id","path","content"],"properties":{)J"
     PVS_SANDBOX_ID "," PVS_PATH("Absolute path of the file") ","
     R"J("content":{"type":"string","description":"The whole new content"},)J"
     R"J("mode":{"type":"string","pattern":"^[0-7]{3,4}$","description":"Octal permissions (default 0644)"}}})J",
     false, true, true, true},
    {"edit_file", "Edit a file",
     "Replace an exact piece of text in a file in a sandbox. old_string must match exactly "
     "(whitespace and indentation included) and occur exactly once, unless replace_all is true; "
     "include enough surrounding lines to make it unique. Returns a diff of the change.",
     R"J({"type":"object","additionalProperties":false,"required":["sandbox_id","path","old_string","new_string"],"properties":{)J"
     PVS_SANDBOX_ID "," PVS_PATH("Absolute path of the file") ","
     R"J("old_string":{"type":"string","minLength":1,"description":"The exact text to replace"},)J"
     R"J("new_string":{"type":"string","description":"The text to put in its place (may be empty)"},)J"
     R"J("replace_all":{"type":"boolean","description":"Replace every occurrence (default false)"}}})J",
     false, true, false, true},
    {"list_dir", "List a directory",
     "List a directory in a sandbox: one entry per line with type, permissions, size and name "
     "(directories end with /).",
     R"J({"type":"object","additionalProperties":false,"required":["sandbox_id","path"],"properties":{)J"
     PVS_SANDBOX_ID "," PVS_PATH("Absolute path of the directory") ","
     R"J("limit":{"type":"integer","minimum":1,"description":"At most this many entries (default 1000)"}}})J",
     true, false, true, false},
    {"internet", "Set a sandbox's internet access",
     "Allow (enabled: true) or block (enabled: false) a sandbox's outbound HTTP/HTTPS, or allow "
     "only some hosts: allow (DNS names; *.example.com for its subdomains) with optional ports "
     "(default 80 and 443), or list (an operator's named list). Give exactly one of enabled, "
     "allow, list. A host not allowed fails at once (connection refused or DNS REFUSED). "
     "Returns the sandbox's state and still_refused: the names the sandbox asked for and was "
     "refused that the new setting still refuses (ask for those if it needs them).",
     R"J({"type":"object","additionalProperties":false,"required":["sandbox_id"],"properties":{)J"
     PVS_SANDBOX_ID ","
     R"J("enabled":{"type":"boolean","description":"true: allow all HTTP/HTTPS; false: block"},)J"
     R"J("allow":{"type":"array","items":{"type":"string"},"maxItems":64,"description":"Only these hosts, e.g. [\"pypi.org\", \"*.github.com\"]"},)J"
     R"J("ports":{"type":"array","items":{"type":"integer","minimum":1,"maximum":65535},"maxItems":16,"description":"With allow: the ports (default [80, 443])"},)J"
     R"J("list":{"type":"string","description":"An operator's named allowlist, e.g. python-packages"}}})J",
     false, false, true, true},
    {"terminal_open", "Open a terminal",
     "Open an interactive terminal (a pseudo-terminal running the login shell, or command) in a "
     "sandbox, for programs that need one: REPLs, editors, pagers, prompts, anything that waits "
     "for typed input. Returns its terminal_id and its first screen. Prefer exec for plain "
     "commands. Close it with terminal_close when done.",
     R"J({"type":"object","additionalProperties":false,"required":["sandbox_id"],"properties":{)J"
     PVS_SANDBOX_ID ","
     R"J("command":{"type":"string","description":"Program to run (sh -c); default: the login shell"},)J"
     R"J("cols":{"type":"integer","minimum":1,"maximum":1000,"description":"Width (default 80)"},)J"
     R"J("rows":{"type":"integer","minimum":1,"maximum":1000,"description":"Height (default 24)"},)J"
     R"J("cwd":{"type":"string","description":"Absolute working directory"},)J"
     R"J("env":{"type":"object","additionalProperties":{"type":"string"},"description":"Environment variables"}}})J",
     false, false, false, false},
    {"terminal_input", "Type into a terminal",
     "Type text and press keys in a terminal, then wait (by default until the output is quiet "
     "for 300 ms, at most 10 s) and return the screen as text. Lines end only when you press "
     "Enter: send [{\"text\":\"ls -l\"},{\"key\":\"Enter\"}]. Keys: Enter, Tab, Escape, "
     "Backspace, Up, Down, Left, Right, Home, End, PageUp, PageDown, Delete, F1..F12, and C-x "
     "(Ctrl), M-x (Alt), e.g. C-c to interrupt, C-d for end of input. wait.pattern waits for a "
     "regular expression on the screen instead (e.g. a prompt).",
     R"J({"type":"object","additionalProperties":false,"required":["sandbox_id","terminal_id","input"],"properties":{)J"
     PVS_SANDBOX_ID "," PVS_TERMINAL_ID ","
     R"J("input":{"type":"array","items":{"type":"object","additionalProperties":false,"properties":{)J"
     R"J("text":{"type":"string"},"key":{"type":"string"}}},"description":"Text and keys, in order"},)J"
     R"J("wait":{"type":"object","additionalProperties":false,"description":"What to wait for before reading the screen","properties":{)J"
     R"J("pattern":{"type":"string","description":"Regular expression (ECMAScript) on the screen text"},)J"
     R"J("quiet_ms":{"type":"integer","minimum":0,"description":"Output quiet this long"},)J"
     R"J("timeout_ms":{"type":"integer","minimum":0,"description":"At most this long (default 10000)"},)J"
     R"J("scrollback":{"type":"integer","minimum":0,"description":"Also return this many lines scrolled off the top"}}}}})J",
     false, false, false, true},
    {"terminal_screen", "Read a terminal's screen",
     "Return a terminal's screen as text (and whether its program still runs, with its exit "
     "code), without typing anything.",
     R"J({"type":"object","additionalProperties":false,"required":["sandbox_id","terminal_id"],"properties":{)J"
     PVS_SANDBOX_ID "," PVS_TERMINAL_ID ","
     R"J("scrollback":{"type":"integer","minimum":0,"description":"Also return this many lines scrolled off the top"}}})J",
     true, false, true, false},
    {"terminal_close", "Close a terminal",
     "Hang up a terminal: its program and everything started from it are ended.",
     R"J({"type":"object","additionalProperties":false,"required":["sandbox_id","terminal_id"],"properties":{)J"
     PVS_SANDBOX_ID "," PVS_TERMINAL_ID "}}",
     false, true, true, false},
};
// clang-format on

#undef PVS_SANDBOX_ID
#undef PVS_PATH
#undef PVS_TERMINAL_ID

}  // namespace

std::span<const ToolDef> tool_defs() {
  return kTools;
}

const ToolDef* find_tool(std::string_view name) {
  for (const ToolDef& t : kTools)
    if (t.name == name) return &t;
  return nullptr;
}

std::string_view server_instructions() {
  return "Disposable Linux sandboxes. Create one with sandbox_create, then run commands (exec) "
         "and read, write and edit files in it by its sandbox_id; destroy it with "
         "sandbox_destroy when done. Sandboxes have no internet unless enabled.";
}

std::string tools_list_json() {
  JsonWriter w;
  w.begin_object().key("tools").begin_array();
  for (const ToolDef& t : kTools) {
    w.begin_object().key("name").value(t.name).key("title").value(t.title);
    w.key("description").value(t.description).key("inputSchema").raw(t.input_schema);
    w.key("annotations").begin_object().key("title").value(t.title);
    w.key("readOnlyHint").value(t.read_only).key("destructiveHint").value(t.destructive);
    w.key("idempotentHint").value(t.idempotent).key("openWorldHint").value(false);
    w.end_object().end_object();
  }
  return w.end_array().end_object().take();
}

std::string tool_result_json(const ToolResult& r) {
  JsonWriter w;
  w.begin_object().key("content").begin_array();
  w.begin_object().key("type").value("text").key("text").value(r.text).end_object();
  w.end_array();
  if (!r.structured.empty()) w.key("structuredContent").raw(r.structured);
  w.key("isError").value(r.is_error);
  return w.end_object().take();
}

}  // namespace pvs::service::mcp
