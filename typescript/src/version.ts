/**
 * This package's release version: the one version of the whole Outflow
 * release (Go's outflow.Version, Python's outflowhq.__version__,
 * `outflow version`, the template's SemanticVersion). A constant rather
 * than read from package.json at run time, so bundlers need no JSON
 * import; TestVersion_IsOneEverywhere and test/package.test.ts tie it to
 * package.json.
 */
export const VERSION = "1.0.0";
