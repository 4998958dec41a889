package secrets

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
)

// RedactString returns s with every known value masked.
func (r *Redactor) RedactString(s string) string {
	r.mu.RLock()
	n := len(r.values)
	r.mu.RUnlock()
	if n == 0 || s == "" {
		return s
	}
	return string(r.Redact([]byte(s)))
}

// Handler wraps h so that known secret values are masked in each record's
// message and in every string attribute (keys too, and inside groups, errors
// and other values) before h encodes them. Masking the encoded output instead
// misses values that the encoding changes: a JSON handler writes a value with
// a quote, a backslash, a newline or a tab (a PEM key) escaped, and the escaped
// text no longer contains the value.
//
// Attributes bound with WithAttrs are masked when each record is handled, not
// when they are bound, so a value registered later is masked in them too.
func (r *Redactor) Handler(h slog.Handler) slog.Handler {
	return &redactHandler{r: r, base: h}
}

type redactHandler struct {
	r    *Redactor
	base slog.Handler
	ops  []handlerOp // WithGroup / WithAttrs calls, in order, applied at Handle
}

// handlerOp is one WithGroup (group != "") or WithAttrs call.
type handlerOp struct {
	group string
	attrs []slog.Attr
}

func (h *redactHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.base.Enabled(ctx, l)
}

func (h *redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := h.base
	for _, op := range h.ops {
		if op.group != "" {
			out = out.WithGroup(op.group)
		} else {
			out = out.WithAttrs(h.redactAttrs(op.attrs))
		}
	}
	nr := slog.NewRecord(rec.Time, rec.Level, h.r.RedactString(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		nr.AddAttrs(h.redactAttr(a))
		return true
	})
	return out.Handle(ctx, nr)
}

func (h *redactHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	return h.with(handlerOp{attrs: append([]slog.Attr(nil), attrs...)})
}

func (h *redactHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return h.with(handlerOp{group: h.r.RedactString(name)})
}

func (h *redactHandler) with(op handlerOp) *redactHandler {
	ops := append(append([]handlerOp(nil), h.ops...), op)
	return &redactHandler{r: h.r, base: h.base, ops: ops}
}

func (h *redactHandler) redactAttrs(as []slog.Attr) []slog.Attr {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = h.redactAttr(a)
	}
	return out
}

func (h *redactHandler) redactAttr(a slog.Attr) slog.Attr {
	a.Key = h.r.RedactString(a.Key)
	a.Value = h.redactValue(a.Value.Resolve())
	return a
}

func (h *redactHandler) redactValue(v slog.Value) slog.Value {
	switch v.Kind() {
	case slog.KindString:
		return slog.StringValue(h.r.RedactString(v.String()))
	case slog.KindGroup:
		return slog.GroupValue(h.redactAttrs(v.Group())...)
	case slog.KindAny:
		return h.redactAny(v.Any())
	}
	return v // numbers, bools, times, durations: no text
}

// redactAny masks an arbitrary value as the JSON handler would print it: an
// error by its message, anything else through its JSON form, whose strings
// are masked one by one (then re-encoded by the handler).
func (h *redactHandler) redactAny(x any) slog.Value {
	switch t := x.(type) {
	case nil:
		return slog.AnyValue(nil)
	case error:
		return slog.StringValue(h.r.RedactString(t.Error()))
	case []byte:
		return slog.StringValue(h.r.RedactString(string(t)))
	}
	b, err := json.Marshal(x)
	if err != nil {
		return slog.StringValue(h.r.RedactString(fmt.Sprintf("%+v", x)))
	}
	var generic any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // numbers stay as they were printed
	if err := dec.Decode(&generic); err != nil {
		return slog.StringValue(h.r.RedactString(string(b)))
	}
	return slog.AnyValue(h.redactJSON(generic))
}

func (h *redactHandler) redactJSON(x any) any {
	switch t := x.(type) {
	case string:
		return h.r.RedactString(t)
	case []any:
		for i := range t {
			t[i] = h.redactJSON(t[i])
		}
		return t
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, v := range t {
			out[h.r.RedactString(k)] = h.redactJSON(v)
		}
		return out
	}
	return x
}
