// The SDK's types are control/openapi.json's schemas: src/api.ts is what
// scripts/gen-api.mjs writes from it, so a field added to the document and
// not to the SDK fails here (`npm run gen-api` brings it in).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { repoRoot, sdkSource } from "./helpers.js";

const openapi = join(repoRoot, "control", "openapi.json");
const generator = join(sdkSource, "scripts", "gen-api.mjs");

function generate(doc: string): string {
  const dir = mkdtempSync(join(tmpdir(), "airlock-ts-api-"));
  try {
    const p = join(dir, "openapi.json");
    writeFileSync(p, doc);
    return execFileSync(process.execPath, [generator, p, "-"], { encoding: "utf8" });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("src/api.ts is generated from control/openapi.json (npm run gen-api)", () => {
  const want = generate(readFileSync(openapi, "utf8"));
  const got = readFileSync(join(sdkSource, "src", "api.ts"), "utf8");
  assert.ok(got === want, "src/api.ts is not what scripts/gen-api.mjs makes of control/openapi.json: run `npm run gen-api` in sdk/typescript");
});

test("every schema and property of the document is in src/api.ts, with its type; a new field is noticed", () => {
  const doc = JSON.parse(readFileSync(openapi, "utf8")) as {
    components: { schemas: Record<string, { properties?: Record<string, { type?: string; $ref?: string }>; required?: string[] }> };
  };
  const api = readFileSync(join(sdkSource, "src", "api.ts"), "utf8");
  const scalar: Record<string, string> = { string: "string", integer: "number", number: "number", boolean: "boolean" };
  let checked = 0;
  for (const [name, s] of Object.entries(doc.components.schemas)) {
    if (!s.properties) continue;
    const m = new RegExp(`export interface ${name} \\{\\n([\\s\\S]*?)\\n\\}`).exec(api);
    assert.ok(m, `schema ${name} is not an interface of src/api.ts`);
    const props = new Map<string, string>();
    for (const line of m[1]!.split("\n")) {
      const p = /^ {2}([a-z_0-9]+)(\??): (.*);$/.exec(line);
      if (p) props.set(p[1]!, `${p[2]}${p[3]}`);
    }
    const required = new Set(s.required ?? []);
    for (const [prop, ps] of Object.entries(s.properties)) {
      const got = props.get(prop);
      assert.ok(got !== undefined, `${name}.${prop} is in control/openapi.json, not in src/api.ts`);
      assert.equal(got.startsWith("?"), !required.has(prop), `${name}.${prop}: optional in one, required in the other`);
      const t = got.replace(/^\?/, "");
      if (ps.$ref) assert.equal(t, ps.$ref.split("/").pop(), `${name}.${prop}`);
      else if (ps.type && scalar[ps.type]) assert.ok(t === scalar[ps.type] || t.startsWith('"'), `${name}.${prop}: ${t}, not ${ps.type}`);
      else if (ps.type === "array") assert.ok(t.endsWith("[]"), `${name}.${prop}: ${t}, not an array`);
      checked++;
    }
    assert.equal(props.size, Object.keys(s.properties).length, `${name}: src/api.ts has properties the document does not`);
  }
  assert.ok(checked > 200, `only ${checked} properties checked`);

  // The generator notices a field added to the document.
  const changed = JSON.parse(readFileSync(openapi, "utf8")) as typeof doc;
  changed.components.schemas["Sandbox"]!.properties!["brand_new_field"] = { type: "string" };
  assert.notEqual(generate(JSON.stringify(changed)), api);
});
