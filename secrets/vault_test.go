package secrets

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// cheap keeps tests fast; TestDefaultKDFOpenTime measures the real parameters.
var cheap = KDFParams{Time: 1, Memory: 1024, Threads: 1}

const secretValue = "s3cr3t-VALUE-that-must-never-leak"

func opts(t *testing.T, s Storage, pass string) Options {
	t.Helper()
	o := Options{Storage: s, Prefix: filepath.Join(t.TempDir(), "data", "airlock", "vault"), kdf: cheap}
	if pass != "" {
		o.Passphrase = func(bool) (string, error) { return pass, nil }
	}
	return o
}

func mustOpen(t *testing.T, o Options) *Vault {
	t.Helper()
	v, err := Open(o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return v
}

func noLeak(t *testing.T, err error, values ...string) {
	t.Helper()
	if err == nil {
		return
	}
	for _, v := range append(values, secretValue) {
		if strings.Contains(err.Error(), v) {
			t.Fatalf("error text contains a secret value: %v", err)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, s := range []Storage{EncryptedFile, PlainFile} {
		t.Run(string(s), func(t *testing.T) {
			t.Parallel()
			o := opts(t, s, "correct horse")
			v := mustOpen(t, o)
			if _, err := os.Stat(v.Path()); !os.IsNotExist(err) {
				t.Fatalf("Open created %s", v.Path())
			}
			if err := v.Set("TOKEN", secretValue); err != nil {
				t.Fatal(err)
			}
			if err := v.Set("OTHER", "multi\nline\n"); err != nil {
				t.Fatal(err)
			}
			if err := v.Set("TOKEN", secretValue+"2"); err != nil { // replace
				t.Fatal(err)
			}
			v2 := mustOpen(t, o)
			got, ok, err := v2.Get("TOKEN")
			if err != nil || !ok || got != secretValue+"2" {
				t.Fatalf("Get TOKEN after reopen: ok=%v err=%v", ok, err)
			}
			got, ok, _ = v2.Lookup("OTHER")
			if !ok || got != "multi\nline\n" {
				t.Fatal("OTHER did not round-trip")
			}
			if _, ok, _ := v2.Lookup("MISSING"); ok {
				t.Fatal("MISSING found")
			}
			list, _ := v2.List()
			if len(list) != 2 || list[0].Name != "OTHER" || list[1].Name != "TOKEN" || list[1].Preview != "****eak2" {
				t.Fatalf("List: %+v", list)
			}
			if list[0].SavedAt.IsZero() || time.Since(list[0].SavedAt) > time.Minute {
				t.Fatalf("SavedAt %v", list[0].SavedAt)
			}
			if ok, err := v2.Delete("TOKEN"); !ok || err != nil {
				t.Fatalf("Delete: %v %v", ok, err)
			}
			if ok, err := v2.Delete("TOKEN"); ok || err != nil {
				t.Fatalf("second Delete: %v %v", ok, err)
			}
			if names := mustOpen(t, o).Names(); len(names) != 1 || names[0] != "OTHER" {
				t.Fatalf("after delete: %v", names)
			}
			st, err := os.Stat(v.Path())
			if err != nil || st.Mode().Perm() != 0o600 {
				t.Fatalf("vault file mode %v (%v)", st.Mode(), err)
			}
			dst, _ := os.Stat(filepath.Dir(v.Path()))
			if dst.Mode().Perm() != 0o700 {
				t.Fatalf("vault folder mode %v", dst.Mode())
			}
			raw, _ := os.ReadFile(v.Path())
			if s == EncryptedFile && strings.Contains(string(raw), "multi") {
				t.Fatal("the encrypted file holds plaintext")
			}
			var probe map[string]any
			if err := json.Unmarshal(raw, &probe); err != nil || probe["version"] != float64(1) {
				t.Fatalf("file is not versioned JSON: %v", err)
			}
		})
	}
}

func TestEncryptedEnvelope(t *testing.T) {
	t.Parallel()
	o := opts(t, EncryptedFile, "pw")
	v := mustOpen(t, o)
	if err := v.Set("A", secretValue); err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(v.Path())
	var e1 map[string]any
	if err := json.Unmarshal(first, &e1); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"version", "kdf", "params", "salt", "nonce", "ciphertext"} {
		if _, ok := e1[k]; !ok {
			t.Errorf("envelope lacks %q: %s", k, first)
		}
	}
	if e1["kdf"] != "argon2id" {
		t.Errorf("kdf %v", e1["kdf"])
	}
	if err := v.Set("A", secretValue); err != nil { // same content, new salt and nonce
		t.Fatal(err)
	}
	second, _ := os.ReadFile(v.Path())
	var e2 map[string]any
	_ = json.Unmarshal(second, &e2)
	if e1["salt"] == e2["salt"] || e1["nonce"] == e2["nonce"] {
		t.Fatal("salt or nonce reused across writes")
	}
}

func TestWrongPassphrase(t *testing.T) {
	t.Parallel()
	o := opts(t, EncryptedFile, "pass-RIGHT-1")
	if err := mustOpen(t, o).Set("A", secretValue); err != nil {
		t.Fatal(err)
	}
	o.Passphrase = func(bool) (string, error) { return "pass-WRONG-2", nil }
	_, err := Open(o)
	if !errors.Is(err, ErrWrongPassphrase) || !strings.Contains(err.Error(), "cannot open the vault") {
		t.Fatalf("got %v", err)
	}
	noLeak(t, err, "pass-RIGHT-1", "pass-WRONG-2")
	o.Passphrase = nil
	if _, err := Open(o); !errors.Is(err, ErrNoPassphrase) || !strings.Contains(err.Error(), PassphraseEnv) {
		t.Fatalf("no passphrase: %v", err)
	}
}

func TestTamperDetected(t *testing.T) {
	t.Parallel()
	o := opts(t, EncryptedFile, "pw")
	v := mustOpen(t, o)
	if err := v.Set("A", secretValue); err != nil {
		t.Fatal(err)
	}
	orig, _ := os.ReadFile(v.Path())
	flip := func(field string) func(map[string]any) {
		return func(m map[string]any) {
			b, _ := base64.StdEncoding.DecodeString(m[field].(string))
			b[len(b)/2] ^= 0x01
			m[field] = base64.StdEncoding.EncodeToString(b)
		}
	}
	cases := []struct {
		name   string
		edit   func(map[string]any)
		format bool // a FormatError rather than ErrWrongPassphrase
		want   string
	}{
		{"ciphertext", flip("ciphertext"), false, "wrong passphrase or damaged file"},
		{"salt", flip("salt"), false, "wrong passphrase or damaged file"},
		{"nonce", flip("nonce"), false, "wrong passphrase or damaged file"},
		{"time", func(m map[string]any) { m["params"].(map[string]any)["time"] = 2.0 }, false, "wrong passphrase or damaged file"},
		{"version", func(m map[string]any) { m["version"] = 2.0 }, true, "version 2 is not supported"},
		{"no version", func(m map[string]any) { delete(m, "version") }, true, "no version"},
		{"kdf", func(m map[string]any) { m["kdf"] = "scrypt" }, true, `unknown kdf "scrypt"`},
		{"huge memory", func(m map[string]any) { m["params"].(map[string]any)["memory"] = 1e9 }, true, "out of range"},
		{"short salt", func(m map[string]any) { m["salt"] = "AAAA" }, true, "salt is 3 bytes"},
		{"no ciphertext", func(m map[string]any) { delete(m, "ciphertext") }, true, "ciphertext too short"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal(orig, &m); err != nil {
				t.Fatal(err)
			}
			c.edit(m)
			b, _ := json.Marshal(m)
			if err := os.WriteFile(v.Path(), b, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Open(o)
			var fe *FormatError
			if err == nil || !strings.Contains(err.Error(), c.want) || errors.As(err, &fe) != c.format {
				t.Fatalf("got %v, want %q (format error: %v)", err, c.want, c.format)
			}
			noLeak(t, err)
		})
	}
	for name, data := range map[string]string{"truncated": string(orig[:len(orig)/2]), "empty": "", "not json": "hello"} {
		if err := os.WriteFile(v.Path(), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		var fe *FormatError
		if _, err := Open(o); !errors.As(err, &fe) {
			t.Errorf("%s: got %v, want a format error", name, err)
		}
	}
}

func TestPlainFileErrorsDoNotQuoteContent(t *testing.T) {
	t.Parallel()
	o := opts(t, PlainFile, "")
	path := FileFor(PlainFile, o.Prefix)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, content := range []string{
		`{"version":1,"secrets":{"A":{"value":"` + secretValue + `"`,
		`{"version":1,"secrets":{"A":{"value":` + secretValue + `}}}`,
		`{"version":1,"secrets":{"A":{"value":["` + secretValue + `"]}}}`,
		`{"version":7,"secrets":{"A":{"value":"` + secretValue + `"}}}`,
		`{"version":1,"secrets":{"bad name":{"value":"` + secretValue + `"}}}`,
	} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Open(o)
		if err == nil {
			t.Fatalf("opened %s", content)
		}
		noLeak(t, err)
	}
	if err := os.WriteFile(path, []byte(`{"version":1,"secrets":{}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(o); err == nil || !strings.Contains(err.Error(), "readable by others") {
		t.Fatalf("a 0644 plain vault opened: %v", err)
	}
}

func TestSetRefusesBadInput(t *testing.T) {
	t.Parallel()
	v := mustOpen(t, opts(t, EncryptedFile, "pw"))
	if err := v.Set("TOKEN", ""); !errors.Is(err, ErrEmptyValue) {
		t.Fatalf("empty value: %v", err)
	}
	for _, name := range []string{"", "lower", "1ABC", "A-B", "A B", "ÄB", "A.B"} {
		err := v.Set(name, secretValue)
		if err == nil {
			t.Fatalf("Set(%q) accepted", name)
		}
		noLeak(t, err)
	}
	if _, err := os.Stat(v.Path()); !os.IsNotExist(err) {
		t.Fatal("a refused Set wrote the vault")
	}
}

func TestValidName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"A": true, "_": true, "_A1": true, "GITHUB_TOKEN": true, "A1_2": true,
		"": false, "a": false, "Token": false, "1A": false, "A-B": false, "A.B": false, "A B": false, "A$": false,
	} {
		if ValidName(name) != want {
			t.Errorf("ValidName(%q) = %v", name, !want)
		}
	}
}

func TestPreview(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		value, want string
	}{
		{"", "****"},
		{"1234567", "****"},                            // 7
		{"12345678", "****78"},                         // 8
		{"123456789012345", "****45"},                  // 15
		{"1234567890123456", "****3456"},               // 16
		{strings.Repeat("x", 36) + "WXYZ", "****WXYZ"}, // 40
		{"ééééééé€", "****é€"},                         // 8 runes, more bytes
	} {
		if got := Preview(c.value); got != c.want {
			t.Errorf("Preview(%d chars) = %q, want %q", len([]rune(c.value)), got, c.want)
		}
	}
}

func TestTrimNewline(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"abc": "abc", "abc\n": "abc", "abc\r\n": "abc", "abc\n\n": "abc\n", "abc\r\n\r\n": "abc\r\n",
		"\n": "", "": "", "abc\r": "abc\r", " abc \n": " abc ",
	} {
		if got := TrimNewline(in); got != want {
			t.Errorf("TrimNewline(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDisabled(t *testing.T) {
	t.Parallel()
	_, err := Open(opts(t, Disabled, ""))
	if !errors.Is(err, ErrDisabled) || !strings.Contains(err.Error(), "disabled") {
		t.Fatalf("got %v", err)
	}
	if _, err := ParseStorage("s3"); err == nil {
		t.Fatal("unknown storage accepted")
	}
}

func TestMissingVaultNeedsNoPassphrase(t *testing.T) {
	t.Parallel()
	o := opts(t, EncryptedFile, "")
	o.Passphrase = func(bool) (string, error) { t.Fatal("asked for a passphrase"); return "", nil }
	v := mustOpen(t, o)
	if _, ok, err := v.Lookup("TOKEN"); ok || err != nil {
		t.Fatalf("Lookup on a missing vault: %v %v", ok, err)
	}
	if l, err := v.List(); len(l) != 0 || err != nil {
		t.Fatalf("List: %v %v", l, err)
	}
	if ok, err := v.Delete("TOKEN"); ok || err != nil {
		t.Fatalf("Delete: %v %v", ok, err)
	}
}

func TestNewVaultAsksForConfirmation(t *testing.T) {
	t.Parallel()
	o := opts(t, EncryptedFile, "")
	var asks []bool
	o.Passphrase = func(confirm bool) (string, error) { asks = append(asks, confirm); return "pw", nil }
	v := mustOpen(t, o)
	if err := v.Set("A", "1"); err != nil {
		t.Fatal(err)
	}
	if err := v.Set("B", "2"); err != nil {
		t.Fatal(err)
	}
	mustOpen(t, o)
	if fmt.Sprint(asks) != "[true false]" {
		t.Fatalf("passphrase asks (confirm flags): %v", asks)
	}
}

func TestPassphraseSource(t *testing.T) {
	t.Parallel()
	env := map[string]string{PassphraseEnv: "from-env"}
	get := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if p, err := PassphraseSource(get, false)(false); p != "from-env" || err != nil {
		t.Fatalf("%v", err)
	}
	env[PassphraseEnv] = ""
	if _, err := PassphraseSource(get, false)(false); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("empty: %v", err)
	}
	delete(env, PassphraseEnv)
	if _, err := PassphraseSource(get, false)(false); !errors.Is(err, ErrNoPassphrase) {
		t.Fatalf("none: %v", err)
	}
}

func TestConcurrentWritersKeepBothChanges(t *testing.T) {
	t.Parallel()
	for _, s := range []Storage{EncryptedFile, PlainFile} {
		o := opts(t, s, "pw")
		if err := mustOpen(t, o).Set("BASE", "0"); err != nil {
			t.Fatal(err)
		}
		a, b := mustOpen(t, o), mustOpen(t, o)
		var wg sync.WaitGroup
		for i, v := range []*Vault{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range 5 {
					if err := v.Set(fmt.Sprintf("V%d_%d", i, j), "x"); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		if n := len(mustOpen(t, o).Names()); n != 11 {
			t.Fatalf("%s: %d secrets after concurrent writes, want 11", s, n)
		}
	}
}

func TestLeftoverTempFileIsHarmless(t *testing.T) {
	t.Parallel()
	for _, s := range []Storage{EncryptedFile, PlainFile} {
		o := opts(t, s, "pw")
		v := mustOpen(t, o)
		if err := v.Set("KEEP", secretValue); err != nil {
			t.Fatal(err)
		}
		tmp := v.Path() + ".12345.tmp"
		if err := os.WriteFile(tmp, []byte(`{"version":1,"sec`), 0o600); err != nil {
			t.Fatal(err)
		}
		v2 := mustOpen(t, o)
		if got, ok, _ := v2.Get("KEEP"); !ok || got != secretValue {
			t.Fatalf("%s: old content lost", s)
		}
		if err := v2.Set("MORE", "x"); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(tmp); !os.IsNotExist(err) {
			t.Fatalf("%s: the stale temp file was not cleaned up", s)
		}
	}
}

// TestCrashMidWrite kills a process between writing the temporary file and
// renaming it: the old vault must still open with its old content.
func TestCrashMidWrite(t *testing.T) {
	t.Parallel()
	for _, s := range []Storage{EncryptedFile, PlainFile} {
		o := opts(t, s, "pw")
		if err := mustOpen(t, o).Set("OLD", "old-value"); err != nil {
			t.Fatal(err)
		}
		ready := filepath.Join(t.TempDir(), "ready")
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$")
		cmd.Env = append(os.Environ(), "SECRETS_CRASH_HELPER=1", "CRASH_PREFIX="+o.Prefix, "CRASH_STORAGE="+string(s), "CRASH_READY="+ready)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, err := os.Stat(ready); err == nil {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatal("the helper never reached the rename")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		temps, _ := filepath.Glob(FileFor(s, o.Prefix) + ".*.tmp")
		if len(temps) != 1 {
			t.Fatalf("%s: want the killed writer's temp file, found %v", s, temps)
		}
		v := mustOpen(t, o)
		if got, ok, _ := v.Get("OLD"); !ok || got != "old-value" {
			t.Fatalf("%s: the old content is gone after a crash", s)
		}
		if _, ok, _ := v.Get("NEW"); ok {
			t.Fatalf("%s: a half-done write is visible", s)
		}
		if err := v.Set("AFTER", "x"); err != nil {
			t.Fatalf("%s: write after a crash: %v", s, err)
		}
	}
}

// TestCrashHelper runs in a child process of TestCrashMidWrite.
func TestCrashHelper(t *testing.T) {
	if os.Getenv("SECRETS_CRASH_HELPER") != "1" {
		t.Skip("helper process only")
	}
	beforeRename = func(string) {
		_ = os.WriteFile(os.Getenv("CRASH_READY"), nil, 0o600)
		time.Sleep(time.Minute) // killed here
	}
	o := Options{Storage: Storage(os.Getenv("CRASH_STORAGE")), Prefix: os.Getenv("CRASH_PREFIX"), kdf: cheap,
		Passphrase: func(bool) (string, error) { return "pw", nil }}
	v, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	_ = v.Set("NEW", "new-value")
	t.Fatal("not killed")
}

func TestLazyLookup(t *testing.T) {
	t.Parallel()
	opens := 0
	o := opts(t, EncryptedFile, "pw")
	if err := mustOpen(t, o).Set("TOKEN", secretValue); err != nil {
		t.Fatal(err)
	}
	l := Lazy(func() (*Vault, error) { opens++; return Open(o) })
	if _, ok, err := l.Lookup("lower_case"); ok || err != nil || l.Opened() {
		t.Fatal("a name that cannot be in the vault opened it")
	}
	if l.Opened() || opens != 0 {
		t.Fatal("opened before a lookup")
	}
	for range 3 {
		if v, ok, err := l.Lookup("TOKEN"); !ok || err != nil || v != secretValue {
			t.Fatalf("Lookup: %v %v", ok, err)
		}
	}
	if opens != 1 || !l.Opened() {
		t.Fatalf("%d opens", opens)
	}
	bad := Lazy(func() (*Vault, error) { opens++; return nil, ErrDisabled })
	for range 2 {
		if _, _, err := bad.Lookup("TOKEN"); !errors.Is(err, ErrDisabled) {
			t.Fatalf("got %v", err)
		}
	}
	if opens != 2 {
		t.Fatalf("a failed open is retried: %d opens", opens)
	}
}

// TestDefaultKDFOpenTime measures an open with the production parameters.
func TestDefaultKDFOpenTime(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	o := opts(t, EncryptedFile, "pw")
	o.kdf = DefaultKDF
	if err := mustOpen(t, o).Set("A", "1"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	mustOpen(t, o)
	d := time.Since(start)
	t.Logf("open with %+v took %v", DefaultKDF, d)
	if d > 5*time.Second {
		t.Fatalf("opening the vault took %v", d)
	}
}

func TestRedactor(t *testing.T) {
	r := NewRedactor()
	var out strings.Builder
	w := r.Writer(&out)
	r.Add("s3cret-value", "abc", "s3cret")
	fmt.Fprintln(w, "token=s3cret-value short=abc part=s3cret")
	r.Remove("s3cret-value")
	fmt.Fprintln(w, "token=s3cret-value")
	want := "token=******** short=abc part=********\ntoken=********-value\n"
	if out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
}
