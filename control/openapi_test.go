package control_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control"
	"github.com/airlock-dev/airlock/internal/fsentry"
)

// The API's contract is control/openapi.json (served at GET /v1/openapi.json)
// and docs/api.md. These tests fail when the daemon and the document differ:
// a route one has and the other lacks, a wire type whose JSON fields are not
// its schema's properties, a $ref that resolves to nothing, a curl example of
// docs/api.md that no longer does what the page shows.

// openAPIDoc is the embedded document, decoded.
func openAPIDoc(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(control.OpenAPIDocument(), &doc); err != nil {
		t.Fatalf("control/openapi.json is not JSON: %v", err)
	}
	return doc
}

// obj is v as a JSON object (nil when it is none).
func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }

// httpMethods are the operations a path item of OpenAPI can hold.
var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// TestOpenAPIRoutes: every route the daemon registers is in the document's
// paths with its method, and every operation of the document is a route.
func TestOpenAPIRoutes(t *testing.T) {
	parallel(t)
	doc := openAPIDoc(t)
	routes := control.APIRoutes()
	if len(routes) == 0 {
		t.Fatal("no routes")
	}
	var documented []string
	for path, item := range obj(doc["paths"]) {
		for _, m := range httpMethods {
			if obj(item)[m] != nil {
				documented = append(documented, strings.ToUpper(m)+" "+path)
			}
		}
	}
	for _, r := range routes {
		if !slices.Contains(documented, r) {
			t.Errorf("the daemon serves %s; control/openapi.json does not describe it", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(routes, d) {
			t.Errorf("control/openapi.json describes %s; the daemon does not serve it", d)
		}
	}
	// A handler registered beside the table would escape this test: the one
	// Handle call of the package is the loop over apiRoutes in server.go.
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	register := regexp.MustCompile(`\.(Handle|HandleFunc)\(`)
	calls := map[string]int{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(register.FindAll(b, -1)); n > 0 {
			calls[f] = n
		}
	}
	if !maps.Equal(calls, map[string]int{"server.go": 1}) {
		t.Errorf("package control registers handlers at %v; want one call, in server.go's routes: add routes to apiRoutes", calls)
	}
}

// wireTypes maps each wire type of the API to its schema in
// components/schemas. A struct that a wire type holds must be here too.
var wireTypes = []struct {
	v      any
	schema string
	// response: the daemon writes it; its fields without omitempty are
	// always there, so they are the schema's required ones.
	response bool
}{
	{client.Health{}, "Health", true},
	{client.Error{}, "Error", true},
	{client.CreateRequest{}, "CreateRequest", false},
	{client.Manifest{}, "Manifest", false},
	{client.Engine{}, "Engine", false},
	{client.Kubernetes{}, "Kubernetes", false},
	{client.KubePod{}, "KubePod", false},
	{client.KubeToleration{}, "KubeToleration", false},
	{client.KubeResources{}, "KubeResources", false},
	{client.ResumeRequest{}, "ResumeRequest", false},
	{client.Sandbox{}, "Sandbox", true},
	{client.DaemonCount{}, "DaemonCount", true},
	{client.Port{}, "Port", true},
	{client.Event{}, "Event", true},
	{client.ExecRequest{}, "ExecRequest", false},
	{client.FinishRequest{}, "FinishRequest", false},
	{client.SignalRequest{}, "SignalRequest", false},
	{client.Exec{}, "Exec", true},
	{client.ExecFrame{}, "ExecFrame", true},
	{client.ExitFrame{}, "ExitFrame", true},
	{client.ResizeFrame{}, "ResizeFrame", false},
	{client.SignalFrame{}, "SignalFrame", false},
	{client.AttachRequest{}, "AttachRequest", false},
	{client.CompareRequest{}, "CompareRequest", false},
	{client.RemoveFilesRequest{}, "RemoveFilesRequest", false},
	{client.Comparison{}, "Comparison", true},
	{client.PrepareRequest{}, "PrepareRequest", false},
	{client.RegistryAuth{}, "RegistryAuth", false},
	{client.PrepareFrame{}, "PrepareFrame", true},
	{client.PruneRequest{}, "PruneRequest", false},
	{client.PruneResult{}, "PruneResult", true},
	{client.PrunedObject{}, "PrunedObject", true},
	{client.PoolList{}, "PoolList", true},
	{client.Pool{}, "Pool", true},
	{client.PooledSandbox{}, "PooledSandbox", true},
	{client.WarmRequest{}, "WarmRequest", false},
	{client.DrainRequest{}, "DrainRequest", false},
	{client.DrainResult{}, "DrainResult", true},
	{client.UpdateRequest{}, "UpdateRequest", false},
	{client.SnapshotRequest{}, "SnapshotRequest", false},
	{client.SnapshotImage{}, "SnapshotImage", true},
	{client.Snapshot{}, "Snapshot", true},
	{client.ForkRequest{}, "ForkRequest", false},
	{client.Fork{}, "Fork", true},
	{fsentry.EntryJSON{}, "FileEntry", true},
	{fsentry.ListJSON{}, "FileList", true},
	{fsentry.EventJSON{}, "FileEvent", true},
}

// jsonField is a field of a struct as encoding/json writes it.
type jsonField struct {
	typ       reflect.Type
	omitempty bool
}

// jsonFields are the JSON fields of struct type t, embedded structs flattened.
func jsonFields(t reflect.Type) map[string]jsonField {
	out := map[string]jsonField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					out[k] = v
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		out[name] = jsonField{typ: f.Type, omitempty: slices.Contains(strings.Split(opts, ","), "omitempty")}
	}
	return out
}

// resolveRef follows a local $ref ("#/a/b") in doc.
func resolveRef(doc map[string]any, ref string) (any, error) {
	p, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, fmt.Errorf("cannot resolve %q: not a reference into the document", ref)
	}
	var cur any = doc
	for _, part := range strings.Split(p, "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		m := obj(cur)
		if m == nil || m[part] == nil {
			return nil, fmt.Errorf("cannot resolve %q: no %q", ref, part)
		}
		cur = m[part]
	}
	return cur, nil
}

