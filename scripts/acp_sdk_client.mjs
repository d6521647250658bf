// An independent ACP client for `keel --mode acp`: the official TypeScript SDK
// (@agentclientprotocol/sdk, installed by .ci/run) drives keel with the scripted provider,
// initializes (offering its file system: fs/read_text_file and fs/write_text_file over
// in-memory buffers), opens a session, prompts three times (the second one asks for a
// permission, which this client allows once; the third edits and writes files, which keel
// does through the buffers), lists the sessions, and prints one JSON summary line that
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
// The editor's buffers by absolute path (greet.txt has unsaved changes), and its fs calls.
const buffers = new Map([[`${cwd}/greet.txt`, "hello world (unsaved)\n"]]);
const fsCalls = [];
const base = (path) => path.slice(cwd.length + 1);
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
  })
  .onRequest("fs/read_text_file", ({ params }) => {
    fsCalls.push({ method: "read", path: base(params.path) });
    return { content: buffers.get(params.path) ?? "" };
  })
  .onRequest("fs/write_text_file", ({ params }) => {
    fsCalls.push({ method: "write", path: base(params.path), content: params.content });
    buffers.set(params.path, params.content);
    return {};
  });

const summary = await app.connectWith(stream, async (agent) => {
  const init = await agent.request("initialize", {
    protocolVersion: 1,
    clientCapabilities: { fs: { readTextFile: true, writeTextFile: true } },
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
  const updatesBeforeEdit = updates.length;
  const edit = await agent.request("session/prompt", {
    sessionId: session.sessionId,
    prompt: [{ type: "text", text: "edit both files" }],
  });
  const list = await agent.request("session/list", { cwd });
  updates.length = updatesBeforeEdit;
  return {
    protocolVersion: init.protocolVersion,
    agentName: init.agentInfo?.name,
    loadSession: init.agentCapabilities?.loadSession,
    stopReasons: [hello.stopReason, rm.stopReason, edit.stopReason],
    listed: list.sessions.map((s) => s.sessionId === session.sessionId),
  };
});
child.stdin.end();
const exitCode = await exited;
process.stdout.write(JSON.stringify({ ...summary, updates, permissions, fsCalls, exitCode }) + "\n");
