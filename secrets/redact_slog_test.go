package secrets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// pemLike is a multi-line secret with the characters JSON escapes: quotes,
// backslashes, tabs and newlines.
const pemLike = "-----BEGIN PRIVATE KEY-----\n" +
	"MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\t\"quoted\"\\back\\slash\n" +
	"kqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIB\n" +
	"-----END PRIVATE KEY-----\n"

// leaks returns what of secret appears in out: the value, its JSON-escaped
// form, or one of its lines that is long enough to be unique.
func leaks(out, secret string) []string {
	var found []string
	esc, _ := json.Marshal(secret)
	for _, s := range []string{secret, strings.Trim(string(esc), `"`)} {
		if strings.Contains(out, s) {
			found = append(found, s)
		}
	}
	for _, line := range strings.Split(secret, "\n") {
		if len(line) >= 12 && !strings.HasPrefix(line, "-----") && strings.Contains(out, line) {
			found = append(found, line)
		}
	}
	for _, part := range []string{"MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "kqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIB"} {
		if strings.Contains(out, part) {
			found = append(found, part)
		}
	}
	return found
}

type secretStruct struct {
	Name string
	Key  string
	N    int64
}

// The handler masks a value that JSON escapes, wherever it is: the message,
// string attributes, groups (bound and inline), errors, arbitrary values, and
// attributes bound before the value was known.
func TestHandlerMasksBeforeEncoding(t *testing.T) {
	r := NewRedactor()
	var buf bytes.Buffer
	log := slog.New(r.Handler(slog.NewJSONHandler(&buf, nil)))
	bound := log.With("bound", "key="+pemLike).WithGroup("g").With("inner", pemLike)
	r.Add(pemLike)

	log.Info("cannot read "+pemLike, "value", pemLike)
	log.Warn("group", slog.Group("req", "body", "x"+pemLike+"y", slog.Group("deeper", "k", pemLike)))
	log.Error("error", "error", errors.New("open: "+pemLike))
	log.Info("any", "struct", secretStruct{Name: "n", Key: pemLike, N: 1 << 60}, "map", map[string]any{"k": []string{pemLike}})
	bound.Info("bound", "more", pemLike)
	log.Info("bytes", "b", []byte(pemLike))

	out := buf.String()
	if l := leaks(out, pemLike); len(l) > 0 {
		t.Errorf("the log shows the secret (%q):\n%s", l, out)
	}
	if n := strings.Count(out, Mask); n < 11 {
		t.Errorf("%d masks in the log, want at least 11:\n%s", n, out)
	}
	// Every line is still valid JSON, and what is not secret is kept.
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("not JSON: %v: %s", err, line)
		}
	}
	for _, want := range []string{`"msg":"cannot read ********"`, `"N":1152921504606846976`, `"g":{"inner":"********","more":"********"}`, `"Name":"n"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %s:\n%s", want, out)
		}
	}
}

// A value removed from the redactor is no longer masked; short values never
// are (MinRedactLen).
func TestHandlerFollowsTheRedactor(t *testing.T) {
	r := NewRedactor()
	var buf bytes.Buffer
	log := slog.New(r.Handler(slog.NewJSONHandler(&buf, nil)))
	r.Add("s3cr3t-value", "abc")
	log.Info("one", "v", "s3cr3t-value abc")
	r.Remove("s3cr3t-value")
	log.Info("two", "v", "s3cr3t-value")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], fmt.Sprintf(`"v":"%s abc"`, Mask)) || !strings.Contains(lines[1], `"v":"s3cr3t-value"`) {
		t.Errorf("log:\n%s", buf.String())
	}
}
