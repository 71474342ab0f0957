#!/usr/bin/env bash
# The MCP Inspector's command line against pve-sandbox's /mcp, in either protocol era:
#   modern  revision 2026-07-28: no session; the CLI asks server/discover, then every request
#           carries its revision in _meta and the MCP-Protocol-Version / Mcp-Method / Mcp-Name
#           headers
#   legacy  revision 2025-11-25: initialize, then the Mcp-Session-Id session
# Needs Node 22 or later (npx fetches the pinned Inspector the first time).
#
#   PVS_TOKEN=... examples/mcp/inspector.sh [modern|legacy] [url]
set -euo pipefail

era=${1:-modern}
url=${2:-http://127.0.0.1:8787/mcp}
: "${PVS_TOKEN:?set PVS_TOKEN to an API token}"
inspector=(npx -y @modelcontextprotocol/inspector@2.12.0 --cli "$url" --transport http
  --protocol-era "$era" --header "Authorization: Bearer $PVS_TOKEN")

# The tools, with the CLI's portability check of their schemas.
"${inspector[@]}" --method tools/list --strict
# A sandbox, a command in it, and away with it.
sandbox=$("${inspector[@]}" --format json --method tools/call --tool-name sandbox_create \
  --tool-args-json '{"ttl_seconds":600}' | sed -n 's/.*"id": *"\(sb-[0-9a-f]\{12\}\)".*/\1/p' |
  head -n1)
echo "sandbox: $sandbox"
"${inspector[@]}" --method tools/call --tool-name exec \
  --tool-args-json "{\"sandbox_id\":\"$sandbox\",\"command\":\"uname -a\"}"
"${inspector[@]}" --method tools/call --tool-name sandbox_destroy \
  --tool-args-json "{\"sandbox_id\":\"$sandbox\"}"
