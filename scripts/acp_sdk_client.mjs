// An independent ACP client for `keel --mode acp`: the official TypeScript SDK
// (@agentclientprotocol/sdk, installed by .ci/run) drives keel with the scripted provider,
// initializes, opens a session, prompts twice (the second one asks for a permission, which
// this client allows once), lists the sessions, and prints one JSON summary line that
// tests/acp_sdk.rs checks.
//
// usage: node scripts/acp_sdk_client.mjs SDK_ENTRY KEEL SCRIPT CWD
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const [sdkEntry, keel, script, cwd] = process.argv.slice(2);
const { client, ndJsonStream } = await import(pathToFileURL(sdkEntry).href);

const child = spawn(keel, ["--mode", "acp", "--provider", "scripted", "--script", script], {
  cwd,
  stdio: ["pipe", "pipe", "inherit"],
});
const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

const updates = [];
const permissions = [];
const app = client()
  .onNotification("session/update", ({ params }) => {
    updates.push(params.update.sessionUpdate);
  })
  .onRequest("session/request_permission", ({ params }) => {
    permissions.push({
      toolCallId: params.toolCall.toolCallId,
      kind: params.toolCall.kind,
      options: params.options.map((o) => o.kind),
    });
    return { outcome: { outcome: "selected", optionId: "allow_once" } };
  });

const summary = await app.connectWith(stream, async (agent) => {
  const init = await agent.request("initialize", {
    protocolVersion: 1,
    clientCapabilities: {},
    clientInfo: { name: "acp-sdk-test", version: "0" },
  });
  const session = await agent.request("session/new", { cwd, mcpServers: [] });
  const hello = await agent.request("session/prompt", {
    sessionId: session.sessionId,
    prompt: [{ type: "text", text: "hello" }],
  });
  const rm = await agent.request("session/prompt", {
    sessionId: session.sessionId,
    prompt: [{ type: "text", text: "rm it" }],
  });
  const list = await agent.request("session/list", { cwd });
  return {
    protocolVersion: init.protocolVersion,
    agentName: init.agentInfo?.name,
    loadSession: init.agentCapabilities?.loadSession,
    stopReasons: [hello.stopReason, rm.stopReason],
    listed: list.sessions.map((s) => s.sessionId === session.sessionId),
  };
});
child.stdin.end();
const exitCode = await exited;
process.stdout.write(JSON.stringify({ ...summary, updates, permissions, exitCode }) + "\n");