// schemaTypes are the JSON types a schema allows ("type": "x" or ["x", "null"]),
// its $ref followed.
func schemaTypes(doc, s map[string]any) []string {
	if ref, ok := s["$ref"].(string); ok {
		if r, err := resolveRef(doc, ref); err == nil {
			return schemaTypes(doc, obj(r))
		}
		return nil
	}
	switch v := s["type"].(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

var (
	timeType = reflect.TypeOf(time.Time{})
	rawType  = reflect.TypeOf(json.RawMessage{})
)

// checkValue checks that schema s (at where) describes values of Go type t:
// the same JSON type, and for a struct a $ref to the schema wireTypes maps
// it to.
func checkValue(t *testing.T, doc, s map[string]any, typ reflect.Type, where string) {
	t.Helper()
	if s == nil {
		t.Errorf("%s: no schema", where)
		return
	}
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	want := ""
	switch {
	case typ == rawType:
		return // any JSON
	case typ == timeType:
		want = "string"
		if schemaTypes(doc, s) != nil && obj(s)["format"] != "date-time" {
			t.Errorf("%s: a time, want format date-time", where)
		}
	case typ.Kind() == reflect.Struct:
		name := ""
		for _, w := range wireTypes {
			if reflect.TypeOf(w.v) == typ {
				name = w.schema
			}
		}
		if name == "" {
			t.Errorf("%s: %v is not in wireTypes (map it to a schema)", where, typ)
			return
		}
		if s["$ref"] != "#/components/schemas/"+name {
			t.Errorf("%s: $ref %v, want #/components/schemas/%s (%v)", where, s["$ref"], name, typ)
		}
		return
	case typ.Kind() == reflect.String:
		want = "string"
	case typ.Kind() == reflect.Bool:
		want = "boolean"
	case typ.Kind() >= reflect.Int && typ.Kind() <= reflect.Uint64:
		want = "integer"
	case typ.Kind() == reflect.Float32 || typ.Kind() == reflect.Float64:
		want = "number"
	case typ.Kind() == reflect.Slice && typ.Elem().Kind() == reflect.Uint8:
		want = "string" // encoding/json writes []byte as base64
	case typ.Kind() == reflect.Slice || typ.Kind() == reflect.Array:
		want = "array"
		if st := schemaTypes(doc, s); slices.Contains(st, "array") {
			checkValue(t, doc, obj(s["items"]), typ.Elem(), where+"[]")
		}
	case typ.Kind() == reflect.Map:
		want = "object"
		if ap := obj(s["additionalProperties"]); ap != nil {
			checkValue(t, doc, ap, typ.Elem(), where+"{}")
		}
	default:
		t.Errorf("%s: no JSON type for %v", where, typ)
		return
	}
	if got := schemaTypes(doc, s); !slices.Contains(got, want) {
		t.Errorf("%s: schema type %v, want %s (%v)", where, got, want, typ)
	}
}

// TestOpenAPISchemas: each wire type's JSON fields are its schema's
// properties, of the same JSON types, nested structs by $ref to their own
// schema; a response's fields without omitempty are required; and every
// object schema of the document is a wire type's.
func TestOpenAPISchemas(t *testing.T) {
	parallel(t)
	doc := openAPIDoc(t)
	schemas := obj(obj(doc["components"])["schemas"])
	mapped := map[string]bool{}
	for _, w := range wireTypes {
		typ := reflect.TypeOf(w.v)
		mapped[w.schema] = true
		s := obj(schemas[w.schema])
		if s == nil {
			t.Errorf("%v: no components/schemas/%s", typ, w.schema)
			continue
		}
		if s["type"] != "object" {
			t.Errorf("%s: type %v, want object", w.schema, s["type"])
		}
		props := obj(s["properties"])
		fields := jsonFields(typ)
		var want []string
		for name, f := range fields {
			if !f.omitempty && w.response {
				want = append(want, name)
			}
			if props[name] == nil {
				t.Errorf("%v has JSON field %q; components/schemas/%s lacks it", typ, name, w.schema)
				continue
			}
			checkValue(t, doc, obj(props[name]), f.typ, w.schema+"."+name)
		}
		for name := range props {
			if _, ok := fields[name]; !ok {
				t.Errorf("components/schemas/%s has property %q; %v has no such JSON field", w.schema, name, typ)
			}
		}
		var required []string
		for _, r := range asSlice(s["required"]) {
			required = append(required, fmt.Sprint(r))
			if props[fmt.Sprint(r)] == nil {
				t.Errorf("components/schemas/%s requires %v, not a property", w.schema, r)
			}
		}
		if w.response {
			sort.Strings(want)
			sort.Strings(required)
			if !slices.Equal(want, required) {
				t.Errorf("components/schemas/%s: required %v; %v always has %v (its fields without omitempty)", w.schema, required, typ, want)
			}
		}
	}
	for name, s := range schemas {
		if obj(s)["type"] == "object" && !mapped[name] {
			t.Errorf("components/schemas/%s is no wire type's (add it to wireTypes or remove it)", name)
		}
	}
	// Every JSON body of an operation is a wire type's schema (or an array
	// of them), so that the checks above cover it: none is written inline.
	// The document itself is one exception, the MCP server (JSON-RPC
	// messages of another protocol: docs/mcp.md) the other.
	for path, item := range obj(doc["paths"]) {
		for _, m := range httpMethods {
			op := obj(obj(item)[m])
			if op == nil || path == "/v1/openapi.json" || path == "/v1/mcp" {
				continue
			}
			where := strings.ToUpper(m) + " " + path
			bodies := map[string]any{"request": obj(op["requestBody"])}
			for code, r := range obj(op["responses"]) {
				bodies[code] = r
			}
			for name, b := range bodies {
				if ref, ok := obj(b)["$ref"].(string); ok {
					r, _ := resolveRef(doc, ref)
					b = r
				}
				for ct, media := range obj(obj(b)["content"]) {
					if !strings.HasSuffix(ct, "json") {
						continue
					}
					sch := obj(obj(media)["schema"])
					if sch["type"] == "array" {
						sch = obj(sch["items"])
					}
					ref, _ := sch["$ref"].(string)
					if schema, ok := strings.CutPrefix(ref, "#/components/schemas/"); !ok || !mapped[schema] {
						t.Errorf("%s: the %s body (%s) is not a $ref to a schema of wireTypes: %v", where, name, ct, sch)
					}
				}
			}
		}
	}
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

// TestOpenAPIDocument: the document is OpenAPI 3.1.0, every $ref resolves,
// every {parameter} of a path is declared in the path, and every operation has
// an operationId (unique) and responses.
func TestOpenAPIDocument(t *testing.T) {
	parallel(t)
	doc := openAPIDoc(t)
	if doc["openapi"] != "3.1.0" {
		t.Errorf("openapi: %v, want 3.1.0", doc["openapi"])
	}
	if info := obj(doc["info"]); info["title"] == nil || info["version"] == nil {
		t.Errorf("info lacks a title or version: %v", info)
	}
	refs := 0
	var walk func(v any, where string)
	walk = func(v any, where string) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				refs++
				if _, err := resolveRef(doc, ref); err != nil {
					t.Errorf("%s: %v", where, err)
				}
			}
			for k, x := range v {
				walk(x, where+"/"+k)
			}
		case []any:
			for i, x := range v {
				walk(x, where+"/"+strconv.Itoa(i))
			}
		}
	}
	walk(doc, "#")
	if refs == 0 {
		t.Error("no $ref: the walk is broken")
	}
	param := regexp.MustCompile(`\{([^}]+)\}`)
	ops := map[string]string{}
	for path, item := range obj(doc["paths"]) {
		declared := map[string]bool{}
		addParams := func(ps any) {
			for _, p := range asSlice(ps) {
				pm := obj(p)
				if ref, ok := pm["$ref"].(string); ok {
					r, _ := resolveRef(doc, ref)
					pm = obj(r)
				}
				if pm["in"] == "path" {
					declared[fmt.Sprint(pm["name"])] = true
					if pm["required"] != true {
						t.Errorf("%s: path parameter %v is not required", path, pm["name"])
					}
				}
			}
		}
		addParams(obj(item)["parameters"])
		for _, m := range httpMethods {
			op := obj(obj(item)[m])
			if op == nil {
				continue
			}
			where := strings.ToUpper(m) + " " + path
			id, _ := op["operationId"].(string)
			if id == "" {
				t.Errorf("%s: no operationId", where)
			} else if other, ok := ops[id]; ok {
				t.Errorf("%s: operationId %s is %s's too", where, id, other)
			}
			ops[id] = where
			if len(obj(op["responses"])) == 0 {
				t.Errorf("%s: no responses", where)
			}
			saved := maps.Clone(declared)
			addParams(op["parameters"])
			for _, p := range param.FindAllStringSubmatch(path, -1) {
				if !declared[p[1]] {
					t.Errorf("%s: path parameter {%s} is not declared", where, p[1])
				}
			}
			declared = saved
		}
	}
}

