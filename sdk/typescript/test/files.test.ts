// A sandbox's files: written, read, listed, described, made, renamed, removed.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  DirectoryNotEmptyError,
  NotAFileError,
  PathExistsError,
  PathNotFoundError,
  type Sandbox,
} from "../src/index.js";
import { client, manifest } from "./helpers.js";

describe("files", { concurrency: true }, () => {
  let sb: Sandbox;
  before(async () => {
    sb = await client().create(manifest(), { labels: { suite: "sdk-ts" } });
  });
  after(async () => {
    await sb?.delete();
  });

  test("writeFile and readFile: text, bytes, mode; missing directories are made", async () => {
    await sb.writeFile("/tmp/a/b/note.txt", "héllo\n");
    assert.equal(await sb.readText("/tmp/a/b/note.txt"), "héllo\n");
    const bin = Buffer.from([0, 1, 2, 255, 254]);
    await sb.writeFile("/tmp/a/bin", bin, { mode: 0o755 });
    assert.deepEqual(await sb.readFile("/tmp/a/bin"), bin);
    const st = await sb.stat("/tmp/a/bin");
    assert.deepEqual([st.type, st.mode, st.size, st.name], ["file", "0755", 5, "bin"]);
    const r = await sb.run("cat /tmp/a/b/note.txt");
    assert.equal(r.stdoutText, "héllo\n");
  });

  test("readFile of nothing, of a directory: PathNotFoundError, NotAFileError", async () => {
    await assert.rejects(sb.readFile("/tmp/none/such"), PathNotFoundError);
    await assert.rejects(sb.readFile("/tmp"), NotAFileError);
    assert.equal(await sb.exists("/tmp/none/such"), false);
    assert.equal(await sb.exists("/tmp"), true);
  });

  test("listDir, mkdir, rename, remove", async () => {
    await sb.mkdir("/tmp/l/x/y", { parents: true });
    await sb.mkdir("/tmp/l/x/y", { parents: true }); // exists: no error with parents
    await assert.rejects(sb.mkdir("/tmp/l/x"), PathExistsError);
    await sb.writeFile("/tmp/l/f.txt", "12345");
    const top = await sb.listDir("/tmp/l");
    assert.deepEqual(top.map((e) => [e.name, e.type]), [["f.txt", "file"], ["x", "dir"]]);
    assert.equal(top.truncated, false);
    const deep = await sb.listDir("/tmp/l", { depth: 3 });
    assert.deepEqual(deep.map((e) => e.path), ["/tmp/l/f.txt", "/tmp/l/x", "/tmp/l/x/y"]);
    assert.equal((await sb.listDir("/tmp/l", { depth: 3, limit: 1 })).truncated, true);
    await sb.writeFile("/tmp/l/g.txt", "g");
    await assert.rejects(sb.rename("/tmp/l/f.txt", "/tmp/l/g.txt"), PathExistsError);
    await sb.rename("/tmp/l/f.txt", "/tmp/l/g.txt", { overwrite: true });
    assert.equal(await sb.readText("/tmp/l/g.txt"), "12345");
    await assert.rejects(sb.remove("/tmp/l/x"), DirectoryNotEmptyError);
    await sb.remove("/tmp/l/x", { recursive: true });
    await sb.remove("/tmp/l/g.txt");
    assert.deepEqual(await sb.listDir("/tmp/l"), Object.assign([], { truncated: false }));
  });

  test("a name with spaces, a newline and non-ASCII is just a name", async () => {
    const p = "/tmp/odd dir/a file\nwith ünïcode & ?#%.txt";
    await sb.writeFile(p, "odd");
    assert.equal(await sb.readText(p), "odd");
    const [e] = await sb.listDir("/tmp/odd dir");
    assert.equal(e?.path, p);
  });

  test("writeArchive and readArchive: a tar in and out", async () => {
    await sb.writeFile("/tmp/t/one.txt", "one");
    const tar = await sb.readArchive("/tmp/t");
    assert.ok(tar.includes(Buffer.from("one.txt")));
    await sb.writeArchive("/tmp/t2", tar);
    const names = (await sb.listDir("/tmp/t2", { depth: 2 })).map((e) => e.path);
    assert.ok(names.some((n) => n.endsWith("one.txt")), names.join(" "));
  });
});
