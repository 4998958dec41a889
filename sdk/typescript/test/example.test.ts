// The TypeScript example of docs/sdk.md runs as written (the image replaced
// by the tests' busybox image) and prints its text block.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { test } from "node:test";
import { daemon, repoRoot } from "./helpers.js";

test("docs/sdk.md's TypeScript example runs and prints what the doc shows", async () => {
  const doc = readFileSync(join(repoRoot, "docs", "sdk.md"), "utf8");
  const m = /<!-- example typescript -->\n```ts\n([\s\S]*?)```\n\n```text\n([\s\S]*?)```/.exec(doc);
  assert.ok(m, "docs/sdk.md has no <!-- example typescript --> block followed by its text block");
  const build = process.env["AIRLOCK_SDK_BUILD"];
  assert.ok(build, "AIRLOCK_SDK_BUILD is not set: run the suite with go test ./sdk/typescript");
  const code = m[1]!
    .replace('from "@airlock-dev/sdk"', `from ${JSON.stringify(pathToFileURL(join(build, "src", "index.js")).href)}`)
    .replaceAll('"debian:12-slim"', JSON.stringify(daemon.image));
  assert.notEqual(code, m[1], "the example does not import @airlock-dev/sdk");
  const dir = mkdtempSync(join(tmpdir(), "airlock-ts-example-"));
  try {
    const file = join(dir, "example.mjs");
    writeFileSync(file, code);
    const { stdout } = await promisify(execFile)(process.execPath, [file], {
      env: { PATH: process.env["PATH"] ?? "", AIRLOCK_HOST: daemon.socket },
      timeout: 120_000,
    });
    assert.equal(stdout, m[2]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