// docExample is a ```sh block of docs/api.md and, when a ```text block follows
// it, the output that block shows.
type docExample struct {
	line      int
	cmd, want string
	hasWant   bool
}

// docExamples reads the examples of docs/api.md.
func docExamples(t *testing.T) []docExample {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []docExample
	lines := strings.Split(string(b), "\n")
	block := func(i int) (string, int) { // the fenced block opening at line i, and the line after it
		var body []string
		for j := i + 1; j < len(lines); j++ {
			if strings.TrimSpace(lines[j]) == "```" {
				return strings.Join(body, "\n"), j + 1
			}
			body = append(body, lines[j])
		}
		t.Fatalf("docs/api.md:%d: a fenced block is not closed", i+1)
		return "", 0
	}
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```sh" {
			continue
		}
		ex := docExample{line: i + 1}
		ex.cmd, i = block(i)
		j := i
		for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
			j++
		}
		if j < len(lines) && strings.TrimSpace(lines[j]) == "```text" {
			ex.want, i = block(j)
			ex.hasWant = true
		}
		i--
		out = append(out, ex)
	}
	return out
}

// globMatch tells whether out is want, where … in want stands for any text
// (newlines included).
func globMatch(want, out string) bool {
	parts := strings.Split(strings.TrimRight(want, " \n"), "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	re := regexp.MustCompile(`^` + strings.Join(parts, `(?s:.*?)`) + `$`)
	return re.MatchString(strings.TrimRight(out, " \n"))
}

// notifyBuffer is a buffer that says when it was written.
type notifyBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	notify chan struct{}
}

