// An MCP client from npm (@modelcontextprotocol/sdk) driving `airlock mcp`
// over stdio, as an MCP host would: it lists the tools, creates a sandbox,
// runs echo, writes and reads a file and deletes the sandbox. e2e.TestMCP runs
// it (after `npm ci` in a copy of this directory) with AIRLOCK_BIN, the
// binary; AIRLOCK_MCP_IMAGE, the image; AIRLOCK_MCP_PROJECT, the project dir;
// and the environment of the user whose daemon it uses. It exits 0 once every
// step gave what it should, 1 otherwise, saying which.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const bin = process.env.AIRLOCK_BIN;
const image = process.env.AIRLOCK_MCP_IMAGE;
const project = process.env.AIRLOCK_MCP_PROJECT;
if (!bin || !image || !project) {
  console.error("AIRLOCK_BIN, AIRLOCK_MCP_IMAGE and AIRLOCK_MCP_PROJECT are required");
  process.exit(2);
}

function check(cond, what, got) {
  if (!cond) {
    throw new Error(`${what}: got ${JSON.stringify(got)}`);
  }
}

// call calls a tool and returns its structured result; a tool error throws.
async function call(client, name, args) {
  const r = await client.callTool({ name, arguments: args });
  if (r.isError) {
    throw new Error(`${name}: ${r.content.map((c) => c.text).join(" ")}`);
  }
  console.log(`${name}: ${JSON.stringify(r.structuredContent)}`);
  return r.structuredContent;
}

const transport = new StdioClientTransport({ command: bin, args: ["mcp"], env: process.env, stderr: "inherit" });
const client = new Client({ name: "airlock-npm-test", version: "0.0.0" });
let id;
try {
  await client.connect(transport);
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  console.log(`tools: ${names.join(" ")}`);
  for (const want of ["create_sandbox", "run_command", "write_file", "read_file", "delete_sandbox", "list_sandboxes"]) {
    check(names.includes(want), `the tools have no ${want}`, names);
  }

  const manifest = `[sandbox]\nimage = "${image}"\nnetwork = "none"\n`;
  const sb = await call(client, "create_sandbox", { manifest, project_dir: project, labels: { client: "npm" } });
  id = sb.id;
  check(sb.state === "ready", "create_sandbox: state", sb);

  const echo = await call(client, "run_command", { sandbox_id: id, argv: ["echo", "hello from npm"] });
  check(echo.exit_code === 0 && echo.stdout === "hello from npm\n", "run_command echo", echo);

  await call(client, "write_file", { sandbox_id: id, path: "/tmp/npm.txt", content: "written by npm\n" });
  const file = await call(client, "read_file", { sandbox_id: id, path: "/tmp/npm.txt" });
  check(file.content === "written by npm\n" && file.encoding === "text", "read_file", file);

  const gone = await call(client, "delete_sandbox", { sandbox_id: id });
  check(gone.state === "deleted", "delete_sandbox: state", gone);
  id = undefined;
  console.log("npm client: OK");
} catch (e) {
  console.error(`npm client: ${e.message}`);
  process.exitCode = 1;
  if (id) {
    await client.callTool({ name: "delete_sandbox", arguments: { sandbox_id: id } }).catch(() => {});
  }
} finally {
  await client.close();
}
