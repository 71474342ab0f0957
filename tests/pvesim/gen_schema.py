#!/usr/bin/env python3
"""Extracts the request schema pvesim validates against.

Reads the endpoint list of pve-api-subset.json and copies, for each endpoint, the full
parameter schema from the official Proxmox API schema (pve-apidata.json, i.e. pve-docs
api-viewer/apidata.js). Descriptions are dropped to keep the file small; everything the
validator uses (type, optional, format, pattern, enum, minimum, maximum, maxLength,
default_key, alias, additionalProperties) is kept verbatim.

Usage: gen_schema.py SUBSET.json APIDATA.json OUT.json
"""
import json
import sys

# Endpoints pvesim models beyond the reference subset (pve-api-subset.json): the cluster
# model's storage listing, converting a CT into a template (the controller's template
# replicas), and a CT's RRD history (what a sandbox used over time).
EXTRA = [("GET", "/nodes/{node}/storage"), ("POST", "/nodes/{node}/lxc/{vmid}/template"),
         ("GET", "/nodes/{node}/lxc/{vmid}/rrddata")]

DROP = {"description", "verbose_description", "typetext", "format_description", "default",
        "renderer", "title", "requires"}


def strip_schema(schema):
    """One property schema without its documentation; recurses into nested schemas."""
    out = {}
    for key, value in schema.items():
        if key in DROP:
            continue
        if key == "format" and isinstance(value, dict):
            value = strip_properties(value)  # a property string: a map of sub-schemas
        elif key == "items" and isinstance(value, dict):
            value = strip_schema(value)
        elif key == "properties" and isinstance(value, dict):
            value = strip_properties(value)
        out[key] = value
    return out


def strip_properties(properties):
    """A map name -> schema; the names are kept as they are (one may be 'description')."""
    return {name: strip_schema(schema) for name, schema in properties.items()}


def walk(node):
    yield node
    for child in node.get("children", []):
        yield from walk(child)


def main():
    subset_path, apidata_path, out_path = sys.argv[1:4]
    subset = json.load(open(subset_path))
    apidata = json.load(open(apidata_path))
    by_path = {}
    for root in apidata:
        for node in walk(root):
            if "path" in node:
                by_path[node["path"]] = node
    endpoints = []
    wanted = [(ep["method"], ep["path"]) for ep in subset["endpoints"]]
    wanted += [extra for extra in EXTRA if extra not in wanted]
    for method, path in wanted:
        info = by_path[path]["info"][method]
        params = info.get("parameters", {})
        endpoints.append({
            "method": method,
            "path": path,
            "allowtoken": info.get("allowtoken", 0),
            "additionalProperties": params.get("additionalProperties", 0),
            "properties": strip_properties(params.get("properties", {})),
        })
    out = {
        "source": {
            "schema": subset["meta"]["schema_source"],
            "generated_by": "tests/pvesim/gen_schema.py from the reference pve-apidata.json",
            "extra": [method + " " + path for method, path in EXTRA],
        },
        "endpoints": endpoints,
    }
    with open(out_path, "w") as f:
        json.dump(out, f, indent=None, sort_keys=True, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
