#!/usr/bin/python3
"""Stand-in for pvesh, pveum, pct, pveam, systemctl, ifreload, sysctl, apt-get, dpkg-query and
nft in the setup tests. Invoked through symlinks named like the real tools. Every call is
appended to $STUB_LOG (one shell-quoted command line); state (pools, roles, users, tokens, ACLs,
containers, templates, units, packages) lives in $STUB_STATE/state.json so that a second run
sees what the first one created. $STUB_FAIL="prefix" makes calls starting with it fail."""
import json
import os
import shlex
import sys

name = os.path.basename(sys.argv[0])
args = sys.argv[1:]
line = shlex.join([name] + args)
with open(os.environ["STUB_LOG"], "a") as f:
    f.write(line + "\n")
fail = os.environ.get("STUB_FAIL", "")
if fail and line.startswith(fail):
    print("stub: injected failure", file=sys.stderr)
    sys.exit(1)

state_path = os.path.join(os.environ["STUB_STATE"], "state.json")
root = os.environ.get("PVS_ROOT", "")
try:
    st = json.load(open(state_path))
except FileNotFoundError:
    st = {}
for k in ("pools", "roles", "users", "tokens", "acl", "cts", "vztmpl", "enabled", "active",
          "packages", "mainpid"):
    st.setdefault(k, [] if k in ("acl",) else {})


def save():
    json.dump(st, open(state_path, "w"), indent=1, sort_keys=True)


def opt(flag, default=None):
    if flag in args:
        return args[args.index(flag) + 1]
    return default


def missing(what):
    print("%s does not exist" % what, file=sys.stderr)
    sys.exit(2)


def pvesh():
    verb, path = args[0], args[1]
    parts = path.strip("/").split("/")
    if verb == "get":
        if parts[0] == "pools" and len(parts) == 2:
            if parts[1] not in st["pools"]:
                missing("pool")
            members = [{"type": "lxc", "vmid": int(v), "id": "lxc/%s" % v}
                       for v, c in sorted(st["cts"].items()) if c.get("pool") == parts[1]]
            print(json.dumps({"poolid": parts[1], "members": members}))
        elif parts[:2] == ["access", "roles"] and len(parts) == 3:
            if parts[2] not in st["roles"]:
                missing("role")
            print(json.dumps({p: 1 for p in st["roles"][parts[2]]}))
        elif parts[:2] == ["access", "users"] and len(parts) == 3:
            if parts[2] not in st["users"]:
                missing("user")
            print(json.dumps({"userid": parts[2]}))
        elif parts[:2] == ["access", "users"] and len(parts) == 5 and parts[3] == "token":
            if "%s!%s" % (parts[2], parts[4]) not in st["tokens"]:
                missing("token")
            print(json.dumps({"privsep": 1}))
        elif parts == ["access", "acl"]:
            print(json.dumps(st["acl"]))
        else:
            missing(path)
    elif verb == "create" and parts == ["pools"]:
        pid = opt("--poolid")
        if pid in st["pools"]:
            print("pool '%s' already exists" % pid, file=sys.stderr)
            sys.exit(2)
        st["pools"][pid] = {}
    else:
        print("stub pvesh: unsupported %s" % line, file=sys.stderr)
        sys.exit(3)


def pveum():
    if args[:2] in (["role", "add"], ["role", "modify"]):
        if args[1] == "add" and args[2] in st["roles"]:
            sys.exit(2)
        if args[1] == "modify" and args[2] not in st["roles"]:
            sys.exit(2)
        st["roles"][args[2]] = opt("--privs").split(",")
    elif args[:2] == ["user", "add"]:
        if args[2] in st["users"]:
            sys.exit(2)
        st["users"][args[2]] = {}
    elif args[:3] == ["user", "token", "add"]:
        tid = "%s!%s" % (args[3], args[4])
        if args[3] not in st["users"] or tid in st["tokens"]:
            sys.exit(2)
        st["tokens"][tid] = {"privsep": opt("--privsep")}
        print(json.dumps({"full-tokenid": tid, "info": {"privsep": 1},
                          "value": "0b9e3c2a-5f1d-4c7e-9a8b-stub-secret"}))
    elif args[:2] == ["acl", "modify"]:
        path = args[2]
        kind = "user" if "--users" in args else "token"
        ugid = opt("--users") or opt("--tokens")
        entry = {"path": path, "roleid": opt("--roles"), "type": kind, "ugid": ugid,
                 "propagate": 1}
        if entry not in st["acl"]:
            st["acl"].append(entry)
    else:
        print("stub pveum: unsupported %s" % line, file=sys.stderr)
        sys.exit(3)


