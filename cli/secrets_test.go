package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/airlock-dev/airlock/secrets"
)

const (
	testPassphrase = "test-passphrase-Q7"
	testSecret     = "ghp_vaultValue_0123456789abcdefXYZ"
)

// vaultHome is one user's hermetic HOME and XDG folders, kept across invocations.
type vaultHome struct {
	home string
	env  map[string]string
}

func newVaultHome(t *testing.T, withPassphrase bool) *vaultHome {
	t.Helper()
	home := t.TempDir()
	h := &vaultHome{home: home, env: map[string]string{
		"HOME":            home,
		"XDG_CONFIG_HOME": filepath.Join(home, "config"),
		"XDG_DATA_HOME":   filepath.Join(home, "data"),
	}}
	if withPassphrase {
		h.env[secrets.PassphraseEnv] = testPassphrase
	}
	return h
}

func (h *vaultHome) vaultFile(ext string) string {
	return filepath.Join(h.home, "data", "airlock", "vault"+ext)
}

func (h *vaultHome) userConfig(t *testing.T, content string) {
	t.Helper()
	writeFile(t, filepath.Join(h.home, "config", "airlock", "config.toml"), content)
}

// run invokes airlock in-process with stdin and this home's environment plus extra.
func (h *vaultHome) run(t *testing.T, stdin string, extra map[string]string, args ...string) result {
	t.Helper()
	vars := map[string]string{}
	for k, v := range h.env {
		vars[k] = v
	}
	for k, v := range extra {
		vars[k] = v
	}
	getenv := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errb, getenv)
	r := result{code, out.String(), errb.String()}
	if strings.Contains(r.stdout+r.stderr, testSecret) {
		t.Fatalf("airlock %v printed a secret value:\nstdout: %s\nstderr: %s", args, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, testPassphrase) {
		t.Fatalf("airlock %v printed the passphrase", args)
	}
	return r
}

func (h *vaultHome) mustRun(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	r := h.run(t, stdin, nil, args...)
	if r.code != 0 {
		t.Fatalf("airlock %v: exit %d\nstderr: %s", args, r.code, r.stderr)
	}
	return r
}

