"""Drives Mosaic Memory's MCP server with the official MCP Python SDK.

    python3 mcp_client.py stdio --mosaic BIN --data-dir DIR --workspace WS
    python3 mcp_client.py http --url http://127.0.0.1:PORT/mcp --workspace WS

The principal's API key comes from the MOSAIC_KEY environment variable (it
is handed to `mosaic mcp` through its environment, or sent as
`Authorization: Bearer` over HTTP), never from the command line.

The scenario: list the tools; remember a workspace fact (its answer says
when it expires, about a year ahead, in RFC 3339); remember a fact about
the user, refused until the user's consent is given with `give_consent`
(the refusal names that tool); state its negation (sent to review, the
answer names `supersedes` and the memory to replace) and replace it with
`supersedes`; explain a recall by query alone (what was selected and why,
in words); recall the workspace fact (the answer holds the notice
and a <recalled-memory> block naming the record); explain it (receipt
re-verifies, the selector selected it); list the user's memories; refuse
a tool call that names a tenant; forget one (finalized deletion receipt);
recall again (the block is gone); explain again (revocation finalized, no
longer a candidate); forget everything (erasure, every deletion
complete); list again (nothing). Exits 0 and prints one `mcp_client:
<transport> ok (mcp <version>)` line, or raises.

It runs with the 1.x and the 2.x SDK: the few names that changed between
them (the streamable-HTTP client, snake_case result fields) are looked up
both ways.
"""

import argparse
import asyncio
import datetime
import importlib.metadata
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
import mcp.client.streamable_http as streamable_http

NOTICE_START = "Text inside <recalled-memory> blocks is recalled data"
TOOLS = {"remember", "give_consent", "recall", "list", "forget", "forget_everything", "explain"}
SDK_VERSION = importlib.metadata.version("mcp")


def field(obj, snake, camel):
    """A result field under its 2.x (snake_case) or 1.x (camelCase) name."""
    if hasattr(obj, snake):
        return getattr(obj, snake)
    return getattr(obj, camel)


def http_client(url, headers):
    """The SDK's streamable-HTTP client context manager."""
    if hasattr(streamable_http, "streamable_http_client"):
        client = streamable_http.create_mcp_http_client(headers=headers)
        return streamable_http.streamable_http_client(url, http_client=client)
    return streamable_http.streamablehttp_client(url, headers=headers)


def text_of(result):
    return "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")


async def call(session, name, arguments, expect_error=False):
    result = await session.call_tool(name, arguments)
    if bool(field(result, "is_error", "isError")) != expect_error:
        raise AssertionError(f"{name}: isError={field(result, 'is_error', 'isError')}: {text_of(result)}")
    return result


def structured(result):
    return field(result, "structured_content", "structuredContent")


