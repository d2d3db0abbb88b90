/**
 * What the packed package ships besides its code: the project's licence.
 * typescript/LICENSE and NOTICE are copies of the repository's (npm packs
 * a package's own folder, and Apache-2.0 asks that a redistribution carry
 * both), kept in the tree so that every way of installing the package
 * (the tarball, a checkout with --install-links) has them; this test ties
 * them to the originals.
 */

import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import * as outflow from "../src/index.js";
import { ROOT } from "./vectors.js";

/** typescript/: tests run from typescript/dist/test/. */
const PACKAGE = fileURLToPath(new URL("../../", import.meta.url));

for (const name of ["LICENSE", "NOTICE"]) {
  test(`typescript/${name} is the repository's ${name}`, () => {
    assert.ok(
      readFileSync(PACKAGE + name).equals(readFileSync(ROOT + name)),
      `typescript/${name} differs from the repository's: cp ${name} typescript/${name}`,
    );
  });
}

test("package.json names the licence, and ships LICENSE and NOTICE", () => {
  const pkg = JSON.parse(readFileSync(PACKAGE + "package.json", "utf8")) as { license?: string; files?: string[]; private?: boolean };
  assert.equal(pkg.license, "Apache-2.0");
  assert.ok(readFileSync(ROOT + "LICENSE", "utf8").includes("Apache License\n                           Version 2.0"), "the repository's LICENSE is Apache-2.0");
  assert.equal(pkg.private, undefined, "the package is published");
  assert.ok(pkg.files?.includes("LICENSE") && pkg.files.includes("NOTICE"));
});

test("the package exports its version, package.json's (review 49, R49-2)", () => {
  const pkg = JSON.parse(readFileSync(PACKAGE + "package.json", "utf8")) as { version: string };
  assert.equal(outflow.VERSION, pkg.version, "src/version.ts's VERSION differs from package.json's version");
});

test("npm test runs every test file but the artifact's (which needs the packed tarball's project)", () => {
  const pkg = JSON.parse(readFileSync(PACKAGE + "package.json", "utf8")) as { scripts: { test: string } };
  const run = new Set([...pkg.scripts.test.matchAll(/dist\/test\/([a-z0-9-]+)\.test\.js/g)].map((m) => m[1]));
  const files = readdirSync(PACKAGE + "test")
    .filter((f) => f.endsWith(".test.ts"))
    .map((f) => f.slice(0, -".test.ts".length))
    .filter((f) => f !== "artifact");
  assert.deepStrictEqual([...run].sort(), files.sort(), "a test file npm test leaves out is never run");
});