// openVault reads the vault the way the CLI does, to check what was stored.
func (h *vaultHome) openVault(t *testing.T, storage secrets.Storage) *secrets.Vault {
	t.Helper()
	v, err := secrets.Open(secrets.Options{Storage: storage, Prefix: filepath.Join(h.home, "data", "airlock", "vault"),
		Passphrase: func(bool) (string, error) { return testPassphrase, nil }})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestSecretsSetListRemove(t *testing.T) {
	t.Parallel()
	h := newVaultHome(t, true)
	r := h.mustRun(t, testSecret+"\n", "secrets", "set", "GITHUB_TOKEN", "--stdin")
	if r.stdout != "saved GITHUB_TOKEN\n" {
		t.Fatalf("set printed %q", r.stdout)
	}
	if r := h.mustRun(t, "short", "-q", "secrets", "set", "A_SHORT", "--stdin"); r.stdout != "" {
		t.Fatalf("set -q printed %q", r.stdout)
	}
	st, err := os.Stat(h.vaultFile(".enc"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("vault file: %v %v", st, err)
	}
	if raw, _ := os.ReadFile(h.vaultFile(".enc")); bytes.Contains(raw, []byte("vaultValue")) {
		t.Fatal("the encrypted vault holds the value in clear")
	}
	r = h.mustRun(t, "", "secrets", "ls")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("ls:\n%s", r.stdout)
	}
	hdr := strings.Fields(lines[0])
	if strings.Join(hdr, " ") != "NAME VALUE SAVED AT" {
		t.Fatalf("ls header %q", lines[0])
	}
	want := [][2]string{{"A_SHORT", "****"}, {"GITHUB_TOKEN", "****fXYZ"}}
	for i, w := range want {
		f := strings.Fields(lines[i+1])
		if len(f) != 3 || f[0] != w[0] || f[1] != w[1] {
			t.Fatalf("ls line %q, want %v", lines[i+1], w)
		}
		at, err := time.Parse(time.RFC3339, f[2])
		if err != nil || time.Since(at) > time.Minute {
			t.Fatalf("saved at %q: %v", f[2], err)
		}
	}
	if r := h.mustRun(t, "", "secrets", "rm", "A_SHORT"); r.stdout != "removed A_SHORT\n" {
		t.Fatalf("rm printed %q", r.stdout)
	}
	r = h.run(t, "", nil, "secrets", "rm", "A_SHORT")
	if r.code != 1 || !strings.Contains(r.stderr, "no secret A_SHORT in the vault") {
		t.Fatalf("rm of a missing secret: %d %q", r.code, r.stderr)
	}
	if got, ok, _ := h.openVault(t, secrets.EncryptedFile).Get("GITHUB_TOKEN"); !ok || got != testSecret {
		t.Fatal("GITHUB_TOKEN not stored as given")
	}
}

func TestSecretsStdinTrimsOneNewline(t *testing.T) {
	t.Parallel()
	h := newVaultHome(t, true)
	cases := map[string]string{"A": "abcd\n", "B": "abcd\r\n", "C": "abcd\n\n", "D": "abcd", "E": "line1\nline2\n"}
	want := map[string]string{"A": "abcd", "B": "abcd", "C": "abcd\n", "D": "abcd", "E": "line1\nline2"}
	for name, in := range cases {
		h.mustRun(t, in, "secrets", "set", name, "--stdin")
	}
	v := h.openVault(t, secrets.EncryptedFile)
	for name, w := range want {
		if got, _, _ := v.Get(name); got != w {
			t.Errorf("%s: stored %q, want %q", name, got, w)
		}
	}
}

func TestSecretsSetRefusals(t *testing.T) {
	t.Parallel()
	h := newVaultHome(t, true)
	for _, c := range []struct {
		stdin string
		args  []string
		code  int
		msg   string
	}{
		{"", []string{"secrets", "set", "TOKEN", "--stdin"}, 2, "empty value refused"},
		{"\n", []string{"secrets", "set", "TOKEN", "--stdin"}, 2, "empty value refused"},
		{"\r\n", []string{"secrets", "set", "TOKEN", "--stdin"}, 2, "empty value refused"},
		{testSecret, []string{"secrets", "set", "TOKEN"}, 2, "pass --stdin"},
		{testSecret, []string{"secrets", "set", "token", "--stdin"}, 2, `invalid secret name "token"`},
		{testSecret, []string{"secrets", "set", "1TOKEN", "--stdin"}, 2, "[A-Z_][A-Z0-9_]*"},
		{testSecret, []string{"secrets", "set", "--stdin"}, 2, "accepts 1 arg"},
		{testSecret, []string{"secrets", "set", "TOKEN", testSecret, "--stdin"}, 2, "accepts 1 arg"},
		{"", []string{"secrets", "rm", "bad-name"}, 2, "invalid secret name"},
	} {
		r := h.run(t, c.stdin, nil, c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.msg) {
			t.Errorf("airlock %v: exit %d, stderr %q; want %d and %q", c.args, r.code, r.stderr, c.code, c.msg)
		}
	}
	if _, err := os.Stat(h.vaultFile(".enc")); !os.IsNotExist(err) {
		t.Fatal("a refused set wrote the vault")
	}
}

// A value shorter than 4 bytes is refused: the redactor could not mask it
// (secrets.MinRedactLen); one of 4 bytes is stored.
func TestSecretsSetRefusesShortValues(t *testing.T) {
	t.Parallel()
	h := newVaultHome(t, true)
	for _, v := range []string{"a", "ab\n", "abc", "é"} {
		r := h.run(t, v, nil, "secrets", "set", "SHORT", "--stdin")
		if r.code != 2 || !strings.Contains(r.stderr, "shorter than 4 bytes") || !strings.Contains(r.stderr, "could not mask it") {
			t.Errorf("secrets set %q: exit %d, stderr %q; want 2 and a refusal saying why", v, r.code, r.stderr)
		}
	}
	if _, err := os.Stat(h.vaultFile(".enc")); !os.IsNotExist(err) {
		t.Fatal("a refused set wrote the vault")
	}
	h.mustRun(t, "abcd\n", "secrets", "set", "SHORT", "--stdin")
	if r := h.mustRun(t, "", "secrets", "ls"); !strings.Contains(r.stdout, "SHORT") {
		t.Errorf("a 4-byte value was not stored: %q", r.stdout)
	}
}

func TestSecretsPassphraseProblems(t *testing.T) {
	t.Parallel()
	h := newVaultHome(t, false)
	r := h.run(t, testSecret, nil, "secrets", "set", "TOKEN", "--stdin")
	if r.code != 1 || !strings.Contains(r.stderr, "AIRLOCK_VAULT_PASSPHRASE") {
		t.Fatalf("set without a passphrase: %d %q", r.code, r.stderr)
	}
	// An absent vault lists as empty without a passphrase.
	if r := h.mustRun(t, "", "secrets", "ls"); strings.TrimSpace(r.stdout) != "NAME  VALUE  SAVED AT" {
		t.Fatalf("ls of an empty vault: %q", r.stdout)
	}
	h.run(t, testSecret, map[string]string{secrets.PassphraseEnv: testPassphrase}, "secrets", "set", "TOKEN", "--stdin")
	r = h.run(t, "", map[string]string{secrets.PassphraseEnv: "not-the-passphrase"}, "secrets", "ls")
	if r.code != 1 || !strings.Contains(r.stderr, "cannot open the vault") || !strings.Contains(r.stderr, "wrong passphrase or damaged file") {
		t.Fatalf("wrong passphrase: %d %q", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "not-the-passphrase") {
		t.Fatal("the error shows the passphrase")
	}
	r = h.run(t, "", nil, "secrets", "ls")
	if r.code != 1 || !strings.Contains(r.stderr, "AIRLOCK_VAULT_PASSPHRASE") {
		t.Fatalf("ls without a passphrase: %d %q", r.code, r.stderr)
	}
}

func TestSecretsDisabled(t *testing.T) {
	t.Parallel()
	h := newVaultHome(t, true)
	h.userConfig(t, "[vault]\nstorage = \"disabled\"\n")
	for _, args := range [][]string{{"secrets", "set", "TOKEN", "--stdin"}, {"secrets", "ls"}, {"secrets", "rm", "TOKEN"}} {
		r := h.run(t, testSecret, nil, args...)
		if r.code != 1 || !strings.Contains(r.stderr, "the vault is disabled") || !strings.Contains(r.stderr, `storage = "encrypted-file"`) ||
			!strings.Contains(r.stderr, "config.toml") {
			t.Errorf("airlock %v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	dir := project(t, "[sandbox]\nimage = \"b\"\n[env]\nTOKEN = \"${GITHUB_TOKEN}\"\nHOSTED = \"${FROM_HOST}\"\n")
	r := h.run(t, "", nil, "--file", dir, "validate")
	if r.code != 2 || !strings.Contains(r.stderr, "env.TOKEN: GITHUB_TOKEN is not set and the vault") || !strings.Contains(r.stderr, "disabled") {
		t.Fatalf("validate with a disabled vault: %d %q", r.code, r.stderr)
	}
	if r := h.run(t, "", map[string]string{"GITHUB_TOKEN": "x", "FROM_HOST": "y"}, "--file", dir, "validate"); r.code != 0 {
		t.Fatalf("host variables with a disabled vault: %d %q", r.code, r.stderr)
	}
}

func TestSecretsPlainFileStorage(t *testing.T) {
	t.Parallel()
	h := newVaultHome(t, false)
	h.userConfig(t, "[vault]\nstorage = \"file\"\n")
	r := h.run(t, testSecret, nil, "secrets", "set", "TOKEN", "--stdin")
	if r.code != 2 || !strings.Contains(r.stderr, "warning:") || !strings.Contains(r.stderr, "unencrypted") || !strings.Contains(r.stderr, "--yes") {
		t.Fatalf("set without --yes: %d %q", r.code, r.stderr)
	}
	if _, err := os.Stat(h.vaultFile(".json")); !os.IsNotExist(err) {
		t.Fatal("written without confirmation")
	}
	h.mustRun(t, testSecret+"\n", "secrets", "set", "TOKEN", "--stdin", "--yes")
	st, err := os.Stat(h.vaultFile(".json"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("plain vault: %v %v", st, err)
	}
	var doc struct {
		Version int `json:"version"`
		Secrets map[string]struct {
			Value   string    `json:"value"`
			SavedAt time.Time `json:"saved_at"`
		} `json:"secrets"`
	}
	raw, _ := os.ReadFile(h.vaultFile(".json"))
	if err := json.Unmarshal(raw, &doc); err != nil || doc.Version != 1 || doc.Secrets["TOKEN"].Value != testSecret || doc.Secrets["TOKEN"].SavedAt.IsZero() {
		t.Fatalf("plain vault content: %v %+v", err, doc)
	}
	if r := h.mustRun(t, "", "secrets", "ls"); !strings.Contains(r.stdout, "****fXYZ") {
		t.Fatalf("ls: %q", r.stdout)
	}
	dir := project(t, "[sandbox]\nimage = \"b\"\n[env]\nTOKEN = \"${TOKEN}\"\n")
	if r := h.mustRun(t, "", "--file", dir, "config"); !strings.Contains(r.stdout, `TOKEN = "********"`) {
		t.Fatalf("config: %s", r.stdout)
	}
}

func TestSecretsBadUserConfig(t *testing.T) {
	t.Parallel()
	h := newVaultHome(t, true)
	h.userConfig(t, "[vault]\nstorage = \"keychain\"\n")
	r := h.run(t, "", nil, "secrets", "ls")
	if r.code != 2 || !strings.HasPrefix(r.stderr, "config error: ") || !strings.Contains(r.stderr, "config.toml:2: vault.storage: unknown storage \"keychain\"") {
		t.Fatalf("ls with a bad config.toml: %d %q", r.code, r.stderr)
	}
}

func TestManifestSecretFromVaultIsMasked(t *testing.T) {
	t.Parallel()
	h := newVaultHome(t, true)
	h.mustRun(t, testSecret, "secrets", "set", "GITHUB_TOKEN", "--stdin")
	dir := project(t, `[sandbox]
image = "busybox"
[env]
TOKEN = "${GITHUB_TOKEN}"
AUTH = "Bearer ${GITHUB_TOKEN}"
PLAIN = "${NOT_ANYWHERE:-fallback}"
HOSTED = "${FROM_HOST}"
[daemons.web]
command = ["httpd"]
env = { T = "${GITHUB_TOKEN}" }
`)
	host := map[string]string{"FROM_HOST": "host-value"}
	for _, args := range [][]string{{"config"}, {"config", "--json"}, {"config", "--layers"}, {"config", "--layers", "--json"}, {"validate"}} {
		r := h.run(t, "", host, append([]string{"--file", dir}, args...)...)
		if r.code != 0 {
			t.Fatalf("airlock %v: exit %d: %s", args, r.code, r.stderr)
		}
		if args[0] == "validate" {
			continue
		}
		if strings.Count(r.stdout, "********") < 3 {
			t.Errorf("airlock %v does not mask the vault values:\n%s", args, r.stdout)
		}
		if !strings.Contains(r.stdout, "host-value") || !strings.Contains(r.stdout, "fallback") {
			t.Errorf("airlock %v hides host or default values:\n%s", args, r.stdout)
		}
	}
	r := h.run(t, "", host, "--file", dir, "config", "--json")
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatal(err)
	}
	if env := m["env"].(map[string]any); env["TOKEN"] != "********" || env["AUTH"] != "********" {
		t.Fatalf("config --json env: %v", env)
	}
	// The host environment wins over the vault, and is shown as it is.
	r = h.run(t, "", map[string]string{"FROM_HOST": "h", "GITHUB_TOKEN": "from-the-host"}, "--file", dir, "config")
	if r.code != 0 || !strings.Contains(r.stdout, `TOKEN = "from-the-host"`) {
		t.Fatalf("host value: %d %s %s", r.code, r.stdout, r.stderr)
	}
	// Without the passphrase the vault cannot be read: a config error naming the key, not the value.
	r = h.run(t, "", map[string]string{"FROM_HOST": "h", secrets.PassphraseEnv: "nope-wrong"}, "--file", dir, "validate")
	if r.code != 2 || !strings.Contains(r.stderr, "env.AUTH: GITHUB_TOKEN is not set and the vault cannot be read") ||
		!strings.Contains(r.stderr, "wrong passphrase or damaged file") {
		t.Fatalf("wrong passphrase: %d %q", r.code, r.stderr)
	}
}

// TestVaultOpenedOnlyWhenNeeded points the vault at something unreadable:
// a manifest taking everything from the host never notices.
func TestVaultOpenedOnlyWhenNeeded(t *testing.T) {
	t.Parallel()
	h := newVaultHome(t, false)
	if err := os.MkdirAll(h.vaultFile(".enc"), 0o700); err != nil { // a folder: reading it fails
		t.Fatal(err)
	}
	dir := project(t, "[sandbox]\nimage = \"busybox\"\n[env]\nA = \"${FROM_HOST}\"\nB = \"$${LITERAL}\"\nC = \"${lower_case:-x}\"\n")
	r := h.run(t, "", map[string]string{"FROM_HOST": "v"}, "--file", dir, "config")
	if r.code != 0 {
		t.Fatalf("the vault was opened: %d %s", r.code, r.stderr)
	}
	r = h.run(t, "", nil, "--file", dir, "config")
	if r.code != 2 || !strings.Contains(r.stderr, "env.A: FROM_HOST is not set and the vault cannot be read") {
		t.Fatalf("a missing name should open the vault: %d %q", r.code, r.stderr)
	}
}

func TestSecretsHelp(t *testing.T) {
	t.Parallel()
	r := airlock(t, nil, "secrets", "--help")
	for _, w := range []string{"set", "ls", "rm"} {
		if r.code != 0 || !strings.Contains(r.stdout, w) {
			t.Fatalf("secrets --help: %d %q", r.code, r.stdout)
		}
	}
	if r := airlock(t, nil, "secrets", "bogus"); r.code != 2 || !strings.Contains(r.stderr, "unknown command") {
		t.Fatalf("secrets bogus: %d %q", r.code, r.stderr)
	}
}

// runTTY invokes airlock with a pseudo-terminal as stdin, typing input into it.
func (h *vaultHome) runTTY(t *testing.T, input string, args ...string) result {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	// The input is typed before airlock turns echo off, so the terminal's
	// output (echo included) is drained and not checked; echo is x/term's job.
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, ptmx); close(done) }()
	if _, err := ptmx.Write([]byte(input)); err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) (string, bool) { v, ok := h.env[k]; return v, ok }
	var out, errb bytes.Buffer
	code := run(args, tty, &out, &errb, getenv)
	tty.Close()
	ptmx.Close()
	<-done
	r := result{code, out.String(), errb.String()}
	if strings.Contains(r.stdout+r.stderr, "typed-") {
		t.Fatalf("airlock %v printed the typed value", args)
	}
	return r
}

func TestSecretsSetPromptsOnTerminal(t *testing.T) {
	t.Parallel()
	h := newVaultHome(t, true)
	r := h.runTTY(t, "typed-Value-123\ntyped-Value-123\n", "secrets", "set", "TYPED")
	if r.code != 0 || r.stdout != "saved TYPED\n" || !strings.Contains(r.stderr, "Value of TYPED:") || !strings.Contains(r.stderr, "Repeat") {
		t.Fatalf("prompted set: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if got, _, _ := h.openVault(t, secrets.EncryptedFile).Get("TYPED"); got != "typed-Value-123" {
		t.Fatal("the typed value was not stored")
	}
	r = h.runTTY(t, "typed-one\ntyped-two\n", "secrets", "set", "OTHER")
	if r.code != 2 || !strings.Contains(r.stderr, "do not match") {
		t.Fatalf("mismatch: %d %q", r.code, r.stderr)
	}
	r = h.runTTY(t, "\n", "secrets", "set", "OTHER")
	if r.code != 2 || !strings.Contains(r.stderr, "empty value refused") {
		t.Fatalf("empty: %d %q", r.code, r.stderr)
	}
	r = h.runTTY(t, "", "secrets", "set", "OTHER", "--stdin")
	if r.code != 2 || !strings.Contains(r.stderr, "standard input, which is a terminal") {
		t.Fatalf("--stdin on a terminal: %d %q", r.code, r.stderr)
	}
	if names := h.openVault(t, secrets.EncryptedFile).Names(); len(names) != 1 {
		t.Fatalf("vault holds %v", names)
	}
}

func TestSecretsPlainFileAsksOnTerminal(t *testing.T) {
	t.Parallel()
	h := newVaultHome(t, false)
	h.userConfig(t, "[vault]\nstorage = \"file\"\n")
	r := h.runTTY(t, "n\n", "secrets", "set", "TOKEN")
	if r.code != 1 || !strings.Contains(r.stderr, "Store it anyway? [y/N]") || !strings.Contains(r.stderr, "not saved") {
		t.Fatalf("declined: %d %q", r.code, r.stderr)
	}
	r = h.runTTY(t, "y\ntyped-plain\ntyped-plain\n", "secrets", "set", "TOKEN")
	if r.code != 0 || r.stdout != "saved TOKEN\n" {
		t.Fatalf("confirmed: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if got, _, _ := h.openVault(t, secrets.PlainFile).Get("TOKEN"); got != "typed-plain" {
		t.Fatal("not stored")
	}
}
