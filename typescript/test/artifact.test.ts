/**
 * The README's examples (readme-examples.ts) run from the packed tarball,
 * not the source tree: scripts/artifact-test-typescript.sh makes a fresh
 * npm project outside the checkout, installs the tarball there with the
 * pinned @aws-sdk/client-dynamodb, typescript and @types/node, and runs
 * this file with OUTFLOW_ARTIFACT_PROJECT set to that project. The blocks
 * are written into the project, compiled with its tsc, type-checked under
 * NodeNext, Node16 and Bundler resolution, and run against moto; what they
 * import is checked to come from the project's node_modules: every file
 * tsc read for them, and what Node resolves @outflowhq/outflow and
 * @outflowhq/outflow/consume to from where they run (the consumer's Inbox
 * is that module's). The consumer's examples need what an adopter of them
 * installs besides (the SQS client, a peer dependency, and Powertools'
 * batch package with the Lambda types for its example): the first test
 * installs them in the project at the versions typescript/package.json
 * pins. A package that works from its folder and breaks from
 * its tarball (a file left out, an exports or types map that resolves only
 * in the checkout) fails here.
 *
 * Not part of npm test: it needs the tarball's project (make
 * release-typescript runs it).
 */

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { lstatSync, mkdtempSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, sep } from "node:path";
import { test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";
import { NODENEXT, readmeExamples } from "./readme-examples.js";
import { ROOT } from "./vectors.js";

const given = process.env["OUTFLOW_ARTIFACT_PROJECT"] ?? "";
assert.ok(given !== "", "OUTFLOW_ARTIFACT_PROJECT: the fresh project the tarball was installed in (scripts/artifact-test-typescript.sh)");
/** The project, its real path (as Node and tsc resolve, symbolic links followed), with a trailing separator. */
const PROJECT = realpathSync(given) + sep;
const CHECKOUT = realpathSync(ROOT) + sep;
/** Where npm installed the tarball. */
const INSTALLED = PROJECT + join("node_modules", "@outflowhq", "outflow") + sep;

/** Whether path lies under dir (both real paths, dir ending in a separator). */
function under(path: string, dir: string): boolean {
  return path.startsWith(dir);
}

test("the project is outside the checkout, and the package in it was installed, not linked", () => {
  assert.ok(!under(PROJECT, CHECKOUT) && !under(CHECKOUT, PROJECT), `${PROJECT} and the checkout ${CHECKOUT} must not contain each other`);
  const stat = lstatSync(INSTALLED);
  assert.ok(stat.isDirectory() && !stat.isSymbolicLink(), `${INSTALLED}: a folder npm unpacked, not a link`);
});

test("CommonJS code requires it, where Node loads ES modules synchronously (20.19 and later): the same modules", async (t) => {
  if (!(process.features as { require_module?: boolean }).require_module) return t.skip("this Node cannot require an ES module");
  const require = createRequire(PROJECT + "package.json");
  for (const name of ["@outflowhq/outflow", "@outflowhq/outflow/consume"]) {
    const path = require.resolve(name);
    assert.ok(under(realpathSync(path), INSTALLED), `require.resolve(${name}): ${path}`);
    // One module, not a CommonJS copy beside the ES one: instanceof holds across both.
    assert.equal(require(name), await import(pathToFileURL(path).href), `require(${name}) is its import`);
  }
});

test("the project installs what the consumer's examples use besides, at the pinned versions", () => {
  const pinned = (JSON.parse(readFileSync(ROOT + "typescript/package.json", "utf8")) as { devDependencies: Record<string, string> }).devDependencies;
  const wanted = ["@aws-sdk/client-sqs", "@aws-lambda-powertools/batch", "@types/aws-lambda"].map((name) => {
    const version = pinned[name];
    assert.ok(version, `typescript/package.json pins ${name}`);
    return `${name}@${version}`;
  });
  const npm = spawnSync("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error", "--save-exact", ...wanted], {
    cwd: PROJECT,
    encoding: "utf8",
    timeout: 600_000,
  });
  assert.equal(npm.status, 0, `npm install ${wanted.join(" ")} in ${PROJECT}:\n${npm.stdout}${npm.stderr}${npm.error ?? ""}`);
  for (const name of ["@aws-sdk/client-sqs", "@aws-lambda-powertools/batch"]) {
    const installed = JSON.parse(readFileSync(join(PROJECT, "node_modules", name, "package.json"), "utf8")) as { version: string };
    assert.equal(installed.version, pinned[name], name);
  }
});

readmeExamples({
  // The README the tarball shipped.
  readme: INSTALLED + "README.md",
  tsc: PROJECT + join("node_modules", ".bin", "tsc"),
  makeDir: () => mkdtempSync(PROJECT + "readme-"),
  typecheck: {
    Node16: { module: "Node16", moduleResolution: "Node16" },
    Bundler: { module: "Preserve", moduleResolution: "Bundler" },
  },
  checkTypes(files, name) {
    const real = files.map((f) => realpathSync(f));
    const outside = real.filter((f) => !under(f, PROJECT));
    assert.deepStrictEqual(outside, [], `tsc (${name}) read files outside the project`);
    const ours = real.filter((f) => f.includes(`${sep}@outflowhq${sep}`)).map((f) => f.slice(INSTALLED.length));
    for (const types of ["dist/src/index.d.ts", "dist/src/consume/index.d.ts"]) {
      assert.ok(ours.includes(types.split("/").join(sep)), `tsc (${name}) took the package's types from ${INSTALLED}${types}: it read ${ours.join(", ")}`);
    }
    assert.ok(
      real.filter((f) => f.includes(`${sep}@outflowhq${sep}`)).every((f) => under(f, INSTALLED)),
      `tsc (${name}) read the package from elsewhere than ${INSTALLED}`,
    );
  },
  async checkConsumer(dir, exports) {
    // What Node resolves the package's names to from where the blocks run.
    const probe = join(dir, "out", "resolve.js");
    writeFileSync(
      probe,
      [
        `export const main = import.meta.resolve("@outflowhq/outflow");`,
        `export const consume = import.meta.resolve("@outflowhq/outflow/consume");`,
        `export const sdk = import.meta.resolve("@aws-sdk/client-dynamodb");`,
        "",
      ].join("\n"),
    );
    const resolved = (await import(pathToFileURL(probe).href)) as { main: string; consume: string; sdk: string };
    assert.equal(realpathSync(fileURLToPath(resolved.main)), INSTALLED + join("dist", "src", "index.js"));
    assert.equal(realpathSync(fileURLToPath(resolved.consume)), INSTALLED + join("dist", "src", "consume", "index.js"));
    assert.ok(under(realpathSync(fileURLToPath(resolved.sdk)), PROJECT + "node_modules" + sep), `the SDK from ${resolved.sdk}`);
    // And the consumer block's inbox is an Inbox of that very module.
    const consume = (await import(resolved.consume)) as { Inbox: abstract new (...args: never[]) => unknown };
    assert.ok(exports["inbox"] instanceof consume.Inbox, `the consumer block's Inbox is not ${resolved.consume}'s`);
    // The installed code says the version its package.json says.
    const main = (await import(resolved.main)) as { VERSION?: string };
    const installed = JSON.parse(readFileSync(INSTALLED + "package.json", "utf8")) as { version: string };
    assert.equal(main.VERSION, installed.version, "the installed package's VERSION is its package.json's version");
  },
});
