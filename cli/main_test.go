package cli

import (
	"os"
	"testing"

	"github.com/airlock-dev/airlock/secrets"
	"github.com/airlock-dev/airlock/test/testenv"
)

// TestMain fails the run when a test wrote into the package directory: tests
// write only under t.TempDir().
//
// The vaults the in-process commands write use cheap key derivation: 64 MiB
// argon2id per open or write cost the package's tests ~30 s of CPU under the
// race detector, and secrets.TestDefaultKDFOpenTime measures the real one.
func TestMain(m *testing.M) {
	secrets.DefaultKDF = secrets.KDFParams{Time: 1, Memory: 1024, Threads: 1}
	os.Exit(testenv.RunClean(m))
}
