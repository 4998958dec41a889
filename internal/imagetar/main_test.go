package imagetar_test

import (
	"os"
	"testing"

	"github.com/airlock-dev/airlock/test/testenv"
)

// TestMain fails the run when a test wrote into the package directory: tests
// write only under t.TempDir().
func TestMain(m *testing.M) { os.Exit(testenv.RunClean(m)) }
