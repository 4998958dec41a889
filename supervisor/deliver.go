package supervisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"
)

// Secret values reach a sandbox through the Engine API, never through a file, the
// container's configuration or a terminal: the receiving process (PID 1, or `wrap`
// in a service container) listens on a unix socket on the container's tmpfs, and
// the host runs `airlock supervise deliver` as a non-TTY exec whose stdin carries
// the values as a JSON object and is closed after them. deliver copies stdin to
// the socket and prints the receiver's answer. The socket is removed once one
// delivery was taken.

// DeliveryTimeout is how long a receiver waits for its values.
const DeliveryTimeout = 60 * time.Second

// deliveryOK is the receiver's answer to a delivery it accepted.
const deliveryOK = "ok"

// ReceiveSecrets listens on path (mode 0600), takes one delivery within timeout
// and returns its values. Errors name the socket, never a value.
func ReceiveSecrets(path string, timeout time.Duration) (*Secrets, error) {
	dl, err := listenDelivery(path)
	if err != nil {
		return nil, err
	}
	defer dl.close()
	return dl.take(timeout, nil)
}

// deliveryListener is a receiver's socket, listening until close.
type deliveryListener struct {
	l      net.Listener
	path   string
	closed sync.Once
}

// listenDelivery listens on path (mode 0600), replacing what is there.
func listenDelivery(path string) (*deliveryListener, error) {
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("cannot listen for secrets on %s: %w", path, err)
	}
	dl := &deliveryListener{l: l, path: path}
	if err := os.Chmod(path, 0o600); err != nil {
		dl.close()
		return nil, fmt.Errorf("cannot listen for secrets on %s: %w", path, err)
	}
	return dl, nil
}

// close stops the listener (a take in progress returns) and removes the
// socket; it may be called more than once.
func (dl *deliveryListener) close() {
	dl.closed.Do(func() {
		_ = dl.l.Close()
		_ = os.Remove(dl.path)
	})
}

// take waits for one delivery that check (when not nil) accepts, within
// timeout (0: no limit, each connection then has DeliveryTimeout to send its
// values), and returns its values. A delivery refused, by check or because
// it is not an object of string values, gets the error as its answer and the
// wait goes on; an accepted one gets deliveryOK.
func (dl *deliveryListener) take(timeout time.Duration, check func(*Secrets) error) (*Secrets, error) {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
		_ = dl.l.(*net.UnixListener).SetDeadline(deadline)
	}
	for {
		c, err := dl.l.Accept()
		if err != nil {
			if timeout > 0 {
				return nil, fmt.Errorf("cannot receive secrets: none delivered within %s", timeout)
			}
			return nil, fmt.Errorf("cannot receive secrets: %w", err)
		}
		connDeadline := deadline
		if timeout <= 0 {
			connDeadline = time.Now().Add(DeliveryTimeout)
		}
		s, err := readDelivery(c, connDeadline)
		if err == nil && check != nil {
			err = check(s)
		}
		if err != nil {
			fmt.Fprintf(c, "%v\n", err)
			c.Close()
			continue // a bad delivery does not end the wait
		}
		fmt.Fprintln(c, deliveryOK)
		c.Close()
		return s, nil
	}
}

func readDelivery(c net.Conn, deadline time.Time) (*Secrets, error) {
	_ = c.SetDeadline(deadline)
	data, err := io.ReadAll(io.LimitReader(c, maxSecretsSize+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read the delivery: %w", err)
	}
	if len(data) > maxSecretsSize {
		return nil, fmt.Errorf("cannot read the delivery: larger than %d bytes", maxSecretsSize)
	}
	values := map[string]string{}
	if err := json.Unmarshal(data, &values); err != nil {
		// The JSON error may quote a value: keep only its kind.
		return nil, errors.New("cannot decode the delivery: want a JSON object of string values")
	}
	return &Secrets{values: values}, nil
}

// Deliver copies the values read from in (a JSON object, at most 4 MiB) to the
// receiver listening on socket, waiting up to timeout for it to appear, and
// returns the receiver's refusal as an error.
func Deliver(socket string, in io.Reader, timeout time.Duration) error {
	data, err := io.ReadAll(io.LimitReader(in, maxSecretsSize+1))
	if err != nil {
		return fmt.Errorf("cannot read the values to deliver: %w", err)
	}
	if len(data) > maxSecretsSize {
		return fmt.Errorf("cannot deliver: larger than %d bytes", maxSecretsSize)
	}
	deadline := time.Now().Add(timeout)
	var c net.Conn
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		c, err = net.DialTimeout("unix", socket, time.Until(deadline))
		if err == nil {
			break
		}
		if time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("cannot deliver secrets: nothing listens on %s", socket)
		}
		time.Sleep(wait)
	}
	defer c.Close()
	_ = c.SetDeadline(deadline)
	if _, err := c.Write(data); err != nil {
		return fmt.Errorf("cannot deliver secrets: %w", err)
	}
	_ = c.(*net.UnixConn).CloseWrite()
	answer, err := io.ReadAll(io.LimitReader(c, 4096))
	if err != nil {
		return fmt.Errorf("cannot deliver secrets: %w", err)
	}
	if a := strings.TrimSpace(string(answer)); a != deliveryOK {
		if a == "" {
			a = "the receiver closed the connection"
		}
		return fmt.Errorf("cannot deliver secrets: %s", a)
	}
	return nil
}

// deliveryWait is how long the supervisor waits for a delivery before it
// starts anything (Hold, or values to receive).
func (s *Spec) deliveryWait() time.Duration {
	if s.HoldTimeout > 0 {
		return time.Duration(s.HoldTimeout) * time.Second
	}
	return DeliveryTimeout
}

// NeedsSecrets reports whether the supervisor waits for a delivery: the spec
// holds its start (Hold) or parks (Park), or an env entry takes a delivered
// value.
func (s *Spec) NeedsSecrets() bool {
	if s.Hold || s.Park {
		return true
	}
	has := func(es []EnvEntry) bool {
		for _, e := range es {
			if e.Value == nil {
				return true
			}
		}
		return false
	}
	if has(s.Main.Env) {
		return true
	}
	for _, d := range s.Daemons {
		if d != nil && has(d.Env) {
			return true
		}
	}
	return false
}