def ct_conf_path(vmid):
    return os.path.join(root + "/etc/pve/lxc", "%s.conf" % vmid)


def pct():
    verb = args[0]
    vmid = args[1] if len(args) > 1 else None
    if verb == "config":
        if vmid not in st["cts"]:
            missing("CT %s" % vmid)
        sys.stdout.write(open(ct_conf_path(vmid)).read())
    elif verb == "create":
        if vmid in st["cts"]:
            sys.exit(2)
        net0 = ""  # a container without --net0 (the volume holder) has no network
        if opt("--net0"):
            net0 = "net0: %s,hwaddr=BC:24:11:AA:BB:%02X\n" % (opt("--net0"), int(vmid) % 256)
        os.makedirs(os.path.dirname(ct_conf_path(vmid)), exist_ok=True)
        with open(ct_conf_path(vmid), "w") as f:
            f.write("arch: amd64\nhostname: %s\n%sswap: %s\nunprivileged: %s\n"
                    "features: %s\n" % (opt("--hostname"), net0, opt("--swap"),
                                        opt("--unprivileged"), opt("--features")))
        st["cts"][vmid] = {"status": "stopped", "pool": opt("--pool")}
    elif verb == "set":
        text = open(ct_conf_path(vmid)).read().splitlines()
        text = [("net0: " + opt("--net0")) if l.startswith("net0:") else l for l in text]
        open(ct_conf_path(vmid), "w").write("\n".join(text) + "\n")
    elif verb == "template":
        with open(ct_conf_path(vmid), "a") as f:
            f.write("template: 1\n")
    elif verb in ("start", "stop"):
        st["cts"][vmid]["status"] = "running" if verb == "start" else "stopped"
    elif verb == "exec":
        pass
    else:
        print("stub pct: unsupported %s" % line, file=sys.stderr)
        sys.exit(3)


def pveam():
    if args[0] == "list":
        for t in sorted(st["vztmpl"].get(args[1], [])):
            print("%s:vztmpl/%s   123.45MB" % (args[1], t))
    elif args[0] == "update":
        pass
    elif args[0] == "available":  # what a PVE 9 node's pveam offers (the system section)
        for t in st.get("available") or ["debian-12-standard_12.12-1_amd64.tar.zst",
                                         "debian-13-standard_13.1-2_amd64.tar.zst",
                                         "debian-13-standard_13.6-1_amd64.tar.zst",
                                         "ubuntu-24.04-standard_24.04-2_amd64.tar.zst"]:
            print("system          %s" % t)
    elif args[0] == "download":
        st["vztmpl"].setdefault(args[1], []).append(args[2])


def systemctl():
    if args[0] == "is-enabled":
        print("enabled" if st["enabled"].get(args[1]) else "disabled")
        sys.exit(0 if st["enabled"].get(args[1]) else 1)
    if args[0] == "is-active":
        print("active" if st["active"].get(args[1]) else "inactive")
        sys.exit(0 if st["active"].get(args[1]) else 3)
    if args[0] == "show":  # show -p MainPID --value UNIT: the pid a test put into the state
        print(st["mainpid"].get(args[-1], 0))
        sys.exit(0)
    if args[0] == "enable":
        st["enabled"][args[-1]] = True
    elif args[0] in ("restart", "start", "reload-or-restart"):
        st["active"][args[-1]] = True


def dpkg_query():
    pkg = args[-1]
    if st["packages"].get(pkg):
        print("install ok installed", end="")
    else:
        sys.exit(1)


def apt_get():
    for a in args:
        if not a.startswith("-") and a != "install":
            st["packages"][a] = True


handlers = {"pvesh": pvesh, "pveum": pveum, "pct": pct, "pveam": pveam, "systemctl": systemctl,
            "dpkg-query": dpkg_query, "apt-get": apt_get}
handler = handlers.get(name)
if handler:
    handler()
save()
sys.exit(0)
