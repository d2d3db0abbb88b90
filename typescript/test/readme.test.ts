/**
 * Every ```ts block of typescript/README.md, compiled with the package's
 * own tsc and run against the project's moto server (readme-examples.ts
 * says how, and what is checked).
 *
 * The blocks are written under typescript/dist/, inside the package, so
 * Node and tsc resolve @outflowhq/outflow to this package's dist/ by its
 * "exports" (a package may import itself by name). Each run writes its own
 * directory, so two runs at once do not collide. The same blocks from the
 * packed tarball, installed in a fresh project: artifact.test.ts.
 */

import { mkdirSync, mkdtempSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { readmeExamples } from "./readme-examples.js";

/** typescript/: tests run from typescript/dist/test/. */
const PACKAGE = fileURLToPath(new URL("../../", import.meta.url));

readmeExamples({
  readme: PACKAGE + "README.md",
  tsc: PACKAGE + "node_modules/.bin/tsc",
  makeDir() {
    mkdirSync(PACKAGE + "dist", { recursive: true });
    return mkdtempSync(join(PACKAGE, "dist", "readme-"));
  },
});