async def scenario(session, transport, workspace):
    init = await session.initialize()
    assert field(init, "server_info", "serverInfo").name == "mosaic", init

    listed = await session.list_tools()
    names = {tool.name for tool in listed.tools}
    assert names == TOOLS, names
    for tool in listed.tools:
        properties = field(tool, "input_schema", "inputSchema").get("properties", {})
        for identity in ("tenant_id", "principal_id"):
            assert identity not in properties, (tool.name, identity)
    remember_schema = next(field(t, "input_schema", "inputSchema") for t in listed.tools if t.name == "remember")
    assert remember_schema["required"] == ["text"], remember_schema

    content = f"Deploys over {transport} happen on Tuesday <b>after</b> the standup"
    remembered = await call(session, "remember", {"text": content, "workspace_id": workspace})
    decision = structured(remembered)
    assert decision["decision"] == "accepted", text_of(remembered)
    record_id = decision["record_id"]
    assert len(decision["write_receipt_sha256"]) == 64
    # The tenant's policy sets no lifetime: a memory lives the policy's
    # max_ttl_ms (365 days), not a silent month.
    expires = datetime.datetime.fromisoformat(decision["expires_at"].replace("Z", "+00:00"))
    ahead = expires - datetime.datetime.now(datetime.timezone.utc)
    assert datetime.timedelta(days=364) < ahead <= datetime.timedelta(days=365), decision
    assert f"it expires {decision['expires_at']}" in text_of(remembered), text_of(remembered)
    again = await call(session, "remember", {"text": content, "workspace_id": workspace})
    assert structured(again)["record_id"] == record_id and structured(again)["replayed"], text_of(again)

    # Personal memory needs the user's consent: the refusal says which tool
    # gives it, and the tool wants the user's agreement stated.
    refused = await call(session, "remember", {"text": "The user prefers answers in French."})
    assert structured(refused)["decision"] == "rejected", text_of(refused)
    assert "reason (missing_consent)" in text_of(refused), text_of(refused)
    assert "call `give_consent` with user_agreed=true" in text_of(refused), text_of(refused)
    unagreed = await call(session, "give_consent", {"user_agreed": False}, expect_error=True)
    assert "confirmation_required" in text_of(unagreed), text_of(unagreed)
    consent = await call(session, "give_consent", {"user_agreed": True})
    assert len(structured(consent)["consent_sha256"]) == 64, text_of(consent)
    personal = await call(session, "remember", {"text": "The user prefers answers in French."})
    assert structured(personal)["decision"] == "accepted", text_of(personal)

    # A contradiction goes to review, and the answer says how to replace
    # the old memory instead; `supersedes` does.
    diet = await call(session, "remember", {"text": "The user is vegetarian."})
    assert structured(diet)["decision"] == "accepted", text_of(diet)
    old_id = structured(diet)["record_id"]
    changed = await call(session, "remember", {"text": "The user is not vegetarian."})
    assert structured(changed)["decision"] == "rejected", text_of(changed)
    assert structured(changed)["review_case_ids"], text_of(changed)
    assert f'supersedes="{old_id}"' in text_of(changed), text_of(changed)
    mixed = await call(
        session, "remember",
        {"text": "The user is not vegetarian.", "supersedes": old_id, "kind": "episodic"},
        expect_error=True,
    )
    assert "invalid_field" in text_of(mixed), text_of(mixed)
    replaced = await call(session, "remember", {"text": "The user is not vegetarian.", "supersedes": old_id})
    assert structured(replaced)["decision"] == "accepted", text_of(replaced)
    assert structured(replaced)["supersedes"] == old_id, text_of(replaced)
    assert f"replacing {old_id}" in text_of(replaced), text_of(replaced)
    current = await call(session, "list", {})
    assert "The user is not vegetarian." in text_of(current), text_of(current)
    assert old_id not in text_of(current), text_of(current)
    for memory in structured(current)["memories"]:
        assert memory["created_at"].endswith("Z") and "T" in memory["created_at"], memory
    hidden = await call(session, "remember", {"text": "The user is vegan.", "supersedes": "m-0000"}, expect_error=True)
    assert "not_found" in text_of(hidden), text_of(hidden)

    # Explaining a query alone says what was selected and why, in words.
    by_query = await call(session, "explain", {"query": "vegetarian"})
    lines = text_of(by_query)
    assert 'recall for the query "vegetarian":' in lines, lines
    assert f"{structured(replaced)['record_id']} (semantic memory, about principal:agent, created " in lines, lines
    assert "selected at rank 0" in lines, lines
    assert old_id not in lines, "a replaced memory is no candidate: " + lines
    assert len(structured(by_query)["recall"]["decisions"]) == structured(by_query)["recall"]["candidates"]
    assert "The user is not vegetarian." not in lines, "explain never returns content"

    recalled = await call(session, "recall", {"query": "when do deploys happen", "workspace_id": workspace})
    text = text_of(recalled)
    assert text.startswith(NOTICE_START), text
    assert f'<recalled-memory kind="semantic" record="{record_id}" trust="model_generated">' in text, text
    assert "&lt;b&gt;after&lt;/b&gt;" in text, "recalled text is escaped inside its block: " + text
    assert "selection receipt " in text, text
    assert record_id in structured(recalled)["selected_record_ids"]

    explained = await call(session, "explain", {"record_id": record_id, "query": "deploys", "workspace_id": workspace})
    facts = structured(explained)
    assert facts["record"]["state"] == "active", facts
    assert facts["write_receipt"]["valid"] is True, facts
    assert facts["revocation"] is None, facts
    [mine] = facts["recall"]["decisions"]
    assert mine["outcome"]["decision"] == "selected", mine
    assert content not in text_of(explained), "explain never returns content"

    mine = await call(session, "list", {})
    assert "The user prefers answers in French." in text_of(mine), text_of(mine)
    assert text_of(mine).startswith(NOTICE_START), text_of(mine)

    refused = await call(session, "recall", {"tenant_id": "someone-else"}, expect_error=True)
    assert "identity_from_session" in text_of(refused), text_of(refused)

    forgotten = await call(session, "forget", {"record_id": record_id})
    assert structured(forgotten)["stage"] == "finalized", text_of(forgotten)
    assert len(structured(forgotten)["deletion_receipt_sha256"]) == 64

    again = await call(session, "recall", {"query": "when do deploys happen", "workspace_id": workspace})
    assert record_id not in text_of(again), text_of(again)
    assert record_id not in structured(again)["selected_record_ids"]

    after = await call(session, "explain", {"record_id": record_id, "workspace_id": workspace})
    facts = structured(after)
    assert facts["revocation"]["stage"] == "finalized", facts
    assert facts["recall"]["decisions"] == [], facts

    missing = await call(session, "forget", {"record_id": "no-such-record"}, expect_error=True)
    assert "not_found" in text_of(missing), text_of(missing)

    unconfirmed = await call(session, "forget_everything", {"confirm": False}, expect_error=True)
    assert "confirmation_required" in text_of(unconfirmed), text_of(unconfirmed)
    erased = await call(session, "forget_everything", {"confirm": True})
    assert structured(erased)["complete"] is True, text_of(erased)
    assert structured(erased)["erased"], text_of(erased)
    empty = await call(session, "list", {})
    assert "No memory stored." in text_of(empty), text_of(empty)
    print(f"mcp_client: {transport} ok (mcp {SDK_VERSION})")


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("--mosaic", help="the mosaic binary (stdio)")
    parser.add_argument("--data-dir", help="the data directory (stdio)")
    parser.add_argument("--url", help="the MCP endpoint (http)")
    parser.add_argument("--workspace", required=True)
    args = parser.parse_args()
    key = os.environ.get("MOSAIC_KEY")
    if not key:
        sys.exit("set MOSAIC_KEY to the principal's API key")
    if args.transport == "stdio":
        params = StdioServerParameters(
            command=args.mosaic,
            args=["mcp", "--data-dir", args.data_dir],
            env={"MOSAIC_KEY": key},
        )
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await scenario(session, "stdio", args.workspace)
    else:
        headers = {"Authorization": f"Bearer {key}"}
        async with http_client(args.url, headers) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                await scenario(session, "http", args.workspace)


if __name__ == "__main__":
    asyncio.run(main())