func (b *notifyBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	select {
	case b.notify <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (b *notifyBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.ReplaceAll(b.buf.String(), "\r\n", "\n")
}

// runDocExample runs one example with bash (-euo pipefail) in its own process
// group and checks it: it exits 0 and prints what its ```text block shows. An
// example that follows a stream (and would never end) passes once its output,
// up to a whole line, is what the block shows; its processes are then killed.
func runDocExample(t *testing.T, ex docExample, dir string, environ []string) {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", ex.cmd)
	cmd.Dir = dir
	cmd.Env = environ
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout := &notifyBuffer{notify: make(chan struct{}, 1)}
	var stderr syncBuffer
	cmd.Stdout, cmd.Stderr = stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	kill := func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	defer kill()
	timeout := time.After(90 * time.Second)
	for {
		select {
		case err := <-done:
			out := stdout.String()
			if err != nil {
				ls, _ := exec.Command("ls", "-la", dir).CombinedOutput()
				t.Errorf("docs/api.md:%d: %v\n%s\nstdout:\n%s\nstderr:\n%s\nthe project dir %s:\n%s", ex.line, err, ex.cmd, out, stderr.String(), dir, ls)
			} else if ex.hasWant && !globMatch(ex.want, out) {
				t.Errorf("docs/api.md:%d: the output differs from the page's\n%s\ngot:\n%s\nwant:\n%s\nstderr:\n%s", ex.line, ex.cmd, out, ex.want, stderr.String())
			}
			return
		case <-stdout.notify:
			if out := stdout.String(); ex.hasWant && strings.HasSuffix(out, "\n") && globMatch(ex.want, out) {
				kill()
				<-done
				return
			}
		case <-timeout:
			kill()
			<-done
			t.Fatalf("docs/api.md:%d: no end and not the page's output within 90 s\n%s\ngot:\n%s\nwant:\n%s\nstderr:\n%s", ex.line, ex.cmd, stdout.String(), ex.want, stderr.String())
		}
	}
}

// TestAPIDocExamples runs the curl examples of docs/api.md, in order, against
// a daemon listening on its socket and on TCP with a token, as the page says.
// The page's sandbox ID demo-1 becomes one of this test's own (container names
// come from it and the Engine is shared), its port 7878 a free one.
func TestAPIDocExamples(t *testing.T) {
	parallel(t)
	examples := docExamples(t)
	if len(examples) < 10 {
		t.Fatalf("docs/api.md has %d ```sh examples, want at least 10", len(examples))
	}
	e := newEnv(t)
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("docs/api.md's examples need %s (scripts/engine.sh installs it): %v", tool, err)
		}
	}
	port := freePort(t)
	const token = "api-doc-token-4f1e"
	tokenFile := filepath.Join(e.home, "token")
	writeTokenFile(t, tokenFile, token, 0o600)
	d := e.startDaemon(binA, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--token-file", tokenFile)
	waitTCP(t, port)

	// The CLI as `airlock` on PATH: the page builds a create request with `airlock config --json`.
	bin := t.TempDir()
	if err := os.Symlink(binA, filepath.Join(bin, "airlock")); err != nil {
		t.Fatal(err)
	}
	environ := append(e.environ(), "PATH="+bin+":"+os.Getenv("PATH"), "AIRLOCK_TOKEN="+token)
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	id := "apidoc-" + hex.EncodeToString(rnd[:])
	subst := strings.NewReplacer("demo-1", id, "127.0.0.1:7878", "127.0.0.1:"+strconv.Itoa(port))
	t.Cleanup(func() { _, _ = d.client.Delete(ctxT(t, time.Minute), id) })
	ran := 0
	for _, ex := range examples {
		ex.cmd, ex.want = subst.Replace(ex.cmd), subst.Replace(ex.want)
		runDocExample(t, ex, e.project, environ)
		// No example may take the project's files away (a mount's removal
		// once emptied the project directory: keep that caught here).
		if _, err := os.Stat(filepath.Join(e.project, "sandbox.toml")); err != nil {
			ls, _ := exec.Command("ls", "-la", e.project).CombinedOutput()
			t.Errorf("after docs/api.md:%d the project dir lost sandbox.toml: %v\n%s\n%s", ex.line, err, ex.cmd, ls)
		}
		if t.Failed() {
			break // the examples build on each other
		}
		ran++
	}
	t.Logf("ran %d of docs/api.md's %d examples", ran, len(examples))

	// The document the daemon serves is control/openapi.json as is; on TCP it
	// needs the token.
	code, body := rawGet(t, e.paths.Socket(), "/v1/openapi.json")
	if code != http.StatusOK || body != string(control.OpenAPIDocument()) {
		t.Errorf("GET /v1/openapi.json: %d, %d bytes; want 200 and control/openapi.json (%d bytes)", code, len(body), len(control.OpenAPIDocument()))
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/v1/openapi.json", port)
	if code, body := get(t, url, ""); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/openapi.json on TCP without the token: %d %s, want 401", code, body)
	}
	if code, body := get(t, url, "Token "+token); code != http.StatusOK || body != string(control.OpenAPIDocument()) {
		t.Errorf("GET /v1/openapi.json on TCP with the token: %d, %d bytes, want 200 and the document", code, len(body))
	}
}

// TestGlobMatch: … in a page's output stands for any text, newlines included.
func TestGlobMatch(t *testing.T) {
	parallel(t)
	for _, c := range []struct {
		want, out string
		ok        bool
	}{
		{`{"pid":…,"v":"…"}`, `{"pid":12,"v":"x.y"}` + "\n", true},
		{`{"pid":…}`, `{"pid":12,"v":1}`, true},
		{`{"pid":…}`, `{"pid":12}x`, false},
		{"a\n…\nz", "a\nb\nc\nz\n", true},
		{"a\n…\nz", "b\nz", false},
		{"(x)", "(x)", true},
	} {
		if got := globMatch(c.want, c.out); got != c.ok {
			t.Errorf("globMatch(%q, %q) = %v, want %v", c.want, c.out, got, c.ok)
		}
	}
}
