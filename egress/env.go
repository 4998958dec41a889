package egress

import "strings"

// ClientEnv is the environment that sends a process's HTTP and HTTPS through
// the proxy at url; loopback and the names in direct go direct. Its keys are
// every proxy variable airlock sets.
func ClientEnv(url string, direct []string) map[string]string {
	noProxy := append([]string{"localhost", "127.0.0.1", "::1"}, direct...)
	np := strings.Join(noProxy, ",")
	return map[string]string{
		"HTTP_PROXY": url, "HTTPS_PROXY": url, "http_proxy": url, "https_proxy": url,
		"NO_PROXY": np, "no_proxy": np,
	}
}
