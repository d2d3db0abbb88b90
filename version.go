package outflow

import "github.com/outflowhq/outflow/internal/version"

// Version is this module's release version, as its git tag (vVersion)
// names it. The Python and npm packages, the template's SemanticVersion
// and the dispatcher's published configuration carry the same one.
const Version = version.Version
