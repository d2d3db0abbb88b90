package cli_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAWSConfig_LoadsWithACustomCABundle: the loader adds AWS_CA_BUNDLE's
// certificates only to the SDK's own client type and refuses any other,
// so the client that keeps answered requests from being sent again
// (package sdkhttp) is set after loading. Set in the process environment,
// as the loader reads it there, so not parallel.
func TestAWSConfig_LoadsWithACustomCABundle(t *testing.T) {
	bundle := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(bundle, []byte(testCA), 0o600))
	t.Setenv("AWS_CA_BUNDLE", bundle)
	e := newEnv(t)
	e.ok(t, "stats")
}

// testCA is a self-signed certificate, only parsed.
const testCA = `-----BEGIN CERTIFICATE-----
MIIBVDCB+6ADAgECAgEBMAoGCCqGSM49BAMCMBoxGDAWBgNVBAMTD291dGZsb3cg
dGVzdCBDQTAeFw0yNjAxMDEwMDAwMDBaFw0zNjAxMDEwMDAwMDBaMBoxGDAWBgNV
BAMTD291dGZsb3cgdGVzdCBDQTBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABKIW
dfd2/GlhhUsW3+sDO0plZ7wJANlQ++hyeQB3zh65e92h62PBvnP83IEIyEF865xj
Q/yH+9Txv7dSc5ZJkvqjMjAwMA8GA1UdEwEB/wQFMAMBAf8wHQYDVR0OBBYEFJtW
qSDJVvfrT+VUdtEIu20DojDYMAoGCCqGSM49BAMCA0gAMEUCIQCjWblXUVZ3Yee0
cjEdIg7heB+CP9+xDAfc4SezF3MnjgIgI7yTf6ZkJSVVib/WK1Y/EhOKRLu4kAyu
lBiVjjsfzg4=
-----END CERTIFICATE-----
`
