package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// AuthRegistry is Registry with htpasswd authentication: only user with
// password may pull or push. It returns the registry's address ("127.0.0.1:PORT").
func AuthRegistry(t testing.TB, user, password string) string {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	htpasswd := filepath.Join(t.TempDir(), "htpasswd")
	if err := os.WriteFile(htpasswd, fmt.Appendf(nil, "%s:%s\n", user, hash), 0o600); err != nil {
		t.Fatal(err)
	}
	return startRegistryFor(t, fmt.Sprintf("auth:\n  htpasswd:\n    realm: airlock-test\n    path: %s\n", htpasswd))
}
