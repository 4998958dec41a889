package manifest_test

import "testing"

// daemons.<name>.ready.send / expect (issue 24: readiness that means serving):
// a tcp check that writes a request and waits for its answer.

func TestReadyExchange(t *testing.T) {
	const daemon = img + "[daemons.redis]\ncommand = [\"redis-server\"]\n"
	r := load(t, map[string]string{"sandbox.toml": daemon + `ready = { tcp = "127.0.0.1:6379", send = "PING\r\n", expect = "+PONG" }` + "\n"})
	if got := r.Daemons["redis"].Ready; got.Send != "PING\r\n" || got.Expect != "+PONG" {
		t.Errorf("ready %+v", got)
	}
	// A server that greets first needs no send.
	r = load(t, map[string]string{"sandbox.toml": daemon + `ready = { tcp = "127.0.0.1:3306", expect = "mariadb" }` + "\n"})
	if got := r.Daemons["redis"].Ready; got.Expect != "mariadb" || got.Send != "" {
		t.Errorf("ready %+v", got)
	}
	for line, want := range map[string]string{
		`ready = { log = "up", expect = "+PONG" }`:                    `sandbox.toml:5: daemons.redis.ready.expect: goes with a tcp check (set tcp = "host:port")`,
		`ready = { http = "http://x/", send = "PING" }`:               `sandbox.toml:5: daemons.redis.ready.send: goes with a tcp check (set tcp = "host:port")`,
		`ready = { tcp = "127.0.0.1:6379", send = "PING\r\n" }`:       `sandbox.toml:5: daemons.redis.ready.send: needs expect: what the server's answer must hold, e.g. send = "PING\r\n", expect = "+PONG"`,
		`ready = { tcp = "127.0.0.1:6379", expect = "` + long + `" }`: `sandbox.toml:5: daemons.redis.ready.expect: is 1025 bytes long; at most 1024`,
	} {
		if got := loadErr(t, map[string]string{"sandbox.toml": daemon + line + "\n"}); got != want {
			t.Errorf("%s:\n\tgot  %s\n\twant %s", line, got, want)
		}
	}
}

// TestReadyExchangeReplacedWithTheCheck: a layer that sets another check
// replaces the lower layer's send and expect with it; one that sets only
// expect keeps the lower layer's tcp.
func TestReadyExchangeReplacedWithTheCheck(t *testing.T) {
	base := img + "[daemons.redis]\ncommand = [\"redis-server\"]\nready = { tcp = \"127.0.0.1:6379\", send = \"PING\\r\\n\", expect = \"+PONG\" }\n"
	r := load(t, map[string]string{"sandbox.toml": base, "sandbox.local.toml": "[daemons.redis.ready]\nlog = \"Ready to accept\"\n"})
	if got := r.Daemons["redis"].Ready; got.Log != "Ready to accept" || got.TCP != "" || got.Send != "" || got.Expect != "" {
		t.Errorf("ready after a log check replaced it: %+v", got)
	}
	r = load(t, map[string]string{"sandbox.toml": base, "sandbox.local.toml": "[daemons.redis.ready]\nexpect = \"PONG\"\n"})
	if got := r.Daemons["redis"].Ready; got.TCP != "127.0.0.1:6379" || got.Send != "PING\r\n" || got.Expect != "PONG" {
		t.Errorf("ready after expect alone changed: %+v", got)
	}
}

var long = func() string {
	b := make([]byte, 1025)
	for i := range b {
		b[i] = 'x'
	}
	return string(b)
}()
